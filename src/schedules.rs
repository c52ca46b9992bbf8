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
pub(crate) fn slots(cron: &Cron, zone: &Tz, from_ms: i64, until_ms: i64, keep: usize) -> Vec<i64> {
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

pub(crate) fn checked_pattern(pattern: Option<&str>) -> Cron {
    let Some(pattern) = pattern else { Refusal::invalid_parameter("cron must not be null").raise() };
    parse_pattern(pattern).unwrap_or_else(|message| {
        Refusal::invalid_parameter(message)
            .hint("Five fields (minute hour day-of-month month day-of-week), six with seconds first, or @hourly, @daily, @weekly, @monthly, @yearly.")
            .raise()
    })
}

pub(crate) fn checked_zone(name: Option<&str>) -> Tz {
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
#[pg_extern(stable, parallel_safe, schema = "raquel_internal")]
fn rq_cron_next(cron: Option<&str>, timezone: Option<&str>, after_ms: Option<i64>) -> Option<i64> {
    let (cron, zone) = (checked_pattern(cron), checked_zone(timezone));
    let after = after_ms.unwrap_or_else(|| Refusal::invalid_parameter("after_ms must not be null").raise());
    next(&cron, &zone, after)
}

/// A slot a round reaches within this long after its instant is on time:
/// it runs whatever the schedule's catch_up. Older slots were missed (the
/// server was down, the worker off, or the schedule made with a slot in the
/// past) and follow catch_up.
const ON_TIME_MS: i64 = 60_000;

/// The most missed slots catch_up 'all' runs: the latest of them.
const MAX_CAUGHT_UP: usize = 1000;

/// What a schedule does with its missed slots (sql/schedules.sql).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum CatchUp {
    /// skips them
    None,
    /// runs one job for them all, at the latest missed slot
    Last,
    /// runs each (the latest MAX_CAUGHT_UP)
    All,
}

impl CatchUp {
    fn named(name: Option<&str>) -> Option<CatchUp> {
        match name {
            Some("none") => Some(CatchUp::None),
            Some("last") => Some(CatchUp::Last),
            Some("all") => Some(CatchUp::All),
            _ => None,
        }
    }
}

/// The slots a round at `now_ms` enqueues for a schedule whose next slot not
/// yet enqueued is `next_ms`, in order: of the missed ones (before
/// `now_ms - ON_TIME_MS`) what `catch_up` says, then every on-time one up
/// to `now_ms`.
fn due_slots(cron: &Cron, zone: &Tz, next_ms: i64, now_ms: i64, catch_up: CatchUp) -> Vec<i64> {
    let on_time_from = now_ms.saturating_sub(ON_TIME_MS);
    if next_ms >= on_time_from {
        return slots(cron, zone, next_ms, now_ms, usize::MAX);
    }
    let keep = match catch_up {
        CatchUp::None => 0,
        CatchUp::Last => 1,
        CatchUp::All => MAX_CAUGHT_UP,
    };
    let mut due = if keep == 0 { Vec::new() } else { slots(cron, zone, next_ms, on_time_from - 1, keep) };
    // the first slot at or after on_time_from (slots fall on whole seconds)
    if let Some(first_on_time) = next(cron, zone, on_time_from - 1) {
        due.extend(slots(cron, zone, first_on_time, now_ms, usize::MAX));
    }
    due
}

/// The slots a round at `now_ms` enqueues for a schedule (`cron` in
/// `timezone`) whose next slot not yet enqueued is `next_ms`, following its
/// `catch_up`: what rq_fire_schedules enqueues (sql/schedules.sql).
#[pg_extern(stable, parallel_safe, schema = "raquel_internal")]
fn rq_schedule_slots(
    cron: Option<&str>,
    timezone: Option<&str>,
    next_ms: Option<i64>,
    now_ms: Option<i64>,
    catch_up: Option<&str>,
) -> Vec<i64> {
    let (cron, zone) = (checked_pattern(cron), checked_zone(timezone));
    let (Some(next_ms), Some(now_ms)) = (next_ms, now_ms) else {
        Refusal::invalid_parameter("next_ms and now_ms must not be null").raise()
    };
    due_slots(&cron, &zone, next_ms, now_ms, checked_catch_up(catch_up))
}

/// Tells the background worker, at commit, that a schedule is due at
/// `due_ms` (src/deadlines.rs): a new or changed schedule's first slot. Only
/// for roles that may change schedules (42501): a note starts a round of the
/// background worker.
#[pg_extern(volatile, parallel_unsafe, schema = "raquel_internal")]
#[search_path(pg_catalog, pg_temp)]
fn rq_schedule_due(due_ms: Option<i64>, fcinfo: pg_sys::FunctionCallInfo) {
    // SAFETY: fcinfo is this call's own.
    let function = unsafe { crate::statements::called_function(fcinfo) };
    crate::privileges::require_update_of(function, "schedules", "rq_schedule_due");
    if let Some(due_ms) = due_ms {
        deadlines::note(due_ms);
    }
}

fn checked_catch_up(catch_up: Option<&str>) -> CatchUp {
    CatchUp::named(catch_up).unwrap_or_else(|| {
        let got = catch_up.map_or_else(|| "NULL".to_string(), |c| format!("'{c}'"));
        Refusal::invalid_parameter(format!("catch_up must be 'none', 'last' or 'all', got {got}"))
            .hint("Slots missed by over a minute: 'none' skips them, 'last' runs one job for them, 'all' runs each (the latest 1000).")
            .raise()
    })
}

/// Checks a schedule before it is stored (22023, 54000), so that every job
/// it will enqueue can be: its name, its catch-up policy, and its payload's
/// size against raquel.max_payload_size for its queue.
#[pg_extern(stable, parallel_safe, schema = "raquel_internal")]
fn rq_check_schedule_options(name: Option<&str>, catch_up: Option<&str>, queue: Option<&str>, payload: Option<&str>) {
    check_name_and_catch_up(name, catch_up);
    crate::events::check_payload_bytes(payload.map_or(0, str::len), queue.unwrap_or_default());
}

pub(crate) fn check_name_and_catch_up(name: Option<&str>, catch_up: Option<&str>) {
    match name {
        None => Refusal::invalid_parameter("name must not be null").raise(),
        Some("") => Refusal::invalid_parameter("name must not be an empty name").raise(),
        Some(name) => limits::check_name(Some(name), "name"),
    }
    checked_catch_up(catch_up);
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
    #[test]
    fn on_time_slots_always_run_and_missed_ones_follow_catch_up() {
        let utc = parse_zone("UTC").unwrap();
        let every_second = parse_pattern("* * * * * *").unwrap();
        let now = 1_000_000_000_500; // half a second past a slot
        // a round 3 s late: every slot on time, whatever the policy
        for policy in [CatchUp::None, CatchUp::Last, CatchUp::All] {
            let due = due_slots(&every_second, &utc, now - 3_500, now, policy);
            assert_eq!(due, [now - 3_500, now - 2_500, now - 1_500, now - 500], "{policy:?}");
        }
        // five minutes late: the last minute's 60 slots are on time; of the
        // 241 missed before them, none, the latest, or each
        let since = now - 300_500;
        let on_time: Vec<i64> = (0..60).map(|i| now - 59_500 + i * 1000).collect();
        assert_eq!(due_slots(&every_second, &utc, since, now, CatchUp::None), on_time);
        let last = due_slots(&every_second, &utc, since, now, CatchUp::Last);
        assert_eq!(last[0], now - 60_500, "the latest missed slot");
        assert_eq!(last[1..], on_time[..]);
        let all = due_slots(&every_second, &utc, since, now, CatchUp::All);
        assert_eq!(all.len(), 241 + 60);
        assert!(all.windows(2).all(|w| w[1] - w[0] == 1000), "each slot once, in order");
        // 'all' keeps the latest 1000 missed
        let days = due_slots(&every_second, &utc, now - 86_400_500, now, CatchUp::All);
        assert_eq!(days.len(), MAX_CAUGHT_UP + 60);
        assert_eq!(days[MAX_CAUGHT_UP - 1], now - 60_500);
        // an hourly schedule missed by a day: no slot is on time
        let hourly = parse_pattern("@hourly").unwrap();
        let hour = 3_600_000;
        let next = (now / hour - 24) * hour;
        assert_eq!(due_slots(&hourly, &utc, next, now, CatchUp::None), Vec::<i64>::new());
        assert_eq!(due_slots(&hourly, &utc, next, now, CatchUp::Last), [now / hour * hour]);
        assert_eq!(due_slots(&hourly, &utc, next, now, CatchUp::All).len(), 25);
    }
}
