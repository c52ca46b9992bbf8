//! Waiting claims. A claim with a `wait` that finds nothing registers here and
//! sleeps on its latch. A transaction that enqueued jobs wakes, when it
//! commits, at most as many waiters of each queue as it committed jobs for
//! that queue, and no waiter of any other queue or database. An idle waiter
//! sleeps in WaitLatch and uses no CPU.
//!
//! A waiter's slot is its PGPROC number, so a backend has one slot for life
//! and a slot left behind is simply reused. The slots live in shared memory,
//! which exists only when the server preloads the library; without it a
//! waiting claim polls (see src/claim.rs).

use pgrx::prelude::*;
use pgrx::{pg_shmem_init, PGRXSharedMemory, PgLwLock, PgXactCallbackEvent};
use std::cell::{Cell, RefCell};
use std::collections::HashMap;

const SLOTS: usize = 1024;
/// A waiter on more queues than this is woken for any queue (a harmless
/// extra wake-up: it claims, finds nothing, and sleeps again).
const QUEUES_PER_WAITER: usize = 8;

#[derive(Clone, Copy, PartialEq, Eq)]
enum State {
    Free,
    Waiting,
    Woken,
}

#[derive(Clone, Copy)]
struct Waiter {
    state: State,
    database: pg_sys::Oid,
    any_queue: bool,
    queue_count: usize,
    queues: [u32; QUEUES_PER_WAITER],
}

impl Waiter {
    const FREE: Waiter = Waiter {
        state: State::Free,
        database: pg_sys::InvalidOid,
        any_queue: false,
        queue_count: 0,
        queues: [0; QUEUES_PER_WAITER],
    };

    fn wants(&self, database: pg_sys::Oid, queue_hash: u32) -> bool {
        self.state == State::Waiting
            && self.database == database
            && (self.any_queue || self.queues[..self.queue_count].contains(&queue_hash))
    }
}

#[derive(Clone, Copy)]
struct Waiters {
    slots: [Waiter; SLOTS],
}

impl Default for Waiters {
    fn default() -> Self {
        Waiters { slots: [Waiter::FREE; SLOTS] }
    }
}

// SAFETY: plain data (no pointers), shared under the PgLwLock below.
unsafe impl PGRXSharedMemory for Waiters {}

// SAFETY: the name is unique to this lock, and pg_shmem_init! in init() sets it up.
static WAITERS: PgLwLock<Waiters> = unsafe { PgLwLock::new(c"raquel_waiters") };

thread_local! {
    /// Jobs this transaction enqueued, per queue, to wake waiters for at commit.
    static ENQUEUED: RefCell<HashMap<String, i64>> = RefCell::new(HashMap::new());
    static WAKE_AT_COMMIT: Cell<bool> = const { Cell::new(false) };
    static UNREGISTER_AT_END: Cell<bool> = const { Cell::new(false) };
}

/// Called from `_PG_init` while the server preloads the library.
pub fn init() {
    pg_shmem_init!(WAITERS);
}

/// FNV-1a: waiters keep queue names as 32-bit hashes; a collision only
/// causes an extra wake-up.
pub fn queue_hash(queue: &str) -> u32 {
    queue.bytes().fold(0x811c_9dc5u32, |h, b| (h ^ u32::from(b)).wrapping_mul(0x0100_0193))
}

fn my_slot() -> Option<usize> {
    if !crate::preloaded() {
        return None;
    }
    // SAFETY: MyProc is this backend's PGPROC, set before any SQL runs.
    let procno = unsafe { (*pg_sys::MyProc).pgprocno };
    usize::try_from(procno).ok().filter(|&n| n < SLOTS)
}

/// Registers this backend as waiting for jobs of the queues whose hashes
/// are `queues` (None: any queue) and clears its latch, so that a wake-up
/// from now on is not lost; false when it cannot wait (library not
/// preloaded, or no slot).
pub fn register(queues: Option<&[u32]>) -> bool {
    let Some(slot) = my_slot() else { return false };
    // SAFETY: MyDatabaseId is this backend's, set once it connected.
    let mut me = Waiter { state: State::Waiting, database: unsafe { pg_sys::MyDatabaseId }, ..Waiter::FREE };
    match queues {
        Some(hashes) if hashes.len() <= QUEUES_PER_WAITER => {
            me.queues[..hashes.len()].copy_from_slice(hashes);
            me.queue_count = hashes.len();
        }
        _ => me.any_queue = true,
    }
    // SAFETY: MyLatch is this backend's own latch.
    unsafe { pg_sys::ResetLatch(pg_sys::MyLatch) };
    WAITERS.exclusive().slots[slot] = me;
    if !UNREGISTER_AT_END.get() {
        // An error (cancel, statement_timeout) ends the wait by aborting.
        UNREGISTER_AT_END.set(true);
        for event in [PgXactCallbackEvent::Abort, PgXactCallbackEvent::Commit] {
            pgrx::register_xact_callback(event, || {
                unregister();
                UNREGISTER_AT_END.set(false);
            });
        }
    }
    true
}

/// Gives this backend's slot back.
pub fn unregister() {
    if let Some(slot) = my_slot() {
        WAITERS.exclusive().slots[slot] = Waiter::FREE;
    }
}

/// Sleeps until the latch is set (a commit woke us, or a signal came), or
/// `timeout_ms` passes; then honours cancel, statement_timeout and shutdown.
pub fn sleep(timeout_ms: i64) {
    let timeout = timeout_ms.clamp(0, i64::from(i32::MAX)) as std::ffi::c_long;
    let events = pg_sys::WL_LATCH_SET | pg_sys::WL_TIMEOUT | pg_sys::WL_EXIT_ON_PM_DEATH;
    // SAFETY: waiting on this backend's own latch.
    unsafe {
        pg_sys::WaitLatch(pg_sys::MyLatch, events as i32, timeout, pg_sys::PG_WAIT_EXTENSION);
    }
    pg_sys::check_for_interrupts!();
}

/// Notes that this transaction made `jobs` jobs of `queue` ready; at commit,
/// up to that many waiters of the queue are woken. For the verbs written in
/// SQL that make a job ready again (rq_reject, rq_retry).
#[pg_extern(volatile, parallel_unsafe)]
fn rq_wait_notify(queue: &str, jobs: i64) {
    note_ready(queue, jobs);
}

/// The same from Rust: the row trigger on jobs (src/events.rs) calls it for
/// every inserted job, so it allocates only for a queue new to the
/// transaction.
pub fn note_ready(queue: &str, jobs: i64) {
    if !crate::preloaded() || jobs <= 0 {
        return;
    }
    ENQUEUED.with(|m| {
        let mut m = m.borrow_mut();
        match m.get_mut(queue) {
            Some(n) => *n += jobs,
            None => {
                m.insert(queue.to_owned(), jobs);
            }
        }
    });
    if !WAKE_AT_COMMIT.get() {
        WAKE_AT_COMMIT.set(true);
        pgrx::register_xact_callback(PgXactCallbackEvent::Commit, wake_waiters);
        pgrx::register_xact_callback(PgXactCallbackEvent::Abort, || {
            ENQUEUED.with(|m| m.borrow_mut().clear());
            WAKE_AT_COMMIT.set(false);
        });
    }
}

/// Runs after the commit is visible to everyone, where nothing may fail: it
/// only marks slots and sets latches.
fn wake_waiters() {
    WAKE_AT_COMMIT.set(false);
    let enqueued = ENQUEUED.with(|m| std::mem::take(&mut *m.borrow_mut()));
    // SAFETY: MyDatabaseId is this backend's, set once it connected.
    let database = unsafe { pg_sys::MyDatabaseId };
    let mut waiters = WAITERS.exclusive();
    for (queue, jobs) in enqueued {
        let hash = queue_hash(&queue);
        let mut left = jobs;
        for (procno, waiter) in waiters.slots.iter_mut().enumerate() {
            if left == 0 {
                break;
            }
            if waiter.wants(database, hash) {
                waiter.state = State::Woken;
                left -= 1;
                // SAFETY: slots are indexed by PGPROC number, below allProcCount.
                unsafe {
                    let proc = (*pg_sys::ProcGlobal).allProcs.add(procno);
                    pg_sys::SetLatch(&raw mut (*proc).procLatch);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::queue_hash;

    #[test]
    fn queue_hashes_are_fnv1a() {
        assert_eq!(queue_hash(""), 0x811c_9dc5);
        assert_eq!(queue_hash("a"), 0xe40c_292c);
        assert_ne!(queue_hash("emails"), queue_hash("email"));
    }
}
