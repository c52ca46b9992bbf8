//! A job's result and waiting for a job's end (declared in sql/results.sql).
//!
//! The verbs that complete a job take a result (jsonb), kept in the jobs
//! table's `result` column by the same UPDATE that completes it
//! (src/finish.rs): no row written besides. `rq_await` is the producer's
//! side: it returns when the job has ended, woken at the ending commit as a
//! waiting claim is (src/waiters.rs: every verb that ends a job notes it),
//! or when its timeout passes, with the job's row as it then is.

use crate::clock::now_ms;
use crate::durations::interval_ms_within;
use crate::errors::Refusal;
use crate::limits::MAX_WAIT_MS;
use crate::statements::{self, Shape, Statement};
use crate::waiters;
use pgrx::fcinfo::pg_getarg;
use pgrx::prelude::*;

/// The statuses a job does not leave by itself: 'failed' is not one (a
/// retry follows), nor 'blocked' (its parents release it).
pub const ENDED: [&str; 4] = ["success", "exhausted", "cancelled", "expired"];

/// How often an awaiter looks again although nothing woke it: an end made
/// by other SQL (the Python library's own UPDATE, an operator's) notes
/// nothing, and a backend without a waiter slot is never woken.
const LOOK_AGAIN_MS: i64 = 5000;
const LOOK_AGAIN_WITHOUT_WAKEUPS_MS: i64 = 100;

/// (On Citus the row is ROW(j.*)::jobs: a whole-row reference to a
/// distributed table does not plan: src/distributed.rs whole_row.)
const JOB: &str = "SELECT @row@, j.status FROM @jobs@ j WHERE j.id = $1";

// rq_await(id uuid, timeout interval) RETURNS jobs. See sql/results.sql.
function_info_v1!(pg_finfo_rq_await_c);

/// # Safety
/// Called by the function manager with the arguments sql/results.sql declares.
#[pg_guard]
#[unsafe(no_mangle)]
pub unsafe extern "C-unwind" fn rq_await_c(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    // SAFETY: the arguments as declared: a uuid and an interval.
    let (id, timeout, function) = unsafe {
        (pg_getarg::<pgrx::Uuid>(fcinfo, 0), pg_getarg::<Interval>(fcinfo, 1), statements::called_function(fcinfo))
    };
    let Some(id) = id else { Refusal::invalid_parameter("id must not be null").raise() };
    let Some(timeout) = timeout else { Refusal::invalid_parameter("timeout must not be null").raise() };
    let timeout_ms = interval_ms_within(timeout, "timeout", 0, MAX_WAIT_MS);
    // SAFETY: a global of the backend, read in its own thread.
    if timeout_ms > 0 && unsafe { pg_sys::XactIsoLevel } >= pg_sys::XACT_REPEATABLE_READ as i32 {
        Refusal::invalid_parameter("rq_await with a timeout needs READ COMMITTED")
            .detail("rq_await looks at the job again with a new snapshot each time it is woken.")
            .hint("A snapshot that never changes would never see the job end.")
            .raise()
    }
    statements::connect();
    // the mode first: on Citus the statement is planned for each look, and
    // its row built as the table's type (src/distributed.rs)
    crate::install::mode(function);
    let jobs = statements::in_schema_of(function, "jobs");
    let text = || statements::fill(JOB, &[("@jobs@", &jobs), ("@row@", &crate::distributed::whole_row(function))]);
    let statement = Statement { shape: Shape { name: "await", variant: 0 }, text: &text, types: &[pg_sys::UUIDOID] };
    let deadline = now_ms() + timeout_ms;
    let mut seen = false;
    let row = loop {
        // Registered before it looks: an end committed after the look wakes it.
        let registered = timeout_ms > 0 && waiters::register_for_end(waiters::job_hash(&id));
        // Each look is a new statement with a new snapshot (READ COMMITTED).
        if statements::run(function, &statement, &[id.into_datum()]) == 0 {
            if seen {
                // Gone since: deleted at its success (a queue without
                // history) or by hand. Nothing to show.
                break None;
            }
            Refusal::new(PgSqlErrorCode::ERRCODE_NO_DATA_FOUND, format!("job {id} does not exist"))
                .hint("A job is gone after its retention (the prune duty), and a queue without history deletes a job that succeeds without a result.")
                .raise()
        }
        seen = true;
        // SAFETY: the statement returned one row of (jobs, status).
        let status = unsafe { statements::value::<String>(0, 2) }.unwrap_or_default();
        let now = now_ms();
        if ENDED.contains(&status.as_str()) || now >= deadline {
            // SAFETY: as above: the row is the first column.
            break Some(unsafe { statements::first_row_copied() });
        }
        statements::free_result();
        let look_again = if registered { LOOK_AGAIN_MS } else { LOOK_AGAIN_WITHOUT_WAKEUPS_MS };
        waiters::sleep(deadline.min(now + look_again) - now);
        if waiters::told_to_give_up() {
            // a DROP EXTENSION waits for the lock this call holds on the table
            break None;
        }
    };
    waiters::unregister();
    statements::finish();
    match row {
        Some(row) => row,
        None => {
            // SAFETY: fcinfo is this call's own; the result is SQL NULL.
            unsafe { (*fcinfo).isnull = true };
            pg_sys::Datum::from(0)
        }
    }
}
