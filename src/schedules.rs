//! Recurring jobs (declared in sql/schedules.sql): when a schedule's slots
//! fall. Cron patterns are parsed by the croner crate (five fields, six with
//! seconds first, and @hourly … @yearly), in a time zone of chrono-tz; the
//! background worker enqueues each due slot once (rq_fire_schedules).
//!
//! croner walks local wall-clock time: a slot in a spring-forward gap runs
//! at the first instant after the gap, and a slot in a fall-back's repeated
//! hour runs once, the first time. So a 02:30 daily job runs once on both
//! days.

use crate::deadlines;
use crate::errors::Refusal;
use crate::limits;
use chrono::TimeZone;
use chrono_tz::Tz;
use croner::Cron;
use pgrx::prelude::*;

/// The most slots one catch-up looks through (a per-second schedule after
/// four months down), so that a call always ends.
const MAX_SLOTS_WALKED: u32 = 10_000_000;

/// A cron pattern, parsed, or what is wrong with it.
fn parse_pattern(pattern: &str) -> Result<Cron, String> {
    Cron::new(pattern).with_seconds_optional().parse().map_err(|e| format!("cron pattern '{pattern}' is not valid: {e}"))
}

/// A time zone of the IANA database, or what is wrong with the name.
fn parse_zone(name: &str) -> Result<Tz, String> {
    name.parse().map_err(|_| format!("timezone '{name}' is not a known time zone"))
}

/// The first slot strictly after `after_ms` (to the second), or None when
/// the pattern has no more (such as a 30th of February).
fn next(cron: &Cron, zone: &Tz, after_ms: i64) -> Option<i64> {
    let after = zone.timestamp_millis_opt(after_ms.div_euclid(1000) * 1000).single()?;
    cron.find_next_occurrence(&after, false).ok().map(|next| next.timestamp_millis())
}

/// The slots from `from_ms` (a slot itself, so included) up to `until_ms`,
/// the last `keep` of them, in order.
fn slots(cron: &Cron, zone: &Tz, from_ms: i64, until_ms: i64, keep: usize) -> Vec<i64> {
    let mut kept = std::collections::VecDeque::with_capacity(keep.min(1024));
    let mut slot = Some(from_ms);
    for _ in 0..MAX_SLOTS_WALKED {
        let Some(at) = slot.filter(|at| *at <= until_ms) else { break };
        if kept.len() == keep {
            kept.pop_front();
        }
        kept.push_back(at);
        slot = next(cron, zone, at);
    }
    kept.into()
}

fn checked_pattern(pattern: Option<&str>) -> Cron {
    let Some(pattern) = pattern else { Refusal::invalid_parameter("cron must not be null").raise() };
    parse_pattern(pattern).unwrap_or_else(|message| {
        Refusal::invalid_parameter(message)
            .hint("Five fields (minute hour day-of-month month day-of-week), six with seconds first, or @hourly, @daily, @weekly, @monthly, @yearly.")
            .raise()
    })
}

fn checked_zone(name: Option<&str>) -> Tz {
    let Some(name) = name else { Refusal::invalid_parameter("timezone must not be null").raise() };
    parse_zone(name).unwrap_or_else(|message| {
        Refusal::invalid_parameter(message)
            .hint("Name one of the IANA database, such as 'UTC', 'Europe/Berlin' or 'America/New_York'.")
            .raise()
    })
}

/// The first slot of `cron` in `timezone` after `after_ms`, in ms since the
/// epoch; every argument checked (22023). NULL when the pattern never fires
/// again.
#[pg_extern(stable, parallel_safe)]
fn rq_cron_next(cron: Option<&str>, timezone: Option<&str>, after_ms: Option<i64>) -> Option<i64> {
    let (cron, zone) = (checked_pattern(cron), checked_zone(timezone));
    let after = after_ms.unwrap_or_else(|| Refusal::invalid_parameter("after_ms must not be null").raise());
    next(&cron, &zone, after)
}

/// The slots of `cron` in `timezone` from `from_ms` (a slot itself, so
/// included) up to `until_ms`, the last `keep` of them in order: what a
/// schedule's catch-up looks at (sql/schedules.sql).
#[pg_extern(stable, parallel_safe)]
fn rq_cron_slots(
    cron: Option<&str>,
    timezone: Option<&str>,
    from_ms: Option<i64>,
    until_ms: Option<i64>,
    keep: Option<i32>,
) -> Vec<i64> {
    let (cron, zone) = (checked_pattern(cron), checked_zone(timezone));
    let (Some(from), Some(until)) = (from_ms, until_ms) else {
        Refusal::invalid_parameter("from_ms and until_ms must not be null").raise()
    };
    let keep = usize::try_from(keep.unwrap_or(1).clamp(1, limits::MAX_BATCH)).unwrap_or(1);
    slots(&cron, &zone, from, until, keep)
}

/// Tells the background worker, at commit, that a schedule is due at
/// `due_ms` (src/deadlines.rs): a new or changed schedule's first slot.
#[pg_extern(volatile, parallel_unsafe)]
fn rq_schedule_due(due_ms: Option<i64>) {
    if let Some(due_ms) = due_ms {
        deadlines::note(due_ms);
    }
}

/// Checks a schedule's name and catch-up policy (22023).
#[pg_extern(immutable, parallel_safe)]
fn rq_check_schedule(name: Option<&str>, catch_up: Option<&str>) {
    match name {
        None => Refusal::invalid_parameter("name must not be null").raise(),
        Some("") => Refusal::invalid_parameter("name must not be an empty name").raise(),
        Some(name) => limits::check_name(Some(name), "name"),
    }
    if !matches!(catch_up, Some("none" | "last" | "all")) {
        let got = catch_up.map_or_else(|| "NULL".to_string(), |c| format!("'{c}'"));
        Refusal::invalid_parameter(format!("catch_up must be 'none', 'last' or 'all', got {got}"))
            .hint("'none' skips the slots missed while the server was down, 'last' runs once for them, 'all' runs each (the last 1000).")
            .raise()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn berlin() -> Tz {
        parse_zone("Europe/Berlin").unwrap()
    }

    fn local_ms(y: i32, mo: u32, d: u32, h: u32, mi: u32) -> i64 {
        berlin().with_ymd_and_hms(y, mo, d, h, mi, 0).earliest().unwrap().timestamp_millis()
    }

    /// The slots of `pattern` in Berlin on one local day.
    fn runs_on(pattern: &str, y: i32, mo: u32, d: u32) -> Vec<i64> {
        let cron = parse_pattern(pattern).unwrap();
        let (start, end) = (local_ms(y, mo, d, 0, 0), local_ms(y, mo, d + 1, 0, 0) - 1);
        let first = next(&cron, &berlin(), start - 1000).unwrap();
        slots(&cron, &berlin(), first, end, 100)
    }

    #[test]
    fn a_daily_0230_job_runs_once_on_both_daylight_saving_days() {
        // 2026-03-29: 02:00 jumps to 03:00, so 02:30 never happens; it runs at 03:00
        assert_eq!(runs_on("30 2 * * *", 2026, 3, 29), [local_ms(2026, 3, 29, 3, 0)]);
        // 2026-10-25: 03:00 goes back to 02:00, so 02:30 happens twice; it runs the first time
        assert_eq!(runs_on("30 2 * * *", 2026, 10, 25), [local_ms(2026, 10, 25, 2, 30)]);
        assert_eq!(runs_on("30 2 * * *", 2026, 6, 1), [local_ms(2026, 6, 1, 2, 30)]);
    }

    #[test]
    fn seconds_aliases_and_bad_patterns() {
        let utc = parse_zone("UTC").unwrap();
        let every_5_s = parse_pattern("*/5 * * * * *").unwrap();
        assert_eq!(slots(&every_5_s, &utc, 0, 59_999, 100), (0..12).map(|i| i * 5000).collect::<Vec<i64>>());
        assert_eq!(slots(&every_5_s, &utc, 0, 59_999, 2), [50_000, 55_000], "the last `keep`");
        assert_eq!(next(&parse_pattern("@hourly").unwrap(), &utc, 0), Some(3_600_000));
        assert_eq!(next(&parse_pattern("0 0 * * *").unwrap(), &utc, 0), Some(86_400_000));
        assert_eq!(next(&parse_pattern("@daily").unwrap(), &utc, 1500), Some(86_400_000));
        for bad in ["* * *", "61 * * * *", "x * * * *", "@sometimes"] {
            let error = parse_pattern(bad).err().unwrap_or_else(|| panic!("{bad} was accepted"));
            assert!(error.contains(bad), "{error}");
        }
        assert!(parse_zone("Mars/Olympus").is_err());
    }
}
