//! Metrics over time (declared in sql/metrics.sql): per queue and minute, how
//! many jobs were enqueued, claimed, succeeded, failed, rescued and expired,
//! and how long jobs waited (from due to claim) and ran (from claim to end).
//!
//! The verbs count what they did as they do it, in the backend's own memory
//! (a map lookup and two additions a job); at commit the counts join the
//! database's figures in shared memory, under one lock, so a rolled-back
//! transaction counts nothing. The background worker takes the figures
//! (`rq_take_metrics`) and adds them to the `metrics` table, one row per
//! queue and minute, each round and soon after every minute with activity.
//! Nothing on the hot path reads or writes a table.
//!
//! Times are kept as histograms of 161 buckets, four per doubling (bucket b
//! holds ms in [2^((b-1)/4), 2^(b/4)); bucket 0 holds under a millisecond),
//! so minutes add up exactly and a percentile is within 19 % of the truth.
//!
//! Shared memory holds SLOTS queues across databases, each under its whole
//! name (up to MAX_NAME_BYTES, the longest raquel lets a queue have). A
//! database may hold at most half of them, the worker's round in a
//! database frees the slots it emptied, and the launcher frees those of
//! databases that are gone. Figures that find no slot (every slot taken, a
//! database at its share, a name longer than any queue raquel makes) are
//! not counted: the launcher says how many in a WARNING, and
//! `rq_metrics_lost()` and rq_prometheus's raquel_metrics_lost_total count
//! them since the server started.

use crate::clock::now_ms;
use crate::deadlines;
use crate::settings;
use pgrx::prelude::*;
use pgrx::{pg_shmem_init, PGRXSharedMemory, PgAtomic, PgLwLock, PgXactCallbackEvent};
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};

pub const BUCKETS: usize = 161;
const SLOTS: usize = 256;
/// The most slots one database may hold, so that one database (with the
/// worker off there, say) never takes every other database's counting.
const SLOTS_PER_DATABASE: usize = SLOTS / 2;
const NAME_BYTES: usize = crate::limits::MAX_NAME_BYTES;
const MINUTE_MS: i64 = 60_000;

/// What the figures count, in the order of the table's columns.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Event {
    Enqueued = 0,
    Claimed = 1,
    Succeeded = 2,
    Failed = 3,
    Rescued = 4,
    Expired = 5,
}
const EVENTS: usize = 6;

impl Event {
    fn named(name: &str) -> Option<Event> {
        Some(match name {
            "enqueued" => Event::Enqueued,
            "claimed" => Event::Claimed,
            "succeeded" => Event::Succeeded,
            "failed" => Event::Failed,
            "rescued" => Event::Rescued,
            "expired" => Event::Expired,
            _ => return None,
        })
    }
}

/// The bucket of a duration in ms.
pub fn bucket(ms: i64) -> usize {
    if ms < 1 {
        return 0;
    }
    // 4 × log2(ms) rounded down (exact at the powers of two, whose log2
    // a double holds exactly)
    let log4 = (4.0 * (ms as f64).log2()).floor() as usize;
    (log4 + 1).min(BUCKETS - 1)
}

/// The ms a bucket stands for: the geometric middle of its bounds.
pub fn bucket_ms(bucket: usize) -> f64 {
    if bucket == 0 { 0.5 } else { 2f64.powf((bucket as f64 - 0.5) / 4.0) }
}

/// The `fraction` percentile of a histogram, or None when it is empty.
pub fn percentile(histogram: &[i32], fraction: f64) -> Option<f64> {
    let total: i64 = histogram.iter().map(|&n| i64::from(n.max(0))).sum();
    if total == 0 {
        return None;
    }
    let rank = ((fraction.clamp(0.0, 1.0) * total as f64).ceil() as i64).max(1);
    let mut seen = 0;
    for (b, &n) in histogram.iter().enumerate() {
        seen += i64::from(n.max(0));
        if seen >= rank {
            return Some(bucket_ms(b));
        }
    }
    None
}

#[derive(Clone, Copy)]
struct Figures {
    counts: [u64; EVENTS],
    wait: [u32; BUCKETS],
    run: [u32; BUCKETS],
}

impl Figures {
    const ZERO: Figures = Figures { counts: [0; EVENTS], wait: [0; BUCKETS], run: [0; BUCKETS] };

    fn is_empty(&self) -> bool {
        self.counts.iter().all(|&n| n == 0)
    }

    fn add(&mut self, other: &Figures) {
        for (a, b) in self.counts.iter_mut().zip(other.counts) {
            *a += b;
        }
        for (a, b) in self.wait.iter_mut().zip(other.wait) {
            *a = a.saturating_add(b);
        }
        for (a, b) in self.run.iter_mut().zip(other.run) {
            *a = a.saturating_add(b);
        }
    }

    /// Adds a transaction's figures: its counts, and one to the bucket of
    /// each of its times.
    fn add_pending(&mut self, pending: &Pending) {
        for (a, b) in self.counts.iter_mut().zip(pending.counts) {
            *a += b;
        }
        for &b in &pending.waits {
            self.wait[usize::from(b)] = self.wait[usize::from(b)].saturating_add(1);
        }
        for &b in &pending.runs {
            self.run[usize::from(b)] = self.run[usize::from(b)].saturating_add(1);
        }
    }
}

/// One queue's figures in shared memory: those of the minute of the last
/// commit (`current`), and those of earlier minutes the worker has not taken
/// yet (`earlier`, at `earlier_minute`: minutes are merged when the worker
/// falls behind by more than one).
#[derive(Clone, Copy)]
struct Slot {
    used: bool,
    database: pg_sys::Oid,
    name_len: usize,
    name: [u8; NAME_BYTES],
    minute: i64,
    current: Figures,
    earlier_minute: i64,
    earlier: Option<Figures>,
}

impl Slot {
    const FREE: Slot = Slot {
        used: false,
        database: pg_sys::InvalidOid,
        name_len: 0,
        name: [0; NAME_BYTES],
        minute: 0,
        current: Figures::ZERO,
        earlier_minute: 0,
        earlier: None,
    };

    fn is(&self, database: pg_sys::Oid, name: &[u8]) -> bool {
        self.used && self.database == database && &self.name[..self.name_len] == name
    }
}

#[derive(Clone, Copy)]
struct Table {
    slots: [Slot; SLOTS],
}

impl Default for Table {
    fn default() -> Self {
        Table { slots: [Slot::FREE; SLOTS] }
    }
}

// SAFETY: plain data (no pointers), shared under the PgLwLock below.
unsafe impl PGRXSharedMemory for Table {}

// SAFETY: the name is unique to this lock, and pg_shmem_init! in init() sets it up.
static TABLE: PgLwLock<Table> = unsafe { PgLwLock::new(c"raquel_metrics") };
/// Events not counted for want of a slot, since the launcher last said so.
// SAFETY: the name is unique to this atomic, and pg_shmem_init! in init() sets it up.
static LOST: PgAtomic<AtomicU64> = unsafe { PgAtomic::new(c"raquel_metrics_lost") };
/// The same since the server started (rq_metrics_lost).
// SAFETY: the name is unique to this atomic, and pg_shmem_init! in init() sets it up.
static LOST_TOTAL: PgAtomic<AtomicU64> = unsafe { PgAtomic::new(c"raquel_metrics_lost_total") };

/// A transaction's figures of one queue: its counts and the buckets of its
/// times, added to the shared histograms at commit (most transactions hold
/// one job, so this stays small instead of two whole histograms).
#[derive(Default)]
struct Pending {
    counts: [u64; EVENTS],
    waits: Vec<u8>,
    runs: Vec<u8>,
}

impl Pending {
    fn note(&mut self, event: Event, ms: Option<i64>) {
        self.counts[event as usize] += 1;
        match (event, ms) {
            (Event::Claimed, Some(ms)) => self.waits.push(bucket(ms) as u8),
            (Event::Succeeded | Event::Failed, Some(ms)) => self.runs.push(bucket(ms) as u8),
            _ => {}
        }
    }
}

thread_local! {
    /// This transaction's figures, per queue, joined to shared memory at commit.
    static PENDING: RefCell<HashMap<String, Pending>> = RefCell::new(HashMap::new());
    static FLUSH_AT_COMMIT: Cell<bool> = const { Cell::new(false) };
    /// The minute whose end this backend last told the worker about.
    static NOTED_MINUTE: Cell<i64> = const { Cell::new(-1) };
}

/// Called from `_PG_init` while the server preloads the library.
pub fn init() {
    pg_shmem_init!(TABLE);
    pg_shmem_init!(LOST = AtomicU64::new(0));
    pg_shmem_init!(LOST_TOTAL = AtomicU64::new(0));
}

fn lose(events: u64) {
    LOST.get().fetch_add(events, Ordering::Relaxed);
    LOST_TOTAL.get().fetch_add(events, Ordering::Relaxed);
}

/// Counts `event` for a job of `queue` (with its wait or run time in ms) in
/// this transaction. Nothing without the preloaded library or with
/// `raquel.metrics` off.
pub fn note(queue: &str, event: Event, ms: Option<i64>) {
    if !crate::preloaded() || !settings::metrics() {
        return;
    }
    PENDING.with_borrow_mut(|pending| match pending.get_mut(queue) {
        Some(figures) => figures.note(event, ms),
        None => {
            let mut figures = Pending::default();
            figures.note(event, ms);
            pending.insert(queue.to_owned(), figures);
        }
    });
    if !FLUSH_AT_COMMIT.replace(true) {
        pgrx::register_xact_callback(PgXactCallbackEvent::Commit, flush);
        pgrx::register_xact_callback(PgXactCallbackEvent::Abort, || {
            PENDING.with_borrow_mut(HashMap::clear);
            FLUSH_AT_COMMIT.set(false);
        });
        // the worker records this minute soon after it ends (told once a
        // minute: a committed note outlives its transaction; flush() says
        // when one committed)
        let minute = now_ms() / MINUTE_MS;
        if NOTED_MINUTE.get() != minute {
            deadlines::note((minute + 1) * MINUTE_MS + 100);
        }
    }
}

/// Counts the claims in the last SPI result (jobs rows): each one's wait
/// from scheduled_at to claimed_at. Connected to SPI.
pub fn note_claimed_rows() {
    if !crate::preloaded() || !settings::metrics() {
        return;
    }
    // SAFETY: SPI's last result, read while connected; columns found by name.
    unsafe {
        let table = pg_sys::SPI_tuptable;
        if table.is_null() || pg_sys::SPI_processed == 0 {
            return;
        }
        let desc = (*table).tupdesc;
        let (queue, due, claimed) = (
            pg_sys::SPI_fnumber(desc, c"queue".as_ptr()),
            pg_sys::SPI_fnumber(desc, c"scheduled_at".as_ptr()),
            pg_sys::SPI_fnumber(desc, c"claimed_at".as_ptr()),
        );
        if queue <= 0 || due <= 0 || claimed <= 0 {
            return;
        }
        for row in 0..pg_sys::SPI_processed as usize {
            let name = crate::statements::value::<&str>(row, queue);
            let wait = match (crate::statements::value::<i64>(row, due), crate::statements::value::<i64>(row, claimed)) {
                (Some(due), Some(claimed)) => Some(claimed - due),
                _ => None,
            };
            if let Some(name) = name {
                note(name, Event::Claimed, wait);
            }
        }
    }
}

/// Joins this transaction's figures to the database's, after the commit.
/// Runs where nothing may fail: it only adds numbers.
fn flush() {
    FLUSH_AT_COMMIT.set(false);
    let pending = PENDING.with_borrow_mut(std::mem::take);
    if pending.is_empty() {
        return;
    }
    let minute = now_ms() / MINUTE_MS * MINUTE_MS;
    NOTED_MINUTE.set(minute / MINUTE_MS);
    // SAFETY: MyDatabaseId is this backend's, set once it connected.
    let database = unsafe { pg_sys::MyDatabaseId };
    let mut table = TABLE.exclusive();
    for (queue, figures) in pending {
        let name = queue.as_bytes();
        let found = table.slots.iter().position(|s| s.is(database, name));
        let free = || {
            let held = table.slots.iter().filter(|s| s.used && s.database == database).count();
            table.slots.iter().position(|s| !s.used).filter(|_| held < SLOTS_PER_DATABASE)
        };
        let Some(index) = found.or_else(free).filter(|_| name.len() <= NAME_BYTES) else {
            lose(figures.counts.iter().sum());
            continue;
        };
        let slot = &mut table.slots[index];
        if !slot.used {
            *slot = Slot { used: true, database, name_len: name.len(), minute, ..Slot::FREE };
            slot.name[..name.len()].copy_from_slice(name);
        }
        if minute > slot.minute && !slot.current.is_empty() {
            // a new minute: the last one waits for the worker
            match &mut slot.earlier {
                Some(earlier) => earlier.add(&slot.current),
                None => {
                    slot.earlier = Some(slot.current);
                    slot.earlier_minute = slot.minute;
                }
            }
            slot.current = Figures::ZERO;
        }
        slot.minute = slot.minute.max(minute);
        slot.current.add_pending(&figures);
    }
}

type Taken = (String, i64, [i64; EVENTS], Vec<i32>, Vec<i32>);

/// Takes this database's figures out of shared memory (and frees the slots
/// that are left empty): one entry per queue and minute.
fn take_figures() -> Vec<Taken> {
    if !crate::preloaded() {
        return Vec::new();
    }
    // SAFETY: MyDatabaseId is this backend's, set once it connected.
    let database = unsafe { pg_sys::MyDatabaseId };
    let mut taken = Vec::new();
    let row = |name: &str, minute: i64, f: &Figures| -> Taken {
        (
            name.to_string(),
            minute,
            f.counts.map(|n| n as i64),
            f.wait.iter().map(|&n| n as i32).collect(),
            f.run.iter().map(|&n| n as i32).collect(),
        )
    };
    let mut table = TABLE.exclusive();
    for slot in table.slots.iter_mut().filter(|s| s.used && s.database == database) {
        let name = String::from_utf8_lossy(&slot.name[..slot.name_len]).into_owned();
        if let Some(earlier) = slot.earlier.take() {
            taken.push(row(&name, slot.earlier_minute, &earlier));
        }
        if slot.current.is_empty() {
            *slot = Slot::FREE;
        } else {
            taken.push(row(&name, slot.minute, &slot.current));
            slot.current = Figures::ZERO;
        }
    }
    taken
}

/// For the launcher, each round: frees the slots of databases that are not
/// in `databases` (dropped ones), counting their figures as lost, and says
/// in a WARNING how many events found no slot since it last did.
pub fn forget_databases_and_report(databases: &[pg_sys::Oid]) {
    let mut lost = 0;
    {
        let mut table = TABLE.exclusive();
        for slot in table.slots.iter_mut().filter(|s| s.used && !databases.contains(&s.database)) {
            lost += slot.current.counts.iter().sum::<u64>() + slot.earlier.map_or(0, |e| e.counts.iter().sum());
            *slot = Slot::FREE;
        }
    }
    lose(lost);
    let unreported = LOST.get().swap(0, Ordering::Relaxed);
    if unreported > 0 {
        crate::errors::warning(
            PgSqlErrorCode::ERRCODE_PROGRAM_LIMIT_EXCEEDED,
            format!(
                "raquel: {unreported} events were not counted in the metrics: no slot of the {SLOTS} \
                 (at most {SLOTS_PER_DATABASE} a database) was free, a queue name was longer than \
                 {NAME_BYTES} bytes, or their database was dropped before the worker recorded them"
            ),
        );
    }
}

/// Events not counted in the metrics since the server started (see
/// forget_databases_and_report): 0 without the preloaded library.
#[pg_extern(schema = "raquel_internal", volatile, parallel_safe)]
#[search_path(pg_catalog, pg_temp)]
fn rq_metrics_lost() -> i64 {
    if !crate::preloaded() {
        return 0;
    }
    i64::try_from(LOST_TOTAL.get().load(Ordering::Relaxed)).unwrap_or(i64::MAX)
}

// rq_take_metrics(): for rq_record_metrics (sql/metrics.sql), run by the
// background worker as the extension's owner.
#[pg_extern(volatile, parallel_unsafe, schema = "raquel_internal")]
#[search_path(pg_catalog, pg_temp)]
fn rq_take_metrics() -> TableIterator<
    'static,
    (
        name!(queue, String),
        name!(minute, i64),
        name!(enqueued, i64),
        name!(claimed, i64),
        name!(succeeded, i64),
        name!(failed, i64),
        name!(rescued, i64),
        name!(expired, i64),
        name!(wait_histogram, Vec<i32>),
        name!(run_histogram, Vec<i32>),
    ),
> {
    TableIterator::new(
        take_figures().into_iter().map(|(q, m, c, w, r)| (q, m, c[0], c[1], c[2], c[3], c[4], c[5], w, r)),
    )
}

// rq_note_metric(queue, event, ms): for the verbs written in SQL (rq_fail,
// rq_complete_batch, the duties). Only for a role that may update jobs,
// which could have done what it counts.
#[pg_extern(volatile, parallel_unsafe, schema = "raquel_internal")]
#[search_path(pg_catalog, pg_temp)]
fn rq_note_metric(queue: Option<&str>, event: &str, ms: Option<i64>, fcinfo: pg_sys::FunctionCallInfo) {
    // SAFETY: fcinfo is this call's own.
    let function = unsafe { crate::statements::called_function(fcinfo) };
    crate::privileges::require_update(function, "rq_note_metric");
    let Some(event) = Event::named(event) else {
        crate::errors::Refusal::invalid_parameter(format!("rq_note_metric: unknown event \"{event}\""))
            .hint("One of enqueued, claimed, succeeded, failed, rescued, expired.")
            .raise()
    };
    if let Some(queue) = queue {
        note(queue, event, ms);
    }
}

// rq_histogram_percentile(histogram, fraction): the ms a percentile of a
// metrics histogram stands for (NULL when it is empty).
#[pg_extern(immutable, parallel_safe, schema = "raquel_internal")]
#[search_path(pg_catalog, pg_temp)]
fn rq_histogram_percentile(histogram: Option<Vec<Option<i32>>>, fraction: f64) -> Option<f64> {
    let histogram: Vec<i32> = histogram?.into_iter().map(|n| n.unwrap_or(0)).collect();
    percentile(&histogram, fraction)
}

// rq_histogram_add(a, b): two histograms added bucket by bucket.
#[pg_extern(immutable, parallel_safe, schema = "raquel_internal")]
#[search_path(pg_catalog, pg_temp)]
fn rq_histogram_add(a: Option<Vec<Option<i32>>>, b: Option<Vec<Option<i32>>>) -> Option<Vec<i32>> {
    let (a, b) = (a.unwrap_or_default(), b.unwrap_or_default());
    let n = a.len().max(b.len());
    let at = |v: &Vec<Option<i32>>, i: usize| i64::from(v.get(i).copied().flatten().unwrap_or(0));
    Some((0..n).map(|i| (at(&a, i) + at(&b, i)).min(i64::from(i32::MAX)) as i32).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_four_per_doubling() {
        assert_eq!(bucket(0), 0);
        assert_eq!(bucket(-5), 0);
        assert_eq!(bucket(1), 1);
        assert_eq!(bucket(2), 5);
        assert_eq!(bucket(1024), 41);
        assert_eq!(bucket(i64::MAX), BUCKETS - 1);
        for ms in [1i64, 3, 10, 250, 1000, 60_000, 3_600_000] {
            let middle = bucket_ms(bucket(ms));
            assert!((middle / ms as f64 - 1.0).abs() < 0.19, "{ms} ms reads as {middle}");
        }
    }

    #[test]
    fn percentiles_come_from_the_counts() {
        let mut h = vec![0; BUCKETS];
        for ms in 1..=100 {
            h[bucket(ms * 10)] += 1;
        }
        let p50 = percentile(&h, 0.5).unwrap();
        let p99 = percentile(&h, 0.99).unwrap();
        assert!((p50 / 500.0 - 1.0).abs() < 0.19, "{p50}");
        assert!((p99 / 990.0 - 1.0).abs() < 0.19, "{p99}");
        assert_eq!(percentile(&[0; BUCKETS], 0.5), None);
    }
}
