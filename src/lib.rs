//! raquel: a job queue inside PostgreSQL.
//!
//! The table, its indexes and most of the queue's verbs are SQL (`sql/*.sql`),
//! where a reader can see every statement. The calls made for every job
//! (rq_enqueue, rq_claim, rq_complete) are C functions here (`hot_path`) that
//! run statements from `sql/statements/` with plans kept per backend. Rust
//! also supplies what SQL cannot say well: the backoff arithmetic,
//! time-ordered ids, the wall clock in the table's unit, checked conversions
//! of intervals, timestamps and job options, the `raquel.*` settings, the
//! background worker that expires, rescues and prunes jobs, and the shared
//! memory through which a commit wakes waiting claims.

use pgrx::prelude::*;
use std::sync::atomic::{AtomicBool, Ordering};

::pgrx::pg_module_magic!(name, version);

/// Declares `$name` a version-1 C function (PG_FUNCTION_INFO_V1).
macro_rules! function_info_v1 {
    ($finfo:ident) => {
        #[unsafe(no_mangle)]
        pub extern "C" fn $finfo() -> &'static ::pgrx::pg_sys::Pg_finfo_record {
            const V1: ::pgrx::pg_sys::Pg_finfo_record = ::pgrx::pg_sys::Pg_finfo_record { api_version: 1 };
            &V1
        }
    };
}

mod backoff;
mod checks;
mod clock;
mod durations;
mod enqueued;
mod errors;
mod hot_path;
mod ids;
mod job_options;
mod settings;
mod wait;
mod worker;

#[cfg(any(test, feature = "pg_test"))]
mod pg_tests;

extension_sql_file!(
    "../sql/schema.sql",
    name = "schema",
    requires = [ids::rq_uuid7, clock::rq_now_ms]
);
extension_sql_file!("../sql/checks.sql", name = "checks", requires = ["schema"]);
extension_sql_file!(
    "../sql/enqueue.sql",
    name = "enqueue",
    requires = ["checks", durations::rq_interval_ms, durations::rq_timestamp_ms, job_options::rq_job_options]
);
extension_sql_file!(
    "../sql/claim.sql",
    name = "claim",
    requires = ["checks", wait::rq_wait_register, wait::rq_wait_sleep, wait::rq_wait_unregister]
);
extension_sql_file!(
    "../sql/finish.sql",
    name = "finish",
    requires = ["checks", backoff::rq_backoff]
);
extension_sql_file!("../sql/lifecycle.sql", name = "lifecycle", requires = ["finish", wait::rq_wait_notify]);
extension_sql_file!("../sql/observe.sql", name = "observe", requires = ["schema"]);
extension_sql_file!("../sql/events.sql", name = "events", requires = ["enqueue", wait::rq_wait_notify]);
extension_sql_file!("../sql/privileges.sql", name = "privileges", requires = ["enqueue"]);
extension_sql_file!(
    "../sql/duties.sql",
    name = "duties",
    requires = ["finish", worker::rq_worker_wake, checks::rq_check_batch]
);

/// True in processes of a server that preloaded the library (children of the
/// postmaster inherit it): only then do the shared memory, the launcher and
/// the waiting-claim slots exist.
static PRELOADED: AtomicBool = AtomicBool::new(false);

pub fn preloaded() -> bool {
    PRELOADED.load(Ordering::Relaxed)
}

/// Settings exist in every backend that loads the library; the background
/// worker and its shared memory only when the server preloads it.
#[pg_guard]
pub extern "C-unwind" fn _PG_init() {
    settings::define();
    if unsafe { pg_sys::process_shared_preload_libraries_in_progress } {
        worker::register();
        wait::init();
        PRELOADED.store(true, Ordering::Relaxed);
    }
}

/// Required by `cargo pgrx test`.
#[cfg(test)]
pub mod pg_test {
    pub fn setup(_options: Vec<&str>) {}

    #[must_use]
    pub fn postgresql_conf_options() -> Vec<&'static str> {
        vec!["shared_preload_libraries = 'raquel'"]
    }
}
