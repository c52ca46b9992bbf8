//! The `raquel.*` settings. The worker's reload on SIGHUP (`pg_reload_conf()`),
//! so an operator never has to restart the server to retune housekeeping;
//! `raquel.notify` can also be set per database, role or session.

use pgrx::guc::{GucContext, GucFlags, GucRegistry, GucSetting};
use std::ffi::CString;
use std::time::Duration;

static WORKER_ENABLED: GucSetting<bool> = GucSetting::<bool>::new(true);
static WORKER_INTERVAL_MS: GucSetting<i32> = GucSetting::<i32>::new(1000);
static RETENTION_S: GucSetting<i32> = GucSetting::<i32>::new(7 * 24 * 3600);
static BATCH_SIZE: GucSetting<i32> = GucSetting::<i32>::new(1000);
static DATABASES: GucSetting<Option<CString>> = GucSetting::<Option<CString>>::new(None);
static NOTIFY: GucSetting<bool> = GucSetting::<bool>::new(false);
static METRICS: GucSetting<bool> = GucSetting::<bool>::new(true);
static DIRECT_WRITES: GucSetting<bool> = GucSetting::<bool>::new(true);
static MAX_PAYLOAD_SIZE: GucSetting<i32> = GucSetting::<i32>::new(1024 * 1024);
static MAX_RESULT_SIZE: GucSetting<i32> = GucSetting::<i32>::new(1024 * 1024);
static MAX_EVENT_SIZE: GucSetting<i32> = GucSetting::<i32>::new(1024 * 1024);
static MAX_EVENT_KEEP_S: GucSetting<i32> = GucSetting::<i32>::new(24 * 3600);
static EVENT_RETENTION_S: GucSetting<i32> = GucSetting::<i32>::new(7 * 24 * 3600);
static MAX_EVENT_WAIT_S: GucSetting<i32> = GucSetting::<i32>::new(30 * 24 * 3600);
static CURSOR_QUEUES: GucSetting<i32> = GucSetting::<i32>::new(512);
static CURSOR_PRIORITIES: GucSetting<i32> = GucSetting::<i32>::new(8);
static CURSOR_NAME_BYTES: GucSetting<i32> = GucSetting::<i32>::new(64);

pub fn define() {
    GucRegistry::define_bool_guc(
        c"raquel.worker_enabled",
        c"Whether the background worker expires, rescues and prunes jobs.",
        c"Off leaves every database alone; the duties can still be run by hand.",
        &WORKER_ENABLED,
        GucContext::Sighup,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"raquel.worker_interval",
        c"How long the background worker sleeps between rounds of housekeeping.",
        c"Each round runs expire, rescue and prune in every served database.",
        &WORKER_INTERVAL_MS,
        10,
        3_600_000,
        GucContext::Sighup,
        GucFlags::UNIT_MS,
    );
    GucRegistry::define_int_guc(
        c"raquel.retention",
        c"How long finished jobs are kept before the prune duty deletes them.",
        c"0 keeps finished jobs forever.",
        &RETENTION_S,
        0,
        i32::MAX,
        GucContext::Sighup,
        GucFlags::UNIT_S,
    );
    GucRegistry::define_int_guc(
        c"raquel.batch_size",
        c"How many jobs one housekeeping transaction handles at most.",
        c"Small batches keep each transaction, and the locks it holds, short.",
        &BATCH_SIZE,
        1,
        100_000,
        GucContext::Sighup,
        GucFlags::default(),
    );
    GucRegistry::define_bool_guc(
        c"raquel.notify",
        c"Whether an enqueue sends NOTIFY rq_<queue> at commit, for workers that LISTEN.",
        c"Off by default: a NOTIFY takes a database-wide lock at commit, which lets one enqueuing \
          transaction commit at a time. Waiting claims are woken at commit without it.",
        &NOTIFY,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_bool_guc(
        c"raquel.direct_writes",
        c"Whether rq_enqueue writes the jobs table directly, without a planned statement (src/direct.rs).",
        c"On by default; it does only while the table is as raquel made it (no trigger, policy or \
          constraint of a user). Off runs the planned statement every time.",
        &DIRECT_WRITES,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_bool_guc(
        c"raquel.metrics",
        c"Whether the verbs count what they do for the metrics table (src/metrics.rs).",
        c"On by default; off leaves the metrics table without new rows.",
        &METRICS,
        GucContext::Suset,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"raquel.max_payload_size",
        c"The largest payload a job may carry, in bytes.",
        c"Checked for every job enqueued, however it is enqueued. A queue passes work, not \
          data: keep large data in a table and put its key in the payload.",
        &MAX_PAYLOAD_SIZE,
        1,
        i32::MAX,
        GucContext::Suset,
        GucFlags::UNIT_BYTE,
    );
    GucRegistry::define_int_guc(
        c"raquel.max_result_size",
        c"The largest result a job (rq_complete) or one of its steps (rq_step) may keep, in bytes.",
        c"Checked for every result and step recorded. Results are kept with the job: keep large \
          data in a table and put its key in the result.",
        &MAX_RESULT_SIZE,
        1,
        i32::MAX,
        GucContext::Suset,
        GucFlags::UNIT_BYTE,
    );
    GucRegistry::define_int_guc(
        c"raquel.max_event_size",
        c"The largest payload an event (rq_emit) may carry, in bytes.",
        c"Checked for every emit: the payload is copied into the step of every job parked for it.",
        &MAX_EVENT_SIZE,
        1,
        i32::MAX,
        GucContext::Suset,
        GucFlags::UNIT_BYTE,
    );
    GucRegistry::define_int_guc(
        c"raquel.max_event_keep",
        c"The longest an event (rq_emit's keep) is kept for jobs that start waiting later.",
        c"An emit with a longer keep is refused: a kept event answers a wait that begins after it.",
        &MAX_EVENT_KEEP_S,
        0,
        i32::MAX,
        GucContext::Suset,
        GucFlags::UNIT_S,
    );
    GucRegistry::define_int_guc(
        c"raquel.event_retention",
        c"How long an event emitted without a keep waits for a wait to read it (rq_emit).",
        c"Such an event is kept until the first wait for it reads it, or for this long; then it goes.",
        &EVENT_RETENTION_S,
        0,
        i32::MAX,
        GucContext::Suset,
        GucFlags::UNIT_S,
    );
    GucRegistry::define_int_guc(
        c"raquel.max_event_wait",
        c"The longest a wait for an event without a timeout waits (rq_wait_event); 0: no limit.",
        c"At its end the wait times out, as one with that timeout would: the job's next attempt hears timed_out.",
        &MAX_EVENT_WAIT_S,
        0,
        i32::MAX,
        GucContext::Suset,
        GucFlags::UNIT_S,
    );
    // The claim cursors' shared memory (src/cursors.rs), sized once when the
    // server starts: a claim beyond a limit walks its queue from the start
    // (correct, slower behind a held snapshot) and is counted
    // (rq_stats().cursors, raquel_cursor_limits_total). PostgreSQL ends a
    // backend (FATAL) that defines a server-start setting later than the
    // preload, so a library loaded by a session (not preloaded: no cursors)
    // leaves them undefined and reads their defaults.
    // SAFETY: a flag the postmaster sets while it loads preloaded libraries.
    if unsafe { pgrx::pg_sys::process_shared_preload_libraries_in_progress } {
        define_cursor_sizes();
    }
    GucRegistry::define_string_guc(
        c"raquel.databases",
        c"Comma-separated databases the background worker serves; empty serves all.",
        c"Empty (the default) serves every database in which the raquel extension is created.",
        &DATABASES,
        GucContext::Sighup,
        GucFlags::default(),
    );
}

fn define_cursor_sizes() {
    GucRegistry::define_int_guc(
        c"raquel.cursor_queues",
        c"How many queues (of all databases) keep claim cursors in shared memory.",
        c"Past it, the queue claimed least recently gives up its place. About 2.7 kB a queue \
          at the default raquel.cursor_priorities and raquel.cursor_name_bytes.",
        &CURSOR_QUEUES,
        16,
        262_144,
        GucContext::Postmaster,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"raquel.cursor_priorities",
        c"How many priorities of one queue keep claim cursors.",
        c"A queue whose ready jobs have more priorities is claimed without cursors.",
        &CURSOR_PRIORITIES,
        1,
        64,
        GucContext::Postmaster,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"raquel.cursor_name_bytes",
        c"The longest queue name, in bytes, that keeps claim cursors.",
        c"A queue with a longer name is claimed without cursors.",
        &CURSOR_NAME_BYTES,
        1,
        1024,
        GucContext::Postmaster,
        GucFlags::UNIT_BYTE,
    );
}

pub fn worker_enabled() -> bool {
    WORKER_ENABLED.get()
}

pub fn worker_interval() -> Duration {
    Duration::from_millis(WORKER_INTERVAL_MS.get().max(1) as u64)
}

pub fn retention_s() -> i32 {
    RETENTION_S.get()
}

pub fn batch_size() -> i32 {
    BATCH_SIZE.get()
}

pub fn notify() -> bool {
    NOTIFY.get()
}

pub fn direct_writes() -> bool {
    DIRECT_WRITES.get()
}

pub fn metrics() -> bool {
    METRICS.get()
}

pub fn max_payload_size() -> usize {
    MAX_PAYLOAD_SIZE.get().max(1) as usize
}

pub fn max_result_size() -> usize {
    MAX_RESULT_SIZE.get().max(1) as usize
}

pub fn max_event_size() -> usize {
    MAX_EVENT_SIZE.get().max(1) as usize
}

pub fn max_event_keep_ms() -> i64 {
    i64::from(MAX_EVENT_KEEP_S.get().max(0)) * 1000
}

pub fn event_retention_ms() -> i64 {
    i64::from(EVENT_RETENTION_S.get().max(0)) * 1000
}

/// None: no limit (the setting's 0).
pub fn max_event_wait_ms() -> Option<i64> {
    Some(i64::from(MAX_EVENT_WAIT_S.get().max(0)) * 1000).filter(|&ms| ms > 0)
}

pub fn cursor_queues() -> usize {
    CURSOR_QUEUES.get().max(16) as usize
}

pub fn cursor_priorities() -> usize {
    CURSOR_PRIORITIES.get().max(1) as usize
}

pub fn cursor_name_bytes() -> usize {
    CURSOR_NAME_BYTES.get().max(1) as usize
}

/// Whether `raquel.databases` lets the worker serve database `name`.
pub fn serves_database(name: &str) -> bool {
    match DATABASES.get() {
        None => true,
        Some(list) => database_listed(&list.to_string_lossy(), name),
    }
}

fn database_listed(list: &str, name: &str) -> bool {
    let mut names = list.split(',').map(str::trim).filter(|n| !n.is_empty()).peekable();
    names.peek().is_none() || names.any(|n| n == name)
}

#[cfg(test)]
mod tests {
    use super::database_listed;

    #[test]
    fn an_empty_list_serves_every_database() {
        assert!(database_listed("", "app"));
        assert!(database_listed(" , ", "app"));
    }

    #[test]
    fn a_list_serves_only_its_names() {
        assert!(database_listed("app, jobs", "jobs"));
        assert!(database_listed("app,jobs", "app"));
        assert!(!database_listed("app, jobs", "postgres"));
        assert!(!database_listed("application", "app"));
    }
}
