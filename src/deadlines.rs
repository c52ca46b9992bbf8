//! When the background worker next has work in a database. A housekeeping
//! round in a database costs a process start and a connection (about 10 ms
//! of CPU), so the launcher starts one only when something there is due:
//! a lease ends, a job's max_age runs out, finished jobs pass the retention.
//! A round reports the earliest such instant it can see in the table
//! (sql/duties.sql, rq_next_duty_ms); what commits after it, each backend
//! notes here at commit: a claim's lease end (src/claim.rs), and from the
//! jobs table's triggers (src/events.rs) a new job's or a ready-again job's
//! expiry and the lease of a claim made outside rq_claim. The launcher
//! takes the notes each time it looks (src/worker.rs).
//!
//! The notes sit in shared memory, one slot per database; a full table
//! notes for every database at once (the launcher then looks at each),
//! which costs rounds, never a missed deadline.

use pgrx::prelude::*;
use pgrx::{pg_shmem_init, PGRXSharedMemory, PgLwLock, PgXactCallbackEvent};
use std::cell::Cell;

/// Databases whose deadlines are noted separately; more share one slot.
const SLOTS: usize = 64;
const NOTHING_DUE: i64 = i64::MAX;

#[derive(Clone, Copy)]
struct Note {
    database: pg_sys::Oid,
    due_ms: i64,
}

#[derive(Clone, Copy)]
pub struct Notes {
    slots: [Note; SLOTS],
    /// Noted for every database: the slots were full.
    every_database_ms: i64,
}

impl Default for Notes {
    fn default() -> Self {
        Notes { slots: [Note { database: pg_sys::InvalidOid, due_ms: NOTHING_DUE }; SLOTS], every_database_ms: NOTHING_DUE }
    }
}

impl Notes {
    fn note(&mut self, database: pg_sys::Oid, due_ms: i64) {
        let free = pg_sys::InvalidOid;
        let slot = self.slots.iter().position(|n| n.database == database).or_else(|| self.slots.iter().position(|n| n.database == free));
        match slot.map(|i| &mut self.slots[i]) {
            Some(slot) => {
                slot.database = database;
                slot.due_ms = slot.due_ms.min(due_ms);
            }
            None => self.every_database_ms = self.every_database_ms.min(due_ms),
        }
    }

    /// When database `database` has something due, by these notes.
    pub fn due_ms(&self, database: pg_sys::Oid) -> Option<i64> {
        let own = self.slots.iter().find(|n| n.database == database).map_or(NOTHING_DUE, |n| n.due_ms);
        Some(own.min(self.every_database_ms)).filter(|&due| due != NOTHING_DUE)
    }
}

// SAFETY: plain data (no pointers), shared under the PgLwLock below.
unsafe impl PGRXSharedMemory for Notes {}

// SAFETY: the name is unique to this lock, and pg_shmem_init! in init() sets it up.
static NOTES: PgLwLock<Notes> = unsafe { PgLwLock::new(c"raquel_deadlines") };

thread_local! {
    /// The earliest deadline this transaction made, noted at commit.
    static EARLIEST: Cell<i64> = const { Cell::new(NOTHING_DUE) };
}

/// Called from `_PG_init` while the server preloads the library.
pub fn init() {
    pg_shmem_init!(NOTES);
}

/// Notes that this transaction made something due at `due_ms` in this
/// database (noted at commit: before, the worker could not see it, and a
/// rolled-back transaction made nothing due).
pub fn note(due_ms: i64) {
    if !crate::preloaded() {
        return;
    }
    let before = EARLIEST.replace(EARLIEST.get().min(due_ms));
    if before == NOTHING_DUE {
        pgrx::register_xact_callback(PgXactCallbackEvent::Commit, || {
            let due_ms = EARLIEST.replace(NOTHING_DUE);
            // SAFETY: MyDatabaseId is this backend's, set once it connected.
            NOTES.exclusive().note(unsafe { pg_sys::MyDatabaseId }, due_ms);
        });
        pgrx::register_xact_callback(PgXactCallbackEvent::Abort, || EARLIEST.set(NOTHING_DUE));
    }
}

/// The notes made since the last take, for the launcher; the table is empty after.
pub fn take() -> Notes {
    std::mem::take(&mut *NOTES.exclusive())
}

/// Asks the background worker to look in at this transaction's commit: for
/// what a snapshot older than another transaction's commit may have missed
/// (a wait and an emit of one event under REPEATABLE READ: sql/waits.sql).
#[pg_extern(volatile, parallel_unsafe, schema = "raquel_internal")]
#[search_path(pg_catalog, pg_temp)]
fn rq_look_in_at_commit() {
    note(crate::clock::now_ms());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_database_keeps_its_earliest_deadline() {
        let mut notes = Notes::default();
        let (a, b) = (pg_sys::Oid::from(10), pg_sys::Oid::from(11));
        notes.note(a, 500);
        notes.note(a, 300);
        notes.note(a, 900);
        assert_eq!(notes.due_ms(a), Some(300));
        assert_eq!(notes.due_ms(b), None);
    }

    #[test]
    fn a_full_table_notes_for_every_database() {
        let mut notes = Notes::default();
        for db in 1..=SLOTS as u32 {
            notes.note(pg_sys::Oid::from(db), 1000);
        }
        notes.note(pg_sys::Oid::from(5000), 700);
        assert_eq!(notes.due_ms(pg_sys::Oid::from(6000)), Some(700), "an unnoted database is due when the overflow is");
        assert_eq!(notes.due_ms(pg_sys::Oid::from(1)), Some(700));
    }
}
