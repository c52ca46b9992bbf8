//! Telling the world that jobs are ready (declared in sql/events.sql). The
//! jobs table's insert trigger sees every job enqueued, however it was
//! enqueued (rq_enqueue, a batch, rq_enqueue_trigger, a plain INSERT): it
//! holds the payload to raquel.max_payload_size, wakes waiting claims of the
//! job's queue at commit (src/waiters.rs), tells the background worker when
//! a job with a max_age expires (src/deadlines.rs), remembers the session's
//! own jobs for `after` (src/workflows.rs) and, with raquel.notify
//! on, sends NOTIFY rq_<queue> (delivered at commit, folded to one per queue
//! per transaction by PostgreSQL). The verbs that make a claimed or ended
//! job ready again (rq_fail with a retry left, so the rescue duty too,
//! rq_reschedule, rq_reject, rq_retry) call `rq_job_ready_again` for the
//! same wake-up and deadline.
//!
//! Both are C because the trigger runs for every job: the PL/pgSQL statement
//! trigger with a transition table it replaces cost a quarter of the
//! enqueue rate with 4 clients (measured with pgbench). Ready-again is a
//! call from the verbs rather than an UPDATE trigger: a row trigger on
//! UPDATE, even one whose WHEN lets nothing through, cost a claim and its
//! complete about 15 % more instructions (bench/instructions).

use crate::deadlines;
use crate::errors::Refusal;
use crate::privileges;
use crate::settings;
use crate::statements;
use crate::waiters::note_ready;
use pgrx::prelude::*;

// rq_job_events() RETURNS trigger: AFTER INSERT FOR EACH ROW on jobs, WHEN
// the row can be claimed (sql/events.sql). An AFTER trigger sees the row as
// stored, after any BEFORE trigger of the user's changed it, and not a row
// ON CONFLICT skipped.
function_info_v1!(pg_finfo_rq_job_events);

/// # Safety
/// Called by the function manager, as a trigger or (by mistake) by hand.
#[pg_guard]
#[unsafe(no_mangle)]
pub unsafe extern "C-unwind" fn rq_job_events(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    // SAFETY: the context is checked to be TriggerData before it is used as
    // one; the trigger's tuple and relation are valid for this call.
    unsafe {
        let context = (*fcinfo).context;
        if context.is_null() || (*context).type_ != pg_sys::NodeTag::T_TriggerData {
            misused()
        }
        let trigger = context as *mut pg_sys::TriggerData;
        let event = (*trigger).tg_event;
        let desc = (*(*trigger).tg_relation).rd_att;
        // Placed by hand on another table, it must not read a row that is
        // not there or a column of another type as text.
        let per_row_insert = event & pg_sys::TRIGGER_EVENT_ROW != 0
            && event & pg_sys::TRIGGER_EVENT_OPMASK == pg_sys::TRIGGER_EVENT_INSERT;
        if !per_row_insert || !text_column(desc, c"queue") || !text_column(desc, c"payload") {
            misused()
        }
        inserted((*(*trigger).tg_relation).rd_id, (*trigger).tg_trigtuple, desc);
        pg_sys::Datum::from(0)
    }
}

/// A new job of the jobs table that can be claimed (queued or failed), as
/// `ready_job` needs it.
pub struct NewReady<'a> {
    pub queue: &'a str,
    /// its payload (text), for raquel.max_payload_size
    pub payload: Option<pg_sys::Datum>,
    /// its id, when the table's id is a uuid
    pub id: Option<pgrx::Uuid>,
    /// its priority, for a job in the plain claim's lanes (without a group)
    pub lane_priority: Option<i32>,
    pub scheduled_at: Option<i64>,
    pub max_age: Option<i64>,
}

/// What follows a new row of the jobs table `table` (descriptor `desc`),
/// read by column name (the trigger may be on a table of any generation):
/// see `ready_job`. The insert trigger calls it.
///
/// # Safety
/// `tuple` is a valid row of `desc`, the descriptor of a table with text
/// columns queue and payload.
pub unsafe fn inserted(table: pg_sys::Oid, tuple: pg_sys::HeapTuple, desc: pg_sys::TupleDesc) {
    // SAFETY: per the contract above.
    unsafe {
        // Only a job that can be claimed counts and wakes anyone. This test
        // is here rather than in the trigger's WHEN: PostgreSQL reads and
        // plans a WHEN anew for every statement, which cost each
        // rq_enqueue more than the rest of this trigger (callgrind).
        let status = column(tuple, desc, c"status").and_then(|d| <&str>::from_datum(d, false));
        if !matches!(status, Some("queued" | "failed")) {
            return;
        }
        let int8 = |name| column(tuple, desc, name).and_then(|d| i64::from_datum(d, false));
        let int4 = |name| column(tuple, desc, name).and_then(|d| i32::from_datum(d, false));
        let queue = column(tuple, desc, c"queue").and_then(|q| <&str>::from_datum(q, false));
        let payload = column(tuple, desc, c"payload");
        let Some(queue) = queue else {
            check_payload_size(payload, "");
            return;
        };
        let id = if uuid_column(desc, c"id") { column(tuple, desc, c"id").and_then(|d| pgrx::Uuid::from_datum(d, false)) } else { None };
        // the plain claim's lanes are of jobs without a group
        let ungrouped = column(tuple, desc, c"group_key").is_none();
        let lane_priority = int4(c"priority").filter(|_| ungrouped && uuid_column(desc, c"id"));
        ready_job(
            table,
            &NewReady { queue, payload, id, lane_priority, scheduled_at: int8(c"scheduled_at"), max_age: int8(c"max_age") },
        );
    }
}

/// What follows a new job of table `table` that can be claimed: its
/// payload's size checked, its id remembered for `after`, a waiting claim
/// woken at commit, its lane's cursor moved back, a deadline noted, and it
/// is counted (and NOTIFY sent with raquel.notify on). The insert trigger
/// calls it through `inserted`; the direct insert (src/direct.rs), which
/// runs no trigger, with the values it wrote.
pub fn ready_job(table: pg_sys::Oid, job: &NewReady) {
    // SAFETY: the payload is a text datum.
    unsafe { check_payload_size(job.payload, job.queue) };
    if let Some(id) = job.id {
        crate::workflows::remember_enqueued(id);
    }
    let lane = job.lane_priority.map_or(Lane::None, |p| Lane::Of(p, job.id));
    ready(table, job.queue, job.scheduled_at, job.max_age, lane);
    crate::metrics::note(job.queue, crate::metrics::Event::Enqueued, None);
    if settings::notify() {
        notify(job.queue);
    }
}

fn misused() -> ! {
    Refusal::new(
        PgSqlErrorCode::ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED,
        "rq_job_events() runs only as the jobs table's AFTER INSERT row trigger",
    )
    .raise()
}

/// The lane of a job that became ready, for the claim cursors
/// (src/cursors.rs).
pub enum Lane {
    /// Its priority, and its id when known.
    Of(i32, Option<pgrx::Uuid>),
    /// Not known: the queue's cursors are forgotten.
    Unknown,
    /// In no lane (a grouped job, which the plain claim leaves out).
    None,
}

/// A job of `queue` in table `table` became ready (now or at scheduled_at):
/// wake a waiting claim at commit, and move the claim cursor of its lane
/// back to it; one with a max_age tells the worker when it expires.
pub fn ready(table: pg_sys::Oid, queue: &str, scheduled_at: Option<i64>, max_age: Option<i64>, lane: Lane) {
    note_ready(queue, 1);
    let due = scheduled_at.unwrap_or(i64::MIN);
    match lane {
        Lane::Of(priority, id) => {
            let id = id.map_or([0; 16], |id| crate::cursors::id_bytes(&id));
            crate::cursors::note_ready(table, queue, Some(priority), (due, id));
        }
        Lane::Unknown => crate::cursors::note_ready(table, queue, None, (due, [0; 16])),
        Lane::None => {}
    }
    if let (Some(scheduled_at), Some(max_age)) = (scheduled_at, max_age) {
        deadlines::note(scheduled_at.saturating_add(max_age));
    }
}

/// For the verbs that make a claimed or ended job ready again (sql/finish.sql,
/// sql/transitions.sql): what the insert trigger does for a new job. Only for
/// a role that may update jobs, that is one that could have made the job
/// ready itself: nobody else can wake waiting claims for nothing.
/// The job's priority and id place it in its claim lane (src/cursors.rs).
/// (Its C symbol is rq_job_ready_in_lane_wrapper: 0.4.0's three-argument
/// declaration keeps rq_job_ready_again_wrapper, src/compat_0_4.rs.)
#[pg_extern(name = "rq_job_ready_again", volatile, parallel_unsafe, schema = "raquel_internal")]
#[search_path(pg_catalog, pg_temp)]
fn rq_job_ready_in_lane(
    queue: Option<&str>,
    scheduled_at: Option<i64>,
    max_age: Option<i64>,
    priority: default!(Option<i32>, "NULL"),
    id: default!(Option<pgrx::Uuid>, "NULL"),
    fcinfo: pg_sys::FunctionCallInfo,
) {
    let lane = priority.map_or(Lane::Unknown, |p| Lane::Of(p, id));
    // SAFETY: fcinfo is this call's own.
    unsafe { ready_again(fcinfo, queue, scheduled_at, max_age, lane) }
}

/// rq_job_ready_again's work, for the function called through `fcinfo`.
///
/// # Safety
/// `fcinfo` is the current call's.
pub unsafe fn ready_again(fcinfo: pg_sys::FunctionCallInfo, queue: Option<&str>, scheduled_at: Option<i64>, max_age: Option<i64>, lane: Lane) {
    // SAFETY: per the contract above.
    let function = unsafe { statements::called_function(fcinfo) };
    privileges::require_update(function, "rq_job_ready_again");
    if let Some(queue) = queue {
        ready(privileges::jobs_of(function), queue, scheduled_at, max_age, lane);
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

/// Whether the relation described by `desc` has a uuid column `name`.
///
/// # Safety
/// `desc` is a valid tuple descriptor.
unsafe fn uuid_column(desc: pg_sys::TupleDesc, name: &std::ffi::CStr) -> bool {
    // SAFETY: per the contract above; SPI_fnumber numbers columns from 1.
    unsafe {
        let number = pg_sys::SPI_fnumber(desc, name.as_ptr());
        number > 0 && pg_sys::SPI_gettypeid(desc, number) == pg_sys::UUIDOID
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
    check_payload_bytes(size, queue);
}

/// Refuses (54000) a payload of `size` bytes when it is larger than
/// raquel.max_payload_size: for a job of queue `queue`, or for what a
/// schedule will enqueue there (src/schedules.rs).
pub fn check_payload_bytes(size: usize, queue: &str) {
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
