//! Ending a job: `rq_complete` and `rq_fail` (declared in sql/finish.sql;
//! with a claim after them, rq_complete_and_claim and rq_fail_and_claim in
//! src/claim.rs).
//!
//! A job claimed under a lease ends with one UPDATE of its claimed row; a
//! job this transaction took (src/take.rs) with one UPDATE that also writes
//! the claim it never wrote (its attempt, worker and time). Each is one kept
//! plan (sql/transition.complete.sql, sql/transition.fail.sql); only when it matches
//! nothing does the verb look at the job to say why (src/errors.rs). A
//! failed job to be retried is counted failed here and wakes a waiting
//! claim when it is due; what follows a job's end is src/ended.rs's.

use crate::clock::now_ms;
use crate::direct;
use crate::distributed;
use crate::errors::{self, Refusal};
use crate::ended::{self, Ended, Outcome};
use crate::events;
use crate::flow;
use crate::install::Mode;
use crate::limits;
use crate::settings;
use crate::metrics::{self, Event};
use crate::statements::{self, Shape, Statement, nullable_arg};
use crate::take;
use crate::transitions;
use pgrx::fcinfo::pg_getarg;
use pgrx::prelude::*;
use pgrx::Array;

/// The parameters of sql/transition.complete.sql and sql/transition.fail.sql (and,
/// with a tenth, the queues without history, of
/// sql/transition.complete_deleting.sql; an eleventh, a completed job's result,
/// only when one is given, so the plan of a complete without one is as
/// before 0.5.0).
const PARAMETER_TYPES: [pg_sys::Oid; 11] = [
    pg_sys::UUIDOID,
    pg_sys::INT4OID,
    pg_sys::INT8OID,
    pg_sys::INT4OID,
    pg_sys::TEXTOID,
    pg_sys::INT8OID,
    pg_sys::TEXTOID,
    pg_sys::TEXTOID,
    pg_sys::TEXTOID,
    pg_sys::TEXTARRAYOID,
    pg_sys::JSONBOID,
];

/// The column a statement that ends jobs returns after each whole row:
/// whether its end sets something off (rq_job_ended: children waiting, a key
/// held for a period). On Citus no job has children (workflows are refused
/// there), and a shard's statement cannot read the coordinator's
/// job_dependencies.
pub fn sets_off(function: pg_sys::Oid, distributed: bool) -> String {
    format!(", {} AS sets_off", sets_off_condition(function, distributed))
}

/// The condition of `sets_off`, on the row `j`.
pub fn sets_off_condition(function: pg_sys::Oid, distributed: bool) -> String {
    if distributed {
        "j.key_period IS NOT NULL".to_string()
    } else {
        format!(
            "j.key_period IS NOT NULL OR EXISTS (SELECT FROM {} d WHERE d.parent_id = j.id)",
            statements::in_schema_of(function, "job_dependencies")
        )
    }
}

/// The queues whose jobs a complete beside `function` deletes (src/history.rs),
/// or None when it updates every job: on Citus, and on a table older than
/// 0.3.0, no queue is without history. May run a statement.
fn deleting(function: pg_sys::Oid, install: Mode) -> Option<Vec<String>> {
    if install.distributed || !install.workflows() {
        return None;
    }
    Some(crate::history::queues_without(function)).filter(|queues| !queues.is_empty())
}

/// The CTEs of a complete that deletes jobs (a queue without history) that
/// delete what is kept for those jobs too: their steps (sql/steps.sql) and
/// the parents they ran after (job_parents, sql/workflows.sql), each row `s`
/// that `condition` (given the row's job column) picks; nothing on a table
/// older than 0.5.0, which has neither.
fn kept_rows_gone(function: pg_sys::Oid, install: Mode, condition: impl Fn(&str) -> String) -> String {
    if install.results() {
        format!(
            ", steps_gone AS (DELETE FROM {} s {}), parents_gone AS (DELETE FROM {} s {})",
            statements::in_schema_of(function, "job_steps"),
            condition("job_id"),
            statements::in_schema_of(function, "job_parents"),
            condition("child_id")
        )
    } else {
        String::new()
    }
}

/// How a job comes to its end.
#[derive(Clone, Copy, PartialEq, Eq)]
enum End {
    Complete,
    Fail,
}

/// One call's end of one job: the statement's shape and arguments.
struct Ending {
    function: pg_sys::Oid,
    end: End,
    /// One server or Citus, and the table's generation (src/install.rs).
    install: Mode,
    /// The job was taken by this transaction (src/take.rs), not claimed.
    taken: Option<take::Taken>,
    /// A complete where some queue keeps no history: the jobs of those
    /// queues are deleted (sql/transition.complete_deleting.sql).
    deleting: bool,
    /// Those queues (empty when not `deleting`).
    without_history: Vec<String>,
    /// A complete with a result (the jobs table's `result`, 0.5.0 on).
    with_result: bool,
    /// The job's id (args[0]).
    id: pgrx::Uuid,
    args: [Option<pg_sys::Datum>; 11],
}

impl Ending {
    /// The verb's arguments: id, attempt, for a failure the error and its
    /// trace, for a complete its result (jsonb); None when there is no job
    /// to end (a NULL id, or on Citus an id no shard has).
    fn new(
        function: pg_sys::Oid,
        end: End,
        id: Option<pg_sys::Datum>,
        attempt: Option<pg_sys::Datum>,
        error: [Option<pg_sys::Datum>; 2],
        result: Option<pg_sys::Datum>,
    ) -> Option<Ending> {
        let id_datum = id?;
        // SAFETY: a uuid argument of the call.
        let uuid = unsafe { pgrx::Uuid::from_datum(id_datum, false) }?;
        let taken = if take::any() { take::taken(&uuid) } else { None };
        let install = crate::install::mode(function);
        let distributed = install.distributed;
        // On Citus the UPDATE names the job's queue, to run in its shard; a
        // job no shard has is not there to end.
        let queue = if distributed { Some(distributed::queue_of(function, id_datum)?) } else { None };
        let mut args = [Some(id_datum), attempt, now_ms().into_datum(), None, None, None, error[0], error[1], None, None, result];
        if let Some(t) = &taken {
            if let Some(given) = attempt.and_then(|a| unsafe { i32::from_datum(a, false) }) {
                if given != t.attempt {
                    Refusal::new(
                        PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
                        format!("job {uuid} was taken by this transaction as attempt {}, not {given}", t.attempt),
                    )
                    .hint("Pass the attempts value rq_take returned.")
                    .raise()
                }
            }
            (args[3], args[4], args[5]) = (t.attempt.into_datum(), t.worker.as_deref().into_datum(), t.claimed_at.into_datum());
        }
        args[8] = queue.as_deref().into_datum();
        let with_result = result.is_some();
        // A job completed with a result is kept (for the retention) even in
        // a queue without history: its result is there to be read.
        let without_history = if end == End::Complete && !with_result { deleting(function, install) } else { None };
        let deleting = without_history.is_some();
        args[9] = without_history.clone().into_datum();
        let without_history = without_history.unwrap_or_default();
        Some(Ending { function, end, install, taken, deleting, without_history, with_result, id: uuid, args })
    }

    fn statement_text(&self) -> std::ffi::CString {
        let taken = self.taken.is_some();
        let attempt = if taken { "$4" } else { "j.attempts" };
        let backoff = statements::own_function(self.function, "rq_backoff(integer,integer,integer,integer)");
        let (base, min, max) = (
            limits::DEFAULT_BACKOFF_BASE_MS.to_string(),
            limits::DEFAULT_MIN_RETRY_DELAY_MS.to_string(),
            limits::DEFAULT_MAX_RETRY_DELAY_MS.to_string(),
        );
        let template = match self.end {
            End::Complete if self.deleting => transitions::COMPLETE_DELETING,
            End::Complete => transitions::COMPLETE,
            End::Fail => transitions::FAIL,
        };
        // a failure with a retry left goes to the job's history
        let (worker, claimed_at) = if taken { ("$5", "$6") } else { ("j.claimed_by", "j.claimed_at") };
        let history_set = transitions::past_attempts_set(
            self.install.history(),
            &format!("({attempt} - j.requeues > j.max_retry_count) IS NOT TRUE"),
            &transitions::PastAttempt {
                attempt,
                worker,
                claimed_at,
                ended_at: "$3",
                outcome: "'failed'",
                error: "$7",
                trace: "$8",
            },
        );
        statements::fill(
            template,
            &[
                ("@history_set@", &history_set),
                ("@taken_set@", if taken { ", attempts = $4, claimed_by = $5, claimed_at = $6" } else { "" }),
                ("@result_set@", if self.with_result { ", result = $11" } else { "" }),
                (
                    "@kept_rows_gone@",
                    &kept_rows_gone(self.function, self.install, |job| format!("WHERE s.{job} = $1 AND EXISTS (SELECT FROM gone)")),
                ),
                ("@taken_json@", if taken { ", 'attempts', $4, 'claimed_by', $5, 'claimed_at', $6" } else { "" }),
                ("@sets_off_condition@", &sets_off_condition(self.function, self.install.distributed)),
                // ($2 is NULL only for a declaration older than 0.6.0, not
                // yet updated: src/compat_0_5.rs; 0.6.0's require it.)
                (
                    "@was@",
                    if taken { "j.status IN ('queued', 'failed')" } else { "j.status = 'claimed' AND ($2 IS NULL OR j.attempts = $2)" },
                ),
                ("@attempt@", attempt),
                ("@jobs@", &statements::in_schema_of(self.function, "jobs")),
                ("@sets_off@", &if self.install.workflows() { sets_off(self.function, self.install.distributed) } else { String::new() }),
                ("@row@", &distributed::whole_row(self.function)),
                ("@same_queue@", if self.install.distributed { "AND j.queue = $9" } else { "" }),
                ("@backoff@", &backoff),
                ("@default_backoff_base@", &base),
                ("@default_min_retry_delay@", &min),
                ("@default_max_retry_delay@", &max),
            ],
        )
    }

    /// The end of a claimed job, written directly (src/direct.rs) with what
    /// it sets off; None, having done nothing, where the statement is to
    /// run: a job this transaction took, a complete of a job of a queue
    /// without history (deleted), Citus, a table older than 0.3.0, and
    /// whenever the direct path declines (the job not claimed as this
    /// attempt, a row changed under it, a table not as raquel made it).
    fn ended_directly(&self, frees_slots: bool) -> Option<pg_sys::Datum> {
        if self.taken.is_some() || self.install.distributed || !self.install.workflows() {
            return None;
        }
        // SAFETY: the attempt and now are an integer and a bigint argument.
        let (attempt, now) = unsafe {
            (self.args[1].and_then(|a| i32::from_datum(a, false))?, self.args[2].and_then(|n| i64::from_datum(n, false))?)
        };
        let end = match self.end {
            End::Complete => direct::End::Complete { result: self.args[10] },
            End::Fail => direct::End::Fail { error: self.args[6], trace: self.args[7] },
        };
        let table = crate::privileges::jobs_of(self.function);
        let dependencies = crate::privileges::table_of(self.function, "job_dependencies");
        let keeps_history = |queue: &str| !self.without_history.iter().any(|q| q == queue);
        let done = direct::end(table, dependencies, self.id, attempt, now, end, keeps_history)?;
        // SAFETY: a composite datum in SPI's memory, copied out before SPI_finish frees it.
        let row = unsafe { pg_sys::SPI_datumTransfer(done.row, false, -1) };
        let run_ms = done.claimed_at.map(|claimed_at| now_ms() - claimed_at);
        let outcome = match (self.end, done.retry) {
            (End::Complete, _) => Outcome::Succeeded,
            (End::Fail, None) => Outcome::Exhausted,
            (End::Fail, Some(retry)) => {
                self.to_be_retried(&done.queue, run_ms, Some(retry.due), retry.max_age, retry.priority);
                return Some(row);
            }
        };
        let ended = Ended { id: self.id, queue: done.queue, outcome, run_ms, was_claimed: true, sets_off: done.sets_off };
        ended::jobs_ended(self.function, frees_slots, &[ended]);
        Some(row)
    }

    /// What follows a failed attempt to be retried: counted failed, and a
    /// waiting claim woken when it is due.
    fn to_be_retried(&self, queue: &str, run_ms: Option<i64>, due: Option<i64>, max_age: Option<i64>, priority: Option<i32>) {
        metrics::note(queue, Event::Failed, run_ms);
        let lane = priority.map_or(events::Lane::Unknown, |p| events::Lane::Of(p, Some(self.id)));
        events::ready(crate::privileges::jobs_of(self.function), queue, due, max_age, lane);
        take::finished(&self.id);
    }

    /// Runs the UPDATE and what the end sets off; the job's row, in the
    /// caller's memory, or None when it matched nothing. Connected to SPI.
    fn run(&self) -> Option<pg_sys::Datum> {
        // Before the UPDATE: reading the settings may run a statement, which
        // would replace the UPDATE's result.
        let frees_slots = flow::some_queue_counts_claims(self.function);
        if let Some(row) = self.ended_directly(frees_slots) {
            return Some(row);
        }
        let text = || self.statement_text();
        let variant = i64::from(self.install.workflows())
            + 2 * i64::from(self.taken.is_some())
            + 4 * i64::from(self.end == End::Fail)
            + 8 * i64::from(self.deleting)
            + 16 * i64::from(self.with_result)
            + 32 * i64::from(self.install.history());
        let types = match (self.with_result, self.deleting) {
            (true, _) => &PARAMETER_TYPES[..],
            (false, true) => &PARAMETER_TYPES[..10],
            (false, false) => &PARAMETER_TYPES[..9],
        };
        let statement = Statement { shape: Shape { name: "end", variant }, text: &text, types };
        let run = || statements::run(self.function, &statement, &self.args[..types.len()]);
        let ended = if self.deleting { crate::history::as_owner(self.function, run) } else { run() };
        if ended != 1 {
            return None;
        }
        // SAFETY (each value below): the UPDATE returned the ended row and
        // then the columns its statement names, in that order.
        let queue = unsafe { statements::value::<String>(0, 2) }.unwrap_or_default();
        let run_ms = unsafe { statements::value::<i64>(0, 3) }.map(|claimed_at| now_ms() - claimed_at);
        let (outcome, sets_off_column) = match self.end {
            End::Complete => (Some(Outcome::Succeeded), 4),
            End::Fail => {
                if unsafe { statements::value::<String>(0, 4) }.as_deref() == Some("failed") {
                    let (due, max_age, priority) =
                        unsafe { (statements::value::<i64>(0, 5), statements::value::<i64>(0, 6), statements::value::<i32>(0, 7)) };
                    self.to_be_retried(&queue, run_ms, due, max_age, priority);
                    (None, 8)
                } else {
                    (Some(Outcome::Exhausted), 8)
                }
            }
        };
        let sets_off = self.install.workflows() && unsafe { statements::value::<bool>(0, sets_off_column) } == Some(true);
        // SAFETY: as above.
        let row = unsafe { statements::first_row_copied() };
        if let Some(outcome) = outcome {
            let ended = Ended { id: self.id, queue, outcome, run_ms, was_claimed: self.taken.is_none(), sets_off };
            ended::jobs_ended(self.function, frees_slots, &[ended]);
        }
        Some(row)
    }
}

// rq_complete(id uuid, attempt integer, result jsonb) RETURNS jobs. See
// sql/finish.sql. (rq_complete_c, of the scripts before 0.6.0, whose
// attempt may be left out: src/compat_0_5.rs.)
function_info_v1!(pg_finfo_rq_complete_fenced_c);

/// # Safety
/// Called by the function manager with the arguments sql/finish.sql declares.
#[pg_guard]
#[unsafe(no_mangle)]
pub unsafe extern "C-unwind" fn rq_complete_fenced_c(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    // SAFETY: fcinfo is this call's own: id, attempt, result.
    unsafe { complete_from_args(fcinfo, 2, true) }
}

/// Completes the claimed (or taken) job of arguments 0 (id) and 1 (attempt)
/// of `fcinfo`'s call, with the result of argument `result_arg` (when the
/// call has it: a 0.4.0 declaration of the verb has none), and what its end
/// sets off; its row, in the caller's memory. Raises (rq_raise_cannot) when
/// it cannot; `fenced` (every declaration from 0.6.0 on), refuses a call
/// without its attempt. For rq_complete and rq_complete_and_claim
/// (src/claim.rs).
///
/// # Safety
/// `fcinfo` is a call whose arguments 0 and 1 are a uuid and an integer,
/// and whose argument `result_arg`, if there is one, a jsonb.
pub unsafe fn complete_from_args(fcinfo: pg_sys::FunctionCallInfo, result_arg: usize, fenced: bool) -> pg_sys::Datum {
    // SAFETY: per the contract above.
    unsafe {
        let result = optional_arg(fcinfo, result_arg);
        end_from_args(fcinfo, End::Complete, 1, [None, None], result, fenced)
    }
}

/// Argument `n` of `fcinfo`'s call, or None when it is null or the call has
/// fewer arguments (a verb declared by an older version's script).
///
/// # Safety
/// `fcinfo` is a valid call.
pub unsafe fn optional_arg(fcinfo: pg_sys::FunctionCallInfo, n: usize) -> Option<pg_sys::Datum> {
    // SAFETY: nargs is the call's own count; argument n exists below it.
    unsafe { if usize::try_from((*fcinfo).nargs).is_ok_and(|count| n < count) { nullable_arg(fcinfo, n) } else { None } }
}

// rq_fail(id uuid, attempt integer, error text, error_trace text) RETURNS
// jobs. See sql/finish.sql. (rq_fail_c, of the scripts before 0.6.0, whose
// attempt came last and could be left out: src/compat_0_5.rs.)
function_info_v1!(pg_finfo_rq_fail_fenced_c);

/// # Safety
/// Called by the function manager with the arguments sql/finish.sql declares.
#[pg_guard]
#[unsafe(no_mangle)]
pub unsafe extern "C-unwind" fn rq_fail_fenced_c(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    // SAFETY: fcinfo is this call's own: id, attempt, error, error_trace.
    unsafe { fail_from_args(fcinfo, true) }
}

/// rq_fail of `fcinfo`'s call: `fenced` (0.6.0 on), arguments 0 (id), 1
/// (attempt, required), 2 (error) and 3 (error_trace); before 0.6.0, 0
/// (id), 1 (error), 2 (error_trace) and 3 (attempt, optional). For rq_fail
/// and rq_fail_and_claim (src/claim.rs).
///
/// # Safety
/// `fcinfo` is a call whose arguments 0 to 3 are rq_fail's, in that layout.
pub unsafe fn fail_from_args(fcinfo: pg_sys::FunctionCallInfo, fenced: bool) -> pg_sys::Datum {
    let (attempt_arg, error_arg) = if fenced { (1, 2) } else { (3, 1) };
    // SAFETY: per the contract above: the error arguments are texts.
    unsafe {
        let error = [nullable_arg(fcinfo, error_arg), nullable_arg(fcinfo, error_arg + 1)];
        end_from_args(fcinfo, End::Fail, attempt_arg, error, None, fenced)
    }
}

/// # Safety
/// `fcinfo` is a call whose argument 0 is the id and whose argument
/// `attempt_arg` the attempt.
unsafe fn end_from_args(
    fcinfo: pg_sys::FunctionCallInfo,
    end: End,
    attempt_arg: usize,
    error: [Option<pg_sys::Datum>; 2],
    result: Option<pg_sys::Datum>,
    fenced: bool,
) -> pg_sys::Datum {
    // SAFETY: per the contract above.
    let (function, id, attempt) =
        unsafe { (statements::called_function(fcinfo), nullable_arg(fcinfo, 0), nullable_arg(fcinfo, attempt_arg)) };
    let verb = if end == End::Complete { "complete" } else { "fail" };
    if fenced && attempt.is_none() {
        // SAFETY: argument 0 is a uuid.
        errors::require_attempt(unsafe { pg_getarg::<pgrx::Uuid>(fcinfo, 0) }, verb);
    }
    // SAFETY: the result is a jsonb datum; argument 0 a uuid.
    unsafe {
        limits::check_result(result, || format!("the result of job {}", pg_getarg::<pgrx::Uuid>(fcinfo, 0).map_or("NULL".into(), |id| id.to_string())));
    }
    statements::connect();
    if let Some(row) = Ending::new(function, end, id, attempt, error, result).and_then(|ending| ending.run()) {
        statements::finish();
        return row;
    }
    // SAFETY: the arguments as declared: a uuid and an integer.
    let (id, attempt) = unsafe { (pg_getarg::<pgrx::Uuid>(fcinfo, 0), pg_getarg::<i32>(fcinfo, attempt_arg)) };
    errors::raise_cannot(function, id, attempt, verb, &["claimed"])
}

// rq_complete_batch(ids uuid[], attempts integer[], results jsonb[])
// RETURNS SETOF jobs. See sql/finish.sql. (rq_complete_batch_c, of the
// scripts before 0.6.0, whose attempts may be left out: src/compat_0_5.rs.)
function_info_v1!(pg_finfo_rq_complete_batch_fenced_c);

/// # Safety
/// Called by the function manager with the arguments sql/finish.sql
/// declares, in a context that accepts a materialized set.
#[pg_guard]
#[unsafe(no_mangle)]
pub unsafe extern "C-unwind" fn rq_complete_batch_fenced_c(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    // SAFETY: fcinfo is this call's own: ids and attempts; it returns SETOF jobs.
    unsafe {
        pg_sys::InitMaterializedSRF(fcinfo, 0);
        complete_batch_from_args(fcinfo, 2, true, true);
    }
    pg_sys::Datum::from(0)
}

/// rq_complete_batch of arguments 0 (ids), 1 (attempts) and `results_arg`
/// (results, when the call has it) of `fcinfo`'s call; with `return_rows`,
/// the completed rows go into its result set (set up by the caller);
/// `fenced` (0.6.0 on), every id needs its attempt. For rq_complete_batch
/// and rq_complete_batch_and_claim (src/claim.rs).
///
/// # Safety
/// `fcinfo` is a call whose arguments 0 and 1 are a uuid[] and an integer[],
/// and argument `results_arg`, if there is one, a jsonb[]; with
/// `return_rows`, it was set up by `InitMaterializedSRF`.
pub unsafe fn complete_batch_from_args(fcinfo: pg_sys::FunctionCallInfo, results_arg: usize, return_rows: bool, fenced: bool) {
    // SAFETY: the arguments are read as the types the SQL declaration gives them.
    let (ids, attempts) = unsafe { (pg_getarg::<Array<pgrx::Uuid>>(fcinfo, 0), pg_getarg::<Array<i32>>(fcinfo, 1)) };
    let Some(ids) = ids else { Refusal::invalid_parameter("ids must not be null").raise() };
    // SAFETY: per the contract above.
    let results_datum = unsafe { optional_arg(fcinfo, results_arg) };
    // SAFETY: arguments 0 and 1 (and the results) are arrays when not null.
    unsafe {
        for (array, name) in [(nullable_arg(fcinfo, 0), "ids"), (nullable_arg(fcinfo, 1), "attempts"), (results_datum, "results")] {
            if let Some(array) = array {
                limits::check_dimensions(crate::claim::array_dimensions(array), name);
            }
        }
    }
    // SAFETY: a jsonb[] datum of the call.
    let results: Option<Vec<Option<pgrx::JsonB>>> =
        results_datum.and_then(|d| unsafe { Array::<pgrx::JsonB>::from_datum(d, false) }).map(|a| a.iter().collect());
    let ids: Vec<Option<pgrx::Uuid>> = ids.iter().collect();
    let tokens: Vec<Option<i32>> = match attempts {
        Some(attempts) => attempts.iter().collect(),
        None => vec![None; ids.len()],
    };
    if tokens.len() != ids.len() {
        Refusal::invalid_parameter(format!("attempts has {} tokens for {} ids", tokens.len(), ids.len()))
            .hint(if fenced { "Give one attempt number per id." } else { "Give one attempt number per id, or none." })
            .raise()
    }
    if fenced {
        if let Some(n) = tokens.iter().position(Option::is_none) {
            errors::require_attempt(ids[n], "complete");
        }
    }
    // each result within raquel.max_result_size (the array's own size bounds
    // them all, so most batches need no look at each)
    // SAFETY: a jsonb[] datum of the call.
    if unsafe { limits::datum_bytes(results_datum) } > settings::max_result_size() {
        for (n, r) in results.iter().flatten().enumerate() {
            let size = r.as_ref().map_or(0, |r| r.0.to_string().len());
            limits::check_size(size, settings::max_result_size(), "raquel.max_result_size", || format!("result {} of the batch", n + 1));
        }
    }
    if let Some(results) = results.as_ref().filter(|r| r.len() != ids.len()) {
        Refusal::invalid_parameter(format!("results has {} results for {} ids", results.len(), ids.len()))
            .hint("Give one result per id (null for none), or no results.")
            .raise()
    }
    // SAFETY: fcinfo is this call's own.
    let function = unsafe { statements::called_function(fcinfo) };
    statements::connect();
    // SAFETY: per the contract above.
    unsafe { complete_batch(fcinfo, function, &ids, &tokens, results, return_rows) };
    statements::finish();
}

/// Completes the jobs `ids` (claimed, with their fencing `tokens`, or taken
/// by this transaction) in one UPDATE (on Citus one per queue), all or
/// nothing, with what their ends set off. Connected to SPI.
///
/// # Safety
/// With `return_rows`, `fcinfo` was set up by `InitMaterializedSRF`.
unsafe fn complete_batch(
    fcinfo: pg_sys::FunctionCallInfo,
    function: pg_sys::Oid,
    ids: &[Option<pgrx::Uuid>],
    tokens: &[Option<i32>],
    results: Option<Vec<Option<pgrx::JsonB>>>,
    return_rows: bool,
) {
    let install = crate::install::mode(function);
    let distributed = install.distributed;
    let frees_slots = flow::some_queue_counts_claims(function);
    let workflows = install.workflows();
    // Jobs completed with results are kept (see Ending::new).
    let results = results.filter(|r| r.iter().any(Option::is_some));
    let without_history = if results.is_some() { None } else { deleting(function, install) };
    // One UPDATE in all on one server; on Citus one per queue, each in the
    // queue's shard alone (an id no shard has goes with the empty name).
    let mut groups: Vec<(Option<String>, Vec<usize>)> = Vec::new();
    for (n, id) in ids.iter().enumerate() {
        let queue = if distributed {
            Some(id.and_then(|id| distributed::queue_of(function, id.into_datum()?)).unwrap_or_default())
        } else {
            None
        };
        match groups.iter_mut().find(|(q, _)| *q == queue) {
            Some((_, members)) => members.push(n),
            None => groups.push((queue, vec![n])),
        }
    }
    let now = now_ms();
    let (mut done, mut ended) = (Vec::new(), Vec::new());
    for (queue, members) in &groups {
        let taken: Vec<Option<take::Taken>> =
            members.iter().map(|&n| ids[n].filter(|_| take::any()).and_then(|id| take::taken(&id))).collect();
        let any_taken = taken.iter().any(Option::is_some);
        let text = || {
            let (was, taken_set) = if any_taken {
                (
                    "CASE WHEN w.taken_attempt IS NULL THEN j.status = 'claimed' AND (w.token IS NULL OR j.attempts = w.token) \
                     ELSE j.status IN ('queued', 'failed') END",
                    ", attempts = coalesce(w.taken_attempt, j.attempts), \
                     claimed_by = CASE WHEN w.taken_attempt IS NULL THEN j.claimed_by ELSE w.worker END, \
                     claimed_at = coalesce(w.taken_at, j.claimed_at)",
                )
            } else {
                ("j.status = 'claimed' AND (w.token IS NULL OR j.attempts = w.token)", "")
            };
            statements::fill(
                if without_history.is_some() { transitions::COMPLETE_BATCH_DELETING } else { transitions::COMPLETE_BATCH },
                &[
                    ("@taken_set@", taken_set),
                    ("@sets_off_condition@", &sets_off_condition(function, distributed)),
                    ("@was@", was),
                    ("@jobs@", &statements::in_schema_of(function, "jobs")),
                    ("@same_queue@", if distributed { "AND j.queue = $7" } else { "" }),
                    ("@sets_off@", &if workflows { sets_off(function, distributed) } else { String::new() }),
                    ("@results@", if results.is_some() { ", $9::jsonb[]" } else { "" }),
                    ("@kept_rows_gone@", &kept_rows_gone(function, install, |job| format!("USING gone g WHERE s.{job} = (g.job).id"))),
                    ("@result_column@", if results.is_some() { ", result" } else { "" }),
                    ("@result_set@", if results.is_some() { ", result = w.result" } else { "" }),
                ],
            )
        };
        let variant = i64::from(workflows)
            + 2 * i64::from(any_taken)
            + 4 * i64::from(without_history.is_some())
            + 8 * i64::from(results.is_some());
        let types = [
            pg_sys::UUIDARRAYOID,
            pg_sys::INT4ARRAYOID,
            pg_sys::INT8OID,
            pg_sys::INT4ARRAYOID,
            pg_sys::TEXTARRAYOID,
            pg_sys::INT8ARRAYOID,
            pg_sys::TEXTOID,
            pg_sys::TEXTARRAYOID,
            pg_sys::JSONBARRAYOID,
        ];
        let count = if results.is_some() {
            9
        } else if without_history.is_some() {
            8
        } else {
            7
        };
        let statement = Statement { shape: Shape { name: "complete_batch", variant }, text: &text, types: &types[..count] };
        let args = [
            members.iter().map(|&n| ids[n]).collect::<Vec<_>>().into_datum(),
            members.iter().map(|&n| tokens[n]).collect::<Vec<_>>().into_datum(),
            now.into_datum(),
            taken.iter().map(|t| t.as_ref().map(|t| t.attempt)).collect::<Vec<_>>().into_datum(),
            taken.iter().map(|t| t.as_ref().and_then(|t| t.worker.clone())).collect::<Vec<_>>().into_datum(),
            taken.iter().map(|t| t.as_ref().map(|t| t.claimed_at)).collect::<Vec<_>>().into_datum(),
            queue.as_deref().into_datum(),
            without_history.clone().into_datum(),
            results.as_ref().map(|r| members.iter().map(|&n| r[n].as_ref().map(|j| pgrx::JsonB(j.0.clone()))).collect::<Vec<_>>()).into_datum(),
        ];
        let run = || statements::run(function, &statement, &args[..count]);
        if without_history.is_some() { crate::history::as_owner(function, run) } else { run() };
        let mut each_row = |row: &mut statements::Row| {
            let (id, queue) = (row.get::<pgrx::Uuid>(c"id"), row.get::<String>(c"queue").unwrap_or_default());
            let run_ms = row.get::<i64>(c"claimed_at").map(|at| now - at);
            let sets_off = workflows && row.get::<bool>(c"sets_off") == Some(true);
            if let Some(id) = id {
                // (a job this transaction took was never claimed: it held no slot)
                let was_claimed = !any_taken || take::taken(&id).is_none();
                ended.push(Ended { id, queue, outcome: Outcome::Succeeded, run_ms, was_claimed, sets_off });
            }
            done.push(id);
        };
        // SAFETY: the last SPI result is the completed jobs rows (and
        // sets_off); connected; set up as a materialized set when asked.
        unsafe {
            if return_rows {
                statements::return_rows_changed(fcinfo, each_row);
            } else {
                statements::each_row(&mut each_row);
            }
        }
    }
    // Fewer rows than ids: an id this call could not complete (raise, which
    // undoes the rest), or the same id given twice (fine).
    if let Some(n) = (0..ids.len()).find(|&n| ids[n].is_none() || !done.contains(&ids[n])) {
        errors::raise_cannot(function, ids[n], tokens[n], "complete", &["claimed"])
    }
    ended::jobs_ended(function, frees_slots, &ended);
}
