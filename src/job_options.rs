//! The options of a new job, checked and converted to the table's units
//! (milliseconds) in one place for rq_enqueue (src/hot_path.rs) and
//! rq_enqueue_batch (sql/enqueue.sql, through `rq_job_options`).
//!
//! Bounds on what a caller may ask for. Retry delays are integer milliseconds
//! in the table (about 24.8 days at most); a job's schedule and maximum age
//! stop at a century: anything longer is a mistake.

use crate::checks;
use crate::clock::now_ms;
use crate::durations::{rq_interval_ms, rq_timestamp_ms};
use crate::errors::invalid_parameter;
use pgrx::prelude::*;

/// delay, max_age: 36500 days.
const CENTURY_MS: i64 = 3_153_600_000_000;
/// Retry delays and backoff base: the table's integer columns.
const INT_MS: i64 = i32::MAX as i64;

/// What the jobs table stores for a job enqueued with these options.
pub struct JobOptions {
    pub now_ms: i64,
    pub due_ms: i64,
    pub max_age_ms: Option<i64>,
    pub min_retry_delay_ms: i64,
    pub max_retry_delay_ms: i64,
    pub backoff_base_ms: i64,
}

/// Checks a new job's options; each bad one raises 22023 naming the value,
/// before anything is written.
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
    let max_age_ms = max_age.map(|v| rq_interval_ms(v, "max_age", 1, CENTURY_MS));
    let min_retry_delay_ms = min_retry_delay.map_or(1000, |v| rq_interval_ms(v, "min_retry_delay", 0, INT_MS));
    let max_retry_delay_ms = max_retry_delay.map_or(43_200_000, |v| rq_interval_ms(v, "max_retry_delay", 0, INT_MS));
    let backoff_base_ms = backoff_base.map_or(1000, |v| rq_interval_ms(v, "backoff_base", 0, INT_MS));
    let due_ms = at.map_or(now_ms, |v| rq_timestamp_ms(v, "at"))
        + delay.map_or(0, |v| rq_interval_ms(v, "delay", 0, CENTURY_MS));
    checks::check_queue(queue);
    if let Some(count) = max_retry_count.filter(|c| *c < 0) {
        invalid_parameter(
            format!("max_retry_count must not be negative, got {count}"),
            Some("Use 0 for no retry, or NULL to retry forever."),
        )
    }
    if min_retry_delay_ms > max_retry_delay_ms {
        let shown = |v: Option<Interval>| v.map_or("<NULL>".to_string(), |v| v.to_string());
        invalid_parameter(
            format!(
                "min_retry_delay ({}) must not exceed max_retry_delay ({})",
                shown(min_retry_delay),
                shown(max_retry_delay)
            ),
            None,
        )
    }
    JobOptions { now_ms, due_ms, max_age_ms, min_retry_delay_ms, max_retry_delay_ms, backoff_base_ms }
}

/// The same checks for rq_enqueue_batch: one row of the values to store.
#[pg_extern(volatile, parallel_safe)]
#[allow(clippy::too_many_arguments, clippy::type_complexity)]
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
        o.min_retry_delay_ms,
        o.max_retry_delay_ms,
        o.backoff_base_ms,
    ))
}
