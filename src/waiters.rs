//! Waiting claims. A claim with a `wait` that finds nothing registers here and
//! sleeps on its latch. A transaction that made jobs ready (src/events.rs)
//! wakes, when it commits, at most as many waiters of each queue as it
//! made jobs ready in that queue, and no waiter of any other queue or
//! database. An idle waiter sleeps in WaitLatch and uses no CPU.
//!
//! A waiter's slot is its PGPROC number, so a backend has one slot for life
//! and a slot left behind is simply reused. The slots live in shared memory,
//! which exists only when the server preloads the library; without it a
//! waiting claim polls (see src/claim.rs).
//!
//! A waiter keeps up to QUEUES_PER_WAITER queue names (as hashes) in its
//! slot. One that waits on more queues is woken for any queue, after every
//! waiter that names the queue: it is told which queue woke it, and when
//! that is not one of its own it passes the wake-up on and declines that
//! queue until it registers again, so a wake-up ends at a waiter that can
//! take the job, or nowhere.
//!
//! A backend awaiting a job's end (rq_await, src/results.rs) registers in
//! the same slots for that job alone (its id as a hash); a transaction that
//! ended jobs wakes, at commit, every backend awaiting one of them, and no
//! waiting claim.

use pgrx::prelude::*;
use pgrx::{pg_shmem_init, PGRXSharedMemory, PgAtomic, PgLwLock, PgXactCallbackEvent};
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};

/// Slots by PGPROC number: a server whose backends number more (see
/// `check_slots`) has its later backends poll instead.
const SLOTS: usize = 1024;
/// Queue names a slot holds; a waiter on more is one of "many queues".
const QUEUES_PER_WAITER: usize = 16;
/// Without a hash: a waiter for any queue, or not woken for a queue.
const NO_QUEUE: u32 = 0;

#[derive(Clone, Copy, PartialEq, Eq)]
enum State {
    Free,
    Waiting,
    Woken,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Wants {
    AnyQueue,
    ManyQueues,
    Listed,
    /// The end of the job whose hash is `queues[0]` (rq_await).
    JobEnd,
}

#[derive(Clone, Copy)]
struct Waiter {
    state: State,
    database: pg_sys::Oid,
    wants: Wants,
    queue_count: usize,
    queues: [u32; QUEUES_PER_WAITER],
    /// A queue this many-queues waiter was woken for and does not wait on.
    declined: u32,
    /// The queue whose job woke this waiter.
    woken_for: u32,
    /// Woken to end its wait: its locks are in the way of DROP EXTENSION.
    give_up: bool,
}

impl Waiter {
    const FREE: Waiter = Waiter {
        state: State::Free,
        database: pg_sys::InvalidOid,
        wants: Wants::Listed,
        queue_count: 0,
        queues: [0; QUEUES_PER_WAITER],
        declined: NO_QUEUE,
        woken_for: NO_QUEUE,
        give_up: false,
    };

    /// Whether this waiter should be woken for a job of `queue_hash`: first
    /// (`named`) those that name the queue or wait for any, then
    /// (`!named`) those on many queues that did not decline it.
    fn wants(&self, database: pg_sys::Oid, queue_hash: u32, named: bool) -> bool {
        self.state == State::Waiting
            && self.database == database
            && match self.wants {
                Wants::AnyQueue => named,
                Wants::Listed => named && self.queues[..self.queue_count].contains(&queue_hash),
                Wants::ManyQueues => !named && self.declined != queue_hash,
                Wants::JobEnd => false,
            }
    }

    /// Whether this waiter awaits the end of the job whose hash is `job_hash`.
    fn awaits(&self, database: pg_sys::Oid, job_hash: u32) -> bool {
        self.state == State::Waiting && self.database == database && self.wants == Wants::JobEnd && self.queues[0] == job_hash
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
/// How many slots are not free: a commit with no waiter anywhere takes no lock.
// SAFETY: the name is unique to this atomic, and pg_shmem_init! in init() sets it up.
static REGISTERED: PgAtomic<AtomicU32> = unsafe { PgAtomic::new(c"raquel_waiters_registered") };

thread_local! {
    /// Jobs this transaction made ready, per queue, to wake waiters for at commit.
    static ENQUEUED: RefCell<HashMap<String, i64>> = RefCell::new(HashMap::new());
    /// The hashes of the jobs this transaction ended, to wake their awaiters at commit.
    static ENDED: RefCell<Vec<u32>> = const { RefCell::new(Vec::new()) };
    static WAKE_AT_COMMIT: Cell<bool> = const { Cell::new(false) };
    static UNREGISTER_AT_END: Cell<bool> = const { Cell::new(false) };
    static NO_SLOT_WARNED: Cell<bool> = const { Cell::new(false) };
}

/// Called from `_PG_init` while the server preloads the library.
pub fn init() {
    pg_shmem_init!(WAITERS);
    pg_shmem_init!(REGISTERED = AtomicU32::new(0));
}

/// Says, once, in the server log when some backends cannot have a slot
/// (called by the launcher at its start, when the numbers are known).
pub fn check_slots() {
    // SAFETY: ProcGlobal is set up before any background worker starts.
    let procs = unsafe { (*pg_sys::ProcGlobal).allProcCount } as usize;
    if procs > SLOTS {
        warning!(
            "raquel: this server has {procs} process slots but waiting claims have {SLOTS}: a waiting claim in a \
             backend numbered {SLOTS} or above polls every 100 ms instead of sleeping until woken; lower max_connections \
             to have every backend woken"
        );
    }
}

/// FNV-1a: waiters keep queue names as 32-bit hashes; a collision only
/// causes an extra wake-up. Never NO_QUEUE.
pub fn queue_hash(queue: &str) -> u32 {
    fnv1a(queue.as_bytes())
}

/// The hash of a job's id, as an awaiter of its end registers it.
pub fn job_hash(id: &pgrx::Uuid) -> u32 {
    fnv1a(id.as_bytes())
}

/// FNV-1a of `bytes`, never NO_QUEUE.
fn fnv1a(bytes: &[u8]) -> u32 {
    let hash = bytes.iter().fold(0x811c_9dc5u32, |h, &b| (h ^ u32::from(b)).wrapping_mul(0x0100_0193));
    if hash == NO_QUEUE { 1 } else { hash }
}

fn my_slot() -> Option<usize> {
    if !crate::preloaded() {
        return None;
    }
    let procno = my_procno();
    let slot = usize::try_from(procno).ok().filter(|&n| n < SLOTS);
    if slot.is_none() && !NO_SLOT_WARNED.replace(true) {
        warning!("raquel: backend number {procno} has no waiting-claim slot (there are {SLOTS}); its waiting claims poll every 100 ms");
    }
    slot
}

/// Registers this backend as waiting for jobs of the queues whose hashes
/// are `queues` (None: any queue) and clears its latch, so that a wake-up
/// from now on is not lost; false when it cannot wait (library not
/// preloaded, or no slot). `declined`: a queue it was woken for and does
/// not wait on, not to be woken for again during this wait.
pub fn register(queues: Option<&[u32]>, declined: Option<u32>) -> bool {
    let Some(slot) = my_slot() else { return false };
    // SAFETY: MyDatabaseId is this backend's, set once it connected.
    let mut me = Waiter { state: State::Waiting, database: unsafe { pg_sys::MyDatabaseId }, ..Waiter::FREE };
    match queues {
        None => me.wants = Wants::AnyQueue,
        Some(hashes) if hashes.len() <= QUEUES_PER_WAITER => {
            me.queues[..hashes.len()].copy_from_slice(hashes);
            me.queue_count = hashes.len();
        }
        Some(_) => me.wants = Wants::ManyQueues,
    }
    me.declined = declined.unwrap_or(NO_QUEUE);
    take_slot(slot, me);
    true
}

/// Registers this backend as awaiting the end of the job whose hash is
/// `job_hash`, as `register` does for a claim; false when it cannot be
/// woken (it polls then).
pub fn register_for_end(job_hash: u32) -> bool {
    let Some(slot) = my_slot() else { return false };
    // SAFETY: MyDatabaseId is this backend's, set once it connected.
    let mut me = Waiter { state: State::Waiting, database: unsafe { pg_sys::MyDatabaseId }, wants: Wants::JobEnd, ..Waiter::FREE };
    me.queues[0] = job_hash;
    me.queue_count = 1;
    take_slot(slot, me);
    true
}

/// Puts `me` in this backend's slot, its latch cleared first.
fn take_slot(slot: usize, me: Waiter) {
    // SAFETY: MyLatch is this backend's own latch.
    unsafe { pg_sys::ResetLatch(pg_sys::MyLatch) };
    {
        let mut waiters = WAITERS.exclusive();
        if waiters.slots[slot].state == State::Free {
            REGISTERED.get().fetch_add(1, Ordering::SeqCst);
        }
        waiters.slots[slot] = me;
    }
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
}

/// Gives this backend's slot back.
pub fn unregister() {
    if let Some(slot) = my_slot() {
        let mut waiters = WAITERS.exclusive();
        if waiters.slots[slot].state != State::Free {
            REGISTERED.get().fetch_sub(1, Ordering::SeqCst);
        }
        waiters.slots[slot] = Waiter::FREE;
    }
}

/// The queue whose job woke this backend since it registered, if any.
pub fn woken_for() -> Option<u32> {
    let slot = my_slot()?;
    let waiter = WAITERS.share().slots[slot];
    (waiter.state == State::Woken && waiter.woken_for != NO_QUEUE).then_some(waiter.woken_for)
}

/// Whether this backend's wait was ended by `rq_drop_started`.
pub fn told_to_give_up() -> bool {
    my_slot().is_some_and(|slot| WAITERS.share().slots[slot].give_up)
}

// rq_drop_started() RETURNS event_trigger: ON ddl_command_start WHEN TAG IN
// ('DROP EXTENSION') (sql/claim.sql). A waiting claim holds locks on the
// jobs table while it sleeps; DROP EXTENSION would wait behind it for as
// long as the wait lasts. This wakes every waiting claim of the database
// first, and each returns what it has: nothing.
function_info_v1!(pg_finfo_rq_drop_started);

/// # Safety
/// Called by the function manager, as an event trigger.
#[pg_guard]
#[unsafe(no_mangle)]
pub unsafe extern "C-unwind" fn rq_drop_started(_fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    if crate::preloaded() && REGISTERED.get().load(Ordering::SeqCst) > 0 {
        // SAFETY: MyDatabaseId is this backend's, set once it connected.
        let database = unsafe { pg_sys::MyDatabaseId };
        for (procno, waiter) in WAITERS.exclusive().slots.iter_mut().enumerate() {
            if waiter.state == State::Waiting && waiter.database == database {
                waiter.state = State::Woken;
                waiter.give_up = true;
                set_latch(procno);
            }
        }
    }
    pg_sys::Datum::from(0)
}

/// Hands a wake-up for a queue this backend does not wait on to a waiter
/// that may (this backend has registered again, declining the queue).
pub fn pass_on(queue_hash: u32) {
    // SAFETY: MyDatabaseId is this backend's, set once it connected.
    wake(&mut WAITERS.exclusive(), unsafe { pg_sys::MyDatabaseId }, queue_hash, 1);
}

/// Sleeps until the latch is set (a commit woke us, or a signal came), or
/// `timeout_ms` passes, or the client's connection closes; then honours
/// cancel, statement_timeout and shutdown, and a closed connection.
///
/// A client killed while its claim waits (a worker's SIGKILL) closes its
/// socket, which nothing reads until the claim returns: without watching
/// it, the claim would take a job for nobody, held until its lease lapsed
/// (found by the Python library's tests). So the sleep watches the socket
/// too, and a closed one ends the backend as PostgreSQL's own
/// client_connection_check_interval does ("connection to client lost",
/// FATAL), its transaction rolled back before it took anything.
pub fn sleep(timeout_ms: i64) {
    let timeout = timeout_ms.clamp(0, i64::from(i32::MAX)) as std::ffi::c_long;
    let mut events = pg_sys::WL_LATCH_SET | pg_sys::WL_TIMEOUT | pg_sys::WL_EXIT_ON_PM_DEATH;
    // SAFETY: MyProcPort is this backend's client connection, set at its
    // start; null in a background worker, which has none. pgrx declares
    // Port opaque; its socket is its first member (`pgsocket sock`, an int,
    // in libpq-be.h of PostgreSQL 15, 16, 17 and 18 alike).
    let socket = unsafe {
        if pg_sys::MyProcPort.is_null() { pg_sys::PGINVALID_SOCKET } else { *(pg_sys::MyProcPort as *const std::ffi::c_int) }
    };
    if socket != pg_sys::PGINVALID_SOCKET {
        events |= pg_sys::WL_SOCKET_CLOSED;
    }
    // SAFETY: waiting on this backend's own latch and client socket.
    let happened = unsafe { pg_sys::WaitLatchOrSocket(pg_sys::MyLatch, events as i32, socket, timeout, pg_sys::PG_WAIT_EXTENSION) };
    if happened & pg_sys::WL_SOCKET_CLOSED as i32 != 0 {
        // SAFETY: the flags ProcessInterrupts reads, set as PostgreSQL's
        // own connection check sets them.
        unsafe {
            pg_sys::ClientConnectionLost = 1;
            pg_sys::InterruptPending = 1;
        }
    }
    pg_sys::check_for_interrupts!();
}

/// Notes that this transaction made `jobs` jobs of `queue` ready; at commit,
/// up to that many waiters of the queue are woken. The jobs table's trigger
/// (src/events.rs) calls it for every such job, so it allocates only for a
/// queue new to the transaction.
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
    wake_at_commit();
}

/// Notes that this transaction ended the job `id` (success, exhausted,
/// cancelled, expired); at commit, every backend awaiting its end is woken.
/// Noted whether or not anyone awaits it now: one may register before the
/// commit, and whether anyone waits is read at commit.
pub fn note_ended(id: &pgrx::Uuid) {
    if !crate::preloaded() {
        return;
    }
    ENDED.with(|ended| ended.borrow_mut().push(job_hash(id)));
    wake_at_commit();
}

fn wake_at_commit() {
    if !WAKE_AT_COMMIT.get() {
        WAKE_AT_COMMIT.set(true);
        pgrx::register_xact_callback(PgXactCallbackEvent::Commit, wake_waiters);
        pgrx::register_xact_callback(PgXactCallbackEvent::Abort, || {
            ENQUEUED.with(|m| m.borrow_mut().clear());
            ENDED.with(|ended| ended.borrow_mut().clear());
            WAKE_AT_COMMIT.set(false);
        });
    }
}

/// Runs after the commit is visible to everyone, where nothing may fail: it
/// only marks slots and sets latches.
fn wake_waiters() {
    WAKE_AT_COMMIT.set(false);
    // the woken claim must find the jobs in its cursors' lanes
    crate::cursors::apply_commit_notes();
    let enqueued = ENQUEUED.with(|m| std::mem::take(&mut *m.borrow_mut()));
    let ended = ENDED.with(|ended| std::mem::take(&mut *ended.borrow_mut()));
    if REGISTERED.get().load(Ordering::SeqCst) == 0 {
        return;
    }
    // SAFETY: MyDatabaseId is this backend's, set once it connected.
    let database = unsafe { pg_sys::MyDatabaseId };
    let mut waiters = WAITERS.exclusive();
    for (queue, jobs) in enqueued {
        wake(&mut waiters, database, queue_hash(&queue), jobs);
    }
    if !ended.is_empty() {
        for (procno, waiter) in waiters.slots.iter_mut().enumerate() {
            if ended.iter().any(|&hash| waiter.awaits(database, hash)) {
                wake_one(waiter, procno, NO_QUEUE);
            }
        }
    }
}

/// Wakes up to `jobs` waiters of a queue: those that name it (or wait for
/// any queue) first, then those on many queues. The second pass starts at
/// the first waiter on many queues the first pass saw, and is not made when
/// it saw none: a commit's wake-up scans the slots once.
fn wake(waiters: &mut Waiters, database: pg_sys::Oid, queue_hash: u32, jobs: i64) {
    let mut left = jobs;
    let mut first_on_many_queues = None;
    for (procno, waiter) in waiters.slots.iter_mut().enumerate() {
        if left == 0 {
            return;
        }
        if waiter.wants(database, queue_hash, true) {
            wake_one(waiter, procno, queue_hash);
            left -= 1;
        } else if first_on_many_queues.is_none() && waiter.wants(database, queue_hash, false) {
            first_on_many_queues = Some(procno);
        }
    }
    let Some(first) = first_on_many_queues else { return };
    for (procno, waiter) in waiters.slots.iter_mut().enumerate().skip(first) {
        if left == 0 {
            return;
        }
        if waiter.wants(database, queue_hash, false) {
            wake_one(waiter, procno, queue_hash);
            left -= 1;
        }
    }
}

fn wake_one(waiter: &mut Waiter, procno: usize, queue_hash: u32) {
    waiter.state = State::Woken;
    waiter.woken_for = queue_hash;
    set_latch(procno);
}

/// This process's PGPROC number: its PGPROC's index in
/// `ProcGlobal->allProcs`. PostgreSQL 15 and 16 also keep it in
/// `PGPROC.pgprocno`, which 17 removed (`GetNumberFromPGProc` computes it as
/// this does), so the index serves every major.
pub fn my_procno() -> i32 {
    // SAFETY: MyProc is this process's PGPROC, an element of the array
    // ProcGlobal->allProcs, both set before any SQL or worker code runs.
    let index = unsafe { pg_sys::MyProc.offset_from((*pg_sys::ProcGlobal).allProcs) };
    i32::try_from(index).expect("a PGPROC number fits in an int")
}

/// Wakes the backend whose PGPROC number is `procno`.
fn set_latch(procno: usize) {
    // SAFETY: slots are indexed by PGPROC number, below allProcCount.
    unsafe {
        let proc = (*pg_sys::ProcGlobal).allProcs.add(procno);
        pg_sys::SetLatch(&raw mut (*proc).procLatch);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queue_hashes_are_fnv1a() {
        assert_eq!(queue_hash("a"), 0xe40c_292c);
        assert_ne!(queue_hash("emails"), queue_hash("email"));
        assert_ne!(queue_hash(""), NO_QUEUE);
    }

    fn waiter(wants: Wants, queues: &[u32], declined: u32) -> Waiter {
        let mut w = Waiter { state: State::Waiting, database: pg_sys::Oid::from(5), wants, declined, ..Waiter::FREE };
        w.queues[..queues.len()].copy_from_slice(queues);
        w.queue_count = queues.len();
        w
    }

    #[test]
    fn named_waiters_come_before_waiters_on_many_queues() {
        let db = pg_sys::Oid::from(5);
        let listed = waiter(Wants::Listed, &[7, 8], NO_QUEUE);
        assert!(listed.wants(db, 7, true) && !listed.wants(db, 7, false) && !listed.wants(db, 9, true));
        let any = waiter(Wants::AnyQueue, &[], NO_QUEUE);
        assert!(any.wants(db, 9, true) && !any.wants(db, 9, false));
        let many = waiter(Wants::ManyQueues, &[], 7);
        assert!(!many.wants(db, 9, true) && many.wants(db, 9, false));
        assert!(!many.wants(db, 7, false), "a declined queue is not offered again");
        assert!(!listed.wants(pg_sys::Oid::from(6), 7, true), "another database's waiter");
    }
}
