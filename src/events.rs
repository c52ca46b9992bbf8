//! Telling the world what became of jobs (declared in sql/events.sql). One
//! row trigger sees every job that becomes claimable, however it happened:
//! enqueued (rq_enqueue, a batch, rq_enqueue_trigger, a plain INSERT) or made
//! ready again (rq_fail with a retry left, the rescue duty, rq_reschedule,
//! rq_reject, rq_retry, an UPDATE by hand). It wakes waiting claims of the
//! job's queue at commit (src/waiters.rs); an enqueue also sends, with
//! raquel.notify on, NOTIFY rq_<queue> (delivered at commit, folded to one
//! per queue per transaction by PostgreSQL), and has its payload's size
//! checked against raquel.max_payload_size. A job with a max_age tells the
//! background worker when it expires, and so does a job claimed outside
//! rq_claim (by the Python library) when its lease ends (src/deadlines.rs).
//!
//! It is a C row trigger because it runs for every job: the PL/pgSQL
//! statement trigger with a transition table it replaces cost a quarter of
//! the enqueue rate with 4 clients (measured with pgbench).

use crate::deadlines;
use crate::errors::Refusal;
use crate::limits;
use crate::settings;
use crate::waiters::note_ready;
use pgrx::prelude::*;

// rq_job_events() RETURNS trigger: AFTER INSERT and AFTER UPDATE FOR EACH ROW
// on jobs, each with a WHEN that lets through only rows that became
// claimable or were claimed outside rq_claim (sql/events.sql). An AFTER trigger sees the row as stored, after
// any BEFORE trigger of the user's changed it, and not a row ON CONFLICT
// skipped.
function_info_v1!(pg_finfo_rq_job_events);

/// # Safety
/// Called by the function manager, as a trigger or (by mistake) by hand.
#[pg_guard]
#[unsafe(no_mangle)]
pub unsafe extern "C-unwind" fn rq_job_events(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    // SAFETY: the context is checked to be TriggerData before it is used as
    // one; the trigger's tuples and relation are valid for this call.
    unsafe {
        let context = (*fcinfo).context;
        if context.is_null() || (*context).type_ != pg_sys::NodeTag::T_TriggerData {
            Refusal::new(
                PgSqlErrorCode::ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED,
                "rq_job_events() runs only as the jobs table's trigger",
            )
            .raise()
        }
        let trigger = context as *mut pg_sys::TriggerData;
        let event = (*trigger).tg_event & pg_sys::TRIGGER_EVENT_OPMASK;
        let inserted = event == pg_sys::TRIGGER_EVENT_INSERT;
        let desc = (*(*trigger).tg_relation).rd_att;
        // Placed by hand on another table, it must not read a row that is
        // not there or a column of another type as text.
        let per_row = (*trigger).tg_event & pg_sys::TRIGGER_EVENT_ROW != 0;
        let updated = event == pg_sys::TRIGGER_EVENT_UPDATE;
        if !per_row || !(inserted || updated) || !text_column(desc, c"queue") || !text_column(desc, c"payload") {
            Refusal::new(
                PgSqlErrorCode::ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED,
                "rq_job_events() runs only as the jobs table's AFTER INSERT and AFTER UPDATE row triggers",
            )
            .raise()
        }
        // the row as it is now: the new version of an updated row
        let tuple = if inserted { (*trigger).tg_trigtuple } else { (*trigger).tg_newtuple };
        let int8 = |name| column(tuple, desc, name).and_then(|d| i64::from_datum(d, false));
        if column(tuple, desc, c"status").and_then(|d| <&str>::from_datum(d, false)) == Some("claimed") {
            // claimed outside rq_claim (the Python library, a hand UPDATE):
            // the library's lease, for the rescue duty
            if let Some(claimed_at) = int8(c"claimed_at") {
                deadlines::note(claimed_at.saturating_add(limits::DEFAULT_LEASE_MS));
            }
            return pg_sys::Datum::from(0);
        }
        let queue = column(tuple, desc, c"queue").and_then(|q| <&str>::from_datum(q, false));
        if inserted {
            check_payload_size(column(tuple, desc, c"payload"), queue.unwrap_or_default());
        }
        if let (Some(scheduled_at), Some(max_age)) = (int8(c"scheduled_at"), int8(c"max_age")) {
            // for the expire duty
            deadlines::note(scheduled_at.saturating_add(max_age));
        }
        if let Some(queue) = queue {
            note_ready(queue, 1);
            if inserted && settings::notify() {
                notify(queue);
            }
        }
        pg_sys::Datum::from(0)
    }
}

/// Column `name` of `tuple`: None when it is NULL or the table has no such column.
///
/// # Safety
/// `tuple` is a row of a relation described by `desc`.
unsafe fn column(tuple: *mut pg_sys::HeapTupleData, desc: pg_sys::TupleDesc, name: &std::ffi::CStr) -> Option<pg_sys::Datum> {
    // SAFETY: per the contract above.
    unsafe {
        let number = pg_sys::SPI_fnumber(desc, name.as_ptr());
        let mut isnull = true;
        let datum = if number > 0 { pg_sys::SPI_getbinval(tuple, desc, number, &mut isnull) } else { pg_sys::Datum::from(0) };
        (!isnull).then_some(datum)
    }
}

/// Whether the relation described by `desc` has a text column `name`.
///
/// # Safety
/// `desc` is a valid tuple descriptor.
unsafe fn text_column(desc: pg_sys::TupleDesc, name: &std::ffi::CStr) -> bool {
    // SAFETY: per the contract above; SPI_fnumber numbers columns from 1.
    unsafe {
        let number = pg_sys::SPI_fnumber(desc, name.as_ptr());
        number > 0 && pg_sys::SPI_gettypeid(desc, number) == pg_sys::TEXTOID
    }
}

/// Refuses (54000) a job whose payload is larger than raquel.max_payload_size.
///
/// # Safety
/// `payload` is a text datum.
unsafe fn check_payload_size(payload: Option<pg_sys::Datum>, queue: &str) {
    // SAFETY: per the contract above; toast_raw_datum_size reads a varlena's
    // header without detoasting it.
    let size = payload.map_or(0, |p| unsafe { pg_sys::toast_raw_datum_size(p) }.saturating_sub(pg_sys::VARHDRSZ));
    let limit = settings::max_payload_size();
    if size > limit {
        Refusal::new(
            PgSqlErrorCode::ERRCODE_PROGRAM_LIMIT_EXCEEDED,
            format!("the payload of a job in queue {queue} is {size} bytes, more than raquel.max_payload_size ({limit} bytes)"),
        )
        .hint("Keep large data in a table of its own and put its key in the payload, or raise raquel.max_payload_size.")
        .raise()
    }
}

/// NOTIFY on the queue's channel: rq_channel(queue) in sql/events.sql.
fn notify(queue: &str) {
    let channel = if queue.len() <= 60 {
        format!("rq_{queue}")
    } else {
        // SAFETY: md5_text takes one text argument, given here.
        let hash: String = unsafe { pgrx::direct_function_call(pg_sys::md5_text, &[queue.into_datum()]) }
            .expect("md5 of a text is never null");
        format!("rq_{hash}")
    };
    // SAFETY: pg_notify takes two text arguments, given here.
    unsafe {
        pgrx::direct_function_call_as_datum(pg_sys::pg_notify, &[channel.into_datum(), "".into_datum()]);
    }
}
