//! C symbols that the 0.1.0 install script (sql/raquel--0.1.0.sql) declares
//! and 0.2.0 no longer does. A database not yet updated with ALTER EXTENSION
//! raquel UPDATE still has SQL functions that name them (its rq_claim_waiting
//! calls the rq_wait_* ones, its trigger rq_jobs_inserted, its rq_reject and
//! rq_retry rq_wait_notify), so the library keeps them, with 0.1.0's
//! behaviour, until no version it can be updated from declares them. The
//! update to 0.2.0 drops those functions. Every other symbol 0.1.0 declares
//! is still a function of 0.2.0 under the same name and arguments.

use crate::waiters;
use pgrx::fcinfo::pg_getarg;
use pgrx::prelude::*;

// rq_wait_register(queues text[]) RETURNS bool
function_info_v1!(pg_finfo_rq_wait_register_wrapper);

/// # Safety
/// Called by the function manager with the one argument 0.1.0 declares.
#[pg_guard]
#[unsafe(no_mangle)]
pub unsafe extern "C-unwind" fn rq_wait_register_wrapper(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    // SAFETY: argument 0 is a text[], as declared.
    let queues = unsafe { pg_getarg::<Vec<Option<String>>>(fcinfo, 0) };
    let hashes = queues.map(|names| names.iter().flatten().map(|n| waiters::queue_hash(n)).collect::<Vec<_>>());
    pg_sys::Datum::from(waiters::register(hashes.as_deref(), None))
}

// rq_wait_sleep(timeout_ms bigint) RETURNS void, STRICT
function_info_v1!(pg_finfo_rq_wait_sleep_wrapper);

/// # Safety
/// Called by the function manager with the one argument 0.1.0 declares.
#[pg_guard]
#[unsafe(no_mangle)]
pub unsafe extern "C-unwind" fn rq_wait_sleep_wrapper(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    // SAFETY: argument 0 is a bigint, never NULL (STRICT).
    let timeout_ms = unsafe { pg_getarg::<i64>(fcinfo, 0) }.unwrap_or(0);
    waiters::sleep(timeout_ms);
    pg_sys::Datum::from(0)
}

// rq_wait_unregister() RETURNS void
function_info_v1!(pg_finfo_rq_wait_unregister_wrapper);

/// # Safety
/// Called by the function manager.
#[pg_guard]
#[unsafe(no_mangle)]
pub unsafe extern "C-unwind" fn rq_wait_unregister_wrapper(_fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    waiters::unregister();
    pg_sys::Datum::from(0)
}

// rq_jobs_inserted() RETURNS trigger: 0.1.0's name for the trigger that is
// rq_job_events (src/events.rs) since 0.2.0.
function_info_v1!(pg_finfo_rq_jobs_inserted);

/// # Safety
/// Called by the function manager, as a trigger.
#[pg_guard]
#[unsafe(no_mangle)]
pub unsafe extern "C-unwind" fn rq_jobs_inserted(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    // SAFETY: the same contract as rq_job_events's.
    unsafe { crate::events::rq_job_events(fcinfo) }
}

// rq_wait_notify(queue text, jobs bigint) RETURNS void: 0.1.0's rq_reject
// and rq_retry call it to wake a waiting claim at commit; since 0.2.0 the
// jobs table's trigger does (src/events.rs), for every way a job becomes
// ready, and no role can call it to wake claims for nothing.
function_info_v1!(pg_finfo_rq_wait_notify_wrapper);

/// # Safety
/// Called by the function manager with the arguments 0.1.0 declares.
#[pg_guard]
#[unsafe(no_mangle)]
pub unsafe extern "C-unwind" fn rq_wait_notify_wrapper(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    // SAFETY: arguments 0 and 1 are a text and a bigint, as declared.
    let (queue, jobs) = unsafe { (pg_getarg::<&str>(fcinfo, 0), pg_getarg::<i64>(fcinfo, 1)) };
    if let Some(queue) = queue {
        waiters::note_ready(queue, jobs.unwrap_or(0));
    }
    pg_sys::Datum::from(0)
}
