//! Every refusal the extension makes, in one place. Each is a PostgreSQL
//! ERROR with a SQLSTATE, a message that names the bad value, DETAIL for
//! facts and HINT for the fix; raising it aborts the caller's statement, so
//! nothing the call did stays. Rust code raises them directly; the verbs
//! written in PL/pgSQL name theirs to `rq_refuse`, and ask `rq_raise_cannot`
//! why their UPDATE matched nothing.

use crate::statements::{self, Shape, Statement};
use pgrx::pg_sys::panic::ErrorReport;
use pgrx::prelude::*;

const JOB_STATE: &str = include_str!("../sql/errors.job_state.sql");

/// A refusal being built: `Refusal::invalid_parameter(…).hint(…).raise()`.
#[must_use = "a refusal does nothing until it is raised"]
pub struct Refusal {
    code: PgSqlErrorCode,
    message: String,
    detail: Option<String>,
    hint: Option<String>,
}

impl Refusal {
    pub fn new(code: PgSqlErrorCode, message: impl Into<String>) -> Refusal {
        Refusal { code, message: message.into(), detail: None, hint: None }
    }

    /// 22023: an argument no call may have.
    pub fn invalid_parameter(message: impl Into<String>) -> Refusal {
        Refusal::new(PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE, message)
    }

    pub fn detail(mut self, detail: impl Into<String>) -> Refusal {
        self.detail = Some(detail.into());
        self
    }

    pub fn hint(mut self, hint: impl Into<String>) -> Refusal {
        self.hint = Some(hint.into());
        self
    }

    pub fn raise(self) -> ! {
        let mut report = ErrorReport::new(self.code, self.message, function_name!());
        if let Some(detail) = self.detail {
            report = report.set_detail(detail);
        }
        if let Some(hint) = self.hint {
            report = report.set_hint(hint);
        }
        report.report(PgLogLevel::ERROR);
        unreachable!("an ERROR report does not return")
    }
}

/// A keyed enqueue found its key held, but the holder finished before it
/// could be read: rq_enqueue (src/enqueue.rs) and rq_enqueue_batch.
pub fn key_finished(key: &str, queue: &str) -> Refusal {
    Refusal::new(
        PgSqlErrorCode::ERRCODE_T_R_SERIALIZATION_FAILURE,
        format!("the job holding key {key} in queue {queue} finished while this enqueue ran"),
    )
    .detail("The job that held the key finished between this enqueue's insert and its look for that job.")
    .hint("Try again: the key is free now.")
}

/// The refusals of the verbs written in PL/pgSQL, by name, with the values
/// they name (as text, in the order the message uses them). Always raises.
#[pg_extern(volatile, parallel_safe, schema = "raquel_internal")]
#[search_path(pg_catalog, pg_temp)]
fn rq_refuse(refusal: Option<&str>, refused: Option<Vec<Option<String>>>) {
    // Not STRICT: a NULL argument must not turn a refusal into nothing.
    named(refusal.unwrap_or_default(), &refused.unwrap_or_default()).raise()
}

/// The refusal called `refusal`, naming `refused` (None reads NULL): for
/// rq_refuse, and for the Rust that shares a refusal with PL/pgSQL.
pub fn named(refusal: &str, refused: &[Option<String>]) -> Refusal {
    let value = |i: usize| refused.get(i).cloned().flatten().unwrap_or_else(|| "NULL".into());
    let (v0, v1, v2, v3) = (value(0), value(1), value(2), value(3));
    let (invalid, wrong_state) =
        (PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE, PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE);
    match refusal {
        "payloads_null" => Refusal::new(invalid, "payloads must not be null")
            .hint("Pass an array; ARRAY[NULL]::text[] enqueues one job without a payload."),
        "keys_count" => Refusal::new(invalid, format!("keys has {v0} elements for {v1} payloads"))
            .hint("Give one key (or NULL) per payload."),
        "cron_never" => Refusal::new(invalid, format!("cron pattern '{v0}' never fires in time zone {v1}"))
            .hint("A day that does not exist, such as the 30th of February, has no slots."),
        "schedule_unknown" => Refusal::new(PgSqlErrorCode::ERRCODE_NO_DATA_FOUND, format!("there is no schedule named {v0}")),
        "after_unknown" => Refusal::new(invalid, format!("after names no job: {v0}"))
            .hint("A job can run after jobs that exist (enqueued before it, finished or not)."),
        "group_keys_count" => Refusal::new(invalid, format!("group_keys has {v0} elements for {v1} payloads"))
            .hint("Give one group key (or NULL) per payload."),
        "key_finished" => key_finished(&v0, &v1),
        "ids_null" => Refusal::new(invalid, "ids must not be null"),
        "keep_null" => Refusal::new(invalid, format!("rq_set_history: keep must not be null (queue {v0})"))
            .hint("true keeps the queue's succeeded jobs (the default), false deletes each as it succeeds."),
        "attempts_count" => Refusal::new(invalid, format!("attempts has {v0} tokens for {v1} ids"))
            .hint("Give one attempt number per id."),
        // v1: the verb ("complete", "extend", "record a step of" …)
        "attempt_null" => Refusal::new(
            PgSqlErrorCode::ERRCODE_NULL_VALUE_NOT_ALLOWED,
            format!("cannot {v1} job {v0} without its attempt"),
        )
        .detail(
            "The attempt is the claim's fencing token: without it, a worker whose lease ran out would act on the \
             attempt of the worker that holds the job now.",
        )
        .hint("Pass the attempts value the claim returned, as the verb's second argument (attempt => …)."),
        "retry_key_taken" => {
            Refusal::new(wrong_state, format!("cannot retry job {v0}: another unfinished job in its queue holds its key"))
                .hint("Wait for that job to finish, or cancel it.")
        }
        "trigger_per_statement" => Refusal::new(
            invalid,
            format!("rq_enqueue_trigger() must run FOR EACH ROW, not FOR EACH STATEMENT (trigger {v0} on {v1}.{v2})"),
        ),
        "trigger_arguments" => Refusal::new(
            invalid,
            format!(
                "rq_enqueue_trigger() takes the queue name as its one argument, got {v0} arguments (trigger {v1} on {v2}.{v3})"
            ),
        )
        .hint("EXECUTE FUNCTION rq_enqueue_trigger('my_queue')"),
        "trigger_instead_of" => Refusal::new(
            invalid,
            format!("rq_enqueue_trigger() must run AFTER or BEFORE a change, not INSTEAD OF it (trigger {v0} on {v1}.{v2})"),
        )
        .detail("As an INSTEAD OF trigger it would enqueue a job for a change that never happens."),
        "trigger_on_jobs" => Refusal::new(
            invalid,
            format!("rq_enqueue_trigger() cannot run on the jobs table itself (trigger {v0} on {v1}.{v2})"),
        )
        .detail("Each job it enqueued would fire it again."),
        "max_queues" => Refusal::new(invalid, format!("max_queues must be between 0 and 100000, got {v0}"))
            .hint("rq_prometheus(max_queues) writes series per queue for that many queues, and totals for all."),
        // v1: what the call was doing ("record a step of", "put to sleep", "park")
        "step_name_empty" => Refusal::new(invalid, format!("cannot {v1} job {v0}: name must not be null or empty"))
            .hint("Name each step of a job, say rq_step(id, attempt, 'charge', result) or rq_sleep(id, attempt, 'cool-off', delay => '1 hour')."),
        "sleep_when" => Refusal::new(invalid, format!("cannot put job {v0} to sleep: give at or delay"))
            .hint("rq_sleep(id, attempt, 'cool-off', delay => '1 hour') or rq_sleep(id, attempt, 'until-monday', at => '2026-11-30 09:00+00')."),
        "event_name_empty" => Refusal::new(invalid, format!("{v0}: event must not be null or empty"))
            .hint("Name the event a job waits for, say 'payment:' || order_id."),
        "event_name_long" => Refusal::new(invalid, format!("event name must be at most 1000 bytes, got {v0} bytes ('{v1}…')")),
        "history_of_null" => Refusal::new(invalid, "rq_history: id must not be null"),
        "history_of_unknown" => Refusal::new(PgSqlErrorCode::ERRCODE_NO_DATA_FOUND, format!("rq_history: there is no job {v0}"))
            .hint("A job is pruned with its history after the retention (raquel.retention)."),
        "parents_of_null" => Refusal::new(invalid, "rq_parents: id must not be null"),
        "parents_of_unknown" => Refusal::new(PgSqlErrorCode::ERRCODE_NO_DATA_FOUND, format!("rq_parents: there is no job {v0}")),
        "step_name_long" => Refusal::new(invalid, format!("step name must be at most 1000 bytes, got {v0} bytes ('{v1}…')")),
        "step_recorded" => Refusal::new(
            PgSqlErrorCode::ERRCODE_UNIQUE_VIOLATION,
            format!("step {v0:?} of job {v1} is already recorded"),
        )
        .detail(format!("Attempt {v2} recorded it at {v3}."))
        .hint("Read the steps recorded (SELECT name, result FROM job_steps WHERE job_id = …) and skip those that are done."),
        // v0 the step's name, v1 the job, v2 the kind recorded, v3 the
        // call's kind, v4 the attempt that recorded it, v5 when
        "wait_job_which" => Refusal::new(
            invalid,
            format!("rq_wait_job: job must name another job than the one that waits ({v0}), got {v1}"),
        )
        .hint("Pass the id of the job to wait for, such as a child this job enqueued."),
        "wait_job_unknown" => Refusal::new(PgSqlErrorCode::ERRCODE_NO_DATA_FOUND, format!("cannot wait for job {v0}: no such job"))
            .hint("The job may have been pruned after its retention; enqueue it before waiting for it."),
        "event_name_reserved" => Refusal::new(invalid, format!("{v1}: event names that begin with raquel: are raquel's own, got '{v0}'"))
            .hint("raquel hands a job's end to the jobs that wait for it (rq_wait_job) under such names; choose another name."),
        "step_kind" => {
            let kind = |k: &str| match k {
                "step" => "a step (rq_step)",
                "sleep" => "a sleep (rq_sleep)",
                "event" => "a wait for an event (rq_wait_event)",
                "job" => "a wait for a job (rq_wait_job)",
                _ => "a step of another kind",
            };
            Refusal::new(wrong_state, format!("step {v0:?} of job {v1} is {}, not {}", kind(&v2), kind(&v3)))
                .detail(format!("Attempt {} recorded it at {}.", value(4), value(5)))
                .hint(
                    "A name is one step of one kind in a job's run. If a deploy renamed or reused it, give this call a \
                     name of its own: the jobs in flight keep what their steps recorded.",
                )
        }
        "event_out_of_scope" => Refusal::new(
            PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE,
            format!("role {v1} may not emit event {v0}"),
        )
        .detail(format!("It may emit only events whose name begins with: {v2}."))
        .hint("The extension's owner widens it with rq_grant_emitter(role, prefix)."),
        "emit_prefix_empty" => Refusal::new(invalid, format!("rq_grant_emitter: prefix must not be empty (role {v0})"))
            .hint("Leave prefix out (NULL) to let the role emit any event."),
        "role_null" => Refusal::new(invalid, format!("{v0}: role must not be null"))
            .hint(format!("SELECT {v0}('my_role')")),
        "role_unknown" => Refusal::new(PgSqlErrorCode::ERRCODE_UNDEFINED_OBJECT, format!("{v0}: there is no role with OID {v1}")),
        other => Refusal::invalid_parameter(format!("rq_refuse: no refusal is called {other:?}"))
            .hint("rq_refuse is for the extension's own functions."),
    }
}

/// Refuses a verb on job `id` called without its attempt (0.6.0 on, every
/// verb that acts on a claimed job requires it): changes nothing.
pub fn require_attempt(id: Option<pgrx::Uuid>, verb: &str) -> ! {
    named("attempt_null", &[id.map(|id| id.to_string()), Some(verb.into())]).raise()
}

/// require_attempt for the verbs written in PL/pgSQL (rq_reject, rq_extend,
/// rq_reschedule, rq_sleep, rq_wait_event): refuses a NULL attempt.
#[pg_extern(stable, parallel_safe, schema = "raquel_internal")]
#[search_path(pg_catalog, pg_temp)]
fn rq_require_attempt(id: Option<pgrx::Uuid>, attempt: Option<i32>, verb: Option<&str>) {
    // Not STRICT: a NULL attempt is what it refuses.
    if attempt.is_none() {
        require_attempt(id, verb.unwrap_or("act on"))
    }
}

/// Logs a WARNING with `code` as its SQLSTATE: the background worker's
/// report of a duty that failed keeps the failure's own code.
pub fn warning(code: PgSqlErrorCode, message: String) {
    ErrorReport::new(code, message, function_name!()).report(PgLogLevel::WARNING);
}

/// The same at LOG level, for what is expected now and then.
pub fn log(code: PgSqlErrorCode, message: String) {
    ErrorReport::new(code, message, function_name!()).report(PgLogLevel::LOG);
}

/// Why `verb` (complete, fail, …) matched no job: the id is null, there is
/// no such job, its status is not one of `allowed`, or the caller's claim
/// (`attempt`, the fencing token) is stale.
pub enum Cannot {
    NoId,
    NoSuchJob,
    /// Its status is not one the verb takes; it is on attempt `current`.
    Status { status: String, current: i32 },
    Stale { current: i32 },
    /// Nothing explains it: the job changed between the verb's UPDATE and
    /// this look at it.
    Changed,
}

impl Cannot {
    /// What the job as it is now says about a verb that matched nothing.
    pub fn explain(id: Option<pgrx::Uuid>, attempt: Option<i32>, job: Option<(String, i32)>, allowed: &[&str]) -> Cannot {
        match (id, job) {
            (None, _) => Cannot::NoId,
            (Some(_), None) => Cannot::NoSuchJob,
            (Some(_), Some((status, current))) if !allowed.contains(&status.as_str()) => Cannot::Status { status, current },
            (Some(_), Some((_, current))) if attempt.is_some_and(|a| a != current) => Cannot::Stale { current },
            (Some(_), Some(_)) => Cannot::Changed,
        }
    }

    pub fn refusal(self, verb: &str, id: Option<pgrx::Uuid>, attempt: Option<i32>, allowed: &[&str]) -> Refusal {
        let id = id.map_or_else(String::new, |id| id.to_string());
        // the verb as the message says it ("cannot complete job …"), and its function
        let (function, verb) = match verb {
            "step" => ("rq_step".to_string(), "record a step of"),
            "sleep" => ("rq_sleep".to_string(), "put to sleep"),
            "wait_event" => ("rq_wait_event".to_string(), "park"),
            other => (format!("rq_{other}"), other),
        };
        match self {
            Cannot::NoId => Refusal::invalid_parameter(format!("cannot {verb} a job: id must not be null")),
            Cannot::NoSuchJob => Refusal::new(
                PgSqlErrorCode::ERRCODE_NO_DATA_FOUND,
                format!("cannot {verb} job {id}: no such job"),
            ),
            Cannot::Status { status, current } => Refusal::new(
                PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
                format!("cannot {verb} job {id}: its status is {status}"),
            )
            .detail(format!("Job {id} is {status}, on attempt {current}."))
            .hint(format!("{function} takes a job whose status is {}.", allowed.join(" or "))),
            Cannot::Stale { current } => Refusal::new(
                PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
                format!(
                    "cannot {verb} job {id}: the claim on attempt {} is stale, the job is on attempt {current}",
                    attempt.unwrap_or_default()
                ),
            )
            .detail(format!("Job {id} is on attempt {current}; this call passed attempt {}.", attempt.unwrap_or_default()))
            .hint("The lease ran out and the job was handed out again; this worker's result no longer counts."),
            Cannot::Changed => Refusal::new(
                PgSqlErrorCode::ERRCODE_T_R_SERIALIZATION_FAILURE,
                format!("cannot {verb} job {id}: it changed while this call ran"),
            )
            .hint("Try again."),
        }
    }
}

/// Raises the refusal that explains why `verb` matched no job, looking the
/// job up in the jobs table of `function`'s schema. Connected to SPI.
pub fn raise_cannot(function: pg_sys::Oid, id: Option<pgrx::Uuid>, attempt: Option<i32>, verb: &str, allowed: &[&str]) -> ! {
    cannot(function, id, attempt, allowed).refusal(verb, id, attempt, allowed).raise()
}

/// Why a verb taking jobs whose status is one of `allowed` matched no job,
/// looking the job up in the jobs table of `function`'s schema. Connected
/// to SPI.
pub fn cannot(function: pg_sys::Oid, id: Option<pgrx::Uuid>, attempt: Option<i32>, allowed: &[&str]) -> Cannot {
    let job = id.and_then(|id| {
        let jobs = statements::in_schema_of(function, "jobs");
        let text = || statements::fill(JOB_STATE, &[("@jobs@", &jobs)]);
        let statement =
            Statement { shape: Shape { name: "job_state", variant: 0 }, text: &text, types: &[pg_sys::UUIDOID] };
        (statements::run_once(&statement, &[id.into_datum()]) == 1).then(|| {
            // SAFETY: the statement just returned one row of (status, attempts).
            unsafe { (statements::value::<String>(0, 1).unwrap_or_default(), statements::value::<i32>(0, 2).unwrap_or_default()) }
        })
    });
    Cannot::explain(id, attempt, job, allowed)
}

/// For the verbs written in PL/pgSQL: explains why `verb` matched no job.
/// Always raises.
#[pg_extern(volatile, parallel_unsafe, schema = "raquel_internal")]
#[search_path(pg_catalog, pg_temp)]
fn rq_raise_cannot(
    id: Option<pgrx::Uuid>,
    attempt: Option<i32>,
    verb: &str,
    allowed: Vec<Option<String>>,
    fcinfo: pg_sys::FunctionCallInfo,
) {
    let allowed: Vec<&str> = allowed.iter().flatten().map(String::as_str).collect();
    // SAFETY: fcinfo is this call's own.
    let function = unsafe { statements::called_function(fcinfo) };
    statements::connect();
    raise_cannot(function, id, attempt, verb, &allowed)
}

#[cfg(test)]
mod tests {
    use super::Cannot;

    fn explain(id: bool, attempt: Option<i32>, job: Option<(&str, i32)>) -> &'static str {
        let id = id.then(|| pgrx::Uuid::from_bytes([7; 16]));
        match Cannot::explain(id, attempt, job.map(|(s, a)| (s.to_string(), a)), &["claimed"]) {
            Cannot::NoId => "no id",
            Cannot::NoSuchJob => "no such job",
            Cannot::Status { .. } => "status",
            Cannot::Stale { .. } => "stale",
            Cannot::Changed => "changed",
        }
    }

    #[test]
    fn a_miss_is_explained_by_the_first_reason_that_holds() {
        assert_eq!(explain(false, None, None), "no id");
        assert_eq!(explain(true, None, None), "no such job");
        assert_eq!(explain(true, Some(2), Some(("success", 2))), "status");
        assert_eq!(explain(true, Some(1), Some(("claimed", 2))), "stale");
        assert_eq!(explain(true, Some(2), Some(("claimed", 2))), "changed");
        assert_eq!(explain(true, None, Some(("claimed", 2))), "changed");
    }
}
