//! Workflows (declared in sql/workflows.sql): what `after` may name, and
//! how many edges one call may write.
//!
//! A producer may not read jobs, and learns nothing about other jobs: so a
//! caller who may not SELECT from jobs may name in `after` only jobs its own
//! session enqueued (the last SESSION_JOBS of them, remembered by the insert
//! trigger, src/events.rs), and is refused (42501) the same way whether an
//! id it names exists or not. A caller who may read jobs may name any.

use crate::errors::Refusal;
use crate::privileges;
use crate::statements;
use pgrx::prelude::*;
use std::cell::RefCell;
use std::collections::{HashSet, VecDeque};

/// The most parents one enqueue may name.
pub const MAX_PARENTS: usize = 1000;
/// The most edges (jobs × parents) one enqueue may write: a batch of M jobs
/// after N parents writes N × M rows of job_dependencies.
pub const MAX_EDGES: usize = 100_000;
/// How many of its own jobs a session remembers for `after`.
const SESSION_JOBS: usize = 10_000;

thread_local! {
    /// The ids of the jobs this session enqueued, oldest first (a backend
    /// is one thread, so a thread-local is the session's).
    static ENQUEUED: RefCell<(VecDeque<u128>, HashSet<u128>)> = RefCell::new((VecDeque::new(), HashSet::new()));
}

/// Remembers that this session enqueued job `id` (the insert trigger).
pub fn remember_enqueued(id: pgrx::Uuid) {
    let id = u128::from_be_bytes(*id.as_bytes());
    ENQUEUED.with_borrow_mut(|(order, ids)| {
        if ids.insert(id) {
            order.push_back(id);
            if order.len() > SESSION_JOBS {
                if let Some(oldest) = order.pop_front() {
                    ids.remove(&oldest);
                }
            }
        }
    });
}

fn enqueued_here(id: &pgrx::Uuid) -> bool {
    let id = u128::from_be_bytes(*id.as_bytes());
    ENQUEUED.with_borrow(|(_, ids)| ids.contains(&id))
}

/// Checks what an enqueue of `jobs` jobs names in `after` (for
/// rq_hold_for_parents, sql/transitions.sql): at most MAX_PARENTS ids, none
/// NULL (22023); at most MAX_EDGES edges (54000); and, for a caller who may
/// not read jobs, only jobs this session enqueued (42501).
#[pg_extern(volatile, parallel_unsafe, schema = "raquel_internal")]
#[search_path(pg_catalog, pg_temp)]
fn rq_check_parents(jobs: i32, after: Option<Vec<Option<pgrx::Uuid>>>, fcinfo: pg_sys::FunctionCallInfo) {
    let Some(after) = after else { return };
    if after.len() > MAX_PARENTS {
        Refusal::invalid_parameter(format!("after names {} jobs, more than {MAX_PARENTS}", after.len()))
            .hint("Make the jobs wait for one job that waits for the others.")
            .raise()
    }
    let parents: HashSet<pgrx::Uuid> = after
        .iter()
        .map(|id| id.unwrap_or_else(|| Refusal::invalid_parameter("after must not hold NULL").raise()))
        .collect();
    let edges = parents.len().saturating_mul(usize::try_from(jobs).unwrap_or(0));
    if edges > MAX_EDGES {
        Refusal::new(
            PgSqlErrorCode::ERRCODE_PROGRAM_LIMIT_EXCEEDED,
            format!("{jobs} jobs after {} jobs make {edges} dependencies, more than {MAX_EDGES}", parents.len()),
        )
        .hint("Make the jobs wait for one job that waits for the others: N + M dependencies instead of N × M.")
        .raise()
    }
    // SAFETY: fcinfo is this call's own.
    let jobs_table = privileges::jobs_of(unsafe { statements::called_function(fcinfo) });
    if !privileges::caller_may_read(jobs_table) && !parents.iter().all(enqueued_here) {
        Refusal::new(
            PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE,
            "after may name only jobs this session enqueued, for a role that may not read jobs",
        )
        .hint("Enqueue the jobs and those that run after them in one session, or grant SELECT on jobs.")
        .raise()
    }
    // A parent that ends while this transaction is open does not see its
    // edges: the background worker looks in at commit, and its settle duty
    // releases (or cancels) such children (sql/workflows.sql, through
    // sql/transitions.sql's rq_parent_ended).
    crate::deadlines::note(crate::clock::now_ms());
}
