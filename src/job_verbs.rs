//! The verbs that move one job by its id, other than a worker's end of it
//! (src/finish.rs): `rq_reschedule` and `rq_reject` (claimed → queued),
//! `rq_extend` (a claim's lease pushed out), `rq_cancel` (unfinished →
//! cancelled) and `rq_retry` (ended → queued). Declared in
//! sql/transitions.sql.
//!
//! Each is one kept plan of its statement, sql/transition.<verb>.sql (for
//! rq_extend, which changes no status, sql/job_verbs.extend.sql); only
//! when it matches nothing does the verb look at the job to say why
//! (src/errors.rs). They were PL/pgSQL until 0.6.0: written here, a refusal
//! carries no CONTEXT lines of raquel's internal helpers, which a user
//! cannot act on, and a role without raquel's grants is told which one it
//! lacks (src/statements.rs), as for the verbs already in Rust.

use crate::clock::now_ms;
use crate::distributed;
use crate::ended::{self, Ended, Outcome};
use crate::errors;
use crate::events::{self, Lane};
use crate::limits;
use crate::statements::{self, Shape, Statement};
use crate::transitions;
use pgrx::fcinfo::pg_getarg;
use pgrx::prelude::*;

/// rq_extend's statement: a lease pushed out is no transition of the job's
/// status, so it is not one of src/transitions.rs's.
const EXTEND: &str = include_str!("../sql/job_verbs.extend.sql");

/// The parameters of every statement here: id, attempt, now (ms), a time
/// the verb computed (ms), the job's queue on Citus
/// (sql/transition.reschedule.sql).
const PARAMETER_TYPES: [pg_sys::Oid; 5] = [pg_sys::UUIDOID, pg_sys::INT4OID, pg_sys::INT8OID, pg_sys::INT8OID, pg_sys::TEXTOID];

#[derive(Clone, Copy, PartialEq, Eq)]
enum Verb {
    Reschedule,
    Reject,
    Extend,
    Cancel,
    Retry,
}

impl Verb {
    /// The verb as errors::raise_cannot names it.
    fn name(self) -> &'static str {
        match self {
            Verb::Reschedule => "reschedule",
            Verb::Reject => "reject",
            Verb::Extend => "extend",
            Verb::Cancel => "cancel",
            Verb::Retry => "retry",
        }
    }

    /// The statuses of the jobs it takes.
    fn allowed(self) -> &'static [&'static str] {
        match self {
            Verb::Reschedule | Verb::Reject | Verb::Extend => &["claimed"],
            Verb::Cancel => &["queued", "claimed", "failed", "blocked"],
            Verb::Retry => &["failed", "exhausted", "expired", "cancelled"],
        }
    }

    fn template(self) -> &'static str {
        match self {
            Verb::Reschedule => transitions::RESCHEDULE,
            Verb::Reject => transitions::REJECT,
            Verb::Extend => EXTEND,
            Verb::Cancel => transitions::CANCEL,
            Verb::Retry => transitions::RETRY,
        }
    }

    /// Whether it acts on a claim, and so takes the claim's attempt.
    fn fenced(self) -> bool {
        matches!(self, Verb::Reschedule | Verb::Reject | Verb::Extend)
    }

    /// Whether the job is ready again after it (a waiting claim is woken).
    fn makes_ready(self) -> bool {
        matches!(self, Verb::Reschedule | Verb::Reject | Verb::Retry)
    }
}

/// Moves job `id` by `verb` for the call of `function`: `attempt`, the
/// claim's fencing token (fenced verbs only); `at`, the time the verb
/// computed (when the job is due again, when its lease ends). Its row, in
/// the caller's memory; raises when the job cannot be moved.
fn move_job(function: pg_sys::Oid, verb: Verb, id: Option<pgrx::Uuid>, attempt: Option<i32>, at: Option<i64>) -> pg_sys::Datum {
    statements::connect();
    let install = crate::install::mode(function);
    let now = now_ms();
    // On Citus the UPDATE names the job's queue, to run in its shard; a job
    // no shard has is not there to move.
    let queue = match (id, install.distributed) {
        (Some(id), true) => distributed::queue_of(function, id.into_datum().expect("a uuid is a datum")),
        _ => None,
    };
    let found = id.is_some() && (queue.is_some() || !install.distributed);
    let moved = found && {
        let text = || {
            let history_set = match verb {
                Verb::Reschedule | Verb::Reject => transitions::past_attempts_set(
                    install.history(),
                    "true",
                    &transitions::PastAttempt {
                        attempt: "j.attempts",
                        worker: "j.claimed_by",
                        claimed_at: "j.claimed_at",
                        ended_at: "$3",
                        outcome: if verb == Verb::Reschedule { "'rescheduled'" } else { "'rejected'" },
                        error: "NULL::text",
                        trace: "NULL::text",
                    },
                ),
                // the end a retry resets (a failed attempt rq_fail appended)
                Verb::Retry => transitions::past_attempts_set(
                    install.history(),
                    "j.status IN ('exhausted', 'cancelled', 'expired')",
                    &transitions::PastAttempt {
                        attempt: "j.attempts",
                        worker: &format!("CASE WHEN {} THEN j.claimed_by END", transitions::OWN_ATTEMPT),
                        claimed_at: &format!("CASE WHEN {} THEN j.claimed_at END", transitions::OWN_ATTEMPT),
                        ended_at: "j.finished_at",
                        outcome: "j.status::text",
                        error: "CASE WHEN j.status = 'exhausted' THEN j.error END",
                        trace: "CASE WHEN j.status = 'exhausted' THEN j.error_trace END",
                    },
                ),
                Verb::Extend | Verb::Cancel => String::new(),
            };
            statements::fill(
                verb.template(),
                &[
                    ("@history_set@", &history_set),
                    ("@jobs@", &statements::in_schema_of(function, "jobs")),
                    ("@row@", &distributed::whole_row(function)),
                    ("@same_queue@", if install.distributed { "AND j.queue = $5" } else { "" }),
                    ("@sets_off@", &crate::finish::sets_off(function, install.distributed)),
                    ("@default_min_retry_delay@", &limits::DEFAULT_MIN_RETRY_DELAY_MS.to_string()),
                ],
            )
        };
        let statement = Statement {
            shape: Shape { name: verb.name(), variant: i64::from(install.distributed) + 2 * i64::from(install.history()) },
            text: &text,
            types: &PARAMETER_TYPES,
        };
        let args = [id.into_datum(), attempt.into_datum(), now.into_datum(), at.into_datum(), queue.as_deref().into_datum()];
        let run = || statements::run(function, &statement, &args);
        let rows = if verb == Verb::Retry {
            // an ended job's key taken meanwhile by a newer unfinished job
            PgTryBuilder::new(std::panic::AssertUnwindSafe(run))
                .catch_when(PgSqlErrorCode::ERRCODE_UNIQUE_VIOLATION, |_| {
                    errors::named("retry_key_taken", &[id.map(|id| id.to_string())]).raise()
                })
                .execute()
        } else {
            run()
        };
        rows == 1
    };
    if !moved {
        errors::raise_cannot(function, id, attempt, verb.name(), verb.allowed())
    }
    let id = id.expect("a job was moved by its id");
    // SAFETY (each value below): the UPDATE returned the row and then the
    // columns its statement names, in that order.
    if verb.makes_ready() {
        let (queue, due, max_age, priority) = unsafe {
            (
                statements::value::<String>(0, 2).unwrap_or_default(),
                statements::value::<i64>(0, 3),
                statements::value::<i64>(0, 4),
                statements::value::<i32>(0, 5),
            )
        };
        let lane = priority.map_or(Lane::Unknown, |p| Lane::Of(p, Some(id)));
        events::ready(crate::privileges::jobs_of(function), &queue, due, max_age, lane);
    }
    // SAFETY: as above.
    let row = unsafe { statements::first_row_copied() };
    if verb == Verb::Cancel {
        let (queue, sets_off) =
            unsafe { (statements::value::<String>(0, 2).unwrap_or_default(), statements::value::<bool>(0, 3) == Some(true)) };
        // (asked after the UPDATE's values are read: it may run a statement)
        let frees_slots = crate::flow::some_queue_counts_claims(function);
        let ended = Ended { id, queue, outcome: Outcome::Cancelled, run_ms: None, was_claimed: true, sets_off };
        ended::jobs_ended(function, frees_slots, &[ended]);
    }
    statements::finish();
    row
}

/// The id (argument 0) and, for a fenced verb, the attempt (argument 1) of
/// `fcinfo`'s call; refuses a fenced verb's NULL attempt (22004).
///
/// # Safety
/// `fcinfo` is a call whose argument 0 is a uuid and, for a fenced verb,
/// whose argument 1 is an integer.
unsafe fn id_and_attempt(fcinfo: pg_sys::FunctionCallInfo, verb: Verb) -> (Option<pgrx::Uuid>, Option<i32>) {
    // SAFETY: per the contract above.
    let id = unsafe { pg_getarg::<pgrx::Uuid>(fcinfo, 0) };
    if !verb.fenced() {
        return (id, None);
    }
    // SAFETY: per the contract above.
    let attempt = unsafe { pg_getarg::<i32>(fcinfo, 1) };
    if attempt.is_none() {
        errors::require_attempt(id, verb.name());
    }
    (id, attempt)
}

// rq_reschedule(id uuid, attempt integer, at timestamptz, delay interval)
// RETURNS jobs, and raquel_internal.rq_reschedule, which rq_sleep and
// rq_wait_event call (sql/waits.sql).
function_info_v1!(pg_finfo_rq_reschedule_c);

/// # Safety
/// Called by the function manager with the arguments sql/transitions.sql declares.
#[pg_guard]
#[unsafe(no_mangle)]
pub unsafe extern "C-unwind" fn rq_reschedule_c(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    // SAFETY: fcinfo is this call's own: id, attempt, at, delay.
    unsafe {
        let function = statements::called_function(fcinfo);
        let (at, delay) = (pg_getarg::<pgrx::datum::TimestampWithTimeZone>(fcinfo, 2), pg_getarg::<pgrx::datum::Interval>(fcinfo, 3));
        // (the instant checked first, as the PL/pgSQL verb did)
        let due = (at.is_some() || delay.is_some()).then(|| crate::durations::due_ms(at, delay, now_ms()));
        let (id, attempt) = id_and_attempt(fcinfo, Verb::Reschedule);
        move_job(function, Verb::Reschedule, id, attempt, due)
    }
}

// rq_reject(id uuid, attempt integer) RETURNS jobs.
function_info_v1!(pg_finfo_rq_reject_c);

/// # Safety
/// Called by the function manager with the arguments sql/transitions.sql declares.
#[pg_guard]
#[unsafe(no_mangle)]
pub unsafe extern "C-unwind" fn rq_reject_c(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    // SAFETY: fcinfo is this call's own: id, attempt.
    unsafe {
        let function = statements::called_function(fcinfo);
        let (id, attempt) = id_and_attempt(fcinfo, Verb::Reject);
        move_job(function, Verb::Reject, id, attempt, None)
    }
}

// rq_extend(id uuid, attempt integer, lease interval) RETURNS jobs.
function_info_v1!(pg_finfo_rq_extend_c);

/// # Safety
/// Called by the function manager with the arguments sql/transitions.sql declares.
#[pg_guard]
#[unsafe(no_mangle)]
pub unsafe extern "C-unwind" fn rq_extend_c(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    // SAFETY: fcinfo is this call's own: id, attempt, lease.
    unsafe {
        let function = statements::called_function(fcinfo);
        // (the lease checked first, as the PL/pgSQL verb did)
        let lease_ms = limits::lease_ms(pg_getarg::<pgrx::datum::Interval>(fcinfo, 2));
        let (id, attempt) = id_and_attempt(fcinfo, Verb::Extend);
        move_job(function, Verb::Extend, id, attempt, Some(now_ms() + lease_ms))
    }
}

// rq_cancel(id uuid) RETURNS jobs, and raquel_internal.rq_cancel, which
// raquel's own code calls (sql/privileges.sql says why).
function_info_v1!(pg_finfo_rq_cancel_c);

/// # Safety
/// Called by the function manager with the arguments sql/transitions.sql declares.
#[pg_guard]
#[unsafe(no_mangle)]
pub unsafe extern "C-unwind" fn rq_cancel_c(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    // SAFETY: fcinfo is this call's own: id.
    unsafe {
        let function = statements::called_function(fcinfo);
        let (id, _) = id_and_attempt(fcinfo, Verb::Cancel);
        move_job(function, Verb::Cancel, id, None, None)
    }
}

// rq_retry(id uuid) RETURNS jobs, and raquel_internal.rq_retry.
function_info_v1!(pg_finfo_rq_retry_c);

/// # Safety
/// Called by the function manager with the arguments sql/transitions.sql declares.
#[pg_guard]
#[unsafe(no_mangle)]
pub unsafe extern "C-unwind" fn rq_retry_c(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    // SAFETY: fcinfo is this call's own: id.
    unsafe {
        let function = statements::called_function(fcinfo);
        let (id, _) = id_and_attempt(fcinfo, Verb::Retry);
        move_job(function, Verb::Retry, id, None, None)
    }
}
