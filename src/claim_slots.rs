//! The jobs claimed under each queue's `max_claimed`, in shared memory, so
//! that claims of a queue with a concurrency limit take their places side
//! by side instead of one after another under the queue's row lock, and
//! write no row for them (issue 35).
//!
//! A queue's slot lists what holds a place: each job claimed (its id and
//! attempt) with the transaction that claimed it, and the places a claim
//! under way has reserved (no job yet). A claim reserves up to what the
//! limit leaves, claims, then names the jobs it got and gives back the rest
//! (`reserve`, `took`), under one lock held for microseconds. A job ended
//! through raquel's verbs gives its place back when its transaction
//! commits (`job_ended`, from src/ended.rs); that only saves a look-up. A
//! place is known to be free when its job is no longer claimed with that
//! attempt, which a claim that finds the queue full looks up (one
//! statement, a probe per place), before it decides:
//!
//! - a place of a transaction still in progress (this one too) is held;
//! - otherwise, in REPEATABLE READ or SERIALIZABLE, a place of a
//!   transaction this snapshot does not see is held;
//! - otherwise it is held while its job is claimed with that attempt: a
//!   claim that rolled back, a job ended (by raquel's verbs, the Python
//!   library or a hand-written UPDATE), rescued, slept or deleted frees it.
//!
//! So the list can only hold too much, never too little: the limit is never
//! passed.
//!
//! A claim that finds its queue full and holds no place waits in the
//! queue's line (`WAITING` claims, first come first, each its latch): a
//! place given back (a job's end at commit, a claim's unused reservation,
//! room a look-up found) is handed to the first in line, reserved for its
//! transaction, and its latch set; a transaction that held places and ends
//! without giving one back wakes the first in line to look again. So one
//! claim wakes for each place, rather than every claim waiting on the
//! holder that ended. A claim waits in line up to deadlock_timeout, then
//! on a holder's transaction lock, which the deadlock detector sees (a
//! holder may be waiting for a row this claim's transaction locked).
//!
//! What the list misses is what was claimed outside raquel's verbs,
//! or before the server started (the list is empty then): the claimed jobs
//! of the queue are read again into the list when the slot is made and
//! every `REFRESH_MS` after (a statement, by the claim that finds it due).
//! A queue whose slot cannot be had (`max_claimed` above `PLACES`, a name
//! longer than `NAME_BYTES`, every slot in use, or a server without raquel
//! preloaded) keeps its claimed jobs in its `queue_limits` row, under the
//! row's lock, as before; such claims are counted
//! (`raquel_internal.rq_claim_slot_counts()`). Slots are never given back.

use crate::shmem;
use crate::statements::{self, Shape, Statement};
use pgrx::prelude::*;
use pgrx::{pg_shmem_init, PGRXSharedMemory, PgAtomic};
use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};

/// How many queues' slots the server keeps.
const SLOTS: usize = 256;
/// The most places a slot has: the highest max_claimed served here.
pub const PLACES: usize = 256;
/// The longest queue name with a slot, in bytes.
const NAME_BYTES: usize = 64;
/// How often a slot's list is read again from the table.
const REFRESH_MS: i64 = 1000;
/// How many claims a slot lines up while they wait for a place.
const WAITING: usize = 32;

/// One place held: a job claimed with `attempt` by the transaction `xid`,
/// or (id all zero) a place a claim under way reserved. A job read from the
/// table holds its place with FrozenTransactionId (committed).
#[repr(C)]
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
struct Place {
    id: [u8; 16],
    attempt: i32,
    xid: pg_sys::TransactionId,
}

const RESERVED: [u8; 16] = [0; 16];

#[repr(C)]
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum State {
    Unused = 0,
    /// Its list is being read from the table by the (sub)transaction
    /// `builder`.
    Building = 1,
    Ready = 2,
}

/// A claim waiting for a place of a full queue, holding none: its latch
/// (in shared memory, the same address in every backend) and transaction.
#[repr(C)]
#[derive(Clone, Copy)]
struct Waiting {
    latch: *mut pg_sys::Latch,
    xid: pg_sys::TransactionId,
}

#[repr(C)]
struct Slot {
    state: State,
    builder: pg_sys::TransactionId,
    database: pg_sys::Oid,
    table: pg_sys::Oid,
    name_len: u8,
    name: [u8; NAME_BYTES],
    /// When the list was last read from the table (ms).
    refreshed_at: i64,
    len: u32,
    places: [Place; PLACES],
    /// The claims waiting for a place, first come first.
    waiting_len: u32,
    waiting: [Waiting; WAITING],
}

impl Slot {
    fn is(&self, database: pg_sys::Oid, table: pg_sys::Oid, queue: &[u8]) -> bool {
        self.state != State::Unused
            && self.database == database
            && self.table == table
            && &self.name[..self.name_len as usize] == queue
    }

    fn held(&self) -> &[Place] {
        &self.places[..self.len as usize]
    }

    fn push(&mut self, place: Place) -> bool {
        if (self.len as usize) < PLACES {
            self.places[self.len as usize] = place;
            self.len += 1;
            true
        } else {
            false
        }
    }

    /// Lines up a claim of `xid` to wait; false when the line is full.
    fn line_up(&mut self, latch: *mut pg_sys::Latch, xid: pg_sys::TransactionId) -> bool {
        if self.waiting[..self.waiting_len as usize].iter().any(|w| w.xid == xid) {
            return true;
        }
        if self.waiting_len as usize == WAITING {
            return false;
        }
        self.waiting[self.waiting_len as usize] = Waiting { latch, xid };
        self.waiting_len += 1;
        true
    }

    /// Takes the claim of `xid` out of the line, if it is in it.
    fn leave_line(&mut self, xid: pg_sys::TransactionId) {
        let n = self.waiting_len as usize;
        if let Some(at) = self.waiting[..n].iter().position(|w| w.xid == xid) {
            self.waiting.copy_within(at + 1..n, at);
            self.waiting_len -= 1;
        }
    }

    /// The first claim in line, taken out of it.
    fn next_in_line(&mut self) -> Option<Waiting> {
        let n = self.waiting_len as usize;
        if n == 0 {
            return None;
        }
        let first = self.waiting[0];
        self.waiting.copy_within(1..n, 0);
        self.waiting_len -= 1;
        Some(first)
    }

    /// The places reserved for the transaction `xid` that no claim of its
    /// is naming: handed to it while it waited (`hand_on`).
    fn handed(&self, xid: pg_sys::TransactionId) -> usize {
        self.held().iter().filter(|p| p.xid == xid && p.id == RESERVED).count()
    }

    /// Drops `n` of the places reserved for `xid`.
    fn drop_reserved(&mut self, xid: pg_sys::TransactionId, mut n: usize) {
        let mut kept = 0;
        for i in 0..self.len as usize {
            let place = self.places[i];
            if n > 0 && place.xid == xid && place.id == RESERVED {
                n -= 1;
                continue;
            }
            self.places[kept] = place;
            kept += 1;
        }
        self.len = kept as u32;
    }

    /// Drops the places in `free` (found free by `free_places`).
    fn free(&mut self, free: &[Place]) {
        let mut kept = 0;
        for i in 0..self.len as usize {
            let place = self.places[i];
            if !free.contains(&place) {
                self.places[kept] = place;
                kept += 1;
            }
        }
        self.len = kept as u32;
    }

    /// Names the jobs a claim of the transaction `xid` got in places it
    /// reserved, and gives back the places it reserved and did not use
    /// (`reserved` of them).
    fn took(&mut self, xid: pg_sys::TransactionId, reserved: usize, jobs: &[([u8; 16], i32)]) {
        let mut left = reserved;
        let mut jobs = jobs.iter();
        let mut kept = 0;
        for i in 0..self.len as usize {
            let mut place = self.places[i];
            if left > 0 && place.xid == xid && place.id == RESERVED {
                left -= 1;
                match jobs.next() {
                    Some(&(id, attempt)) => (place.id, place.attempt) = (id, attempt),
                    None => continue,
                }
            }
            self.places[kept] = place;
            kept += 1;
        }
        self.len = kept as u32;
    }
}

/// The slots, all zero bytes at first: every slot unused (State::Unused
/// is 0), every list and line empty.
static REGION: shmem::Region =
    shmem::Region::new(c"raquel claim slots", c"raquel_claim_slots", 1, || std::mem::size_of::<Slot>() * SLOTS, |base| {
        // SAFETY: the region is SLOTS slots, fresh.
        unsafe { std::ptr::write_bytes(base, 0, std::mem::size_of::<Slot>() * SLOTS) }
    });

/// The slots, locked exclusively until the guard goes (no statement runs
/// under it).
struct Locked {
    slots: &'static mut [Slot],
    _lock: shmem::Guard,
}

fn lock_slots() -> Option<Locked> {
    let (base, lock) = REGION.lock(0)?;
    // SAFETY: the region holds SLOTS slots; the lock makes this backend the
    // only one using them while the guard lives.
    Some(Locked { slots: unsafe { std::slice::from_raw_parts_mut(base.cast::<Slot>(), SLOTS) }, _lock: lock })
}

/// The first of the probes of (database, table, queue) that holds its slot
/// or is unused.
fn slot_of(slots: &[Slot], database: pg_sys::Oid, table: pg_sys::Oid, queue: &[u8]) -> Option<usize> {
    // the same in every backend: DefaultHasher::new() has fixed keys
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    (database.to_u32(), table.to_u32(), queue).hash(&mut hasher);
    let start = (hasher.finish() % SLOTS as u64) as usize;
    (0..SLOTS).map(|step| (start + step) % SLOTS).find(|&i| slots[i].state == State::Unused || slots[i].is(database, table, queue))
}

/// How claims went, since the server started.
#[derive(Default)]
struct Counts {
    /// Claims that reserved places in a slot.
    shared: AtomicU64,
    /// Claims that counted their queue's claimed jobs in its row instead.
    from_rows: AtomicU64,
    /// Lists read from the table.
    refreshes: AtomicU64,
    /// Looks at whether the places of a full queue were free.
    checks: AtomicU64,
}

// SAFETY: atomics only.
unsafe impl PGRXSharedMemory for Counts {}

// SAFETY: the name is unique to this value, and init() sets it up.
static COUNTS: PgAtomic<Counts> = unsafe { PgAtomic::new(c"raquel_claim_slot_counts") };

/// Called from `_PG_init` while the server preloads the library.
pub fn init() {
    shmem::register(&REGION);
    pg_shmem_init!(COUNTS);
}

fn count(which: impl FnOnce(&Counts) -> &AtomicU64) {
    which(COUNTS.get()).fetch_add(1, Ordering::Relaxed);
}

/// Whether the caller's transaction reads with one snapshot throughout.
fn one_snapshot() -> bool {
    // SAFETY: a backend global; REPEATABLE READ is 2, SERIALIZABLE 3.
    unsafe { pg_sys::XactIsoLevel >= pg_sys::XACT_REPEATABLE_READ as i32 }
}

/// The claimed jobs of `queue` in the jobs table of `function`, as a
/// snapshot taken now sees them (in REPEATABLE READ too, whose own
/// snapshot would miss claims committed since it began). Connected to SPI.
fn claimed_in_table(function: pg_sys::Oid, queue: &str) -> Vec<Place> {
    let text = || {
        statements::fill(
            "SELECT j.id, j.attempts FROM @jobs@ j WHERE j.queue = $1 AND j.status = 'claimed'",
            &[("@jobs@", &statements::in_schema_of(function, "jobs"))],
        )
    };
    let statement = Statement { shape: Shape { name: "claimed_of_queue", variant: 0 }, text: &text, types: &[pg_sys::TEXTOID] };
    statements::run_with_latest_snapshot(function, &statement, &[queue.into_datum()]);
    count(|c| &c.refreshes);
    rows(pg_sys::FrozenTransactionId)
}

/// The (id, attempts) rows of the last statement, as places of `xid`.
fn rows(xid: pg_sys::TransactionId) -> Vec<Place> {
    let places = crate::claim::jobs_in_last_result().into_iter().map(|(id, attempt)| Place { id: *id.as_bytes(), attempt, xid });
    let places = places.collect();
    statements::free_result();
    places
}

/// Which of `places` are free (the module's comment says how). Connected to
/// SPI; runs one statement when any place's job must be looked up.
fn free_places(function: pg_sys::Oid, places: &[Place]) -> Vec<Place> {
    let mut free = Vec::new();
    let mut look_up = Vec::new();
    // SAFETY: the transaction's own snapshot (REPEATABLE READ and
    // SERIALIZABLE), valid for the transaction.
    let snapshot = if one_snapshot() { unsafe { pg_sys::GetTransactionSnapshot() } } else { std::ptr::null_mut() };
    for place in places {
        // SAFETY: xid checks against the proc array and the snapshot.
        let held = unsafe {
            place.xid != pg_sys::FrozenTransactionId
                && (pg_sys::TransactionIdIsCurrentTransactionId(place.xid)
                    || pg_sys::TransactionIdIsInProgress(place.xid)
                    || (!snapshot.is_null() && pg_sys::XidInMVCCSnapshot(place.xid, snapshot)))
        };
        if held {
            continue;
        }
        if place.id == RESERVED {
            // a claim that ended without naming its jobs (an error)
            free.push(*place);
        } else {
            look_up.push(*place);
        }
    }
    if look_up.is_empty() {
        return free;
    }
    count(|c| &c.checks);
    let text = || {
        statements::fill(
            "SELECT j.id, j.attempts FROM @jobs@ j WHERE j.id = ANY ($1) AND j.status = 'claimed'",
            &[("@jobs@", &statements::in_schema_of(function, "jobs"))],
        )
    };
    let statement = Statement { shape: Shape { name: "still_claimed", variant: 0 }, text: &text, types: &[pg_sys::UUIDARRAYOID] };
    let ids: Vec<pgrx::Uuid> = look_up.iter().map(|p| pgrx::Uuid::from_bytes(p.id)).collect();
    statements::run(function, &statement, &[ids.into_datum()]);
    let claimed = rows(pg_sys::InvalidTransactionId);
    free.extend(look_up.into_iter().filter(|p| !claimed.iter().any(|c| c.id == p.id && c.attempt == p.attempt)));
    free
}

/// Places reserved in a queue's slot by `reserve`, to be named by `took`.
pub struct Reserved {
    slot: usize,
    xid: pg_sys::TransactionId,
    pub count: i32,
}

/// Reserves up to `wanted` places of `queue` (of the jobs table of
/// `function`) under its limit `max_claimed`. None when the queue has no
/// slot (its row keeps its claimed jobs). Connected to SPI; may run
/// statements (none when the queue is not full and its list is fresh).
pub fn reserve(function: pg_sys::Oid, queue: &str, max_claimed: i32, wanted: i32, now_ms: i64) -> Option<Reserved> {
    let reserved = reserve_places(function, queue, max_claimed, wanted, now_ms);
    if LATCH_RESET.replace(false) {
        // SAFETY: this backend's own latch: set again, as it may have been
        // set for a waiting claim while it waited for a place.
        unsafe { pg_sys::SetLatch(pg_sys::MyLatch) };
    }
    reserved
}

fn reserve_places(function: pg_sys::Oid, queue: &str, max_claimed: i32, wanted: i32, now_ms: i64) -> Option<Reserved> {
    let name = queue.as_bytes();
    if !may_serve(queue, max_claimed) {
        count(|c| &c.from_rows);
        return None;
    }
    let table = crate::privileges::jobs_of(function);
    // SAFETY: backend globals, set once connected; the claim writes rows, so
    // its transaction needs an id anyway.
    let (database, xid) = unsafe { (pg_sys::MyDatabaseId, pg_sys::GetTopTransactionId()) };
    let mut checked = false;
    // how long it waited in line for a place
    let mut waited_ms = 0;
    loop {
        let locked = lock_slots()?;
        let Some(i) = slot_of(locked.slots, database, table, name) else {
            drop(locked);
            count(|c| &c.from_rows);
            return None;
        };
        let slot = &mut locked.slots[i];
        // SAFETY: the builder is a transaction id.
        let builder_gone = slot.state == State::Building && !unsafe { pg_sys::TransactionIdIsInProgress(slot.builder) };
        if slot.state == State::Unused || builder_gone || (slot.state == State::Ready && now_ms - slot.refreshed_at >= REFRESH_MS) {
            let first = slot.state != State::Ready;
            if first {
                slot.database = database;
                slot.table = table;
                slot.name_len = name.len() as u8;
                slot.name[..name.len()].copy_from_slice(name);
                slot.len = 0;
                slot.state = State::Building;
                // the (sub)transaction that reads: if it fails (an error,
                // or a savepoint rolled back around it), it is no longer in
                // progress, and the next claim reads the list again
                // SAFETY: assigns this subtransaction an id if it has none.
                slot.builder = unsafe { pg_sys::GetCurrentTransactionId() };
            }
            // (a Ready list keeps serving while it is read again)
            slot.refreshed_at = now_ms;
            drop(locked);
            let claimed = claimed_in_table(function, queue);
            let locked = lock_slots()?;
            let slot = &mut locked.slots[i];
            for place in claimed {
                // (more claimed than a slot holds, the limit lowered or
                // claims outside raquel: the list stays full, and admits
                // nothing until places are free)
                if !slot.held().iter().any(|p| p.id == place.id && p.attempt == place.attempt) && !slot.push(place) {
                    break;
                }
            }
            if first {
                slot.state = State::Ready;
            }
            continue;
        }
        if slot.state == State::Building {
            // another claim reads the list: wait for it
            drop(locked);
            // SAFETY: a plain sleep, then the usual interrupt check.
            unsafe {
                pg_sys::pg_usleep(1000);
                pgrx::check_for_interrupts!();
            }
            continue;
        }
        let handed = slot.handed(xid) as i32;
        if handed > 0 {
            // places handed to this claim while it waited in line (or left
            // reserved by a claim of this transaction that failed): its own
            let keep = handed.min(wanted.max(0));
            slot.drop_reserved(xid, (handed - keep) as usize);
            hand_on(slot, (handed - keep) as usize);
            drop(locked);
            note_holding(i);
            count(|c| &c.shared);
            return Some(Reserved { slot: i, xid, count: keep });
        }
        let room = max_claimed - slot.len as i32;
        if room < wanted && !checked && slot.len > 0 {
            // full: look up which places are free, then decide again
            let places = slot.held().to_vec();
            drop(locked);
            let free = free_places(function, &places);
            let locked = lock_slots()?;
            locked.slots[i].free(&free);
            checked = true;
            continue;
        }
        let count_reserved = room.clamp(0, wanted.max(0));
        if count_reserved == 0
            && checked
            && !locked.slots.iter().any(|s| s.state != State::Unused && s.held().iter().any(|p| p.xid == xid))
        {
            // Full, and this transaction holds no place of any queue: when
            // a place is held by a transaction still in progress (one that
            // claims and completes in one transaction), wait for a place,
            // as a claim waited on the queue's row lock before, and look
            // again. (One that holds a place never waits: two claims could
            // wait for each other.) It waits in the queue's line, woken
            // when a place is handed to it (a job's end gives its place to
            // the first in line) or a holder's transaction ends, for up to
            // deadlock_timeout; then on a holder's transaction, as a row's
            // locker is waited for, which the deadlock detector watches.
            let slot = &mut locked.slots[i];
            let holders: Vec<pg_sys::TransactionId> =
                slot.held().iter().map(|p| p.xid).filter(|&x| x != pg_sys::FrozenTransactionId).collect();
            // SAFETY: a backend global.
            let deadlock_timeout_ms = i64::from(unsafe { pg_sys::DeadlockTimeout }.max(1));
            // SAFETY: this backend's latch, in shared memory.
            let in_line = waited_ms < deadlock_timeout_ms && slot.line_up(unsafe { pg_sys::MyLatch }, xid);
            drop(locked);
            // SAFETY: proc array lookups.
            let in_progress: Vec<pg_sys::TransactionId> =
                holders.into_iter().filter(|&x| unsafe { pg_sys::TransactionIdIsInProgress(x) }).collect();
            if in_progress.is_empty() {
                // nothing frees a place soon: the next in line looks too
                if let Some(locked) = lock_slots() {
                    locked.slots[i].leave_line(xid);
                    wake_next(&mut locked.slots[i]);
                }
                count(|c| &c.shared);
                return Some(Reserved { slot: i, xid, count: 0 });
            }
            if in_line {
                let started = crate::clock::now_ms();
                // SAFETY: this backend's own latch; reset after the wait and
                // set again when the claim returns (`reserve`), so that a
                // waiting claim's wake-up (src/waiters.rs) is not lost.
                unsafe {
                    let events = pg_sys::WL_LATCH_SET | pg_sys::WL_TIMEOUT | pg_sys::WL_EXIT_ON_PM_DEATH;
                    let timeout = (deadlock_timeout_ms - waited_ms).max(1) as std::ffi::c_long;
                    pg_sys::WaitLatch(pg_sys::MyLatch, events as i32, timeout, pg_sys::PG_WAIT_EXTENSION);
                    pg_sys::ResetLatch(pg_sys::MyLatch);
                }
                LATCH_RESET.set(true);
                waited_ms += (crate::clock::now_ms() - started).max(1);
                if let Some(locked) = lock_slots() {
                    locked.slots[i].leave_line(xid);
                }
                pgrx::check_for_interrupts!();
                checked = false;
                continue;
            }
            // (the waiters spread over the holders, by process id: all on
            // one would all wake for the one place its end frees)
            // SAFETY: a backend global; a wait on a transaction's lock as
            // PostgreSQL waits for a row's locker (an interrupt ends it).
            let mine = unsafe { pg_sys::MyProcPid } as usize;
            let holder = in_progress[mine % in_progress.len()];
            unsafe { pg_sys::XactLockTableWait(holder, std::ptr::null_mut(), std::ptr::null_mut(), pg_sys::XLTW_Oper::XLTW_None) };
            checked = false;
            continue;
        }
        let slot = &mut locked.slots[i];
        for _ in 0..count_reserved {
            slot.push(Place { id: RESERVED, attempt: 0, xid });
        }
        // room this claim does not take goes to claims in line
        hand_on(slot, (room - count_reserved).max(0) as usize);
        drop(locked);
        if count_reserved > 0 {
            note_holding(i);
        }
        count(|c| &c.shared);
        return Some(Reserved { slot: i, xid, count: count_reserved });
    }
}

/// Hands up to `free` places of `slot` (free now) to the claims first in
/// its line: each becomes a place reserved for the claim's transaction, and
/// the claim is woken to take it (`reserve`). Under the slots' lock; at
/// commit too, where nothing may fail: shared memory and SetLatch only.
fn hand_on(slot: &mut Slot, free: usize) -> usize {
    let mut handed = 0;
    while handed < free {
        let Some(next) = slot.next_in_line() else { break };
        if !slot.push(Place { id: RESERVED, attempt: 0, xid: next.xid }) {
            break;
        }
        // SAFETY: a latch in shared memory, of a backend that lined up (a
        // backend gone since has left its PGPROC's latch to the next).
        unsafe { pg_sys::SetLatch(next.latch) };
        handed += 1;
    }
    handed
}

/// Wakes the first claim in `slot`'s line to look again, with no place
/// handed to it.
fn wake_next(slot: &mut Slot) {
    if let Some(next) = slot.next_in_line() {
        // SAFETY: as in hand_on.
        unsafe { pg_sys::SetLatch(next.latch) };
    }
}

/// The claim that reserved `reserved` got `jobs` (id, attempt): they hold
/// its places, and the places it did not use are given back.
pub fn took(reserved: &Reserved, jobs: &[(pgrx::Uuid, i32)]) {
    let Some(locked) = lock_slots() else { return };
    let jobs: Vec<([u8; 16], i32)> = jobs.iter().map(|(id, attempt)| (*id.as_bytes(), *attempt)).collect();
    name_jobs(&mut locked.slots[reserved.slot], reserved.xid, reserved.count, &jobs);
}

/// In `slot`, under the slots' lock: the claim of `xid` that reserved
/// `reserved` places got `jobs` (`Slot::took`), and the places it did not
/// use go to the claims in line.
fn name_jobs(slot: &mut Slot, xid: pg_sys::TransactionId, reserved: i32, jobs: &[([u8; 16], i32)]) {
    let reserved = reserved.max(0) as usize;
    slot.took(xid, reserved, jobs);
    hand_on(slot, reserved.saturating_sub(jobs.len()));
}

thread_local! {
    /// The jobs this transaction ended that may hold a place: (jobs table,
    /// queue, id, the subtransaction that ended it). Their places are
    /// given back when it commits, so that the next claim need not look
    /// them up.
    static ENDED: std::cell::RefCell<Vec<(pg_sys::Oid, String, [u8; 16], pg_sys::SubTransactionId)>> =
        const { std::cell::RefCell::new(Vec::new()) };
    /// The slots in which this transaction holds places: when it ends
    /// without giving one back, the first claim in each one's line looks
    /// again (a place of a transaction that ended may be free).
    static HOLDING: std::cell::RefCell<Vec<usize>> = const { std::cell::RefCell::new(Vec::new()) };
    /// This transaction's callbacks for ENDED and HOLDING are registered.
    static ENDED_CALLBACKS: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    /// A wait for a place reset this backend's latch (`reserve`).
    static LATCH_RESET: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// This transaction holds places in slot `slot`.
fn note_holding(slot: usize) {
    HOLDING.with_borrow_mut(|holding| {
        if !holding.contains(&slot) {
            holding.push(slot);
        }
    });
    at_end_of_transaction();
}

/// A claimed job of `queue` (in the jobs table `table`) ended in this
/// transaction, through raquel's verbs (src/ended.rs): if the transaction
/// commits, its place is given back then (if the job holds the only place
/// of its id: a place it may still hold under another attempt is left to
/// the next look-up). A place freed this way is one a look-up would free;
/// this only saves the look-up.
pub fn job_ended(table: pg_sys::Oid, queue: &str, id: &pgrx::Uuid) {
    if !REGION.attached() {
        return;
    }
    // SAFETY: a backend global of the transaction in progress.
    let subtransaction = unsafe { pg_sys::GetCurrentSubTransactionId() };
    ENDED.with_borrow_mut(|ended| ended.push((table, queue.to_owned(), *id.as_bytes(), subtransaction)));
    at_end_of_transaction();
}

/// Registers, once a transaction, what its end does to the slots.
fn at_end_of_transaction() {
    if !ENDED_CALLBACKS.replace(true) {
        // After the commit is visible to everyone, where nothing may fail:
        // shared memory and SetLatch only. A savepoint rolled back forgets
        // what ended since it (its subtransaction and those inside it have
        // later ids).
        pgrx::register_xact_callback(pgrx::PgXactCallbackEvent::Commit, || {
            let ended = ENDED.with_borrow_mut(std::mem::take);
            let holding = HOLDING.with_borrow_mut(std::mem::take);
            ENDED_CALLBACKS.set(false);
            give_back_places(&ended, &holding);
        });
        pgrx::register_xact_callback(pgrx::PgXactCallbackEvent::Abort, || {
            ENDED.with_borrow_mut(Vec::clear);
            let holding = HOLDING.with_borrow_mut(std::mem::take);
            ENDED_CALLBACKS.set(false);
            give_back_places(&[], &holding);
        });
        pgrx::register_subxact_callback(pgrx::PgSubXactCallbackEvent::AbortSub, |aborted, _| {
            ENDED.with_borrow_mut(|ended| ended.retain(|e| e.3 < aborted));
        });
    }
}

/// At the end of a transaction: the places of the jobs it `ended` are
/// handed to the claims first in their slots' lines, or free; in the other
/// slots where it held places, the first claim in line looks again.
fn give_back_places(ended: &[(pg_sys::Oid, String, [u8; 16], pg_sys::SubTransactionId)], holding: &[usize]) {
    if ended.is_empty() && holding.is_empty() {
        return;
    }
    let Some(locked) = lock_slots() else { return };
    // SAFETY: a backend global, set once connected.
    let database = unsafe { pg_sys::MyDatabaseId };
    let mut handed = Vec::new();
    for (table, queue, id, _) in ended {
        let Some(i) = slot_of(locked.slots, database, *table, queue.as_bytes()).filter(|&i| locked.slots[i].state == State::Ready)
        else {
            continue;
        };
        let slot = &mut locked.slots[i];
        let mut of_id = slot.held().iter().filter(|p| p.id == *id);
        if let (Some(&place), None) = (of_id.next(), of_id.next()) {
            slot.free(&[place]);
            if hand_on(slot, 1) > 0 {
                handed.push(i);
            }
        }
    }
    for &i in holding {
        if !handed.contains(&i) {
            wake_next(&mut locked.slots[i]);
        }
    }
}

/// Whether `queue` under `max_claimed` may have a slot here: the server
/// preloaded raquel, the limit fits a slot's places and the name a slot's
/// (src/claim/flow_claim.rs: otherwise its row keeps its claimed jobs).
pub fn may_serve(queue: &str, max_claimed: i32) -> bool {
    REGION.attached() && max_claimed as usize <= PLACES && queue.len() <= NAME_BYTES
}

/// How the claims of queues with max_claimed kept count since the server
/// started: in a slot in shared memory, or in the queue's row (max_claimed
/// above 256, a name longer than 64 bytes, every one of the 256 slots in
/// use); the lists read from the table
/// and the looks at a full queue's places; the slots in use.
#[pg_extern(volatile, parallel_safe, schema = "raquel_internal")]
#[search_path(pg_catalog, pg_temp)]
fn rq_claim_slot_counts() -> TableIterator<
    'static,
    (
        name!(claims_shared, i64),
        name!(claims_from_rows, i64),
        name!(refreshes, i64),
        name!(checks, i64),
        name!(slots, i32),
        name!(max_slots, i32),
    ),
> {
    let counts = COUNTS.get();
    let big = |n: &AtomicU64| i64::try_from(n.load(Ordering::Relaxed)).unwrap_or(i64::MAX);
    let in_use = lock_slots().map_or(0, |locked| locked.slots.iter().filter(|s| s.state != State::Unused).count() as i32);
    TableIterator::once((big(&counts.shared), big(&counts.from_rows), big(&counts.refreshes), big(&counts.checks), in_use, SLOTS as i32))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slot() -> Box<Slot> {
        // SAFETY: every field of a Slot is valid as zero bytes (State::Unused).
        unsafe { Box::new(std::mem::zeroed()) }
    }

    fn job(n: u8, xid: u32) -> Place {
        Place { id: [n; 16], attempt: 1, xid: pg_sys::TransactionId::from_inner(xid) }
    }

    fn reserved(xid: u32) -> Place {
        Place { id: RESERVED, attempt: 0, xid: pg_sys::TransactionId::from_inner(xid) }
    }

    #[test]
    fn a_claim_names_its_jobs_and_gives_back_the_rest() {
        let mut s = slot();
        s.push(job(1, 7));
        for _ in 0..3 {
            s.push(reserved(9));
        }
        s.push(reserved(8));
        s.took(pg_sys::TransactionId::from_inner(9), 3, &[([2; 16], 4)]);
        assert_eq!(s.held(), &[job(1, 7), Place { id: [2; 16], attempt: 4, xid: pg_sys::TransactionId::from_inner(9) }, reserved(8)]);
    }

    #[test]
    fn freed_places_go_and_the_others_stay_in_order() {
        let mut s = slot();
        for n in 1..=4 {
            s.push(job(n, 5));
        }
        s.free(&[job(2, 5), job(4, 5), job(9, 5)]);
        assert_eq!(s.held(), &[job(1, 5), job(3, 5)]);
    }

    #[test]
    fn claims_wait_in_line_first_come_first_and_find_what_was_handed_to_them() {
        let mut s = slot();
        let (a, b) = (pg_sys::TransactionId::from_inner(21), pg_sys::TransactionId::from_inner(22));
        let latch = std::ptr::null_mut();
        assert!(s.line_up(latch, a));
        assert!(s.line_up(latch, b));
        assert!(s.line_up(latch, a), "lined up once");
        assert_eq!(s.waiting_len, 2);
        s.leave_line(a);
        assert_eq!(s.next_in_line().map(|w| w.xid), Some(b));
        assert!(s.next_in_line().is_none());
        for n in 0..WAITING as u32 {
            assert!(s.line_up(latch, pg_sys::TransactionId::from_inner(100 + n)));
        }
        assert!(!s.line_up(latch, a), "a full line takes no more");
        s.push(job(1, 21));
        s.push(reserved(21));
        s.push(reserved(9));
        s.push(reserved(21));
        assert_eq!(s.handed(a), 2);
        s.drop_reserved(a, 1);
        assert_eq!(s.held(), &[job(1, 21), reserved(9), reserved(21)]);
    }

    #[test]
    fn a_full_slot_takes_no_more() {
        let mut s = slot();
        for _ in 0..PLACES {
            assert!(s.push(job(1, 1)));
        }
        assert!(!s.push(job(2, 1)));
    }
}

