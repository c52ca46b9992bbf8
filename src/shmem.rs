//! raquel's regions of shared memory, each with its own named tranche of
//! LWLocks: the claim cursors (src/cursors.rs), the places claimed under
//! max_claimed (src/claim_slots.rs) and the rates' token buckets
//! (src/rate_buckets.rs). Each module declares its `Region` and registers it
//! from `_PG_init`; this module asks the postmaster for their memory and
//! locks (one pair of hooks for all), lays each out once, and hands out
//! a region's bytes under one of its locks. A server that did not preload
//! raquel has none of them: `lock` says so with None.

use pgrx::prelude::*;
use std::ffi::CStr;
use std::sync::atomic::{AtomicPtr, Ordering};

/// One region: `bytes()` of memory named `name`, laid out by `lay_out` when
/// the server makes it, and `locks` LWLocks of the tranche `tranche`
/// (pg_stat_activity shows a wait on one by that name).
pub struct Region {
    name: &'static CStr,
    tranche: &'static CStr,
    locks: usize,
    bytes: fn() -> usize,
    lay_out: unsafe fn(*mut u8),
    base: AtomicPtr<u8>,
    first_lock: AtomicPtr<pg_sys::LWLockPadded>,
}

impl Region {
    pub const fn new(
        name: &'static CStr,
        tranche: &'static CStr,
        locks: usize,
        bytes: fn() -> usize,
        lay_out: unsafe fn(*mut u8),
    ) -> Region {
        Region {
            name,
            tranche,
            locks,
            bytes,
            lay_out,
            base: AtomicPtr::new(std::ptr::null_mut()),
            first_lock: AtomicPtr::new(std::ptr::null_mut()),
        }
    }

    /// Whether the region exists: the server preloaded raquel.
    pub fn attached(&self) -> bool {
        !self.base.load(Ordering::Relaxed).is_null()
    }

    /// The region's first byte with its lock `n` held exclusively until
    /// the guard goes (no statement may run under it); None without the
    /// region.
    pub fn lock(&self, n: usize) -> Option<(*mut u8, Guard)> {
        let base = self.base.load(Ordering::Relaxed);
        if base.is_null() {
            return None;
        }
        assert!(n < self.locks, "lock {n} of a region of {} locks", self.locks);
        // SAFETY: the tranche has `locks` locks, looked up by attach().
        unsafe {
            let lock = &raw mut (*self.first_lock.load(Ordering::Relaxed).add(n)).lock;
            pg_sys::LWLockAcquire(lock, pg_sys::LWLockMode::LW_EXCLUSIVE);
            Some((base, Guard { lock }))
        }
    }
}

/// A region's lock, held until the guard goes.
pub struct Guard {
    lock: *mut pg_sys::LWLock,
}

impl Drop for Guard {
    fn drop(&mut self) {
        // An ERROR from PostgreSQL code unwinding through here has reset
        // InterruptHoldoffCount, and the abort releases every LWLock: then
        // releasing it here would fail (as pgrx's PgLwLock does).
        // SAFETY: the lock was acquired by Region::lock.
        unsafe {
            if pg_sys::InterruptHoldoffCount > 0 {
                pg_sys::LWLockRelease(self.lock);
            }
        }
    }
}

/// The regions registered, in the postmaster while it preloads raquel.
static mut REGIONS: Vec<&'static Region> = Vec::new();
static mut PREV_REQUEST: pg_sys::shmem_request_hook_type = None;
static mut PREV_STARTUP: pg_sys::shmem_startup_hook_type = None;

/// Registers `region`: called from `_PG_init` while the server preloads
/// the library.
pub fn register(region: &'static Region) {
    // SAFETY: _PG_init runs once, in the postmaster, before any hook is
    // called; the hooks are set once, each calling the one it replaced.
    unsafe {
        let regions = &mut *(&raw mut REGIONS);
        if regions.is_empty() {
            PREV_REQUEST = pg_sys::shmem_request_hook;
            pg_sys::shmem_request_hook = Some(request_memory);
            PREV_STARTUP = pg_sys::shmem_startup_hook;
            pg_sys::shmem_startup_hook = Some(attach_memory);
        }
        regions.push(region);
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn request_memory() {
    // SAFETY: the postmaster calls its hooks one at a time.
    unsafe {
        if let Some(previous) = PREV_REQUEST {
            previous();
        }
        for region in (*(&raw const REGIONS)).iter() {
            pg_sys::RequestAddinShmemSpace((region.bytes)());
            pg_sys::RequestNamedLWLockTranche(region.tranche.as_ptr(), region.locks as i32);
        }
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn attach_memory() {
    // SAFETY: the postmaster calls its hooks one at a time; the regions and
    // their locks were requested by request_memory, and AddinShmemInitLock
    // (MainLWLockArray[21], as pgrx's own shared values take it) keeps two
    // processes from laying one out at once where each attaches itself.
    unsafe {
        if let Some(previous) = PREV_STARTUP {
            previous();
        }
        let init_lock = &raw mut (*pg_sys::MainLWLockArray.add(21)).lock;
        pg_sys::LWLockAcquire(init_lock, pg_sys::LWLockMode::LW_EXCLUSIVE);
        for region in (*(&raw const REGIONS)).iter() {
            let mut found = false;
            let base = pg_sys::ShmemInitStruct(region.name.as_ptr(), (region.bytes)(), &mut found).cast::<u8>();
            if !found {
                (region.lay_out)(base);
            }
            region.base.store(base, Ordering::Relaxed);
            region.first_lock.store(pg_sys::GetNamedLWLockTranche(region.tranche.as_ptr()), Ordering::Relaxed);
        }
        pg_sys::LWLockRelease(init_lock);
    }
}
