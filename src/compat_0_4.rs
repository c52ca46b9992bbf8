//! C symbols that the 0.4.0 install script (sql/raquel--0.4.0.sql) declares
//! and 0.5.0 no longer does, kept with 0.4.0's behaviour for a database not
//! yet updated with ALTER EXTENSION raquel UPDATE, whose rq_schedule and
//! rq_fire_schedules still call them. The update to 0.5.0 drops those
//! functions (its rq_check_schedule_options and rq_schedule_slots replace
//! them). rq_job_ready_again keeps its three-argument symbol: 0.4.0's
//! rq_fail, rq_reschedule, rq_retry, rq_reject and the release of a
//! workflow's children call it until the update declares the five-argument
//! one (src/events.rs).

use crate::limits;
use crate::schedules;
use pgrx::fcinfo::pg_getarg;
use pgrx::prelude::*;

// rq_check_schedule(name text, catch_up text) RETURNS void
function_info_v1!(pg_finfo_rq_check_schedule_wrapper);

/// # Safety
/// Called by the function manager with the two arguments 0.4.0 declares.
#[pg_guard]
#[unsafe(no_mangle)]
pub unsafe extern "C-unwind" fn rq_check_schedule_wrapper(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    // SAFETY: arguments 0 and 1 are texts, as declared.
    let (name, catch_up) = unsafe { (pg_getarg::<&str>(fcinfo, 0), pg_getarg::<&str>(fcinfo, 1)) };
    schedules::check_name_and_catch_up(name, catch_up);
    pg_sys::Datum::from(0)
}

// rq_cron_slots(cron text, timezone text, from_ms bigint, until_ms bigint,
// keep integer) RETURNS bigint[]
function_info_v1!(pg_finfo_rq_cron_slots_wrapper);

/// # Safety
/// Called by the function manager with the five arguments 0.4.0 declares.
#[pg_guard]
#[unsafe(no_mangle)]
pub unsafe extern "C-unwind" fn rq_cron_slots_wrapper(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    // SAFETY: the arguments are read as the types 0.4.0 declares.
    let (cron, zone, from, until, keep) = unsafe {
        (
            pg_getarg::<&str>(fcinfo, 0),
            pg_getarg::<&str>(fcinfo, 1),
            pg_getarg::<i64>(fcinfo, 2),
            pg_getarg::<i64>(fcinfo, 3),
            pg_getarg::<i32>(fcinfo, 4),
        )
    };
    let (cron, zone) = (schedules::checked_pattern(cron), schedules::checked_zone(zone));
    let (Some(from), Some(until)) = (from, until) else {
        crate::errors::Refusal::invalid_parameter("from_ms and until_ms must not be null").raise()
    };
    let keep = usize::try_from(keep.unwrap_or(1).clamp(1, limits::MAX_BATCH)).unwrap_or(1);
    schedules::slots(&cron, &zone, from, until, keep).into_datum().unwrap_or(pg_sys::Datum::from(0))
}

// rq_job_ready_again(queue text, scheduled_at bigint, max_age bigint) RETURNS void
function_info_v1!(pg_finfo_rq_job_ready_again_wrapper);

/// # Safety
/// Called by the function manager with the three arguments 0.4.0 declares.
#[pg_guard]
#[unsafe(no_mangle)]
pub unsafe extern "C-unwind" fn rq_job_ready_again_wrapper(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    // SAFETY: the arguments are read as the types 0.4.0 declares; fcinfo is this call's.
    unsafe {
        let (queue, scheduled_at, max_age) =
            (pg_getarg::<&str>(fcinfo, 0), pg_getarg::<i64>(fcinfo, 1), pg_getarg::<i64>(fcinfo, 2));
        crate::events::ready_again(fcinfo, queue, scheduled_at, max_age, crate::events::Lane::Unknown);
    }
    pg_sys::Datum::from(0)
}
