//! Retry backoff: how long a job waits after its n-th attempt failed.

use pgrx::prelude::*;

/// `backoff_base * 2^(attempt-1)` ms, clamped to `[min_retry_delay, max_retry_delay]`.
///
/// Total for every input, because it runs inside `rq_fail` and a bad row must
/// not turn a failure report into an error: attempts below 1 count as the
/// first, negative inputs count as 0, the doubling saturates instead of
/// overflowing, and when the bounds cross the maximum wins (it is the promise
/// an operator relies on: "never wait longer than this").
pub fn backoff_ms(attempt: i32, backoff_base: i32, min_retry_delay: i32, max_retry_delay: i32) -> i64 {
    let doublings = attempt.max(1) as u32 - 1;
    let base = i64::from(backoff_base.max(0));
    let planned = match 1i64.checked_shl(doublings).filter(|_| doublings < 63) {
        Some(factor) => base.saturating_mul(factor),
        None if base == 0 => 0,
        None => i64::MAX,
    };
    let floor = i64::from(min_retry_delay.max(0));
    let ceiling = i64::from(max_retry_delay.max(0));
    planned.max(floor).min(ceiling)
}

/// The delay in milliseconds before the next try after attempt `attempt` failed.
#[pg_extern(schema = "raquel_internal", immutable, strict, parallel_safe)]
fn rq_backoff(attempt: i32, backoff_base: i32, min_retry_delay: i32, max_retry_delay: i32) -> i64 {
    backoff_ms(attempt, backoff_base, min_retry_delay, max_retry_delay)
}

#[cfg(test)]
mod tests {
    use super::backoff_ms;

    const SECOND: i32 = 1000;
    const TWELVE_HOURS: i32 = 12 * 3600 * 1000;

    #[test]
    fn defaults_double_from_one_second() {
        let row: Vec<i64> = (1..=6).map(|n| backoff_ms(n, SECOND, SECOND, TWELVE_HOURS)).collect();
        assert_eq!(row, vec![1000, 2000, 4000, 8000, 16000, 32000]);
    }

    #[test]
    fn defaults_reach_twelve_hours_and_stay() {
        // 2^15 s = 9.1 h is still below the cap; 2^16 s = 18.2 h is above it.
        assert_eq!(backoff_ms(16, SECOND, SECOND, TWELVE_HOURS), 32_768_000);
        assert_eq!(backoff_ms(17, SECOND, SECOND, TWELVE_HOURS), i64::from(TWELVE_HOURS));
        assert_eq!(backoff_ms(40, SECOND, SECOND, TWELVE_HOURS), i64::from(TWELVE_HOURS));
    }

    #[test]
    fn huge_attempt_saturates_to_the_maximum() {
        assert_eq!(backoff_ms(10_000, SECOND, SECOND, TWELVE_HOURS), i64::from(TWELVE_HOURS));
        assert_eq!(backoff_ms(i32::MAX, i32::MAX, 0, i32::MAX), i64::from(i32::MAX));
        assert_eq!(backoff_ms(63, 1, 0, i32::MAX), i64::from(i32::MAX));
        assert_eq!(backoff_ms(64, 1, 0, i32::MAX), i64::from(i32::MAX));
    }

    #[test]
    fn clamped_up_to_the_minimum() {
        assert_eq!(backoff_ms(1, 100, 30 * SECOND, TWELVE_HOURS), 30_000);
        assert_eq!(backoff_ms(3, 100, 30 * SECOND, TWELVE_HOURS), 30_000);
        assert_eq!(backoff_ms(10, 100, 30 * SECOND, TWELVE_HOURS), 51_200);
    }

    #[test]
    fn clamped_down_to_the_maximum() {
        assert_eq!(backoff_ms(5, SECOND, 0, 5 * SECOND), 5_000);
        assert_eq!(backoff_ms(3, SECOND, 0, 5 * SECOND), 4_000);
    }

    #[test]
    fn zero_and_negative_inputs() {
        // attempt 0 or below counts as the first attempt
        assert_eq!(backoff_ms(0, SECOND, 0, TWELVE_HOURS), 1000);
        assert_eq!(backoff_ms(-5, SECOND, 0, TWELVE_HOURS), 1000);
        // a zero base never grows, even at absurd attempts
        assert_eq!(backoff_ms(10_000, 0, 0, TWELVE_HOURS), 0);
        assert_eq!(backoff_ms(10_000, 0, 250, TWELVE_HOURS), 250);
        // negative bounds and base count as zero
        assert_eq!(backoff_ms(2, -1000, -5, TWELVE_HOURS), 0);
        assert_eq!(backoff_ms(2, SECOND, 0, -1), 0);
    }

    #[test]
    fn crossed_bounds_keep_the_maximum() {
        assert_eq!(backoff_ms(1, SECOND, 10 * SECOND, 5 * SECOND), 5_000);
    }
}
