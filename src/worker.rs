//! The background worker that looks after the queue: expires jobs that waited
//! too long, rescues jobs whose lease ran out, prunes old finished jobs.
//!
//! A *launcher* (one per server, started from `shared_preload_libraries`)
//! lists the databases and starts a short-lived *housekeeping* worker in a
//! served database when something there is due, one database at a time.
//! The housekeeping worker connects, runs the duties (the same SQL functions
//! a person can call) in short transactions as the extension's owner,
//! reports when the next thing in that database falls due, and exits.
//! Nothing stays connected to a database, so `DROP DATABASE` is never
//! blocked, and a database whose extension is dropped is simply not served
//! any more.
//!
//! When is "due"? The earliest of: what the last round there saw coming
//! (the first lease to end, the first job to expire, the first finished job
//! to pass the retention), what backends noted since (src/deadlines.rs: a
//! claim's lease, a job's max_age), and IDLE_VISIT after the last round, for
//! what nobody notes (claims made by the Python library, rows written by
//! hand, finished jobs' retention). An idle database costs a round every
//! IDLE_VISIT, not every
//! `raquel.worker_interval`; the launcher looks at the notes every
//! `raquel.worker_interval`, which bounds how late a duty runs.
//!
//! A database whose extension is of another version than the library is
//! left alone, with a WARNING that says to run ALTER EXTENSION raquel UPDATE;
//! the update wakes the launcher, which then serves it.
//!
//! A database without the extension is looked at once, when the launcher first
//! sees it, and again only after some `CREATE EXTENSION raquel` commits and
//! wakes the launcher (`rq_worker_wake()`, run by the install script).
//! However often that is asked, rounds start at most once per
//! MIN_ROUND_GAP.
//!
//! The housekeeping worker runs with an empty search_path (as autovacuum
//! does: only pg_catalog resolves) and runs each duty as the owner of the
//! extension, never as the bootstrap superuser it connects as, with a lock
//! timeout, so that a table some session keeps locked holds up neither this
//! database's other duties for long nor any other database.

use crate::clock::now_ms;
use crate::deadlines;
use crate::errors;
use crate::settings;
use crate::statements;
use crate::waiters;
use pgrx::bgworkers::{BackgroundWorker, BackgroundWorkerBuilder, BgWorkerStartTime, SignalWakeFlags};
use pgrx::pg_sys::panic::CaughtError;
use pgrx::prelude::*;
use pgrx::{pg_shmem_init, PgAtomic};
use std::collections::HashMap;
use std::ffi::CStr;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicI64, AtomicU32, Ordering};
use std::time::Duration;

/// The launcher's PGPROC number, so that a backend can set its latch (-1: none).
// SAFETY (these three): names unique to each atomic, set up by pg_shmem_init! in register().
static LAUNCHER_PROCNO: PgAtomic<AtomicI32> = unsafe { PgAtomic::new(c"raquel_launcher_procno") };
/// Set by `CREATE EXTENSION raquel`: look again at databases that had no extension.
static RECHECK_REQUESTED: PgAtomic<AtomicBool> = unsafe { PgAtomic::new(c"raquel_recheck") };
/// What the housekeeping worker that just ran found; the launcher runs one at
/// a time, so one slot is enough.
static LAST_OUTCOME: PgAtomic<AtomicU32> = unsafe { PgAtomic::new(c"raquel_last_outcome") };
/// When it saw the next thing fall due there (ms; NOTHING_DUE: nothing).
// SAFETY: the name is unique to this atomic, set up by pg_shmem_init! in register().
static LAST_NEXT_DUE: PgAtomic<AtomicI64> = unsafe { PgAtomic::new(c"raquel_last_next_due") };

/// Whether the housekeeping worker about to run may log what
/// rq_warnings() says (the launcher allows it once per WARNINGS_EVERY_MS a
/// database), and whether it did.
// SAFETY (these two): names unique to each atomic, set up by pg_shmem_init! in register().
static WARN_NOW: PgAtomic<AtomicBool> = unsafe { PgAtomic::new(c"raquel_warn_now") };
static WARNED: PgAtomic<AtomicBool> = unsafe { PgAtomic::new(c"raquel_warned") };

/// How often a database's warnings (a schema others may create in) reach
/// the server log: once an hour, and at the first round after the launcher
/// starts.
const WARNINGS_EVERY_MS: i64 = 60 * 60 * 1000;

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

/// Rounds asked for by `rq_worker_wake` (every CREATE EXTENSION) start at
/// most this often (or every `raquel.worker_interval` if that is shorter),
/// however often it is called.
const MIN_ROUND_GAP: Duration = Duration::from_secs(1);

/// Planned visits (a lease that ends, a job that expires, a schedule's slot)
/// start at most this often: often enough that a per-second schedule's
/// visits fall on its slots rather than a second after the last visit, and
/// seldom enough that a flood of deadlines costs at most two housekeeping
/// workers a second.
const MIN_VISIT_GAP: Duration = Duration::from_millis(500);

/// A served database with nothing noted is visited at least this often:
/// for what no backend notes (a claim made outside rq_claim, by the Python
/// library, or any row written by hand), and the retention. A visit costs
/// about 30 ms of CPU (a process, a connection, the duties): every two
/// minutes, 50 idle databases took 1.3 % of a core; every five, half that
/// (bench/idle).
const IDLE_VISIT_MS: i64 = 5 * 60 * 1000;

/// A duty waits at most this long for a lock (a table some session keeps
/// locked): then it fails with 55P03, is reported, and runs again in the
/// next round, and the round goes on with the other duties, each waiting at
/// most LOCK_TIMEOUT_AFTER_A_WAIT. The duties take rows with SKIP LOCKED, so
/// no lock a producer or a worker holds on a job holds them up.
const LOCK_TIMEOUT: &std::ffi::CStr = c"500ms";
const LOCK_TIMEOUT_AFTER_A_WAIT: &std::ffi::CStr = c"50ms";

const NOTHING_DUE: i64 = i64::MAX;

/// Called from `_PG_init` while the server preloads the library.
pub fn register() {
    pg_shmem_init!(LAUNCHER_PROCNO = AtomicI32::new(-1));
    pg_shmem_init!(RECHECK_REQUESTED = AtomicBool::new(false));
    pg_shmem_init!(LAST_OUTCOME = AtomicU32::new(OUTCOME_UNKNOWN));
    pg_shmem_init!(LAST_NEXT_DUE = AtomicI64::new(NOTHING_DUE));
    pg_shmem_init!(WARN_NOW = AtomicBool::new(false));
    pg_shmem_init!(WARNED = AtomicBool::new(false));
    BackgroundWorkerBuilder::new("raquel launcher")
        .set_type("raquel launcher")
        .set_library("raquel")
        .set_function("raquel_launcher_main")
        .enable_spi_access()
        .set_start_time(BgWorkerStartTime::RecoveryFinished)
        .set_restart_time(Some(LAUNCHER_RESTART))
        .load();
}

/// Asks the launcher, once the calling transaction commits, to run the
/// duties in this database and to look again at the databases that had no
/// extension (so that it finds the extension this transaction creates);
/// false when no launcher runs because the library is not in
/// `shared_preload_libraries`.
#[pg_extern(schema = "raquel_internal", volatile, parallel_unsafe)]
#[search_path(pg_catalog, pg_temp)]
fn rq_worker_wake() -> bool {
    if !crate::preloaded() {
        return false;
    }
    deadlines::note(now_ms());
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

/// What the launcher knows of a database.
struct Database {
    found: Found,
    /// When to run its duties next (ms since the epoch).
    next_visit_ms: i64,
    /// When its last visit started (ms since the epoch).
    last_visit_ms: i64,
    /// When its warnings last reached the log (ms since the epoch; 0: never).
    warned_ms: i64,
}

#[pg_guard]
#[unsafe(no_mangle)]
pub extern "C-unwind" fn raquel_launcher_main(_arg: pg_sys::Datum) {
    BackgroundWorker::attach_signal_handlers(SignalWakeFlags::SIGHUP | SignalWakeFlags::SIGTERM);
    // No database: the launcher reads only the shared catalog pg_database.
    BackgroundWorker::connect_worker_to_spi(None, None);
    LAUNCHER_PROCNO.get().store(waiters::my_procno(), Ordering::SeqCst);
    log!("raquel launcher started");
    waiters::check_slots();

    let mut databases: HashMap<pg_sys::Oid, Database> = HashMap::new();
    let mut no_slot_warned = false;
    let mut last_round = std::time::Instant::now();
    // the last round that started a housekeeping worker: the gap between
    // rounds counts from it, so that a round that only looked at the notes
    // does not put off a visit planned just after it
    let mut last_visits = last_round;
    while sleep_until_next_round(next_visit(&databases), last_round, last_visits) {
        last_round = std::time::Instant::now();
        // a new retention applies at each database's next round
        reload_settings_if_asked();
        if settings::worker_enabled() {
            if run_round(&mut databases, &mut no_slot_warned) {
                last_visits = last_round;
            }
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

/// The earliest planned visit of a database with the extension.
fn next_visit(databases: &HashMap<pg_sys::Oid, Database>) -> Option<i64> {
    databases.values().filter(|db| db.found == Found::Extension).map(|db| db.next_visit_ms).min()
}

/// Sleeps until the next look: `raquel.worker_interval` from the last round
/// (when the notes of backends are taken), sooner when a database's visit
/// is planned sooner (but never sooner than MIN_VISIT_GAP after the last
/// round that visited a database), or when a `CREATE EXTENSION` asks for a
/// recheck (never sooner than MIN_ROUND_GAP after the last round). Our own
/// housekeeping workers set the latch too (the postmaster tells the
/// launcher when they start and stop), so a wake-up alone is no reason to
/// start a round. False on SIGTERM or postmaster death.
fn sleep_until_next_round(next_visit_ms: Option<i64>, last_round: std::time::Instant, last_visits: std::time::Instant) -> bool {
    loop {
        // A SIGTERM that came during the round: the round stopped early, so
        // a visit may still be due and the wait below be zero, and the latch
        // (whose wait would say so) never waited on. Without this the
        // launcher spun, never exiting (seen in CI after pg_terminate_backend).
        if shutdown_requested() {
            return false;
        }
        let (interval, elapsed) = (settings::worker_interval(), last_round.elapsed());
        // no round starts sooner than MIN_ROUND_GAP after the last one when
        // a CREATE EXTENSION asks, nor a planned visit sooner than
        // MIN_VISIT_GAP after the last round that visited a database
        let gap_left = MIN_ROUND_GAP.min(interval).saturating_sub(elapsed);
        let visit_gap_left = MIN_VISIT_GAP.min(interval).saturating_sub(last_visits.elapsed());
        let mut wait = interval.saturating_sub(elapsed);
        if let Some(visit) = next_visit_ms {
            // a millisecond past the visit: a latch timeout may end a little
            // early, and a round that found the visit not yet due would put
            // it off by MIN_ROUND_GAP (measured: slots of a schedule fired
            // 0.6 to 0.9 s late)
            let until_visit = Duration::from_millis((visit.saturating_sub(now_ms()) + 1).max(0) as u64);
            wait = wait.min(until_visit.max(visit_gap_left));
        }
        if RECHECK_REQUESTED.get().load(Ordering::SeqCst) {
            wait = wait.min(gap_left);
        }
        if wait.is_zero() {
            return true;
        }
        if !BackgroundWorker::wait_latch(Some(wait)) {
            return false;
        }
        if BackgroundWorker::sighup_received() {
            // the interval may have changed: the caller reloads
            return true;
        }
    }
}

/// Reloads the configuration after a SIGHUP.
fn reload_settings_if_asked() {
    // SAFETY: a flag set by this process's own SIGHUP handler; what
    // PostgreSQL's own processes do on SIGHUP, outside a transaction.
    unsafe {
        if pg_sys::ConfigReloadPending != 0 {
            pg_sys::ConfigReloadPending = 0;
            pg_sys::ProcessConfigFile(pg_sys::GucContext::PGC_SIGHUP);
        }
    }
}

/// One round: every served database whose visit is due, or that backends
/// noted something due in, gets its duties run once.
/// Whether it started a housekeeping worker.
fn run_round(databases: &mut HashMap<pg_sys::Oid, Database>, no_slot_warned: &mut bool) -> bool {
    let listed = list_databases();
    databases.retain(|oid, _| listed.iter().any(|(listed_oid, _)| listed_oid == oid));
    // a dropped database's metrics have nobody left to record them
    crate::metrics::forget_databases_and_report(&listed.iter().map(|(oid, _)| *oid).collect::<Vec<_>>());
    let recheck = RECHECK_REQUESTED.get().swap(false, Ordering::SeqCst);
    let notes = deadlines::take();
    debug1!("raquel launcher: round over {} databases", listed.len());
    let mut visited = false;
    for (oid, name) in listed {
        if shutdown_requested() {
            return visited;
        }
        if !settings::serves_database(&name) {
            // forgotten, so that its planned visit wakes nobody
            databases.remove(&oid);
            continue;
        }
        let db = databases.entry(oid).or_insert(Database { found: Found::Unknown, next_visit_ms: 0, last_visit_ms: 0, warned_ms: 0 });
        if let Some(due) = notes.due_ms(oid) {
            // A note already due when taken is a wake-up (rq_worker_wake,
            // an enqueue after a parent): however many, they start at most a
            // visit a MIN_ROUND_GAP. Notes of what falls due later (a lease,
            // an expiry, a schedule's slot) are kept to the millisecond.
            let round_gap_ms = MIN_ROUND_GAP.as_millis() as i64;
            let due = if due <= now_ms() { due.max(db.last_visit_ms + round_gap_ms) } else { due };
            db.next_visit_ms = db.next_visit_ms.min(due);
        }
        let due = match db.found {
            Found::NoExtension => recheck,
            Found::Unknown => true,
            Found::Extension => db.next_visit_ms <= now_ms(),
        };
        if !due {
            continue;
        }
        debug1!("raquel launcher: looking after database \"{name}\" ({:?})", db.found);
        let started = now_ms();
        db.last_visit_ms = started;
        visited = true;
        WARN_NOW.get().store(started - db.warned_ms >= WARNINGS_EVERY_MS, Ordering::SeqCst);
        WARNED.get().store(false, Ordering::SeqCst);
        let outcome = run_housekeeping(oid, &name);
        if WARNED.get().load(Ordering::SeqCst) {
            db.warned_ms = started;
        }
        match outcome {
            Some((found, next_due)) => {
                db.found = found;
                db.next_visit_ms = match next_due {
                    // due before the round began, and still there after it:
                    // a row some session holds locked. Look again after the
                    // interval, not at once.
                    Some(due) if due <= started => now_ms() + settings::worker_interval().as_millis() as i64,
                    Some(due) => due.min(started + IDLE_VISIT_MS),
                    None => started + IDLE_VISIT_MS,
                };
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
    visited
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

/// Runs a housekeeping worker in database `oid` and waits for it: what it
/// found, and when the next duty there falls due; None when no worker slot
/// was free.
fn run_housekeeping(oid: pg_sys::Oid, name: &str) -> Option<(Found, Option<i64>)> {
    LAST_OUTCOME.get().store(OUTCOME_UNKNOWN, Ordering::SeqCst);
    // unless the worker says otherwise: look again soon
    LAST_NEXT_DUE.get().store(0, Ordering::SeqCst);
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
        return Some((Found::Unknown, None));
    }
    let next_due = Some(LAST_NEXT_DUE.get().load(Ordering::SeqCst)).filter(|&due| due != NOTHING_DUE);
    Some(match LAST_OUTCOME.get().load(Ordering::SeqCst) {
        OUTCOME_SERVED => (Found::Extension, next_due),
        OUTCOME_NO_EXTENSION => (Found::NoExtension, None),
        // it died before saying: try again next round
        _ => (Found::Unknown, None),
    })
}

/// Sets a setting for this whole process, as autovacuum does for its own.
fn set_for_process(name: &std::ffi::CStr, value: &std::ffi::CStr) {
    // SAFETY: both are NUL-terminated; called before any transaction.
    unsafe {
        pg_sys::SetConfigOption(
            name.as_ptr(),
            value.as_ptr(),
            pg_sys::GucContext::PGC_SUSET,
            pg_sys::GucSource::PGC_S_OVERRIDE,
        );
    }
}

#[pg_guard]
#[unsafe(no_mangle)]
pub extern "C-unwind" fn raquel_housekeeping_main(arg: pg_sys::Datum) {
    BackgroundWorker::attach_signal_handlers(SignalWakeFlags::SIGHUP | SignalWakeFlags::SIGTERM);
    // SAFETY: the launcher passes a database OID as the argument.
    let Some(oid) = (unsafe { pg_sys::Oid::from_datum(arg, false) }) else { return };
    // Nothing this process runs may resolve a name outside pg_catalog: the
    // duties' own search_path is pinned, and so is everything around them.
    set_for_process(c"search_path", c"");
    set_for_process(c"lock_timeout", LOCK_TIMEOUT);
    BackgroundWorker::connect_worker_to_spi_by_oid(Some(oid), None);

    // The extension's schema, version and owner. The duties this library
    // calls are those of its own version: an install of another version (the
    // library was updated, ALTER EXTENSION raquel UPDATE not yet run) is
    // left alone.
    let (found, database) = BackgroundWorker::transaction(|| {
        let found = Spi::get_three::<String, String, pg_sys::Oid>(
            "SELECT pg_catalog.quote_ident(n.nspname), e.extversion, e.extowner \
             FROM pg_catalog.pg_extension e JOIN pg_catalog.pg_namespace n ON n.oid = e.extnamespace \
             WHERE e.extname = 'raquel' \
             UNION ALL SELECT NULL, NULL, NULL LIMIT 1",
        );
        // SAFETY: a catalog lookup, inside this transaction, of the
        // database this worker is connected to (so it exists).
        let database = unsafe { CStr::from_ptr(pg_sys::get_database_name(oid)).to_string_lossy().into_owned() };
        (found, database)
    });
    let owner = match found {
        Ok((Some(_), Some(version), Some(owner))) if version == LIBRARY_VERSION => owner,
        Ok((Some(_), Some(version), _)) => {
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
    // The duties by their names in raquel_internal, where only the owner
    // may create: the worker runs them as the owner, and a look-alike
    // planted in the extension's schema (public, often) would run as that
    // owner too, or make the call ambiguous (sql/privileges.sql). Only an
    // install of this library's version is served (above), which has them.
    let internal = statements::INTERNAL_SCHEMA;
    let duties = [
        ("metrics", format!("SELECT {internal}.rq_record_metrics()")),
        ("schedule", format!("SELECT {internal}.rq_fire_schedules({batch})")),
        ("expire", format!("SELECT {internal}.rq_expire({batch})")),
        ("rescue", format!("SELECT {internal}.rq_rescue({batch})")),
        ("settle", format!("SELECT {internal}.rq_settle_workflows({batch})")),
        ("events", format!("SELECT {internal}.rq_settle_waits({batch})")),
        ("prune", prune_duty(internal, batch, settings::retention_s())),
    ];
    let mut waited = false;
    for (duty, sql) in &duties {
        for _ in 0..MAX_BATCHES_PER_DUTY {
            if shutdown_requested() {
                return;
            }
            match run_duty(duty, sql, &database, owner) {
                Ok(Some(changed)) if changed >= i64::from(batch) => continue,
                Err(Failed::ExtensionGone) => return,
                // One duty held up by a lock or failing leaves the others to
                // run. After one lock wait, the rest of the round waits
                // briefly: a table held locked costs a round one timeout, not
                // one per duty.
                Err(Failed::Locked) if !waited => {
                    waited = true;
                    set_for_process(c"lock_timeout", LOCK_TIMEOUT_AFTER_A_WAIT);
                    break;
                }
                _ => break,
            }
        }
    }
    if WARN_NOW.get().load(Ordering::SeqCst) {
        log_warnings(&database, owner);
    }
    let next_due = format!("SELECT {internal}.rq_next_duty_ms(pg_catalog.make_interval(secs => {}))", settings::retention_s());
    if let Ok(due) = run_duty("planning", &next_due, &database, owner) {
        LAST_NEXT_DUE.get().store(due.unwrap_or(NOTHING_DUE), Ordering::SeqCst);
    }
}

/// The prune duty's statement for a retention of `retention_s` seconds
/// (raquel.retention). The setting's 0 keeps finished jobs for ever, while
/// rq_prune given a retention of 0 keeps none (0.6.0): for 0 it passes no
/// retention, and rq_prune reads the setting's 0 itself.
fn prune_duty(internal: &str, batch: i32, retention_s: i32) -> String {
    match retention_s {
        0 => format!("SELECT {internal}.rq_prune({batch}, NULL)"),
        s => format!("SELECT {internal}.rq_prune({batch}, pg_catalog.make_interval(secs => {s}))"),
    }
}

/// What rq_warnings() says in this database, each as a WARNING in the
/// server log (sql/warnings.sql); the launcher allows it once an hour.
fn log_warnings(database: &str, owner: pg_sys::Oid) {
    let warnings = PgTryBuilder::new(|| {
        BackgroundWorker::transaction(|| as_owner(owner, || {
            let mut found = Vec::new();
            let _ = Spi::connect(|client| -> Result<(), pgrx::spi::Error> {
                let rows = client.select(
                    &format!("SELECT w.warning, w.hint FROM {internal}.rq_warnings() w", internal = statements::INTERNAL_SCHEMA),
                    None,
                    &[],
                )?;
                for row in rows {
                    let warning: Option<String> = row.get(1)?;
                    let hint: Option<String> = row.get(2)?;
                    found.push((warning.unwrap_or_default(), hint.unwrap_or_default()));
                }
                Ok(())
            });
            found
        }))
    })
    .catch_others(|_| {
        // SAFETY: the transaction failed; abort it (a warning is no duty).
        unsafe { pg_sys::AbortCurrentTransaction() };
        Vec::new()
    })
    .execute();
    // the hour starts at a warning logged, not at a round that found none
    WARNED.get().store(!warnings.is_empty(), Ordering::SeqCst);
    for (warning, hint) in warnings {
        errors::warning(
            PgSqlErrorCode::ERRCODE_WARNING,
            format!("raquel: in database \"{database}\", {warning}. {hint} (The function rq_warnings there lists this.)"),
        );
    }
}

/// Runs `run` with the rights of `owner` (the extension's owner), as
/// PostgreSQL's own maintenance commands (vacuum, refresh materialized
/// view) run code as a table's owner: restored after, or by the abort of
/// the transaction when `run` raises.
fn as_owner<T>(owner: pg_sys::Oid, run: impl FnOnce() -> T) -> T {
    let (mut user, mut context) = (pg_sys::InvalidOid, 0);
    // SAFETY: the user switch of PostgreSQL's maintenance commands, inside
    // the caller's transaction.
    unsafe {
        pg_sys::GetUserIdAndSecContext(&mut user, &mut context);
        pg_sys::SetUserIdAndSecContext(
            owner,
            context | pg_sys::SECURITY_LOCAL_USERID_CHANGE as i32 | pg_sys::SECURITY_RESTRICTED_OPERATION as i32,
        );
    }
    let result = run();
    // SAFETY: restores what was saved above.
    unsafe { pg_sys::SetUserIdAndSecContext(user, context) };
    result
}

enum Failed {
    /// Reported as a WARNING; the other duties still run.
    Duty,
    /// A lock was held past the lock timeout: logged; the other duties
    /// still run.
    Locked,
    /// The extension was dropped while the round ran.
    ExtensionGone,
}

/// One duty batch in its own transaction, as the extension's owner: what
/// the duty returned, or how it failed. An error is logged
/// as a WARNING with the error's own SQLSTATE and the transaction rolled
/// back, so the other duties still run; an error that says the extension is
/// gone (dropped while this round ran) ends the round quietly.
fn run_duty(duty: &str, sql: &str, database: &str, owner: pg_sys::Oid) -> Result<Option<i64>, Failed> {
    PgTryBuilder::new(|| {
        BackgroundWorker::transaction(|| Ok(as_owner(owner, || Spi::get_one::<i64>(sql)).ok().flatten()))
    })
    .catch_others(|error| {
        // SAFETY: the duty's transaction failed; abort it before the next.
        unsafe { pg_sys::AbortCurrentTransaction() };
        let report = match &error {
            CaughtError::PostgresError(report)
            | CaughtError::ErrorReport(report)
            | CaughtError::RustPanic { ereport: report, .. } => report,
        };
        let code = report.sql_error_code();
        let gone = [
            PgSqlErrorCode::ERRCODE_UNDEFINED_FUNCTION,
            PgSqlErrorCode::ERRCODE_UNDEFINED_TABLE,
            PgSqlErrorCode::ERRCODE_INVALID_SCHEMA_NAME,
        ];
        if code == PgSqlErrorCode::ERRCODE_LOCK_NOT_AVAILABLE {
            errors::log(code, format!("raquel: the {duty} duty in database \"{database}\" waited too long for a lock; it runs again next round"));
            return Err(Failed::Locked);
        }
        if gone.contains(&code) {
            debug1!("raquel: the extension went from database \"{database}\" during the {duty} duty: {}", report.message());
            return Err(Failed::ExtensionGone);
        }
        errors::warning(code, format!("raquel: the {duty} duty failed in database \"{database}\": {}", report.message()));
        Err(Failed::Duty)
    })
    .execute()
}

#[cfg(test)]
mod tests {
    use super::prune_duty;

    #[test]
    fn the_prune_duty_keeps_every_finished_job_when_the_setting_is_zero() {
        // rq_prune's own retention argument 0 deletes every finished job:
        // the setting's 0 must not reach it as a retention of 0
        assert_eq!(prune_duty("raquel_internal", 1000, 0), "SELECT raquel_internal.rq_prune(1000, NULL)");
        assert_eq!(
            prune_duty("raquel_internal", 1000, 604800),
            "SELECT raquel_internal.rq_prune(1000, pg_catalog.make_interval(secs => 604800))"
        );
    }
}
