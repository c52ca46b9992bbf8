//! The table keeps time as milliseconds since the Unix epoch (UTC), as the
//! Python library does; these helpers convert at the SQL surface.

use pgrx::prelude::*;

/// Microseconds between the Unix epoch and PostgreSQL's epoch (2000-01-01).
const PG_EPOCH_OFFSET_US: i64 = 946_684_800_000_000;

/// PostgreSQL timestamp (µs since 2000-01-01) to ms since the Unix epoch,
/// rounding down so that "now" never lands in the future.
pub fn pg_timestamp_to_ms(pg_us: i64) -> i64 {
    (pg_us + PG_EPOCH_OFFSET_US).div_euclid(1000)
}

/// The wall clock now, in ms since the epoch: `clock_timestamp()`, not the
/// start of the transaction, because a long transaction must not see time
/// stand still when it claims or retries jobs.
pub fn now_ms() -> i64 {
    // SAFETY: reads the system clock; no state of the backend involved.
    pg_timestamp_to_ms(unsafe { pg_sys::GetCurrentTimestamp() })
}

#[pg_extern(volatile, parallel_safe)]
fn rq_now_ms() -> i64 {
    now_ms()
}

#[cfg(test)]
mod tests {
    use super::pg_timestamp_to_ms;

    #[test]
    fn converts_between_epochs() {
        assert_eq!(pg_timestamp_to_ms(0), 946_684_800_000);
        assert_eq!(pg_timestamp_to_ms(-946_684_800_000_000), 0);
        assert_eq!(pg_timestamp_to_ms(1_999), 946_684_800_001);
        // before 1970 rounds down, not toward zero
        assert_eq!(pg_timestamp_to_ms(-946_684_800_000_001), -1);
    }
}
