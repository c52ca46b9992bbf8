//! The jobs table's checks (declared in sql/schema.sql): across columns,
//! what two CHECK constraints said until 0.5.0, as a C row trigger, which
//! costs a write a small fraction of what PostgreSQL's reading and planning
//! of CHECK constraints for every statement does; the single values, the
//! checks of their domains (rq_status, rq_nonnegative, rq_delay_ms,
//! rq_max_age_ms), which refuse a value with a message that names it and
//! its column (0.6.0: PostgreSQL's own "value for domain rq_status violates
//! check constraint" named neither).

use crate::errors::Refusal;
use pgrx::prelude::*;

// rq_job_values() RETURNS trigger: BEFORE INSERT OR UPDATE OF
// min_retry_delay, max_retry_delay, attempts, requeues FOR EACH ROW on jobs.
function_info_v1!(pg_finfo_rq_job_values);

/// # Safety
/// Called by the function manager, as a trigger or (by mistake) by hand.
#[pg_guard]
#[unsafe(no_mangle)]
pub unsafe extern "C-unwind" fn rq_job_values(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    // SAFETY: the context is checked to be TriggerData before it is used as
    // one; the trigger's tuples and relation are valid for this call.
    unsafe {
        let context = (*fcinfo).context;
        if context.is_null() || (*context).type_ != pg_sys::NodeTag::T_TriggerData {
            misused()
        }
        let trigger = context as *mut pg_sys::TriggerData;
        let event = (*trigger).tg_event;
        let before_row = event & pg_sys::TRIGGER_EVENT_ROW != 0
            && event & pg_sys::TRIGGER_EVENT_TIMINGMASK == pg_sys::TRIGGER_EVENT_BEFORE;
        let operation = event & pg_sys::TRIGGER_EVENT_OPMASK;
        if !before_row || !(operation == pg_sys::TRIGGER_EVENT_INSERT || operation == pg_sys::TRIGGER_EVENT_UPDATE) {
            misused()
        }
        let (tuple, desc) = if operation == pg_sys::TRIGGER_EVENT_UPDATE {
            ((*trigger).tg_newtuple, (*(*trigger).tg_relation).rd_att)
        } else {
            ((*trigger).tg_trigtuple, (*(*trigger).tg_relation).rd_att)
        };
        let int4 = |name: &std::ffi::CStr| -> Option<i32> {
            let number = pg_sys::SPI_fnumber(desc, name.as_ptr());
            if number <= 0 {
                return None;
            }
            let mut isnull = true;
            let datum = pg_sys::SPI_getbinval(tuple, desc, number, &mut isnull);
            if isnull { None } else { i32::from_datum(datum, false) }
        };
        if let (Some(min), Some(max)) = (int4(c"min_retry_delay"), int4(c"max_retry_delay")) {
            if min > max {
                violated(format!("min_retry_delay ({min} ms) is more than max_retry_delay ({max} ms)"))
            }
        }
        if let (Some(requeues), Some(attempts)) = (int4(c"requeues"), int4(c"attempts")) {
            if requeues > attempts {
                violated(format!("requeues ({requeues}) is more than attempts ({attempts})"))
            }
        }
        pg_sys::Datum::from(tuple)
    }
}

fn violated(what: String) -> ! {
    Refusal::new(PgSqlErrorCode::ERRCODE_CHECK_VIOLATION, format!("new row for relation \"jobs\" violates its checks: {what}"))
        .hint("A job's retry delays must keep min_retry_delay <= max_retry_delay, and requeues (claims handed back) <= attempts.")
        .raise()
}

fn misused() -> ! {
    Refusal::new(
        PgSqlErrorCode::ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED,
        "rq_job_values() runs only as the jobs table's BEFORE INSERT OR UPDATE row trigger",
    )
    .raise()
}

/// The statuses a job may have (the domain rq_status).
const STATUSES: [&str; 8] = ["queued", "claimed", "success", "failed", "cancelled", "expired", "exhausted", "blocked"];

/// The check of the domain rq_status (jobs.status): true, or refused.
#[pg_extern(immutable, strict, parallel_safe, schema = "raquel_internal")]
#[search_path(pg_catalog, pg_temp)]
fn rq_check_status(value: &str) -> bool {
    if !STATUSES.contains(&value) {
        violated_value(format!("status '{value}' is not one of {}", STATUSES.join(", ")))
    }
    true
}

/// The check of the domain rq_nonnegative (jobs.attempts, requeues,
/// max_retry_count).
#[pg_extern(immutable, strict, parallel_safe, schema = "raquel_internal")]
#[search_path(pg_catalog, pg_temp)]
fn rq_check_nonnegative(value: i32) -> bool {
    if value < 0 {
        violated_value(format!("attempts, requeues and max_retry_count must not be negative, got {value}"))
    }
    true
}

/// The check of the domain rq_delay_ms (jobs.min_retry_delay,
/// max_retry_delay, backoff_base).
#[pg_extern(immutable, strict, parallel_safe, schema = "raquel_internal")]
#[search_path(pg_catalog, pg_temp)]
fn rq_check_delay_ms(value: i32) -> bool {
    if value < 0 {
        violated_value(format!("min_retry_delay, max_retry_delay and backoff_base (ms) must not be negative, got {value}"))
    }
    true
}

/// The check of the domain rq_max_age_ms (jobs.max_age).
#[pg_extern(immutable, strict, parallel_safe, schema = "raquel_internal")]
#[search_path(pg_catalog, pg_temp)]
fn rq_check_max_age_ms(value: i64) -> bool {
    if value <= 0 {
        violated_value(format!("max_age (ms) must be positive, got {value}"))
    }
    true
}

fn violated_value(what: String) -> ! {
    Refusal::new(PgSqlErrorCode::ERRCODE_CHECK_VIOLATION, format!("a value for the jobs table violates its checks: {what}"))
        .hint("The verbs (rq_enqueue, rq_complete, …) write only values the table takes; a hand-written INSERT or UPDATE must keep to them too.")
        .raise()
}

