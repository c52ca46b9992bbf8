//! The token buckets of queues' rates (`rq_set_limits(rate => …)`), in
//! shared memory, so that claims of a rate-limited queue take their tokens
//! side by side instead of one after another under the queue's row lock,
//! and write no row for them (issue 35).
//!
//! A claim of a rate-limited queue takes its tokens here before it claims
//! from the queue (src/claim.rs, src/claim/flow_claim.rs).
//!
//! A bucket per (database, jobs table, queue) holds up to `rate` tokens,
//! starts full and gains `rate` every `per`; each job claimed takes one. A
//! claim takes what it may before it claims, and gives back at once what it
//! did not claim. Tokens are not transactional: a claim that rolls back has
//! used its tokens, which errs on the side of the limit. A bucket made for
//! other settings (a new rate or period) starts full again, as
//! `rq_set_limits` says a new rate does.
//!
//! After a restart (or a crash) every bucket starts full: over the period
//! around it, a queue may see at most one bucket more than its rate. A
//! queue whose bucket cannot be had (a name longer than `NAME_BYTES`, every
//! bucket in use, or a server that did not preload raquel) keeps its tokens
//! in its `queue_limits` row, under the row's lock, as before: the answer is
//! the same, only slower, and each such claim is counted
//! (`raquel_internal.rq_rate_bucket_counts()`). Buckets are never given back:
//! `BUCKETS` is the number of (database, queue) pairs with a rate that a
//! server can serve this way between restarts.

use crate::shmem;
use pgrx::prelude::*;
use pgrx::{pg_shmem_init, PGRXSharedMemory, PgAtomic};
use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};

/// How many buckets the server keeps.
const BUCKETS: usize = 1024;
/// The longest queue name with a bucket, in bytes.
const NAME_BYTES: usize = 64;

#[repr(C)]
#[derive(Clone, Copy)]
struct Bucket {
    in_use: bool,
    database: pg_sys::Oid,
    table: pg_sys::Oid,
    name_len: u8,
    name: [u8; NAME_BYTES],
    /// The settings the tokens are for.
    rate: i32,
    per_ms: i64,
    tokens: f64,
    /// When `tokens` was last brought up to date (ms).
    tokens_at: i64,
}

impl Bucket {
    fn is(&self, database: pg_sys::Oid, table: pg_sys::Oid, queue: &[u8]) -> bool {
        self.in_use && self.database == database && self.table == table && &self.name[..self.name_len as usize] == queue
    }

    /// Brings the tokens up to `now_ms` for `rate` per `per_ms`, starting
    /// full when the bucket was made for other settings.
    fn refill(&mut self, rate: i32, per_ms: i64, now_ms: i64) {
        if self.rate != rate || self.per_ms != per_ms {
            (self.rate, self.per_ms, self.tokens, self.tokens_at) = (rate, per_ms, f64::from(rate), now_ms);
            return;
        }
        self.tokens = refilled(self.tokens, self.tokens_at, rate, per_ms, now_ms);
        self.tokens_at = self.tokens_at.max(now_ms);
    }
}

/// The tokens of a bucket of `rate` per `per_ms` that held `tokens` at
/// `tokens_at`, at `now_ms`: what it gained meanwhile, never above `rate`
/// (a clock that steps back adds nothing). A bucket in shared memory and
/// one kept in a queue's row (src/claim/flow_claim.rs) fill alike.
pub fn refilled(tokens: f64, tokens_at: i64, rate: i32, per_ms: i64, now_ms: i64) -> f64 {
    let elapsed = (now_ms - tokens_at).max(0) as f64;
    (tokens + elapsed * f64::from(rate) / per_ms.max(1) as f64).min(f64::from(rate))
}

/// Whether `queue` may have a bucket here: the server preloaded raquel,
/// and its name fits a bucket (src/claim/flow_claim.rs: otherwise its row
/// keeps its tokens).
pub fn may_serve(queue: &str) -> bool {
    REGION.attached() && queue.len() <= NAME_BYTES
}

/// The buckets, all zero bytes at first: every bucket unused.
static REGION: shmem::Region =
    shmem::Region::new(c"raquel rate buckets", c"raquel_rate_buckets", 1, || std::mem::size_of::<Bucket>() * BUCKETS, |base| {
        // SAFETY: the region is BUCKETS buckets, fresh.
        unsafe { std::ptr::write_bytes(base, 0, std::mem::size_of::<Bucket>() * BUCKETS) }
    });

/// The buckets, locked exclusively until the guard goes (microseconds: no
/// statement runs under it).
struct Locked {
    buckets: &'static mut [Bucket],
    _lock: shmem::Guard,
}

/// The buckets, locked; None in a server that did not preload raquel.
fn locked() -> Option<Locked> {
    let (base, lock) = REGION.lock(0)?;
    // SAFETY: the region holds BUCKETS buckets; the lock makes this backend
    // the only one using them while the guard lives.
    Some(Locked { buckets: unsafe { std::slice::from_raw_parts_mut(base.cast::<Bucket>(), BUCKETS) }, _lock: lock })
}

/// Where the bucket of (database, table, queue) is, or would be made: the
/// first of its probes that holds it or is unused.
fn place(buckets: &[Bucket], database: pg_sys::Oid, table: pg_sys::Oid, queue: &[u8]) -> Option<usize> {
    // the same in every backend: DefaultHasher::new() has fixed keys
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    (database.to_u32(), table.to_u32(), queue).hash(&mut hasher);
    let start = (hasher.finish() % BUCKETS as u64) as usize;
    (0..BUCKETS).map(|step| (start + step) % BUCKETS).find(|&i| !buckets[i].in_use || buckets[i].is(database, table, queue))
}

/// How claims went, since the server started.
#[derive(Default)]
struct Counts {
    /// Claims that took their tokens from a bucket.
    shared: AtomicU64,
    /// Claims that took them from the queue's row: a name too long, or
    /// every bucket in use.
    from_rows: AtomicU64,
}

// SAFETY: atomics only.
unsafe impl PGRXSharedMemory for Counts {}

// SAFETY: the name is unique to this value, and init() sets it up.
static COUNTS: PgAtomic<Counts> = unsafe { PgAtomic::new(c"raquel_rate_bucket_counts") };

/// Called from `_PG_init` while the server preloads the library.
pub fn init() {
    shmem::register(&REGION);
    pg_shmem_init!(COUNTS);
}

/// Takes up to `wanted` tokens of `queue`'s bucket in the jobs table
/// `table`, for `rate` per `per_ms`; how many it took, or None when the
/// queue has no bucket (its row keeps its tokens).
pub fn take(table: pg_sys::Oid, queue: &str, rate: i32, per_ms: i64, wanted: i32, now_ms: i64) -> Option<i32> {
    let locked = locked()?;
    // SAFETY: MyDatabaseId is a backend global, set once connected.
    let database = unsafe { pg_sys::MyDatabaseId };
    let name = queue.as_bytes();
    let found = if may_serve(queue) { place(locked.buckets, database, table, name) } else { None };
    let Some(i) = found else {
        drop(locked);
        COUNTS.get().from_rows.fetch_add(1, Ordering::Relaxed);
        return None;
    };
    let bucket = &mut locked.buckets[i];
    if !bucket.in_use {
        let mut fresh = Bucket { in_use: true, database, table, name_len: name.len() as u8, name: [0; NAME_BYTES], rate, per_ms, tokens: f64::from(rate), tokens_at: now_ms };
        fresh.name[..name.len()].copy_from_slice(name);
        *bucket = fresh;
    }
    bucket.refill(rate, per_ms, now_ms);
    let took = (bucket.tokens.floor() as i64).clamp(0, i64::from(wanted.max(0))) as i32;
    bucket.tokens -= f64::from(took);
    drop(locked);
    COUNTS.get().shared.fetch_add(1, Ordering::Relaxed);
    Some(took)
}

/// Gives `count` tokens back to `queue`'s bucket (a claim took them and
/// claimed fewer jobs); never above the bucket's size.
pub fn give_back(table: pg_sys::Oid, queue: &str, count: i32) {
    let Some(locked) = locked() else { return };
    // SAFETY: MyDatabaseId is a backend global, set once connected.
    let database = unsafe { pg_sys::MyDatabaseId };
    if let Some(i) = place(locked.buckets, database, table, queue.as_bytes()) {
        let bucket = &mut locked.buckets[i];
        if bucket.in_use {
            bucket.tokens = (bucket.tokens + f64::from(count.max(0))).min(f64::from(bucket.rate));
        }
    }
}


/// How the claims of rate-limited queues took their tokens since the server
/// started: from a bucket in shared memory, or from the queue's row (a
/// name longer than 64 bytes, or every one of the 1,024 buckets in use);
/// and the buckets in use. For an operator who wonders why a rate-limited
/// queue is slow.
#[pg_extern(volatile, parallel_safe, schema = "raquel_internal")]
#[search_path(pg_catalog, pg_temp)]
fn rq_rate_bucket_counts() -> TableIterator<'static, (name!(claims_shared, i64), name!(claims_from_rows, i64), name!(buckets, i32), name!(max_buckets, i32))> {
    let counts = COUNTS.get();
    let big = |n: &AtomicU64| i64::try_from(n.load(Ordering::Relaxed)).unwrap_or(i64::MAX);
    let in_use = locked().map_or(0, |locked| locked.buckets.iter().filter(|b| b.in_use).count() as i32);
    TableIterator::once((big(&counts.shared), big(&counts.from_rows), in_use, BUCKETS as i32))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bucket(rate: i32, per_ms: i64, tokens: f64, tokens_at: i64) -> Bucket {
        Bucket { in_use: true, database: pg_sys::Oid::from_u32(1), table: pg_sys::Oid::from_u32(2), name_len: 1, name: [b'q'; NAME_BYTES], rate, per_ms, tokens, tokens_at }
    }

    #[test]
    fn a_bucket_fills_at_its_rate_up_to_its_size() {
        let mut b = bucket(10, 1000, 0.0, 0);
        b.refill(10, 1000, 500);
        assert_eq!((b.tokens, b.tokens_at), (5.0, 500));
        b.refill(10, 1000, 10_000);
        assert_eq!(b.tokens, 10.0);
        // a clock that steps back adds nothing, and keeps the later time
        b.tokens = 2.0;
        b.refill(10, 1000, 9_000);
        assert_eq!((b.tokens, b.tokens_at), (2.0, 10_000));
    }

    #[test]
    fn new_settings_start_a_full_bucket() {
        let mut b = bucket(10, 1000, 0.0, 0);
        b.refill(20, 1000, 1);
        assert_eq!((b.tokens, b.rate), (20.0, 20));
        b.tokens = 0.0;
        b.refill(20, 2000, 2);
        assert_eq!((b.tokens, b.per_ms), (20.0, 2000));
    }

    #[test]
    fn a_queue_finds_its_own_bucket_past_others() {
        let mut buckets = vec![bucket(1, 1, 0.0, 0); 0];
        buckets.resize(BUCKETS, Bucket { in_use: false, ..bucket(1, 1, 0.0, 0) });
        let (db, table) = (pg_sys::Oid::from_u32(1), pg_sys::Oid::from_u32(2));
        let first = place(&buckets, db, table, b"q").unwrap();
        buckets[first] = bucket(1, 1, 0.0, 0);
        assert_eq!(place(&buckets, db, table, b"q"), Some(first));
        // another database's queue of the same name is another bucket
        let other = place(&buckets, pg_sys::Oid::from_u32(3), table, b"q").unwrap();
        assert_ne!(other, first);
        // every bucket in use by others: none
        for b in buckets.iter_mut() {
            *b = Bucket { database: pg_sys::Oid::from_u32(9), ..bucket(1, 1, 0.0, 0) };
        }
        assert_eq!(place(&buckets, db, table, b"q"), None);
    }
}
