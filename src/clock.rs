//! The table keeps time as milliseconds since the Unix epoch (UTC), as the
//! Python library does; these helpers convert at the SQL surface.

use crate::errors::Refusal;
use pgrx::prelude::*;

/// Microseconds between the Unix epoch and PostgreSQL's epoch (2000-01-01).
const PG_EPOCH_OFFSET_US: i64 = 946_684_800_000_000;

/// PostgreSQL timestamp (µs since 2000-01-01) to ms since the Unix epoch,
/// rounding down so that "now" never lands in the future. Computed in i128:
/// a timestamp near PostgreSQL's end of time (294276 AD) plus the offset
/// overflows an i64, and once wrapped it was a time long past. In ms every
/// finite timestamp fits an i64 with room to spare.
pub fn pg_timestamp_to_ms(pg_us: i64) -> i64 {
    ((i128::from(pg_us) + i128::from(PG_EPOCH_OFFSET_US)).div_euclid(1000)) as i64
}

/// ms since the Unix epoch to a PostgreSQL timestamp (µs since 2000-01-01);
/// None when it falls outside what a timestamp can hold.
pub fn ms_to_pg_timestamp(ms: i64) -> Option<i64> {
    let us = i128::from(ms) * 1000 - i128::from(PG_EPOCH_OFFSET_US);
    // SAFETY-free bounds: PostgreSQL's END_TIMESTAMP and MIN_TIMESTAMP.
    const MIN_US: i128 = -211_813_488_000_000_000;
    const END_US: i128 = 9_223_371_331_200_000_000;
    (MIN_US..END_US).contains(&us).then_some(us as i64)
}

/// The wall clock now, in ms since the epoch: `clock_timestamp()`, not the
/// start of the transaction, because a long transaction must not see time
/// stand still when it claims or retries jobs.
pub fn now_ms() -> i64 {
    // SAFETY: reads the system clock; no state of the backend involved.
    pg_timestamp_to_ms(unsafe { pg_sys::GetCurrentTimestamp() })
}

#[pg_extern(schema = "raquel_internal", volatile, parallel_safe)]
fn rq_now_ms() -> i64 {
    now_ms()
}

/// A column's instant (ms since the epoch) as a timestamptz, for the rq_jobs
/// view: one exact call instead of arithmetic whose operators an install
/// script would have to resolve (sql/observe.sql says why that matters).
#[pg_extern(schema = "raquel_internal", immutable, strict, parallel_safe)]
fn rq_ms_to_timestamptz(ms: i64) -> TimestampWithTimeZone {
    ms_to_pg_timestamp(ms)
        .and_then(|us| TimestampWithTimeZone::try_from(us).ok())
        .unwrap_or_else(|| {
            Refusal::new(PgSqlErrorCode::ERRCODE_DATETIME_FIELD_OVERFLOW, format!("{ms} ms since the epoch is out of the range of a timestamp")).raise()
        })
}

/// A column's duration (ms) as an interval, for the rq_jobs view.
#[pg_extern(schema = "raquel_internal", immutable, strict, parallel_safe)]
fn rq_ms_to_interval(ms: i64) -> Interval {
    ms.checked_mul(1000)
        .and_then(|us| Interval::new(0, 0, us).ok())
        .unwrap_or_else(|| {
            Refusal::new(PgSqlErrorCode::ERRCODE_DATETIME_FIELD_OVERFLOW, format!("{ms} ms is out of the range of an interval")).raise()
        })
}

#[cfg(test)]
mod tests {
    use super::{ms_to_pg_timestamp, pg_timestamp_to_ms};

    #[test]
    fn converts_between_epochs() {
        assert_eq!(pg_timestamp_to_ms(0), 946_684_800_000);
        assert_eq!(pg_timestamp_to_ms(-946_684_800_000_000), 0);
        assert_eq!(pg_timestamp_to_ms(1_999), 946_684_800_001);
        // before 1970 rounds down, not toward zero
        assert_eq!(pg_timestamp_to_ms(-946_684_800_000_001), -1);
    }

    #[test]
    fn the_end_of_time_does_not_wrap() {
        // 294276-12-31, PostgreSQL's last timestamp: far in the future, in ms
        let last = 9_223_371_331_199_999_999;
        assert_eq!(pg_timestamp_to_ms(last), 9_224_318_015_999_999);
        assert_eq!(ms_to_pg_timestamp(pg_timestamp_to_ms(last)), Some(last - 999));
        assert_eq!(ms_to_pg_timestamp(i64::MAX), None);
        assert_eq!(ms_to_pg_timestamp(0), Some(-946_684_800_000_000));
    }
}
