//! Durations and instants from the SQL surface (`interval`, `timestamptz`)
//! into the table's milliseconds, with the checks that keep absurd values out.

use crate::clock::{ms_to_pg_timestamp, now_ms, pg_timestamp_to_ms};
use crate::limits;
use crate::errors::Refusal;
use pgrx::prelude::*;

const US_PER_DAY: i128 = 86_400_000_000;
/// PostgreSQL's own rule when an interval becomes a length of time (`extract(epoch …)`).
const DAYS_PER_MONTH: i128 = 30;

/// The length of an interval in whole milliseconds (rounded down).
pub fn interval_to_ms(months: i32, days: i32, micros: i64) -> i128 {
    let us = i128::from(micros)
        + i128::from(days) * US_PER_DAY
        + i128::from(months) * DAYS_PER_MONTH * US_PER_DAY;
    us.div_euclid(1000)
}

#[derive(Debug, PartialEq, Eq)]
pub enum OutOfRange {
    BelowMinimum,
    AboveMaximum,
}

/// `ms` if it lies in `[min_ms, max_ms]`.
pub fn within(ms: i128, min_ms: i64, max_ms: i64) -> Result<i64, OutOfRange> {
    if ms < i128::from(min_ms) {
        Err(OutOfRange::BelowMinimum)
    } else if ms > i128::from(max_ms) {
        Err(OutOfRange::AboveMaximum)
    } else {
        Ok(ms as i64)
    }
}

/// Spells a millisecond bound the way a person would write the interval.
pub fn describe_ms(ms: i64) -> String {
    const UNITS: [(i64, &str); 4] = [(86_400_000, "day"), (3_600_000, "hour"), (60_000, "minute"), (1000, "second")];
    for (size, unit) in UNITS {
        if ms >= size && ms % size == 0 {
            let n = ms / size;
            return format!("{n} {unit}{}", if n == 1 { "" } else { "s" });
        }
    }
    format!("{ms} ms")
}

/// `value` in ms, or an error (22023) that names the parameter and the value
/// when it falls outside `[min_ms, max_ms]`.
pub fn interval_ms_within(value: Interval, name: &str, min_ms: i64, max_ms: i64) -> i64 {
    let ms = interval_to_ms(value.months(), value.days(), value.micros());
    let refusal = match within(ms, min_ms, max_ms) {
        Ok(ms) => return ms,
        Err(OutOfRange::BelowMinimum) if min_ms <= 0 => {
            Refusal::invalid_parameter(format!("{name} must not be negative, got '{value}'"))
        }
        Err(OutOfRange::BelowMinimum) if min_ms == 1 => {
            Refusal::invalid_parameter(format!("{name} must be positive, got '{value}'"))
        }
        Err(OutOfRange::BelowMinimum) => Refusal::invalid_parameter(format!(
            "{name} must be at least {}, got '{value}'",
            describe_ms(min_ms)
        )),
        Err(OutOfRange::AboveMaximum) => {
            Refusal::invalid_parameter(format!("{name} must be at most {}, got '{value}'", describe_ms(max_ms)))
                .hint("The jobs table keeps this duration in milliseconds; use a shorter interval.")
        }
    };
    refusal.raise()
}

/// A finite instant in ms since the epoch; `infinity` is refused (22023).
pub fn timestamp_ms(value: TimestampWithTimeZone, name: &str) -> i64 {
    if !value.is_finite() {
        Refusal::invalid_parameter(format!("{name} must be a finite time, got '{value}'")).raise()
    }
    pg_timestamp_to_ms(value.into_inner())
}

/// When a job given `at` and `delay` is due, in ms: `at` (or now) plus
/// `delay` (at most a century). Refused (22023) when the sum is past the last
/// instant PostgreSQL can show (294276 AD), where the job would be stored but
/// no timestamptz could say when it runs.
pub fn due_ms(at: Option<TimestampWithTimeZone>, delay: Option<Interval>, now_ms: i64) -> i64 {
    let due = at.map_or(now_ms, |v| timestamp_ms(v, "at")) + delay.map_or(0, |v| limits::delay_ms(v, "delay"));
    if ms_to_pg_timestamp(due).is_none() {
        let shown = |v: Option<String>| v.unwrap_or_else(|| "now".into());
        Refusal::invalid_parameter(format!(
            "at ({}) plus delay ({}) is past the last time PostgreSQL can hold",
            shown(at.map(|a| a.to_string())),
            delay.map_or("0".into(), |d| d.to_string())
        ))
        .raise()
    }
    due
}

/// due_ms for rq_reschedule and rq_sleep in PL/pgSQL (before 0.6.0, which
/// declares it no more: the symbol stays for the scripts before it), and
/// for rq_due_within_ms: NULL when neither `at` nor `delay` is given.
#[pg_extern(volatile, parallel_safe, schema = "raquel_internal", sql = false)]
fn rq_due_ms(at: Option<TimestampWithTimeZone>, delay: Option<Interval>) -> Option<i64> {
    (at.is_some() || delay.is_some()).then(|| due_ms(at, delay, now_ms()))
}

/// due_ms for rq_sleep: the instant `at` plus `delay`, refused (22023) past
/// a century from now, the bound a delay has (a sleep until the year
/// 294276 would be a job parked for good).
#[pg_extern(volatile, parallel_safe, schema = "raquel_internal")]
fn rq_due_within_ms(at: Option<TimestampWithTimeZone>, delay: Option<Interval>, verb: Option<&str>) -> Option<i64> {
    let now = now_ms();
    let due = rq_due_ms(at, delay)?;
    if due - now > limits::CENTURY_MS {
        Refusal::invalid_parameter(format!(
            "{}: the instant to wake must be at most 36500 days from now, got {}",
            verb.unwrap_or("rq_sleep"),
            at.map_or_else(|| "a delay past it".to_string(), |a| a.to_string())
        ))
        .hint("Put the job to sleep for at most a century; wake it and sleep again for longer.")
        .raise()
    }
    Some(due)
}

/// interval_ms_within for SQL.
#[pg_extern(immutable, strict, parallel_safe, schema = "raquel_internal")]
fn rq_interval_ms(value: Interval, name: &str, min_ms: i64, max_ms: i64) -> i64 {
    interval_ms_within(value, name, min_ms, max_ms)
}

/// timestamp_ms for SQL.
#[pg_extern(immutable, strict, parallel_safe, schema = "raquel_internal")]
fn rq_timestamp_ms(value: TimestampWithTimeZone, name: &str) -> i64 {
    timestamp_ms(value, name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn converts_every_field() {
        assert_eq!(interval_to_ms(0, 0, 1_500_000), 1500);
        assert_eq!(interval_to_ms(0, 1, 0), 86_400_000);
        assert_eq!(interval_to_ms(1, 0, 0), 30 * 86_400_000);
        assert_eq!(interval_to_ms(0, 1, -3_600_000_000), 23 * 3_600_000);
    }

    #[test]
    fn rounds_down_to_the_millisecond() {
        assert_eq!(interval_to_ms(0, 0, 999), 0);
        assert_eq!(interval_to_ms(0, 0, -1), -1);
    }

    #[test]
    fn extreme_fields_do_not_overflow() {
        // about 5.9 million years: computed exactly, refused by any sane bound
        let ms = interval_to_ms(i32::MAX, i32::MAX, i64::MAX);
        assert_eq!(ms, i128::from(i32::MAX) * 31 * 86_400_000 + i128::from(i64::MAX) / 1000);
        assert_eq!(within(ms, 0, 3_153_600_000_000), Err(OutOfRange::AboveMaximum));
        assert_eq!(within(interval_to_ms(i32::MIN, i32::MIN, i64::MIN), 0, 10), Err(OutOfRange::BelowMinimum));
    }

    #[test]
    fn bounds_are_inclusive() {
        assert_eq!(within(0, 0, 10), Ok(0));
        assert_eq!(within(10, 0, 10), Ok(10));
        assert_eq!(within(11, 0, 10), Err(OutOfRange::AboveMaximum));
        assert_eq!(within(0, 1, 10), Err(OutOfRange::BelowMinimum));
    }

    #[test]
    fn describes_bounds_in_words() {
        assert_eq!(describe_ms(1), "1 ms");
        assert_eq!(describe_ms(1000), "1 second");
        assert_eq!(describe_ms(86_400_000), "1 day");
        assert_eq!(describe_ms(2_147_483_647), "2147483647 ms");
        assert_eq!(describe_ms(365 * 86_400_000), "365 days");
    }
}
