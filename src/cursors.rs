//! Where a queue's ready jobs start: a cursor per priority ("lane") of each
//! queue, in shared memory, so that a claim's walk of the ready index starts
//! past the entries of jobs already claimed.
//!
//! Why: a claim walks the ready index (sql/schema.sql) in claim order. The
//! entries of the jobs claimed before it stay in the index until vacuum
//! removes them, and vacuum cannot while any snapshot older than their
//! claim is open (a long report, a lagging replication slot,
//! hot_standby_feedback): then every claim steps over every job claimed
//! since, and a queue that runs 1000 jobs a second slows to a crawl within
//! minutes. With a cursor the walk starts where the last claim of the lane
//! ended, and costs what the jobs enqueued since cost.
//!
//! The rule that keeps a cursor safe: every ready job of the lane sorts at
//! or after it (scheduled_at, then id). A claim moves it forward to the last
//! job it claimed in the lane: the jobs before that it passed were claimed
//! by others, or locked by claims still open, or not yet committed. Whatever
//! makes a job ready at a key before a cursor moves the cursor back, after
//! its commit is visible: an insert (the jobs table's insert trigger,
//! src/events.rs), a verb that makes a job ready again (rq_fail with a retry,
//! rq_reject, rq_reschedule, rq_retry, a parent's success releasing its
//! children: `rq_job_ready_again`), a claim or take rolled back (the jobs it
//! had locked are ready again), a take's commit (the taken jobs it did not
//! finish stay ready). Every such note bumps the queue's generation, and
//! each lane keeps what a claim needs of its notes (LaneNotes: for any
//! generation, the least key noted since, exactly for the latest NOTES
//! steps and no higher than the truth for older ones). A claim moves a lane
//! forward to the last job it took, but never past a job noted ready in
//! that lane since it read the generation, before its statement's
//! snapshot: a job that became ready behind the cursor after that snapshot
//! is never passed over. A claim that read before a rewind or a change of
//! the lanes moves nothing. (0.5.0's first cut refused to move a claim that
//! saw any note, then one that saw more than 32: a queue enqueued into 1000
//! times a second kept its cursors at the start once one walk took longer
//! than that, and behind a held snapshot every claim then stepped over
//! every job claimed since: `bench/run --held`, 12 jobs/s in the tenth
//! minute.)
//!
//! What a cursor cannot hear of: a job made ready by an UPDATE outside
//! raquel's verbs (a hand-written UPDATE, the Python library's own claim
//! rolled back), or inserted with triggers off. So each queue's cursors go
//! back to the start every REWIND_MS: such a job waits at most that long.
//!
//! A queue's lanes are the priorities its ready jobs may have. The first
//! claim of a queue finds them (one probe per priority, sql/claim.sql's
//! priorities walk) and every insert adds its own; a queue with more
//! priorities than `raquel.cursor_priorities`, or one whose lanes a verb
//! could not name, is claimed without cursors. One-queue claims use cursors
//! (src/claim.rs); claims of several queues or any queue walk the index
//! from its start, as before.
//!
//! Shared memory holds `raquel.cursor_queues` queues of all databases (the
//! sizes are settings read at server start: Shape), in PARTITIONS parts by
//! a hash of (database, table, queue), each under a lock of its own: a
//! claim, a commit's note and the rewind of one queue lock only its part,
//! so claims of different queues seldom wait for each other (0.5.0 kept
//! one lock for every queue, taken exclusively at least twice a claim).
//! Past a part's places, its queue used least recently gives up its place.
//! What goes without cursors is counted (rq_cursor_counts, and
//! rq_prometheus's raquel_cursor_* series): a claim of a name longer than
//! `raquel.cursor_name_bytes`, a queue with too many priorities, and the
//! places given up, so that an operator sees when the limits are too
//! small; rq_stats says per queue (rq_cursor_state).

use pgrx::prelude::*;
use crate::shmem;
use pgrx::{pg_shmem_init, PGRXSharedMemory, PgAtomic, PgSubXactCallbackEvent, PgXactCallbackEvent};
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};

/// Parts of the cursors' shared memory, each under its own lock.
const PARTITIONS: usize = 16;
/// How often a queue's cursors go back to the start.
pub const REWIND_MS: i64 = 10_000;
/// The steps a lane's notes keep exactly (LaneNotes).
const NOTES: usize = 8;

/// A lane's notes of jobs made ready, as a claim asks about them: the least
/// key noted after a generation. A staircase: keys rise with generations,
/// as a note hides every older one with a key as high (a claim that read
/// before those read before it too). Jobs enqueued now sort after the
/// jobs a claim takes, so the stairs climb; past NOTES the oldest is
/// dropped into `lost`, which bounds every claim that read before it.
#[derive(Clone, Copy)]
struct LaneNotes {
    count: u8,
    stairs: [(u64, Key); NOTES],
    /// The newest generation dropped, and the least key dropped.
    lost: (u64, Key),
}

const NO_NOTES: LaneNotes = LaneNotes { count: 0, stairs: [(0, START); NOTES], lost: (0, (i64::MAX, [u8::MAX; 16])) };

impl LaneNotes {
    fn note(&mut self, generation: u64, key: Key) {
        let mut count = self.count as usize;
        while count > 0 && self.stairs[count - 1].1 >= key {
            count -= 1;
        }
        if count == NOTES {
            let (dropped, at) = self.stairs[0];
            self.lost = (self.lost.0.max(dropped), self.lost.1.min(at));
            self.stairs.copy_within(1..NOTES, 0);
            count -= 1;
        }
        self.stairs[count] = (generation, key);
        self.count = (count + 1) as u8;
    }

    /// The least key noted after `generation` (or lower), if any.
    fn since(&self, generation: u64) -> Option<Key> {
        let exact = self.stairs[..self.count as usize].iter().find(|(g, _)| *g > generation).map(|(_, k)| *k);
        let lost = (generation < self.lost.0).then_some(self.lost.1);
        match (exact, lost) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}

/// A job's place in a lane: scheduled_at, then id (uuid bytes, which sort
/// as PostgreSQL sorts uuids).
pub type Key = (i64, [u8; 16]);
/// Before every job.
pub const START: Key = (i64::MIN, [0; 16]);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Lane {
    pub priority: i32,
    pub cursor: Key,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[repr(u8)]
enum State {
    /// A claim is finding the lanes; until it has, claims go without.
    Filling,
    /// Claims use the lanes.
    Known,
    /// More priorities than the shape's lanes: claims go without, until the
    /// next rewind finds the lanes again.
    TooMany,
}

/// The sizes of the cursors' shared memory, from the settings at server
/// start (`raquel.cursor_queues`, `raquel.cursor_priorities`,
/// `raquel.cursor_name_bytes`: src/settings.rs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Shape {
    /// Places (queues) in one part.
    per_part: usize,
    /// Priorities with cursors in one queue.
    lanes: usize,
    /// The longest queue name kept, in bytes (longer names have no cursors).
    name: usize,
}

impl Shape {
    fn from_settings() -> Shape {
        Shape {
            per_part: crate::settings::cursor_queues().div_ceil(PARTITIONS),
            lanes: crate::settings::cursor_priorities(),
            name: crate::settings::cursor_name_bytes(),
        }
    }

    /// A place's bytes: its head, its lanes, their notes, its name (each a
    /// multiple of 8 bytes, so every part of every place stays aligned).
    fn place_bytes(&self) -> usize {
        size_of::<Head>() + self.lanes * (size_of::<Lane>() + size_of::<LaneNotes>()) + self.name.next_multiple_of(8)
    }

    fn part_bytes(&self) -> usize {
        size_of::<PartHead>() + self.per_part * self.place_bytes()
    }

    fn places(&self) -> usize {
        self.per_part * PARTITIONS
    }
}

/// A place's fixed part; its lanes, their notes and its name follow it.
#[derive(Clone, Copy)]
#[repr(C)]
struct Head {
    /// InvalidOid: a free place.
    database: pg_sys::Oid,
    /// The jobs table (a new table after DROP and CREATE EXTENSION).
    table: pg_sys::Oid,
    name_len: u32,
    state: State,
    /// Lanes in use.
    count: u32,
    /// Which creation of the place: a claim that read it acts on it only
    /// while it is the same.
    epoch: u64,
    /// Bumped by every note of a job made ready, rewind and change of state.
    generation: u64,
    /// The generation of the last rewind or change of state: a claim that
    /// read before it moves nothing.
    barrier: u64,
    rewound_ms: i64,
    used: u64,
}

const FREE: Head = Head {
    database: pg_sys::InvalidOid,
    table: pg_sys::InvalidOid,
    name_len: 0,
    state: State::Filling,
    count: 0,
    epoch: 0,
    generation: 0,
    barrier: 0,
    rewound_ms: 0,
    used: 0,
};

/// One queue's place, borrowed from its part.
struct Entry<'a> {
    head: &'a mut Head,
    /// Highest priority first; the first `head.count` are in use.
    lanes: &'a mut [Lane],
    /// Each lane's notes, in the order of `lanes`.
    notes: &'a mut [LaneNotes],
    name: &'a mut [u8],
}

impl Entry<'_> {
    fn lanes(&self) -> &[Lane] {
        &self.lanes[..self.head.count as usize]
    }

    /// A free place again.
    fn clear(&mut self) {
        *self.head = FREE;
        self.lanes.fill(Lane { priority: 0, cursor: START });
        self.notes.fill(NO_NOTES);
    }

    /// Adds lane `priority` (its cursor at `cursor`) or moves its cursor
    /// back to `cursor`; the lane's place, or None when the lanes are full.
    fn lower(&mut self, priority: i32, cursor: Key) -> Option<usize> {
        let count = self.head.count as usize;
        match self.lanes[..count].iter().position(|l| l.priority <= priority) {
            Some(i) if self.lanes[i].priority == priority => {
                self.lanes[i].cursor = self.lanes[i].cursor.min(cursor);
                Some(i)
            }
            _ if count == self.lanes.len() => None,
            at => {
                let i = at.unwrap_or(count);
                self.lanes.copy_within(i..count, i + 1);
                self.notes.copy_within(i..count, i + 1);
                self.lanes[i] = Lane { priority, cursor };
                self.notes[i] = NO_NOTES;
                self.head.count += 1;
                Some(i)
            }
        }
    }
}

/// A part's own fields, before its places.
#[repr(C)]
struct PartHead {
    /// Which part this is (in the places it hands out).
    partition: usize,
    next_epoch: u64,
    clock: u64,
}

/// One part of the cursors, the queues whose hash falls in it: a view of
/// `shape.part_bytes()` bytes (in shared memory, under the part's lock; in
/// the unit tests, a buffer of their own).
struct Part {
    shape: Shape,
    bytes: *mut u8,
}

impl Part {
    /// Lays out a free part in `bytes` (8-aligned, `shape.part_bytes()` long).
    ///
    /// # Safety
    /// `bytes` is valid, aligned and not used otherwise while the result is.
    unsafe fn format(shape: Shape, bytes: *mut u8, partition: usize) -> Part {
        // SAFETY: plain data, for which zeros are a value; then the head is
        // the first bytes of the part.
        unsafe {
            bytes.write_bytes(0, shape.part_bytes());
            bytes.cast::<PartHead>().write(PartHead { partition, next_epoch: 1, clock: 0 });
        }
        let mut part = Part { shape, bytes };
        for i in 0..shape.per_part {
            part.entry(i).clear();
        }
        part
    }

    fn head(&mut self) -> &mut PartHead {
        // SAFETY: format() wrote it; `self` is borrowed mutably.
        unsafe { &mut *self.bytes.cast::<PartHead>() }
    }

    fn place(&self, i: usize) -> *mut u8 {
        assert!(i < self.shape.per_part, "place {i} of {}", self.shape.per_part);
        // SAFETY: inside the part's bytes (checked above).
        unsafe { self.bytes.add(size_of::<PartHead>() + i * self.shape.place_bytes()) }
    }

    fn entry(&mut self, i: usize) -> Entry<'_> {
        let lanes = self.shape.lanes;
        let at = self.place(i);
        // SAFETY: the place's head, lanes, notes and name lie one after
        // another inside its bytes, each aligned (Shape::place_bytes), and
        // `self` is borrowed mutably for as long as the entry lives.
        unsafe {
            let head = at.cast::<Head>();
            let lane_at = at.add(size_of::<Head>()).cast::<Lane>();
            let notes_at = lane_at.add(lanes).cast::<LaneNotes>();
            let name_at = notes_at.add(lanes).cast::<u8>();
            Entry {
                head: &mut *head,
                lanes: std::slice::from_raw_parts_mut(lane_at, lanes),
                notes: std::slice::from_raw_parts_mut(notes_at, lanes),
                name: std::slice::from_raw_parts_mut(name_at, self.shape.name),
            }
        }
    }

    fn is(&mut self, i: usize, database: pg_sys::Oid, table: pg_sys::Oid, queue: &[u8]) -> bool {
        let e = self.entry(i);
        e.head.database == database && e.head.table == table && &e.name[..e.head.name_len as usize] == queue
    }
}

/// The cursors' shared memory: PARTITIONS parts of a shape the settings
/// give at preload, and a lock for each (src/shmem.rs).
static SHAPE: std::sync::OnceLock<Shape> = std::sync::OnceLock::new();
static REGION: shmem::Region = shmem::Region::new(
    c"raquel claim cursors",
    c"raquel_cursors",
    PARTITIONS,
    || SHAPE.get().expect("init() set the shape").part_bytes() * PARTITIONS,
    |base| {
        let shape = *SHAPE.get().expect("init() set the shape");
        for partition in 0..PARTITIONS {
            // SAFETY: the region is PARTITIONS parts of shape.part_bytes(), fresh.
            unsafe { Part::format(shape, base.add(partition * shape.part_bytes()), partition) };
        }
    },
);

/// A part, its lock held exclusively until the guard goes.
struct Locked {
    part: Part,
    _lock: shmem::Guard,
}

impl std::ops::Deref for Locked {
    type Target = Part;
    fn deref(&self) -> &Part {
        &self.part
    }
}

impl std::ops::DerefMut for Locked {
    fn deref_mut(&mut self) -> &mut Part {
        &mut self.part
    }
}

/// Part `partition`, locked. Only with the library preloaded.
fn part(partition: usize) -> Locked {
    let shape = *SHAPE.get().expect("the cursors' shared memory is set up at preload");
    let (base, lock) = REGION.lock(partition).expect("the cursors' shared memory is attached");
    // SAFETY: the region holds PARTITIONS parts of shape.part_bytes(), laid
    // out when the server made it; the lock is the part's.
    Locked { part: Part { shape, bytes: unsafe { base.add(partition * shape.part_bytes()) } }, _lock: lock }
}

/// What went without cursors since the server started (rq_cursor_counts).
#[derive(Default)]
struct Counts {
    /// One-queue claims that used a queue's lanes.
    with_cursors: AtomicU64,
    /// One-queue claims that walked from the start: the lanes being found
    /// by another claim, too many priorities, a name too long.
    without_cursors: AtomicU64,
    /// Of those: a queue name longer than raquel.cursor_name_bytes.
    long_names: AtomicU64,
    /// Queues found with more priorities than raquel.cursor_priorities.
    too_many_priorities: AtomicU64,
    /// Places given to another queue while theirs was in use.
    places_given_up: AtomicU64,
}

// SAFETY: atomics only.
unsafe impl PGRXSharedMemory for Counts {}

// SAFETY: the name is unique to this value, and init() sets it up.
static COUNTS: PgAtomic<Counts> = unsafe { PgAtomic::new(c"raquel_cursor_counts") };

/// Called from `_PG_init` while the server preloads the library.
pub fn init() {
    let _ = SHAPE.set(Shape::from_settings());
    shmem::register(&REGION);
    pg_shmem_init!(COUNTS);
}

fn count(which: impl FnOnce(&Counts) -> &AtomicU64) {
    if crate::preloaded() {
        which(COUNTS.get()).fetch_add(1, Ordering::Relaxed);
    }
}

/// What the claim cursors did since the server started, for an operator
/// who wonders whether the limits (a name's bytes, a queue's priorities,
/// the places) are too small: one-queue claims that used a queue's cursors
/// and those that walked from the start, and of the causes, claims of a
/// name too long, queues found with too many priorities, and places given
/// to another queue. Zeros without the preloaded library.
#[pg_extern(volatile, parallel_safe, schema = "raquel_internal")]
#[search_path(pg_catalog, pg_temp)]
fn rq_cursor_counts() -> TableIterator<
    'static,
    (
        name!(claims_with_cursors, i64),
        name!(claims_without_cursors, i64),
        name!(long_names, i64),
        name!(too_many_priorities, i64),
        name!(places_given_up, i64),
        name!(places, i32),
        name!(max_name_bytes, i32),
        name!(max_priorities, i32),
    ),
> {
    let read = |which: fn(&Counts) -> &AtomicU64| {
        if crate::preloaded() { i64::try_from(which(COUNTS.get()).load(Ordering::Relaxed)).unwrap_or(i64::MAX) } else { 0 }
    };
    // (the settings themselves, without the preloaded library)
    let shape = SHAPE.get().copied().unwrap_or_else(Shape::from_settings);
    TableIterator::once((
        read(|c| &c.with_cursors),
        read(|c| &c.without_cursors),
        read(|c| &c.long_names),
        read(|c| &c.too_many_priorities),
        read(|c| &c.places_given_up),
        shape.places() as i32,
        shape.name as i32,
        shape.lanes as i32,
    ))
}

/// How the claim cursors keep queue `queue` of the jobs table `jobs` in this
/// database, for rq_stats' `cursors` column: 'in use' (its one-queue claims
/// start at its cursors), 'finding its priorities' (a claim is finding its
/// lanes), 'too many priorities' (more than raquel.cursor_priorities: its
/// claims walk from the start until the next rewind finds fewer), 'name too
/// long' (longer than raquel.cursor_name_bytes: never), 'none' (no one-queue
/// claim since the server started or since its place went to another queue:
/// raquel.cursor_queues), 'not preloaded' (the library is not in
/// shared_preload_libraries: no cursors at all).
#[pg_extern(volatile, parallel_safe, schema = "raquel_internal")]
#[search_path(pg_catalog, pg_temp)]
fn rq_cursor_state(jobs: pg_sys::Oid, queue: &str) -> &'static str {
    if !crate::preloaded() {
        return "not preloaded";
    }
    let shape = *SHAPE.get().expect("the cursors' shared memory is set up at preload");
    if queue.len() > shape.name {
        return "name too long";
    }
    // SAFETY: MyDatabaseId is this backend's, set once it connected.
    let database = unsafe { pg_sys::MyDatabaseId };
    let mut part = part(partition_of(database, jobs, queue));
    match part.find(database, jobs, queue.as_bytes()).map(|i| part.entry(i).head.state) {
        Some(State::Known) => "in use",
        Some(State::Filling) => "finding its priorities",
        Some(State::TooMany) => "too many priorities",
        None => "none",
    }
}

/// The part of queue `queue` of table `table` in database `database`.
fn partition_of(database: pg_sys::Oid, table: pg_sys::Oid, queue: &str) -> usize {
    // the same in every backend: DefaultHasher::new() has fixed keys
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    (database.to_u32(), table.to_u32(), queue).hash(&mut hasher);
    (hasher.finish() % PARTITIONS as u64) as usize
}

/// What a claim of one queue found.
#[derive(Debug, PartialEq, Eq)]
pub enum Found {
    /// Claim from these lanes; move them forward with `advance`.
    Lanes(Lanes),
    /// The lanes are not known yet: find them (`discovered`); the place is
    /// this claim's to fill.
    Unknown(Place),
    /// No cursors for this claim (no place, a name too long, lanes being
    /// found by another claim).
    None,
}

/// A queue's place, as a claim read it.
#[derive(Debug, PartialEq, Eq, Clone, Copy)]
pub struct Place {
    partition: usize,
    index: usize,
    epoch: u64,
}

#[derive(Debug, PartialEq, Eq)]
pub struct Lanes {
    place: Place,
    generation: u64,
    pub lanes: Vec<Lane>,
}

impl Part {
    fn find(&mut self, database: pg_sys::Oid, table: pg_sys::Oid, queue: &[u8]) -> Option<usize> {
        (0..self.shape.per_part).find(|&i| self.is(i, database, table, queue))
    }

    fn lookup(&mut self, database: pg_sys::Oid, table: pg_sys::Oid, queue: &str, now_ms: i64) -> Found {
        let name = queue.as_bytes();
        if name.len() > self.shape.name {
            count(|c| &c.long_names);
            return Found::None;
        }
        let partition = self.head().partition;
        self.head().clock += 1;
        let clock = self.head().clock;
        if let Some(i) = self.find(database, table, name) {
            let mut entry = self.entry(i);
            entry.head.used = clock;
            let rewind = now_ms.saturating_sub(entry.head.rewound_ms) >= REWIND_MS;
            match entry.head.state {
                State::Filling => return Found::None,
                State::TooMany if !rewind => return Found::None,
                // the lanes are found again (there may be fewer now)
                State::TooMany => entry.clear(),
                State::Known => {
                    if rewind {
                        entry.head.rewound_ms = now_ms;
                        entry.head.generation += 1;
                        entry.head.barrier = entry.head.generation;
                        entry.lanes.iter_mut().for_each(|l| l.cursor = START);
                        entry.notes.fill(NO_NOTES);
                    }
                    let place = Place { partition, index: i, epoch: entry.head.epoch };
                    return Found::Lanes(Lanes { place, generation: entry.head.generation, lanes: entry.lanes().to_vec() });
                }
            }
        }
        // a free place, or the one used least recently
        let free = (0..self.shape.per_part).find(|&i| self.entry(i).head.database == pg_sys::InvalidOid);
        let i = free.unwrap_or_else(|| {
            count(|c| &c.places_given_up);
            (0..self.shape.per_part).min_by_key(|&i| self.entry(i).head.used).expect("a part has places")
        });
        let epoch = self.head().next_epoch;
        self.head().next_epoch += 1;
        let mut entry = self.entry(i);
        entry.clear();
        entry.head.database = database;
        entry.head.table = table;
        entry.name[..name.len()].copy_from_slice(name);
        entry.head.name_len = name.len() as u32;
        entry.head.epoch = epoch;
        entry.head.rewound_ms = now_ms;
        entry.head.used = clock;
        Found::Unknown(Place { partition, index: i, epoch })
    }

    /// The place a claim read, if it is still that creation of it.
    fn entry_read(&mut self, place: Place) -> Option<Entry<'_>> {
        (place.index < self.shape.per_part).then(|| self.entry(place.index)).filter(|e| e.head.epoch == place.epoch)
    }

    fn discovered(&mut self, place: Place, priorities: &[i32]) -> Option<Lanes> {
        let mut entry = self.entry_read(place)?;
        if entry.head.state != State::Filling {
            return None;
        }
        // lanes that commits added meanwhile stay, with their cursors
        if !priorities.iter().all(|&p| entry.lower(p, START).is_some()) {
            count(|c| &c.too_many_priorities);
            entry.head.state = State::TooMany;
            return None;
        }
        entry.head.state = State::Known;
        Some(Lanes { place, generation: entry.head.generation, lanes: entry.lanes().to_vec() })
    }

    fn advance(&mut self, read: &Lanes, claimed: &[(i32, Key)]) {
        let Some(entry) = self.entry_read(read.place) else { return };
        if entry.head.barrier > read.generation {
            return;
        }
        let count = entry.head.count as usize;
        for &(priority, key) in claimed {
            if let Some(i) = entry.lanes[..count].iter().position(|l| l.priority == priority) {
                // not past a job noted ready in this lane since the claim read
                let to = entry.notes[i].since(read.generation).map_or(key, |behind| behind.min(key));
                entry.lanes[i].cursor = entry.lanes[i].cursor.max(to);
            }
        }
    }

    /// A job of `queue` is ready at `key` in lane `priority` (None: a lane
    /// not named, which forgets the queue's lanes).
    fn lower(&mut self, database: pg_sys::Oid, table: pg_sys::Oid, queue: &str, priority: Option<i32>, key: Key) {
        let Some(i) = self.find(database, table, queue.as_bytes()) else { return };
        let mut entry = self.entry(i);
        entry.head.generation += 1;
        let generation = entry.head.generation;
        match priority.map(|priority| entry.lower(priority, key)) {
            Some(Some(lane)) => entry.notes[lane].note(generation, key),
            Some(None) => {
                // a queue counts once, when it is found with too many
                if entry.head.state != State::TooMany {
                    count(|c| &c.too_many_priorities);
                }
                entry.head.state = State::TooMany;
                entry.head.barrier = generation;
            }
            None => entry.clear(),
        }
    }

    fn forget(&mut self, place: Place) {
        if let Some(mut entry) = self.entry_read(place).filter(|e| e.head.state == State::Filling) {
            entry.clear();
        }
    }
}

/// The cursors of a one-queue claim of `queue` in the jobs table `table`.
pub fn lookup(table: pg_sys::Oid, queue: &str, now_ms: i64) -> Found {
    if !crate::preloaded() {
        return Found::None;
    }
    // SAFETY: MyDatabaseId is this backend's, set once it connected.
    let database = unsafe { pg_sys::MyDatabaseId };
    let found = part(partition_of(database, table, queue)).lookup(database, table, queue, now_ms);
    match found {
        Found::Lanes(_) => count(|c| &c.with_cursors),
        // (a claim that finds the lanes walks from the start too)
        Found::None | Found::Unknown(_) => count(|c| &c.without_cursors),
    }
    if let Found::Unknown(place) = found {
        // a claim that fails before it fills the place gives it up
        FILLING.with_borrow_mut(|f| f.push(place));
        on_transaction_end();
    }
    found
}

/// The lanes the claim that got `place` found: the priorities its queue's
/// ready jobs have. None when the place was taken meanwhile, or there are
/// too many priorities.
pub fn discovered(place: Place, priorities: &[i32]) -> Option<Lanes> {
    FILLING.with_borrow_mut(|f| f.retain(|p| *p != place));
    part(place.partition).discovered(place, priorities)
}

/// Moves the lanes forward to the last job the claim took in each.
pub fn advance(read: &Lanes, claimed: &[(i32, Key)]) {
    if !claimed.is_empty() {
        part(read.place.partition).advance(read, claimed);
    }
}

/// What moves cursors back: by queue, each (table, priority) with the
/// earliest key.
type Pending = HashMap<String, Vec<(pg_sys::Oid, Option<i32>, Key)>>;

thread_local! {
    /// Jobs this transaction made ready: cursors move back at commit.
    static AT_COMMIT: RefCell<Pending> = RefCell::new(HashMap::new());
    /// Jobs this transaction locked (claimed or took): ready again if it
    /// rolls back.
    static AT_ABORT: RefCell<Pending> = RefCell::new(HashMap::new());
    /// Places this transaction's claims are filling.
    static FILLING: RefCell<Vec<Place>> = const { RefCell::new(Vec::new()) };
    /// The queues this transaction made jobs ready in: its own claims walk
    /// them whole, as the cursors move back for those jobs only at commit.
    static READY_HERE: RefCell<Vec<(pg_sys::Oid, String)>> = const { RefCell::new(Vec::new()) };
    static CALLBACKS: Cell<bool> = const { Cell::new(false) };
}

fn pend(pending: &RefCell<Pending>, table: pg_sys::Oid, queue: &str, priority: Option<i32>, key: Key) {
    let mut pending = pending.borrow_mut();
    let lanes = match pending.get_mut(queue) {
        Some(lanes) => lanes,
        None => pending.entry(queue.to_owned()).or_default(),
    };
    match lanes.iter_mut().find(|(t, p, _)| *t == table && *p == priority) {
        Some((_, _, earliest)) => *earliest = (*earliest).min(key),
        None => lanes.push((table, priority, key)),
    }
}

/// A job of `queue` in `table` became ready (inserted or ready again) at
/// `key`, in lane `priority` (None when the caller cannot say): cursors move
/// back to it when this transaction commits.
pub fn note_ready(table: pg_sys::Oid, queue: &str, priority: Option<i32>, key: Key) {
    if !crate::preloaded() {
        return;
    }
    AT_COMMIT.with(|p| pend(p, table, queue, priority, key));
    READY_HERE.with_borrow_mut(|here| {
        if !here.iter().any(|(t, q)| *t == table && q == queue) {
            here.push((table, queue.to_owned()));
        }
    });
    on_transaction_end();
}

/// Whether this transaction made jobs of `queue` in `table` ready: the
/// shared cursors may be past them (other claims do not see them yet), so
/// this transaction's claims there walk without cursors until it ends.
pub fn ready_here(table: pg_sys::Oid, queue: &str) -> bool {
    READY_HERE.with_borrow(|here| here.iter().any(|(t, q)| *t == table && q == queue))
}

/// This transaction locked a ready job (a claim or a take): if it rolls
/// back, the job is ready at `key` again. `at_commit`: a take, whose job is
/// ready still after a commit that did not finish it.
pub fn note_locked(table: pg_sys::Oid, queue: &str, priority: i32, key: Key, at_commit: bool) {
    if !crate::preloaded() {
        return;
    }
    AT_ABORT.with(|p| pend(p, table, queue, Some(priority), key));
    if at_commit {
        AT_COMMIT.with(|p| pend(p, table, queue, Some(priority), key));
    }
    on_transaction_end();
}

fn on_transaction_end() {
    if CALLBACKS.replace(true) {
        return;
    }
    // Both run after the transaction's end is visible to everyone, where
    // nothing may fail: they only write shared memory.
    pgrx::register_xact_callback(PgXactCallbackEvent::Commit, || {
        apply(&AT_COMMIT);
        forget_filling();
        end();
    });
    pgrx::register_xact_callback(PgXactCallbackEvent::Abort, || {
        apply(&AT_ABORT);
        forget_filling();
        end();
    });
    pgrx::register_subxact_callback(PgSubXactCallbackEvent::AbortSub, |_, _| {
        // the locks taken since the savepoint are gone: their jobs are ready
        // again now (moving cursors back early only costs a longer walk)
        apply_keeping(&AT_ABORT);
    });
}

/// Places a claim of this transaction took but did not fill go free.
fn forget_filling() {
    let filling = FILLING.with_borrow_mut(std::mem::take);
    for place in filling {
        part(place.partition).forget(place);
    }
}

fn end() {
    AT_COMMIT.with_borrow_mut(HashMap::clear);
    AT_ABORT.with_borrow_mut(HashMap::clear);
    FILLING.with_borrow_mut(Vec::clear);
    READY_HERE.with_borrow_mut(Vec::clear);
    CALLBACKS.set(false);
}

/// Moves the cursors back for the jobs this transaction made ready, now:
/// the commit's wake-up (src/waiters.rs) calls it before it wakes a waiting
/// claim, which would otherwise look at lanes that do not have the job yet
/// (the order of the two commit callbacks is the order they were first
/// registered in the transaction) and sleep again with the job ready.
/// The cursors' own commit callback then finds nothing left to apply.
pub fn apply_commit_notes() {
    apply(&AT_COMMIT);
}

fn apply(pending: &'static std::thread::LocalKey<RefCell<Pending>>) {
    apply_keeping(pending);
    pending.with_borrow_mut(HashMap::clear);
}

fn apply_keeping(pending: &'static std::thread::LocalKey<RefCell<Pending>>) {
    pending.with_borrow(|pending| {
        if pending.is_empty() {
            return;
        }
        // SAFETY: MyDatabaseId is this backend's, set once it connected.
        let database = unsafe { pg_sys::MyDatabaseId };
        for (queue, lanes) in pending {
            for &(table, priority, key) in lanes {
                part(partition_of(database, table, queue)).lower(database, table, queue, priority, key);
            }
        }
    });
}

/// A uuid's bytes, as a Key's.
pub fn id_bytes(id: &pgrx::Uuid) -> [u8; 16] {
    let mut bytes = [0; 16];
    bytes.copy_from_slice(id.as_bytes());
    bytes
}

#[cfg(test)]
mod tests {
    use super::*;

    const DB: pg_sys::Oid = pg_sys::Oid::from_u32(5);
    const TABLE: pg_sys::Oid = pg_sys::Oid::from_u32(16384);

    const LANES: usize = 8;
    const NAME: usize = 64;
    const PER_PARTITION: usize = 32;

    /// A part of the default shape in a buffer of its own (kept alive by
    /// the first of the pair).
    fn part_of_tests() -> (Vec<u64>, Part) {
        let shape = Shape { per_part: PER_PARTITION, lanes: LANES, name: NAME };
        let mut backing = vec![0u64; shape.part_bytes() / 8];
        // SAFETY: the buffer is 8-aligned, part_bytes() long, and lives as
        // long as the part (the pair).
        let part = unsafe { Part::format(shape, backing.as_mut_ptr().cast(), 0) };
        (backing, part)
    }

    #[test]
    fn a_small_shape_and_a_large_one_keep_their_limits() {
        for shape in [Shape { per_part: 2, lanes: 1, name: 3 }, Shape { per_part: 100, lanes: 40, name: 300 }] {
            let mut backing = vec![0u64; shape.part_bytes() / 8];
            // SAFETY: as in part_of_tests
            let mut c = unsafe { Part::format(shape, backing.as_mut_ptr().cast(), 0) };
            let name = "n".repeat(shape.name);
            let Found::Unknown(place) = c.lookup(DB, TABLE, &name, 0) else { panic!("a name of the longest length kept") };
            let priorities: Vec<i32> = (0..shape.lanes as i32).collect();
            assert_eq!(c.discovered(place, &priorities).expect("as many priorities as lanes").lanes.len(), shape.lanes);
            c.lower(DB, TABLE, &name, Some(-1), key(1, 1));
            assert_eq!(c.lookup(DB, TABLE, &name, 1), Found::None, "one priority more: no cursors");
            assert_eq!(c.lookup(DB, TABLE, &format!("{name}n"), 1), Found::None, "a name one byte longer: none");
            for n in 0..shape.per_part + 1 {
                assert!(matches!(c.lookup(DB, TABLE, &format!("{n}"), 1), Found::Unknown(_)), "every place, then the least used");
            }
        }
    }

    fn key(due: i64, id: u8) -> Key {
        (due, [id; 16])
    }

    fn known(c: &mut Part, queue: &str, priorities: &[i32]) -> Lanes {
        let Found::Unknown(place) = c.lookup(DB, TABLE, queue, 0) else { panic!("a new queue is unknown") };
        c.discovered(place, priorities).expect("filled")
    }

    fn lanes(c: &mut Part, queue: &str) -> Lanes {
        match c.lookup(DB, TABLE, queue, 1) {
            Found::Lanes(lanes) => lanes,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_claim_moves_its_lane_forward_and_a_ready_job_moves_it_back() {
        let (_backing, mut c) = part_of_tests();
        let read = known(&mut c, "q", &[0]);
        assert_eq!(read.lanes, vec![Lane { priority: 0, cursor: START }]);
        c.advance(&read, &[(0, key(100, 1))]);
        assert_eq!(lanes(&mut c, "q").lanes[0].cursor, key(100, 1));
        c.lower(DB, TABLE, "q", Some(0), key(50, 9));
        assert_eq!(lanes(&mut c, "q").lanes[0].cursor, key(50, 9));
        c.lower(DB, TABLE, "q", Some(0), key(70, 9));
        assert_eq!(lanes(&mut c, "q").lanes[0].cursor, key(50, 9), "only back, never forward");
    }

    #[test]
    fn a_claim_that_read_before_a_move_back_does_not_move_forward() {
        let (_backing, mut c) = part_of_tests();
        known(&mut c, "q", &[0]);
        let read = lanes(&mut c, "q");
        // a job became ready behind the cursor after the claim read it
        c.lower(DB, TABLE, "q", Some(0), key(10, 1));
        c.advance(&read, &[(0, key(100, 1))]);
        assert_eq!(lanes(&mut c, "q").lanes[0].cursor, key(10, 1), "not past the job made ready");
    }

    #[test]
    fn jobs_made_ready_past_a_claim_do_not_hold_its_lane_back() {
        let (_backing, mut c) = part_of_tests();
        known(&mut c, "q", &[0, 5]);
        let read = lanes(&mut c, "q");
        // enqueues while the claim ran: after its last job, or in another lane
        c.lower(DB, TABLE, "q", Some(0), key(200, 1));
        c.lower(DB, TABLE, "q", Some(5), key(1, 1));
        c.advance(&read, &[(0, key(100, 1))]);
        let now = lanes(&mut c, "q");
        assert_eq!(now.lanes[1].cursor, key(100, 1), "lane 0 moved to the claim's last job");
        assert_eq!(now.lanes[0].cursor, START, "lane 5 untouched");
    }

    #[test]
    fn a_claim_moves_forward_past_any_number_of_jobs_enqueued_after_it() {
        let (_backing, mut c) = part_of_tests();
        known(&mut c, "q", &[0]);
        let read = lanes(&mut c, "q");
        for i in 0..1000 {
            c.lower(DB, TABLE, "q", Some(0), key(1000 + i, 1));
        }
        c.advance(&read, &[(0, key(100, 1))]);
        assert_eq!(lanes(&mut c, "q").lanes[0].cursor, key(100, 1));
    }

    #[test]
    fn a_note_dropped_from_the_stairs_still_bounds_the_claims_that_read_before_it() {
        let (_backing, mut c) = part_of_tests();
        known(&mut c, "q", &[0]);
        let read = lanes(&mut c, "q");
        // one job ready behind the claim, then many after it
        c.lower(DB, TABLE, "q", Some(0), key(50, 1));
        for i in 0..(NOTES as i64 * 3) {
            c.lower(DB, TABLE, "q", Some(0), key(1000 + i, 1));
        }
        let later = lanes(&mut c, "q");
        c.advance(&read, &[(0, key(100, 1))]);
        assert_eq!(lanes(&mut c, "q").lanes[0].cursor, key(50, 1), "not past the job at 50");
        // a claim that read after all of them is not held back by them
        c.advance(&later, &[(0, key(2000, 1))]);
        assert_eq!(lanes(&mut c, "q").lanes[0].cursor, key(2000, 1));
    }

    #[test]
    fn the_stairs_answer_the_least_key_noted_after_each_generation() {
        let mut notes = NO_NOTES;
        for (g, k) in [(1, 30), (2, 10), (3, 20), (4, 40), (5, 35)] {
            notes.note(g, key(k, 0));
        }
        let truth = |after: u64| [(1, 30), (2, 10), (3, 20), (4, 40), (5, 35)].iter().filter(|(g, _)| *g > after).map(|(_, k)| key(*k, 0)).min();
        for after in 0..=5 {
            assert_eq!(notes.since(after), truth(after), "after generation {after}");
        }
    }

    #[test]
    fn a_claim_that_read_before_a_rewind_moves_nothing() {
        let (_backing, mut c) = part_of_tests();
        known(&mut c, "q", &[0]);
        let read = lanes(&mut c, "q");
        let Found::Lanes(_) = c.lookup(DB, TABLE, "q", REWIND_MS + 1) else { panic!("known") };
        c.advance(&read, &[(0, key(100, 1))]);
        assert_eq!(lanes(&mut c, "q").lanes[0].cursor, START);
    }

    #[test]
    fn lanes_stay_in_priority_order_and_a_full_queue_loses_its_cursors() {
        let (_backing, mut c) = part_of_tests();
        known(&mut c, "q", &[5, -1]);
        c.lower(DB, TABLE, "q", Some(2), key(1, 1));
        let priorities: Vec<i32> = lanes(&mut c, "q").lanes.iter().map(|l| l.priority).collect();
        assert_eq!(priorities, vec![5, 2, -1]);
        for p in 10..15 {
            c.lower(DB, TABLE, "q", Some(p), key(1, 1));
        }
        assert_eq!(lanes(&mut c, "q").lanes.len(), LANES);
        c.lower(DB, TABLE, "q", Some(100), key(1, 1));
        assert_eq!(c.lookup(DB, TABLE, "q", 1), Found::None, "a ninth priority: no cursors");
        assert!(matches!(c.lookup(DB, TABLE, "q", REWIND_MS), Found::Unknown(_)), "until the lanes are found again");
    }

    #[test]
    fn too_many_priorities_found_leave_the_queue_without_cursors() {
        let (_backing, mut c) = part_of_tests();
        let Found::Unknown(place) = c.lookup(DB, TABLE, "q", 0) else { panic!() };
        assert_eq!(c.discovered(place, &(0..LANES as i32 + 1).collect::<Vec<_>>()), None);
        assert_eq!(c.lookup(DB, TABLE, "q", 1), Found::None);
    }

    #[test]
    fn a_place_given_up_goes_free() {
        let (_backing, mut c) = part_of_tests();
        let Found::Unknown(place) = c.lookup(DB, TABLE, "q", 0) else { panic!() };
        c.forget(place);
        assert!(matches!(c.lookup(DB, TABLE, "q", 0), Found::Unknown(_)));
    }

    #[test]
    fn a_job_ready_in_a_lane_not_named_forgets_the_queue() {
        let (_backing, mut c) = part_of_tests();
        known(&mut c, "q", &[0]);
        c.lower(DB, TABLE, "q", None, key(1, 1));
        assert!(matches!(c.lookup(DB, TABLE, "q", 1), Found::Unknown(_)));
    }

    #[test]
    fn lanes_added_while_a_claim_finds_them_are_kept() {
        let (_backing, mut c) = part_of_tests();
        let Found::Unknown(place) = c.lookup(DB, TABLE, "q", 0) else { panic!() };
        assert_eq!(c.lookup(DB, TABLE, "q", 0), Found::None, "another claim goes without");
        c.lower(DB, TABLE, "q", Some(3), key(7, 7));
        let filled = c.discovered(place, &[0]).unwrap();
        assert_eq!(filled.lanes, vec![Lane { priority: 3, cursor: key(7, 7) }, Lane { priority: 0, cursor: START }]);
    }

    #[test]
    fn cursors_rewind_after_a_while() {
        let (_backing, mut c) = part_of_tests();
        let read = known(&mut c, "q", &[0]);
        c.advance(&read, &[(0, key(100, 1))]);
        let Found::Lanes(later) = c.lookup(DB, TABLE, "q", REWIND_MS) else { panic!() };
        assert_eq!(later.lanes[0].cursor, START);
    }

    #[test]
    fn queues_are_apart_by_database_table_and_name() {
        let (_backing, mut c) = part_of_tests();
        let read = known(&mut c, "q", &[0]);
        c.advance(&read, &[(0, key(100, 1))]);
        assert!(matches!(c.lookup(DB, TABLE, "q2", 1), Found::Unknown(_)));
        assert!(matches!(c.lookup(pg_sys::Oid::from_u32(6), TABLE, "q", 1), Found::Unknown(_)));
        assert!(matches!(c.lookup(DB, pg_sys::Oid::from_u32(1), "q", 1), Found::Unknown(_)));
        assert_eq!(c.lookup(DB, TABLE, &"x".repeat(NAME + 1), 1), Found::None);
    }

    #[test]
    fn a_full_table_gives_the_least_used_place() {
        let (_backing, mut c) = part_of_tests();
        for n in 0..PER_PARTITION {
            known(&mut c, &format!("q{n}"), &[0]);
        }
        lanes(&mut c, "q0"); // used again: not the least recent
        assert!(matches!(c.lookup(DB, TABLE, "new", 2), Found::Unknown(_)));
        assert!(matches!(c.lookup(DB, TABLE, "q0", 2), Found::Lanes(_)));
        assert!(matches!(c.lookup(DB, TABLE, "q1", 2), Found::Unknown(_)), "q1 gave its place");
    }
}
