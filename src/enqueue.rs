//! Producing jobs: `rq_enqueue` (declared in sql/enqueue.sql) and the options
//! of a new job, checked and converted to the table's milliseconds once, here,
//! for it and for `rq_enqueue_batch` (through `rq_job_options`).
//!
//! rq_enqueue is a C function because every producer calls it for every job:
//! it checks its arguments in Rust and runs one kept plan of
//! sql/transition.enqueue.sql; a job with a key that an unfinished job holds gets
//! that job back (sql/enqueue.key_holder.sql).

use crate::clock::now_ms;
use crate::direct;
use crate::distributed;
use crate::durations::{due_ms, interval_ms_within};
use crate::errors::{self, Refusal};
use crate::limits::{self, CENTURY_MS, INT_MS};
use crate::privileges;
use crate::statements::{self, Shape, Statement, nullable_arg};
use crate::transitions;
use pgrx::fcinfo::{pg_arg_is_null, pg_getarg};
use pgrx::prelude::*;

const KEY_HOLDER: &str = include_str!("../sql/enqueue.key_holder.sql");
/// A job of the key that ended less than its key_period ago (sql/schema.sql,
/// key_holds), shown as the key holder is.
/// (`j.queue = h.queue`: on Citus, a join within one shard.)
const PERIOD_HOLDER: &str = "SELECT @shown@ FROM @schema@key_holds h JOIN @schema@jobs j ON j.id = h.job_id AND j.queue = h.queue \
    WHERE h.queue = $1 AND h.key = $2 AND h.until > $3";
/// A new job that runs after others: held for them (sql/workflows.sql), then
/// read again by a statement of its own, which sees what the first did.
const HOLD: &str = "SELECT @rq_hold_for_parents@(ARRAY[$1], $2)";
const READ_AGAIN: &str = "SELECT j FROM @schema@jobs j WHERE j.id = $1";
/// The key holder as a caller who may not read the table sees it.
const REDACTED: &str = "pg_catalog.json_populate_record(NULL::@jobs@, \
    pg_catalog.json_build_object('id', j.id, 'queue', j.queue, 'key', j.key))";

/// What the jobs table stores for a job enqueued with these options.
pub struct JobOptions {
    pub now_ms: i64,
    pub due_ms: i64,
    pub max_age_ms: Option<i64>,
    pub min_retry_delay_ms: i32,
    pub max_retry_delay_ms: i32,
    pub backoff_base_ms: i32,
}

/// Checks a new job's options; each bad one raises 22023 naming the value,
/// before anything is written. A NULL retry delay is the table's default.
#[allow(clippy::too_many_arguments)]
pub fn check(
    queue: Option<&str>,
    at: Option<TimestampWithTimeZone>,
    delay: Option<Interval>,
    max_age: Option<Interval>,
    max_retry_count: Option<i32>,
    min_retry_delay: Option<Interval>,
    max_retry_delay: Option<Interval>,
    backoff_base: Option<Interval>,
) -> JobOptions {
    let now_ms = now_ms();
    let int_ms = |value: Option<Interval>, name: &str, default: i32| {
        value.map_or(default, |v| interval_ms_within(v, name, 0, INT_MS) as i32)
    };
    let max_age_ms = max_age.map(|v| interval_ms_within(v, "max_age", 1, CENTURY_MS));
    let min_retry_delay_ms = int_ms(min_retry_delay, "min_retry_delay", limits::DEFAULT_MIN_RETRY_DELAY_MS);
    let max_retry_delay_ms = int_ms(max_retry_delay, "max_retry_delay", limits::DEFAULT_MAX_RETRY_DELAY_MS);
    let backoff_base_ms = int_ms(backoff_base, "backoff_base", limits::DEFAULT_BACKOFF_BASE_MS);
    let due_ms = due_ms(at, delay, now_ms);
    limits::check_queue(queue);
    if let Some(count) = max_retry_count.filter(|c| *c < 0) {
        Refusal::invalid_parameter(format!("max_retry_count must not be negative, got {count}"))
            .hint("Use 0 for no retry, or NULL to retry forever.")
            .raise()
    }
    if min_retry_delay_ms > max_retry_delay_ms {
        let shown = |v: Option<Interval>| v.map_or("<NULL>".to_string(), |v| v.to_string());
        Refusal::invalid_parameter(format!(
            "min_retry_delay ({}) must not exceed max_retry_delay ({})",
            shown(min_retry_delay),
            shown(max_retry_delay)
        ))
        .raise()
    }
    JobOptions { now_ms, due_ms, max_age_ms, min_retry_delay_ms, max_retry_delay_ms, backoff_base_ms }
}

/// What the jobs table stores for a job with these options, its
/// max_retry_count and its priority (NULL: 0).
pub fn values_of(options: &JobOptions, max_retry_count: Option<i32>, priority: Option<i32>) -> direct::JobValues {
    direct::JobValues {
        max_age_ms: options.max_age_ms,
        max_retry_count,
        min_retry_delay_ms: options.min_retry_delay_ms,
        max_retry_delay_ms: options.max_retry_delay_ms,
        backoff_base_ms: options.backoff_base_ms,
        now_ms: options.now_ms,
        due_ms: options.due_ms,
        priority: priority.unwrap_or(0),
    }
}

/// A jsonb payload as the text the jobs table stores (its `::text`), in
/// the current memory context: for the direct writes of rq_enqueue and
/// rq_enqueue_batch.
///
/// # Safety
/// `payload` is a jsonb datum.
pub unsafe fn jsonb_as_text(payload: pg_sys::Datum) -> pg_sys::Datum {
    // SAFETY: jsonb_out takes one jsonb; cstring_to_text its cstring.
    unsafe {
        let text = pgrx::direct_function_call_as_datum(pg_sys::jsonb_out, &[Some(payload)]).expect("jsonb_out of a jsonb");
        pg_sys::Datum::from(pg_sys::cstring_to_text(text.cast_mut_ptr()))
    }
}

/// The same checks for rq_enqueue_batch's planned path (sql/enqueue.sql):
/// one row of the values to store.
#[pg_extern(volatile, parallel_safe, schema = "raquel_internal")]
#[allow(clippy::too_many_arguments, clippy::type_complexity)]
#[search_path(pg_catalog, pg_temp)]
fn rq_job_options(
    queue: Option<&str>,
    at: Option<TimestampWithTimeZone>,
    delay: Option<Interval>,
    max_age: Option<Interval>,
    max_retry_count: Option<i32>,
    min_retry_delay: Option<Interval>,
    max_retry_delay: Option<Interval>,
    backoff_base: Option<Interval>,
) -> TableIterator<
    'static,
    (
        name!(now_ms, i64),
        name!(due_ms, i64),
        name!(max_age_ms, Option<i64>),
        name!(min_retry_delay_ms, i64),
        name!(max_retry_delay_ms, i64),
        name!(backoff_base_ms, i64),
    ),
> {
    let o = check(queue, at, delay, max_age, max_retry_count, min_retry_delay, max_retry_delay, backoff_base);
    TableIterator::once((
        o.now_ms,
        o.due_ms,
        o.max_age_ms,
        i64::from(o.min_retry_delay_ms),
        i64::from(o.max_retry_delay_ms),
        i64::from(o.backoff_base_ms),
    ))
}

/// Makes the new job `id` wait for the jobs `after` (sql/transitions.sql) and
/// returns it as it is then: blocked, queued or cancelled.
fn hold_for_parents(function: pg_sys::Oid, id: Option<pg_sys::Datum>, after: pg_sys::Datum) -> pg_sys::Datum {
    let schema = statements::in_schema_of(function, "");
    let hold_for_parents = statements::helper_of(statements::helper_schema(function), "rq_hold_for_parents");
    let (hold_text, read_text) = (
        || statements::fill(HOLD, &[("@rq_hold_for_parents@", &hold_for_parents)]),
        || statements::fill(READ_AGAIN, &[("@schema@", &schema)]),
    );
    let hold = Statement { shape: Shape { name: "hold", variant: 0 }, text: &hold_text, types: &[pg_sys::UUIDOID, pg_sys::UUIDARRAYOID] };
    let read = Statement { shape: Shape { name: "read_again", variant: 0 }, text: &read_text, types: &[pg_sys::UUIDOID] };
    statements::run_once(&hold, &[id, Some(after)]);
    statements::run_once(&read, &[id]);
    // SAFETY: the statement returned the job's row (it was inserted just now).
    unsafe { statements::finish_with_first_row() }
}

// rq_enqueue(queue, payload text or jsonb, at, delay, max_age,
// max_retry_count, min_retry_delay, max_retry_delay, backoff_base, priority,
// key, group_key, after, key_period) RETURNS jobs. See sql/enqueue.sql: both overloads are this function,
// SECURITY DEFINER with a pinned search_path.
function_info_v1!(pg_finfo_rq_enqueue_c);

/// # Safety
/// Called by the function manager with the arguments sql/enqueue.sql declares.
#[pg_guard]
#[unsafe(no_mangle)]
pub unsafe extern "C-unwind" fn rq_enqueue_c(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    // SAFETY: the arguments are read as the types the SQL declaration gives them.
    // The rq_enqueue of a database not yet updated to 0.3.0 has no group_key,
    // after nor key_period.
    // SAFETY: fcinfo is this call's own.
    let grouped = unsafe { (*fcinfo).nargs } > 11;
    // SAFETY: argument 12, when declared, is the uuid[] of the jobs to wait for.
    let after = if unsafe { (*fcinfo).nargs } > 12 { unsafe { nullable_arg(fcinfo, 12) } } else { None };
    // SAFETY: argument 13, when declared, is the key_period interval.
    let key_period_ms = if unsafe { (*fcinfo).nargs } > 13 {
        unsafe { pg_getarg::<Interval>(fcinfo, 13) }.map(|period| interval_ms_within(period, "key_period", 1, CENTURY_MS))
    } else {
        None
    };
    let (payload_type, keyed, args, direct) = unsafe {
        let options = check(
            pg_getarg::<&str>(fcinfo, 0),
            pg_getarg(fcinfo, 2),
            pg_getarg(fcinfo, 3),
            pg_getarg(fcinfo, 4),
            pg_getarg(fcinfo, 5),
            pg_getarg(fcinfo, 6),
            pg_getarg(fcinfo, 7),
            pg_getarg(fcinfo, 8),
        );
        limits::check_name(pg_getarg::<&str>(fcinfo, 10), "key");
        let group_key = if grouped { pg_getarg::<&str>(fcinfo, 11) } else { None };
        limits::check_name(group_key, "group_key");
        let payload_type = pg_sys::get_fn_expr_argtype((*fcinfo).flinfo, 1);
        let args = [
            nullable_arg(fcinfo, 0),
            nullable_arg(fcinfo, 1),
            options.max_age_ms.and_then(|ms| ms.into_datum()),
            nullable_arg(fcinfo, 5),
            options.min_retry_delay_ms.into_datum(),
            options.max_retry_delay_ms.into_datum(),
            options.backoff_base_ms.into_datum(),
            options.now_ms.into_datum(),
            options.due_ms.into_datum(),
            pg_getarg::<i32>(fcinfo, 9).unwrap_or(0).into_datum(),
            nullable_arg(fcinfo, 10),
            if grouped { nullable_arg(fcinfo, 11) } else { None },
            key_period_ms.and_then(|ms| ms.into_datum()),
        ];
        // a job with no key, group or parents may be written directly
        let plain = args[10].is_none() && args[11].is_none() && after.is_none() && key_period_ms.is_none();
        let direct = args[0].filter(|_| plain).map(|queue| direct::NewJob {
            queue,
            payload: args[1],
            options: values_of(&options, pg_getarg::<i32>(fcinfo, 5), pg_getarg::<i32>(fcinfo, 9)),
        });
        (payload_type, !pg_arg_is_null(fcinfo, 10), args, direct)
    };
    if key_period_ms.is_some() && !keyed {
        Refusal::invalid_parameter("key_period needs a key")
            .hint("key_period says how long after a job of that key ended enqueueing the key again gives that job back.")
            .raise()
    }
    // SAFETY: fcinfo is this call's own.
    let function = unsafe { statements::called_function(fcinfo) };
    // The statements' texts are made only when a plan is prepared: the
    // schema lookup is not for every call.
    let jobs = || statements::in_schema_of(function, "jobs");
    let jsonb = payload_type == pg_sys::JSONBOID;
    statements::connect();
    let distributed = crate::install::mode(function).distributed;
    if distributed && (after.is_some() || args[11].is_some()) {
        distributed::refuse("a workflow (after) or a fair group (group_key)")
    }
    if let Some(mut job) = direct.filter(|_| !distributed) {
        if jsonb {
            // stored as its text, as the statement's `::text` does
            // SAFETY: the payload argument is a jsonb.
            job.payload = job.payload.map(|payload| unsafe { jsonb_as_text(payload) });
        }
        if let Some(row) = direct::insert(privileges::jobs_of(function), &job) {
            // SAFETY: a composite datum, copied out of SPI's memory before it is freed.
            let row = unsafe { pg_sys::SPI_datumTransfer(row, false, -1) };
            statements::finish();
            return row;
        }
    }
    // The new row whole: `j`, or on Citus `ROW(j.*)::jobs` (src/distributed.rs).
    let row = || distributed::whole_row(function);
    // What a key's holder shows of itself: the row whole for a caller who
    // may read the table, otherwise only its id, queue and key (src/privileges.rs).
    let shown = |readable: bool| if readable { row() } else { REDACTED.to_string() };

    let insert_text = || {
        statements::fill(
            transitions::ENQUEUE,
            &[
                ("@jobs@", &jobs()),
                ("@payload_as_text@", if jsonb { "::pg_catalog.text" } else { "" }),
                ("@keyed_only@", if keyed { "" } else { "--" }),
                ("@group_key@", if grouped { ", group_key, key_period" } else { "" }),
                ("@group_key_value@", if grouped { ", $12, $13" } else { "" }),
                ("@row@", &row()),
            ],
        )
    };
    let (int4, int8) = (pg_sys::INT4OID, pg_sys::INT8OID);
    let insert = Statement {
        shape: Shape { name: "enqueue", variant: i64::from(grouped) * 4 + i64::from(keyed) * 2 + i64::from(jsonb) },
        text: &insert_text,
        types: &[pg_sys::TEXTOID, payload_type, int8, int4, int4, int4, int4, int8, int8, int4, pg_sys::TEXTOID, pg_sys::TEXTOID, int8]
            [..if grouped { 13 } else { 11 }],
    };
    // The key's job that ended less than key_period ago, when there is one.
    let readable = || privileges::caller_may_read(privileges::jobs_of(function));
    if key_period_ms.is_some() {
        let readable = readable();
        let text = || {
            let schema = statements::in_schema_of(function, "");
            statements::fill(PERIOD_HOLDER, &[("@shown@", &shown(readable)), ("@jobs@", &jobs()), ("@schema@", &schema)])
        };
        let holder = Statement {
            shape: Shape { name: "period_holder", variant: i64::from(readable) },
            text: &text,
            types: &[pg_sys::TEXTOID, pg_sys::TEXTOID, int8],
        };
        if statements::run(function, &holder, &[args[0], args[10], args[7]]) == 1 {
            // SAFETY: the statement returned the holder's row.
            return unsafe { statements::finish_with_first_row() };
        }
    }
    if statements::run(function, &insert, &args[..if grouped { 13 } else { 11 }]) == 1 {
        if distributed {
            // The jobs table's trigger ran on the shard's node: wake this
            // node's waiting claims too (src/waiters.rs).
            // SAFETY: argument 0 is the checked queue name.
            if let Some(queue) = unsafe { pg_getarg::<&str>(fcinfo, 0) } {
                crate::waiters::note_ready(queue, 1);
            }
        }
        if let Some(after) = after {
            // SAFETY: the INSERT returned its row and its id.
            let id = unsafe { statements::value::<pgrx::Uuid>(0, 2) };
            return hold_for_parents(function, id.into_datum(), after);
        }
        // SAFETY: the INSERT returned its row.
        return unsafe { statements::finish_with_first_row() };
    }
    if !keyed {
        error!("raquel: the INSERT of a job without a key inserted nothing");
    }
    let readable = readable();
    // @shown@ first: the @jobs@ in what it puts in is filled in after it.
    let holder_text = || statements::fill(KEY_HOLDER, &[("@shown@", &shown(readable)), ("@jobs@", &jobs())]);
    let holder = Statement {
        shape: Shape { name: "key_holder", variant: i64::from(readable) },
        text: &holder_text,
        types: &[pg_sys::TEXTOID, pg_sys::TEXTOID],
    };
    let (queue, key) = (args[0], args[10]);
    if statements::run(function, &holder, &[queue, key]) == 1 {
        // SAFETY: the statement returned the holder's row.
        return unsafe { statements::finish_with_first_row() };
    }
    // SAFETY: both are non-null text arguments (checked above).
    let (queue, key) = unsafe { (pg_getarg::<&str>(fcinfo, 0), pg_getarg::<&str>(fcinfo, 10)) };
    errors::key_finished(key.unwrap_or_default(), queue.unwrap_or_default()).raise()
}
