//! Every bound and default the extension has, in one place. The Rust verbs
//! use the constants; the table's column defaults, the lease index, the
//! duties and the verbs written in PL/pgSQL read them through the SQL
//! functions below instead of writing the numbers again.

use crate::durations::interval_ms_within;
use crate::errors::Refusal;
use crate::settings;
use pgrx::prelude::*;

/// The most jobs one call may handle (a claim's batch, a duty's batch).
pub const MAX_BATCH: i32 = 100_000;
/// A job's delay, schedule offset and maximum age, a retention: at most a
/// century (36500 days); anything longer is a mistake.
pub const CENTURY_MS: i64 = 3_153_600_000_000;
/// Retry delays and the backoff base live in the table's integer columns.
pub const INT_MS: i64 = i32::MAX as i64;
/// A lease: 1 ms to 365 days.
pub const MAX_LEASE_MS: i64 = 365 * 86_400_000;
/// A claim's lease when none is given, and the lease of a claim made without
/// one (by hand or by the Python library, whose reclaim time it is).
pub const DEFAULT_LEASE_MS: i64 = 60_000;
/// How long a claim may wait for a job.
pub const MAX_WAIT_MS: i64 = 86_400_000;
/// The Python library's defaults for a job's retry delays.
pub const DEFAULT_MIN_RETRY_DELAY_MS: i32 = 1000;
pub const DEFAULT_MAX_RETRY_DELAY_MS: i32 = 43_200_000;
pub const DEFAULT_BACKOFF_BASE_MS: i32 = 1000;

/// The longest queue name, key or worker name, in bytes. A queue name and a
/// key share one entry of the key index, and PostgreSQL refuses index entries
/// of more than about 2700 bytes deep inside the insert (54000); a name this
/// long is a mistake, refused up front with the name's start shown.
pub const MAX_NAME_BYTES: usize = 1000;

/// A queue name: not null, not empty, at most MAX_NAME_BYTES.
pub fn check_queue(queue: Option<&str>) {
    match queue {
        None => Refusal::invalid_parameter("queue must not be null")
            .hint("Name a queue, or leave the argument out for 'default'.")
            .raise(),
        Some("") => Refusal::invalid_parameter("queue must not be an empty name").raise(),
        Some(name) => check_name_length(name, "queue"),
    }
}

/// A key or a worker name (either may be null): at most MAX_NAME_BYTES.
pub fn check_name(value: Option<&str>, what: &str) {
    if let Some(name) = value {
        check_name_length(name, what);
    }
}

fn check_name_length(name: &str, what: &str) {
    if name.len() > MAX_NAME_BYTES {
        let start: String = name.chars().take(20).collect();
        Refusal::invalid_parameter(format!(
            "{what} must be at most {MAX_NAME_BYTES} bytes, got {} bytes ('{start}…')",
            name.len()
        ))
        .raise()
    }
}

/// An array argument must be one-dimensional (or empty): a two-dimensional
/// one would otherwise be read as its elements in a row, silently.
pub fn check_dimensions(dimensions: i32, what: &str) {
    if dimensions > 1 {
        Refusal::invalid_parameter(format!("{what} must be a one-dimensional array, got {dimensions} dimensions"))
            .raise()
    }
}

/// How many jobs one call may handle: 1 to MAX_BATCH.
pub fn check_batch(batch: Option<i32>) -> i32 {
    match batch {
        Some(b) if (1..=MAX_BATCH).contains(&b) => b,
        _ => Refusal::invalid_parameter(format!(
            "batch must be between 1 and {MAX_BATCH}, got {}",
            batch.map_or("NULL".into(), |b| b.to_string())
        ))
        .raise(),
    }
}

/// A lease in ms: not null, 1 ms to MAX_LEASE_MS.
pub fn lease_ms(lease: Option<Interval>) -> i64 {
    let Some(lease) = lease else {
        Refusal::invalid_parameter("lease must not be null").hint("Leave it out for one minute.").raise()
    };
    interval_ms_within(lease, "lease", 1, MAX_LEASE_MS)
}

/// A delay (or retention) in ms: 0 to a century.
pub fn delay_ms(value: Interval, name: &str) -> i64 {
    interval_ms_within(value, name, 0, CENTURY_MS)
}

/// Refuses (54000, the limit in DETAIL) a value of `size` bytes larger than
/// `limit`, the setting `setting`: `what` names the value ("the result of
/// job …"), made only for a refusal. Changes nothing: it raises before any
/// write.
pub fn check_size(size: usize, limit: usize, setting: &str, what: impl FnOnce() -> String) {
    if size > limit {
        Refusal::new(
            PgSqlErrorCode::ERRCODE_PROGRAM_LIMIT_EXCEEDED,
            format!("{} is {size} bytes, more than {setting} allows", what()),
        )
        .detail(format!("{setting} is {limit} bytes."))
        .hint(format!("Keep large data in a table of its own and put its key here, or raise {setting}."))
        .raise()
    }
}

/// The size in bytes of a varlena datum (a jsonb), read from its header
/// without detoasting it; 0 for None.
///
/// # Safety
/// `datum` is a varlena datum when given.
pub unsafe fn datum_bytes(datum: Option<pg_sys::Datum>) -> usize {
    // SAFETY: per the contract above.
    datum.map_or(0, |d| unsafe { pg_sys::toast_raw_datum_size(d) }.saturating_sub(pg_sys::VARHDRSZ))
}

/// Refuses a result larger than raquel.max_result_size: a job's
/// (rq_complete and the verbs that complete) or a step's (rq_step).
///
/// # Safety
/// `result` is a jsonb datum when given.
pub unsafe fn check_result(result: Option<pg_sys::Datum>, what: impl FnOnce() -> String) {
    // SAFETY: per the contract above.
    let size = unsafe { datum_bytes(result) };
    check_size(size, settings::max_result_size(), "raquel.max_result_size", what);
}

/// rq_emit's keep in ms: from 0 to raquel.max_event_keep (22023 beyond;
/// NULL stays NULL: an event that waits for its reader, sql/waits.sql).
#[pg_extern(stable, parallel_safe, schema = "raquel_internal")]
fn rq_event_keep_ms(keep: Option<Interval>) -> Option<i64> {
    let most = settings::max_event_keep_ms();
    keep.map(|keep| {
        let ms = interval_ms_within(keep, "keep", 0, CENTURY_MS);
        if ms > most {
            Refusal::invalid_parameter(format!("keep must be at most raquel.max_event_keep ({} s), got '{keep}'", most / 1000))
                .hint("An emit is kept for the jobs that start waiting after it; raise raquel.max_event_keep to keep it longer.")
                .raise()
        }
        ms
    })
}

/// How long rq_emit keeps an event emitted without a keep, for the first
/// wait to read it: raquel.event_retention, in ms.
#[pg_extern(stable, parallel_safe, schema = "raquel_internal")]
#[search_path(pg_catalog, pg_temp)]
fn rq_event_retention_ms() -> i64 {
    settings::event_retention_ms()
}

/// How long a wait for an event without a timeout waits (rq_wait_event):
/// raquel.max_event_wait in ms, NULL for no limit.
#[pg_extern(stable, parallel_safe, schema = "raquel_internal")]
#[search_path(pg_catalog, pg_temp)]
fn rq_max_event_wait_ms() -> Option<i64> {
    settings::max_event_wait_ms()
}

/// check_size for an event's payload (rq_emit, written in PL/pgSQL), given
/// its size in bytes (`pg_column_size`).
#[pg_extern(stable, parallel_safe, schema = "raquel_internal")]
fn rq_check_event_payload(event: Option<&str>, size: Option<i32>) {
    let size = usize::try_from(size.unwrap_or(0)).unwrap_or(0);
    check_size(size, settings::max_event_size(), "raquel.max_event_size", || format!("the payload of event {}", event.unwrap_or("NULL")));
}

/// `rq_claim`'s and `rq_extend`'s lease when none is given.
#[pg_extern(immutable, parallel_safe, schema = "raquel_internal")]
fn rq_default_lease() -> Interval {
    Interval::new(0, 0, DEFAULT_LEASE_MS * 1000).expect("one minute is an interval")
}

/// The lease of a claim made without one, in ms: the lease index and the
/// rescue duty (sql/schema.sql, sql/duties.sql).
#[pg_extern(immutable, parallel_safe, schema = "raquel_internal")]
fn rq_default_lease_ms() -> i64 {
    DEFAULT_LEASE_MS
}

/// The jobs table's default min_retry_delay (ms).
#[pg_extern(immutable, parallel_safe, schema = "raquel_internal")]
fn rq_default_min_retry_delay() -> i32 {
    DEFAULT_MIN_RETRY_DELAY_MS
}

/// The jobs table's default max_retry_delay (ms).
#[pg_extern(immutable, parallel_safe, schema = "raquel_internal")]
fn rq_default_max_retry_delay() -> i32 {
    DEFAULT_MAX_RETRY_DELAY_MS
}

/// The jobs table's default backoff_base (ms).
#[pg_extern(immutable, parallel_safe, schema = "raquel_internal")]
fn rq_default_backoff_base() -> i32 {
    DEFAULT_BACKOFF_BASE_MS
}

/// lease_ms for rq_extend in PL/pgSQL (before 0.6.0, which declares it no
/// more: the symbol stays for the scripts before it).
#[pg_extern(immutable, parallel_safe, schema = "raquel_internal", sql = false)]
fn rq_lease_ms(lease: Option<Interval>) -> i64 {
    lease_ms(lease)
}

/// delay_ms for rq_reschedule.
#[pg_extern(immutable, strict, parallel_safe, schema = "raquel_internal")]
fn rq_delay_ms(value: Interval, name: &str) -> i64 {
    delay_ms(value, name)
}

/// How long rq_prune keeps finished jobs, in ms: `retention`, or when it is
/// NULL the raquel.retention setting.
#[pg_extern(stable, parallel_safe, schema = "raquel_internal")]
fn rq_retention_ms(retention: Option<Interval>) -> i64 {
    match retention {
        Some(retention) => delay_ms(retention, "retention"),
        None => i64::from(settings::retention_s()) * 1000,
    }
}

/// For rq_enqueue_batch and rq_complete_batch (PL/pgSQL): each of the
/// array arguments `names` (in order) is one-dimensional, and every key is
/// at most MAX_NAME_BYTES.
#[pg_extern(immutable, parallel_safe, schema = "raquel_internal")]
fn rq_check_arrays(names: Option<Vec<Option<String>>>, dimensions: Option<Vec<Option<i32>>>, keys: Option<Vec<Option<String>>>) {
    for (name, dims) in names.unwrap_or_default().iter().zip(&dimensions.unwrap_or_default()) {
        check_dimensions(dims.unwrap_or(0), name.as_deref().unwrap_or("array"));
    }
    for key in keys.iter().flatten() {
        check_name(key.as_deref(), "key");
    }
}

/// check_batch for the duties in sql/duties.sql.
#[pg_extern(immutable, parallel_safe, schema = "raquel_internal")]
fn rq_check_batch(batch: Option<i32>) {
    check_batch(batch);
}
