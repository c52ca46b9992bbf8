//! raquel: a job queue inside PostgreSQL.
//!
//! Each idea has a name, and its SQL (`sql/<idea>.sql`, part of the install
//! script, and `sql/<idea>.<statement>.sql`, statements its Rust prepares)
//! sits beside its Rust (`src/<idea>.rs`) under that name: enqueue, claim,
//! finish, events (the insert trigger and NOTIFY), errors, limits (every
//! bound and default), the background worker and its duties. Every change
//! of a job's status lives in one place, src/transitions.rs's map: the
//! statements `sql/transition.*.sql`, the PL/pgSQL `sql/transitions.sql`,
//! and the direct path src/direct.rs, which the calls made for every job
//! (rq_enqueue, rq_claim, rq_complete, rq_fail, rq_step: C functions) take
//! when the table is as raquel made it; what follows a job's end is
//! src/ended.rs. Flow control (src/flow.rs, sql/flow.sql) is obeyed inside
//! the claim. docs/src/contributing.md ("Layout") has the whole map.

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
mod claim;
mod claim_slots;
mod clock;
mod cursors;
mod compat_0_1;
mod compat_0_4;
mod compat_0_5;
mod deadlines;
mod direct;
mod distributed;
mod durations;
mod ended;
mod enqueue;
mod enqueue_batch;
mod error_context;
mod errors;
mod events;
mod fair;
mod finish;
mod flow;
mod history;
mod ids;
mod job_verbs;
mod install;
mod invalidation;
mod limits;
mod metrics;
mod privileges;
mod rate_buckets;
mod results;
mod schedules;
mod schema;
mod settings;
mod shmem;
mod statements;
mod steps;
mod take;
mod transitions;
mod waiters;
mod worker;
mod workflows;

#[cfg(any(test, feature = "pg_test"))]
mod pg_tests;

// The install script, in the order its parts depend on each other. Each
// sql/<idea>.sql sits beside src/<idea>.rs where the idea has Rust.

/// raquel_internal: the schema of raquel's internal helpers (0.5.0 on).
///
/// The extension's schema (`@extschema@`) holds what users call: the verbs,
/// the views, the tables, the domains and a few pure helpers (rq_now_ms,
/// rq_uuid7, rq_backoff, rq_ms_to_timestamptz, rq_ms_to_interval,
/// rq_channel). Everything the verbs, the triggers, the column defaults and
/// the background worker call underneath lives in raquel_internal: no API,
/// free to change between versions, and left out of `\df` of the
/// extension's schema. The name is fixed (one install per database): the
/// functions name it as `raquel_internal`, and `src/statements.rs` finds the
/// extension's schema from a helper's. pgrx makes it (`CREATE SCHEMA IF NOT
/// EXISTS`, which in an extension script fails on a schema of that name that
/// is not the extension's) before the `#[pg_extern(schema =
/// "raquel_internal")]` functions and the SQL parts that create helpers in
/// it. Privileges: sql/privileges.sql (USAGE for PUBLIC, EXECUTE as before).
#[pg_schema]
mod raquel_internal {}
extension_sql_file!(
    "../sql/schema.sql",
    name = "schema",
    requires = [
        ids::rq_uuid7,
        clock::rq_now_ms,
        limits::rq_default_min_retry_delay,
        limits::rq_default_max_retry_delay,
        limits::rq_default_backoff_base,
        limits::rq_default_lease_ms,
        schema::rq_check_status,
        schema::rq_check_nonnegative,
        schema::rq_check_delay_ms,
        schema::rq_check_max_age_ms
    ]
);
extension_sql_file!(
    "../sql/enqueue.sql",
    name = "enqueue",
    requires = ["schema", enqueue::rq_job_options, errors::rq_refuse, limits::rq_check_arrays, privileges::rq_caller_may_read]
);
extension_sql_file!("../sql/claim.sql", name = "claim", requires = ["schema", limits::rq_default_lease]);
extension_sql_file!(
    "../sql/finish.sql",
    name = "finish",
    requires = [
        "schema",
        backoff::rq_backoff,
        errors::rq_raise_cannot,
        errors::rq_refuse,
        limits::rq_check_arrays,
        events::rq_job_ready_in_lane
    ]
);
extension_sql_file!(
    "../sql/workflows.sql",
    name = "workflows",
    requires = ["schema", events::rq_job_ready_in_lane, errors::rq_refuse, limits::rq_check_arrays, limits::rq_check_batch, workflows::rq_check_parents]
);
extension_sql_file!(
    "../sql/flow.sql",
    name = "flow",
    requires = [
        "claim",
        clock::rq_now_ms,
        flow::rq_check_limits,
        flow::rq_wake_claims,
        flow::rq_require_flow_claim
    ]
);
extension_sql_file!(
    "../sql/history.sql",
    name = "history",
    requires = ["flow", "distributed", errors::rq_refuse]
);
// Every change of a job's status made in SQL (src/transitions.rs).
extension_sql_file!(
    "../sql/transitions.sql",
    name = "transitions",
    requires = [
        "enqueue",
        "finish",
        "workflows",
        "flow",
        "distributed",
        limits::rq_default_lease
    ]
);
extension_sql_file!(
    "../sql/observe.sql",
    name = "observe",
    requires = ["schema", "flow", "waits", clock::rq_ms_to_timestamptz, clock::rq_ms_to_interval]
);
extension_sql_file!("../sql/events.sql", name = "events", requires = ["schema"]);
extension_sql_file!("../sql/results.sql", name = "results", requires = ["schema"]);
extension_sql_file!(
    "../sql/steps.sql",
    name = "steps",
    requires = ["schema"]
);
extension_sql_file!(
    "../sql/waits.sql",
    name = "waits",
    requires = [
        "steps",
        "transitions",
        events::rq_job_ready_in_lane,
        clock::rq_now_ms,
        clock::rq_ms_to_timestamptz,
        durations::rq_interval_ms,
        deadlines::rq_look_in_at_commit,
        limits::rq_check_batch
    ]
);
extension_sql_file!(
    "../sql/privileges.sql",
    name = "privileges",
    // every part whose functions the grants name: the order of the parts
    // a part does not require is pgrx's choice, and may change from build
    // to build
    requires = [
        "enqueue", "claim", "transitions", "events", "observe", "duties", "distributed", "metrics", "flow", "history",
        "workflows", "schedules", "steps", "waits", worker::rq_worker_wake, errors::rq_refuse
    ]
);
extension_sql_file!(
    "../sql/schedules.sql",
    name = "schedules",
    requires = [
        "enqueue",
        schedules::rq_cron_next,
        schedules::rq_schedule_slots,
        schedules::rq_schedule_due,
        schedules::rq_check_schedule_options,
        clock::rq_ms_to_timestamptz,
        clock::rq_ms_to_interval,
        limits::rq_check_batch
    ]
);
extension_sql_file!("../sql/distributed.sql", name = "distributed", requires = ["schema"]);
extension_sql_file!(
    "../sql/metrics.sql",
    name = "metrics",
    requires = [
        "schema",
        clock::rq_ms_to_timestamptz,
        errors::rq_refuse,
        metrics::rq_take_metrics,
        metrics::rq_histogram_add,
        metrics::rq_histogram_percentile,
        metrics::rq_note_metric,
        metrics::rq_metrics_lost
    ]
);
extension_sql_file!(
    "../sql/duties.sql",
    name = "duties",
    requires = ["finish", "schedules", "distributed", "metrics", worker::rq_worker_wake, limits::rq_check_batch, limits::rq_retention_ms]
);

extension_sql_file!("../sql/warnings.sql", name = "warnings", requires = ["privileges"]);

// What every column a user reads holds, in the catalog (\d+).
extension_sql_file!(
    "../sql/column_comments.sql",
    name = "column_comments",
    requires = ["schema", "flow", "history", "schedules", "workflows", "steps", "waits", "metrics", "observe"]
);

// Last, what each public object is for, in the catalog.
extension_sql_file!("../sql/comments.sql", name = "comments", finalize);

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
    error_context::install();
    // SAFETY: a flag the postmaster sets while it loads preloaded libraries.
    if unsafe { pg_sys::process_shared_preload_libraries_in_progress } {
        worker::register();
        waiters::init();
        deadlines::init();
        cursors::init();
        rate_buckets::init();
        claim_slots::init();
        metrics::init();
        PRELOADED.store(true, Ordering::Relaxed);
    }
}

/// Required by `cargo pgrx test`.
#[cfg(test)]
pub mod pg_test {
    pub fn setup(_options: Vec<&str>) {}

    #[must_use]
    pub fn postgresql_conf_options() -> Vec<&'static str> {
        // (the test cluster is thrown away: no fsync)
        vec!["shared_preload_libraries = 'raquel'", "fsync = off"]
    }
}
