//! What a verb asks the catalogs about its own install, answered once per
//! backend: the tables beside a function (the jobs table, job_steps, …:
//! src/privileges.rs `table_of`) and whether the jobs table has a column
//! (`statements::jobs_have`: the schema generation of an install whose
//! update has not run). A claim and its complete asked eight times, 19,500
//! instructions of its 436,000 (callgrind); now each answer is a look in a
//! short list.
//!
//! Forgotten the way PostgreSQL forgets its own caches: any change of a
//! row of pg_proc, of a relation's name or of a column (CREATE, ALTER,
//! DROP, an update script, and a full reset of the caches) clears every
//! answer, and the next call asks again. That is coarse: a VACUUM or
//! ANALYZE of any table, and any temporary table made, clear it too, so
//! on a busy server the answers are asked again more often than the
//! idle single-backend count above shows; asking is what every call did
//! before.

use pgrx::prelude::*;
use std::cell::{Cell, RefCell};

/// How a verb runs, decided once at its entry from what this backend knows
/// of its install (each part asked of the catalogs once per backend and
/// kept, as below): on one server or on Citus, and the schema generation of
/// the jobs table, which is older than this library's in a database whose
/// `ALTER EXTENSION raquel UPDATE` has not run yet. A verb asks for it once
/// and hands it down; nothing below the entry asks again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mode {
    /// Citus distributes the jobs table (src/distributed.rs).
    pub distributed: bool,
    pub generation: Generation,
}

/// The jobs table's columns, by the version that added them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Generation {
    /// 0.1.0 and 0.2.0: no groups, no workflows, no results.
    Before030,
    /// 0.3.0 and 0.4.0: fair groups (group_key) and workflows (key_period,
    /// and with them what a job's end sets off).
    Groups030,
    /// 0.5.0: results and steps kept with a job (result).
    Results050,
    /// 0.6.0 on: a job's history (past_attempts, rq_history).
    History060,
}

impl Mode {
    /// Fair groups: the group_key column.
    pub fn groups(&self) -> bool {
        self.generation >= Generation::Groups030
    }

    /// Workflows and key periods: what a job's end sets off, and queues
    /// without history (a table older than 0.3.0 keeps every job).
    pub fn workflows(&self) -> bool {
        self.generation >= Generation::Groups030
    }

    /// Results and steps kept with a job (job_steps, job_parents).
    pub fn results(&self) -> bool {
        self.generation >= Generation::Results050
    }

    /// A job's history: the attempts before its current one
    /// (past_attempts), appended by the verbs that end an attempt without
    /// ending the job (src/transitions.rs `past_attempts_set`). Not on
    /// Citus: its router planner refuses an UPDATE whose SET calls a
    /// function that is not IMMUTABLE on the row's columns (the entry's
    /// jsonb_build_object is STABLE), so a distributed table keeps none and
    /// rq_history shows the row's own attempt alone.
    pub fn history(&self) -> bool {
        self.generation >= Generation::History060 && !self.distributed
    }
}

/// The mode of a verb of `function`. Connected to SPI, before the verb's
/// own statements: a backend's first call may run one (is the jobs table
/// distributed?); later calls look in the kept answers.
pub fn mode(function: pg_sys::Oid) -> Mode {
    let generation = if crate::statements::jobs_have(function, c"past_attempts") {
        Generation::History060
    } else if crate::statements::jobs_have(function, c"result") {
        Generation::Results050
    } else if crate::statements::jobs_have(function, c"key_period") {
        Generation::Groups030
    } else {
        Generation::Before030
    };
    Mode { distributed: crate::distributed::is_distributed(function), generation }
}

thread_local! {
    /// (function, table name) → the table (InvalidOid: none).
    static TABLES: RefCell<Vec<(pg_sys::Oid, &'static str, pg_sys::Oid)>> = const { RefCell::new(Vec::new()) };
    /// (function, column of its jobs table) → whether it is there.
    static COLUMNS: RefCell<Vec<(pg_sys::Oid, &'static std::ffi::CStr, bool)>> = const { RefCell::new(Vec::new()) };
    static REGISTERED: Cell<bool> = const { Cell::new(false) };
    /// Counts the forgettings: an answer looked up while one came in (a
    /// lock taken while looking takes in invalidations) is not kept.
    static GENERATION: Cell<u64> = const { Cell::new(0) };
}

/// The table named `name` beside `function`, asked of the catalogs with
/// `look` the first time.
pub fn table(function: pg_sys::Oid, name: &'static str, look: impl FnOnce() -> pg_sys::Oid) -> pg_sys::Oid {
    kept(&TABLES, function, name, look)
}

/// Whether `function`'s jobs table has `column`, asked of the catalogs
/// with `look` the first time.
pub fn column(function: pg_sys::Oid, column: &'static std::ffi::CStr, look: impl FnOnce() -> bool) -> bool {
    kept(&COLUMNS, function, column, look)
}

/// The answer `cache` keeps for (`function`, `key`), or `look`'s, kept
/// unless an invalidation came in while it looked.
fn kept<K: PartialEq + Copy, V: Copy>(
    cache: &'static std::thread::LocalKey<RefCell<Vec<(pg_sys::Oid, K, V)>>>,
    function: pg_sys::Oid,
    key: K,
    look: impl FnOnce() -> V,
) -> V {
    if let Some(found) = cache.with_borrow(|c| c.iter().find(|(f, k, _)| *f == function && *k == key).map(|(.., v)| *v)) {
        return found;
    }
    watch();
    let before = GENERATION.get();
    let value = look();
    if GENERATION.get() == before {
        cache.with_borrow_mut(|c| c.push((function, key, value)));
    }
    value
}

/// Registers, once per backend, the callbacks that forget.
fn watch() {
    if REGISTERED.replace(true) {
        return;
    }
    for cache in [pg_sys::SysCacheIdentifier::PROCOID, pg_sys::SysCacheIdentifier::RELNAMENSP, pg_sys::SysCacheIdentifier::ATTNAME] {
        // SAFETY: registers a callback that lives as long as the backend.
        unsafe { pg_sys::CacheRegisterSyscacheCallback(cache as i32, Some(forget), pg_sys::Datum::from(0)) };
    }
}

/// Runs while invalidations are processed: only forgets.
#[pg_guard]
unsafe extern "C-unwind" fn forget(_arg: pg_sys::Datum, _cache: i32, _hash: u32) {
    GENERATION.set(GENERATION.get() + 1);
    TABLES.with_borrow_mut(|t| t.clear());
    COLUMNS.with_borrow_mut(|c| c.clear());
}
