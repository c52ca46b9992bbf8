//! The background worker that looks after the queue: expires jobs that waited
//! too long, rescues jobs whose lease ran out, prunes old finished jobs.
//!
//! A *launcher* (one per server, started from `shared_preload_libraries`)
//! lists the databases and, each round, starts a short-lived *housekeeping*
//! worker in every served database, one at a time. The housekeeping worker
//! connects, runs the duties (the same SQL functions a person can call) in
//! short transactions, and exits. Nothing stays connected to a database, so
//! `DROP DATABASE` is never blocked, and a database whose extension is dropped
//! is simply not served any more.
//!
//! A database whose extension is of another version than the library is
//! left alone, with a WARNING that says to run ALTER EXTENSION raquel UPDATE;
//! the update wakes the launcher, which then serves it.
//!
//! A database without the extension is looked at once, when the launcher first
//! sees it, and again only after some `CREATE EXTENSION raquel` commits and
//! wakes the launcher (`rq_worker_wake()`, run by the install script).

use crate::errors;
use crate::settings;
use pgrx::bgworkers::{BackgroundWorker, BackgroundWorkerBuilder, BgWorkerStartTime, SignalWakeFlags};
use pgrx::pg_sys::panic::CaughtError;
use pgrx::prelude::*;
use pgrx::{pg_shmem_init, PgAtomic};
use std::collections::HashMap;
use std::ffi::CStr;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU32, Ordering};
use std::time::Duration;

/// The launcher's PGPROC number, so that a backend can set its latch (-1: none).
// SAFETY (these three): names unique to each atomic, set up by pg_shmem_init! in register().
static LAUNCHER_PROCNO: PgAtomic<AtomicI32> = unsafe { PgAtomic::new(c"raquel_launcher_procno") };
/// Set by `CREATE EXTENSION raquel`: look again at databases that had no extension.
static RECHECK_REQUESTED: PgAtomic<AtomicBool> = unsafe { PgAtomic::new(c"raquel_recheck") };
/// What the housekeeping worker that just ran found; the launcher runs one at
/// a time, so one slot is enough.
static LAST_OUTCOME: PgAtomic<AtomicU32> = unsafe { PgAtomic::new(c"raquel_last_outcome") };

const OUTCOME_UNKNOWN: u32 = 0;
const OUTCOME_SERVED: u32 = 1;
const OUTCOME_NO_EXTENSION: u32 = 2;

/// Batches one duty may run in one round, so that a huge backlog does not keep
/// the worker from the other duties and databases for long.
const MAX_BATCHES_PER_DUTY: usize = 100;

/// The version of this library: the install version whose duties it runs.
const LIBRARY_VERSION: &str = env!("CARGO_PKG_VERSION");

/// How long the postmaster waits before restarting a launcher that died.
const LAUNCHER_RESTART: Duration = Duration::from_secs(5);

/// Called from `_PG_init` while the server preloads the library.
pub fn register() {
    pg_shmem_init!(LAUNCHER_PROCNO = AtomicI32::new(-1));
    pg_shmem_init!(RECHECK_REQUESTED = AtomicBool::new(false));
    pg_shmem_init!(LAST_OUTCOME = AtomicU32::new(OUTCOME_UNKNOWN));
    BackgroundWorkerBuilder::new("raquel launcher")
        .set_type("raquel launcher")
        .set_library("raquel")
        .set_function("raquel_launcher_main")
        .enable_spi_access()
        .set_start_time(BgWorkerStartTime::RecoveryFinished)
        .set_restart_time(Some(LAUNCHER_RESTART))
        .load();
}

/// Asks the launcher to look at the databases again once the calling
/// transaction commits (so that it finds the extension this transaction
/// creates); false when no launcher runs because the library is not in
/// `shared_preload_libraries`.
#[pg_extern(volatile, parallel_unsafe)]
fn rq_worker_wake() -> bool {
    if !crate::preloaded() {
        return false;
    }
    pgrx::register_xact_callback(pgrx::PgXactCallbackEvent::Commit, wake_launcher);
    true
}

/// Runs at commit, where nothing may fail: atomics and SetLatch only.
fn wake_launcher() {
    RECHECK_REQUESTED.get().store(true, Ordering::SeqCst);
    let procno = LAUNCHER_PROCNO.get().load(Ordering::SeqCst);
    if procno >= 0 {
        // SAFETY: procno is a live PGPROC slot's number, published by the launcher.
        unsafe {
            let proc = (*pg_sys::ProcGlobal).allProcs.add(procno as usize);
            pg_sys::SetLatch(&raw mut (*proc).procLatch);
        }
    }
}

fn shutdown_requested() -> bool {
    // SAFETY: a flag set by this process's own SIGTERM handler.
    unsafe { pg_sys::ShutdownRequestPending != 0 }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Found {
    Unknown,
    Extension,
    NoExtension,
}

#[pg_guard]
#[unsafe(no_mangle)]
pub extern "C-unwind" fn raquel_launcher_main(_arg: pg_sys::Datum) {
    BackgroundWorker::attach_signal_handlers(SignalWakeFlags::SIGHUP | SignalWakeFlags::SIGTERM);
    // No database: the launcher reads only the shared catalog pg_database.
    BackgroundWorker::connect_worker_to_spi(None, None);
    // SAFETY: MyProc is this worker's PGPROC, set when it started.
    unsafe { LAUNCHER_PROCNO.get().store((*pg_sys::MyProc).pgprocno, Ordering::SeqCst) };
    log!("raquel launcher started");

    let mut databases: HashMap<pg_sys::Oid, Found> = HashMap::new();
    let mut no_slot_warned = false;
    while sleep_until_next_round() {
        if settings::worker_enabled() {
            run_round(&mut databases, &mut no_slot_warned);
        } else {
            // forget what we knew: when switched back on, look at every database
            databases.clear();
            RECHECK_REQUESTED.get().store(false, Ordering::SeqCst);
        }
    }

    LAUNCHER_PROCNO.get().store(-1, Ordering::SeqCst);
    log!("raquel launcher exiting");
    // Exit code 1, like PostgreSQL's own workers on SIGTERM: after
    // pg_terminate_backend the postmaster starts the launcher again; at
    // shutdown it does not.
    // SAFETY: ends this process the way PostgreSQL's own workers do.
    unsafe { pg_sys::proc_exit(1) }
}

/// Sleeps `raquel.worker_interval` from now, or less when a `CREATE EXTENSION`
/// asks for a recheck or a reload shortens the interval. Our own housekeeping
/// workers set the latch too (the postmaster tells the launcher when they
/// start and stop), so a wake-up alone is no reason to start a round. False
/// on SIGTERM or postmaster death.
fn sleep_until_next_round() -> bool {
    let slept_from = std::time::Instant::now();
    loop {
        reload_settings_if_asked();
        if RECHECK_REQUESTED.get().load(Ordering::SeqCst) {
            return true;
        }
        let Some(left) = settings::worker_interval().checked_sub(slept_from.elapsed()) else {
            return true;
        };
        if left.is_zero() {
            return true;
        }
        if !BackgroundWorker::wait_latch(Some(left)) {
            return false;
        }
    }
}

fn reload_settings_if_asked() {
    if BackgroundWorker::sighup_received() {
        // SAFETY: what PostgreSQL's own processes do on SIGHUP, outside a transaction.
        unsafe {
            pg_sys::ConfigReloadPending = 0;
            pg_sys::ProcessConfigFile(pg_sys::GucContext::PGC_SIGHUP);
        }
    }
}

/// One round: every served database gets its duties run once.
fn run_round(databases: &mut HashMap<pg_sys::Oid, Found>, no_slot_warned: &mut bool) {
    let listed = list_databases();
    debug1!("raquel launcher: round over {} databases", listed.len());
    databases.retain(|oid, _| listed.iter().any(|(listed_oid, _)| listed_oid == oid));
    let recheck = RECHECK_REQUESTED.get().swap(false, Ordering::SeqCst);
    for (oid, name) in listed {
        if shutdown_requested() {
            return;
        }
        reload_settings_if_asked();
        if !settings::serves_database(&name) {
            continue;
        }
        let found = databases.entry(oid).or_insert(Found::Unknown);
        if *found == Found::NoExtension && !recheck {
            continue;
        }
        debug1!("raquel launcher: looking after database \"{name}\" ({found:?})");
        match run_housekeeping(oid, &name) {
            Some(outcome) => {
                *found = outcome;
                *no_slot_warned = false;
            }
            None if !*no_slot_warned => {
                warning!(
                    "raquel: no free background worker slot to look after database \"{name}\"; \
                     raise max_worker_processes"
                );
                *no_slot_warned = true;
            }
            None => {}
        }
    }
}

/// The connectable databases, from the shared catalog (the way autovacuum's
/// launcher reads it: the launcher is connected to no database).
fn list_databases() -> Vec<(pg_sys::Oid, String)> {
    let mut found = Vec::new();
    // SAFETY: a catalog scan in a transaction of its own, as autovacuum's
    // launcher does; each tuple is read while the scan holds it.
    unsafe {
        pg_sys::SetCurrentStatementStartTimestamp();
        pg_sys::StartTransactionCommand();
        // Sets the transaction's snapshot, which the catalog scan below
        // uses; the pointer it returns is not needed.
        let _ = pg_sys::GetTransactionSnapshot();
        let lock = pg_sys::AccessShareLock as pg_sys::LOCKMODE;
        let rel = pg_sys::table_open(pg_sys::DatabaseRelationId, lock);
        let scan = pg_sys::table_beginscan_catalog(rel, 0, std::ptr::null_mut());
        loop {
            let tuple = pg_sys::heap_getnext(scan, pg_sys::ScanDirection::ForwardScanDirection);
            if tuple.is_null() {
                break;
            }
            let db = &*pg_sys::heap_tuple_get_struct::<pg_sys::FormData_pg_database>(tuple);
            // -2 marks a database left half-dropped by an interrupted DROP DATABASE.
            if db.datallowconn && !db.datistemplate && db.datconnlimit != -2 {
                let name = CStr::from_ptr(db.datname.data.as_ptr()).to_string_lossy().into_owned();
                found.push((db.oid, name));
            }
        }
        pg_sys::table_endscan(scan);
        pg_sys::table_close(rel, lock);
        pg_sys::CommitTransactionCommand();
    }
    found
}

/// Runs a housekeeping worker in database `oid` and waits for it; None when
/// no worker slot was free.
fn run_housekeeping(oid: pg_sys::Oid, name: &str) -> Option<Found> {
    LAST_OUTCOME.get().store(OUTCOME_UNKNOWN, Ordering::SeqCst);
    // SAFETY (MyProcPid): this process's pid, set at its start.
    let worker = BackgroundWorkerBuilder::new(&format!("raquel housekeeping in {name}"))
        .set_type("raquel worker")
        .set_library("raquel")
        .set_function("raquel_housekeeping_main")
        .set_argument(oid.into_datum())
        .enable_spi_access()
        .set_notify_pid(unsafe { pg_sys::MyProcPid })
        .set_restart_time(None)
        .load_dynamic()
        .ok()?;
    if let Err(status) = worker.wait_for_shutdown() {
        // the postmaster is gone or never started it: nothing was done
        debug1!("raquel launcher: the housekeeping worker for \"{name}\" ended as {status:?}");
        return Some(Found::Unknown);
    }
    Some(match LAST_OUTCOME.get().load(Ordering::SeqCst) {
        OUTCOME_SERVED => Found::Extension,
        OUTCOME_NO_EXTENSION => Found::NoExtension,
        // it died before saying: try again next round
        _ => Found::Unknown,
    })
}

#[pg_guard]
#[unsafe(no_mangle)]
pub extern "C-unwind" fn raquel_housekeeping_main(arg: pg_sys::Datum) {
    BackgroundWorker::attach_signal_handlers(SignalWakeFlags::SIGHUP | SignalWakeFlags::SIGTERM);
    // SAFETY: the launcher passes a database OID as the argument.
    let Some(oid) = (unsafe { pg_sys::Oid::from_datum(arg, false) }) else { return };
    BackgroundWorker::connect_worker_to_spi_by_oid(Some(oid), None);

    // The extension's schema and version. The duties this library calls are
    // those of its own version: an install of another version (the library
    // was updated, ALTER EXTENSION raquel UPDATE not yet run) is left alone.
    let found = BackgroundWorker::transaction(|| {
        Spi::get_three::<String, String, String>(
            "SELECT quote_ident(n.nspname), e.extversion, current_database()::text \
             FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace \
             WHERE e.extname = 'raquel' \
             UNION ALL SELECT NULL, NULL, NULL LIMIT 1",
        )
    });
    let (schema, database) = match found {
        Ok((Some(schema), Some(version), Some(database))) if version == LIBRARY_VERSION => (schema, database),
        Ok((Some(_), Some(version), Some(database))) => {
            warning!(
                "raquel: the extension in database \"{database}\" is version {version}, the library is \
                 {LIBRARY_VERSION}; run ALTER EXTENSION raquel UPDATE there. The worker leaves it alone until then."
            );
            LAST_OUTCOME.get().store(OUTCOME_NO_EXTENSION, Ordering::SeqCst);
            return;
        }
        Ok(_) => {
            LAST_OUTCOME.get().store(OUTCOME_NO_EXTENSION, Ordering::SeqCst);
            return;
        }
        Err(error) => {
            // the launcher will try again next round
            warning!("raquel: could not look for the extension in database {oid:?}: {error}");
            return;
        }
    };
    LAST_OUTCOME.get().store(OUTCOME_SERVED, Ordering::SeqCst);

    let batch = settings::batch_size();
    let duties = [
        ("expire", format!("SELECT {schema}.rq_expire({batch})")),
        ("rescue", format!("SELECT {schema}.rq_rescue({batch})")),
        (
            "prune",
            format!("SELECT {schema}.rq_prune({batch}, make_interval(secs => {}))", settings::retention_s()),
        ),
    ];
    for (duty, sql) in &duties {
        for _ in 0..MAX_BATCHES_PER_DUTY {
            if shutdown_requested() {
                return;
            }
            match run_duty(duty, sql, &database) {
                Some(changed) if changed >= i64::from(batch) => continue,
                _ => break,
            }
        }
    }
}

/// One duty batch in its own transaction. An error is logged as a WARNING
/// with the error's own SQLSTATE and the transaction rolled back, so the
/// other duties still run.
fn run_duty(duty: &str, sql: &str, database: &str) -> Option<i64> {
    PgTryBuilder::new(|| BackgroundWorker::transaction(|| Spi::get_one::<i64>(sql)).ok().flatten())
        .catch_others(|error| {
            // SAFETY: the duty's transaction failed; abort it before the next.
            unsafe { pg_sys::AbortCurrentTransaction() };
            let report = match &error {
                CaughtError::PostgresError(report)
                | CaughtError::ErrorReport(report)
                | CaughtError::RustPanic { ereport: report, .. } => report,
            };
            errors::warning(
                report.sql_error_code(),
                format!("raquel: the {duty} duty failed in database \"{database}\": {}", report.message()),
            );
            None
        })
        .execute()
}
