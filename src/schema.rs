//! The jobs table's checks across columns (declared in sql/schema.sql):
//! what two CHECK constraints said until 0.5.0, as a C row trigger, which
//! costs a write a small fraction of what PostgreSQL's reading and planning
//! of CHECK constraints for every statement does. The single values are
//! domains (rq_status, rq_nonnegative, rq_delay_ms, rq_max_age_ms).

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
