//! The distributed mode on Citus (declared in sql/distributed.sql): what the
//! verbs written in Rust do differently once `rq_distribute()` has made the
//! jobs table a Citus table distributed by queue.
//!
//! Citus runs a statement on one shard when its conditions name one queue,
//! and refuses FOR UPDATE in a statement over several shards. So:
//! - a claim takes jobs queue by queue, each with one statement of one
//!   shard whose FOR UPDATE SKIP LOCKED keeps "never the same job twice"
//!   (sql/transition.claim_distributed.sql). A claim on several queues first asks each
//!   queue for its best ready job (one probe each) and takes the queues in
//!   that order; a claim on any queue first asks every shard which queues
//!   have ready jobs (one statement across the shards, no lock);
//! - a verb given only a job's id must find the job's queue first: this
//!   backend remembers the queue of every job it claimed (a worker usually
//!   finishes what it claimed), and otherwise asks every shard (one index
//!   probe each, in parallel) before the UPDATE of one shard;
//! - a waiting claim is woken at commit by enqueues made on its own node,
//!   and looks again every `POLL_MS` for jobs committed on other nodes;
//! - rows come back as `ROW(j.*)::jobs`: Citus cannot send a whole-row
//!   value of a shard back as the table's type;
//! - plans are custom: Citus routes a statement to its shard by the value
//!   of its queue parameter, which a generic plan does not know.
//!
//! Nothing here runs on a table that is not distributed.

use crate::clock::now_ms;
use crate::errors::Refusal;
use crate::statements::{self, Shape, Statement};
use crate::transitions;
use crate::waiters;
use pgrx::prelude::*;
use std::cell::{Cell, RefCell};
use std::collections::HashMap;

/// A queue's best ready job, for the order of a claim on several queues.
const BEST: &str = "SELECT j.priority, j.scheduled_at FROM @jobs@ j
    WHERE j.queue = $1 AND j.status IN ('queued', 'failed') AND j.group_key IS NULL
      AND j.scheduled_at <= $2 AND (j.max_age IS NULL OR j.scheduled_at + j.max_age > $2)
    ORDER BY j.priority DESC, j.scheduled_at, j.id LIMIT 1";
/// The queues with ready jobs, best first, for a claim on any queue.
const READY_QUEUES: &str = "SELECT j.queue FROM @jobs@ j
    WHERE j.status IN ('queued', 'failed') AND j.group_key IS NULL
      AND j.scheduled_at <= $1 AND (j.max_age IS NULL OR j.scheduled_at + j.max_age > $1)
    GROUP BY j.queue ORDER BY max(j.priority) DESC, min(j.scheduled_at)";
/// A job's queue, asked of every shard.
const QUEUE_OF: &str = "SELECT j.queue FROM @jobs@ j WHERE j.id = $1";
const IS_DISTRIBUTED: &str = "SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_dist_partition p WHERE p.logicalrelid = $1)";

/// How often a waiting claim looks again for jobs committed on other nodes,
/// whose commits cannot set its latch.
const POLL_MS: i64 = 50;
/// Queues of claimed jobs this backend remembers; past this it starts over.
const REMEMBERED: usize = 65_536;

thread_local! {
    /// Whether the jobs table is distributed, or None until asked (again).
    static DISTRIBUTED: Cell<Option<bool>> = const { Cell::new(None) };
    /// The answer before it was dropped: a change drops the kept plans.
    static LAST_ANSWER: Cell<Option<bool>> = const { Cell::new(None) };
    /// The queue of each job this backend claimed (a job's queue never changes).
    static QUEUES: RefCell<HashMap<pgrx::Uuid, String>> = RefCell::new(HashMap::new());
}

/// Whether the jobs table beside `function` is distributed. Connected to
/// SPI, before the call's own statements (this may run one).
pub fn is_distributed(function: pg_sys::Oid) -> bool {
    if let Some(answer) = DISTRIBUTED.get() {
        return answer;
    }
    let table = crate::privileges::jobs_of(function);
    // create_distributed_table invalidates the table (src/invalidation.rs)
    crate::invalidation::forget_when_changed("distributed", table, || DISTRIBUTED.set(None));
    // SAFETY: a catalog lookup by name, inside a transaction.
    let citus = unsafe { pg_sys::get_relname_relid(c"pg_dist_partition".as_ptr(), pg_sys::Oid::from(pg_sys::PG_CATALOG_NAMESPACE)) } != pg_sys::InvalidOid;
    let answer = citus && {
        let text = || statements::fill(IS_DISTRIBUTED, &[]);
        let statement = Statement { shape: Shape { name: "is_distributed", variant: 0 }, text: &text, types: &[pg_sys::REGCLASSOID] };
        statements::run_once(&statement, &[table.into_datum()]);
        // SAFETY: EXISTS returns one row.
        let answer = unsafe { statements::value::<bool>(0, 1) } == Some(true);
        statements::free_result();
        answer
    };
    if LAST_ANSWER.replace(Some(answer)).is_some_and(|last| last != answer) {
        // the statements differ in the other mode
        statements::forget_kept_plans();
    }
    DISTRIBUTED.set(Some(answer));
    answer
}

/// The answer already known, without asking: for preparing a statement.
pub fn known() -> bool {
    DISTRIBUTED.get() == Some(true)
}

/// What a statement returns as a whole jobs row: the row itself on one
/// server, the row built as the table's type on Citus.
pub fn whole_row(function: pg_sys::Oid) -> String {
    if known() { format!("ROW(j.*)::{}", statements::in_schema_of(function, "jobs")) } else { "j".to_string() }
}

/// Refuses what the distributed mode does not offer (0A000).
pub fn refuse(what: &str) -> ! {
    Refusal::new(PgSqlErrorCode::ERRCODE_FEATURE_NOT_SUPPORTED, format!("{what} is not available on a distributed jobs table"))
        .hint("The Citus guide (docs/src/guides/citus.md) lists what the distributed mode offers.")
        .raise()
}

/// The queue of job `id`, or None when no shard has it: remembered from
/// this backend's claims, or asked of every shard.
pub fn queue_of(function: pg_sys::Oid, id: pg_sys::Datum) -> Option<String> {
    // SAFETY: a uuid datum of the call's arguments.
    let uuid = unsafe { pgrx::Uuid::from_datum(id, false) }?;
    if let Some(queue) = QUEUES.with_borrow(|q| q.get(&uuid).cloned()) {
        return Some(queue);
    }
    let text = || statements::fill(QUEUE_OF, &[("@jobs@", &statements::in_schema_of(function, "jobs"))]);
    let statement = Statement { shape: Shape { name: "queue_of", variant: 0 }, text: &text, types: &[pg_sys::UUIDOID] };
    let found = statements::run(function, &statement, &[Some(id)]);
    // SAFETY: the statement returned `found` rows of one text column.
    let queue = if found > 0 { unsafe { statements::value::<String>(0, 1) } } else { None };
    statements::free_result();
    queue
}

// rq_shard_queue(id): for the verbs written in PL/pgSQL until 0.6.0 that
// find a job by its id (rq_fail, rq_reschedule, rq_reject, rq_extend,
// rq_cancel, rq_retry; Rust since: src/job_verbs.rs, which asks queue_of).
// 0.6.0 no longer declares it; the symbol stays for the scripts before it,
// whose verbs call it until their update. On a distributed table, the
// job's queue, which they add to
// their UPDATE's conditions so that Citus runs it in one shard: an UPDATE
// over every shard takes a lock on each that lasts to the end of its
// transaction and makes all such UPDATEs wait for one another. When no
// shard has the job, an empty name: the UPDATE still runs in one shard, and
// finds nothing. NULL on one server, where the condition holds for every
// row. It reads with the caller's rights, so it shows no more than the
// caller could read.
#[pg_extern(volatile, parallel_unsafe, schema = "raquel_internal", sql = false)]
#[search_path(pg_catalog, pg_temp)]
fn rq_shard_queue(id: Option<pgrx::Uuid>, fcinfo: pg_sys::FunctionCallInfo) -> Option<String> {
    // SAFETY: fcinfo is this call's own.
    let function = unsafe { statements::called_function(fcinfo) };
    when_distributed(function, || shard_queue_of(function, id))
}

// rq_shard_queues(ids): rq_shard_queue of each id, for rq_complete_batch
// in PL/pgSQL (0.4.0 and 0.5.0; Rust since, src/finish.rs), which runs one
// UPDATE per queue; NULL on one server, where it runs one. Kept, as
// rq_shard_queue is, for the scripts that declare it.
#[pg_extern(volatile, parallel_unsafe, schema = "raquel_internal", sql = false)]
#[search_path(pg_catalog, pg_temp)]
fn rq_shard_queues(ids: Option<pgrx::Array<pgrx::Uuid>>, fcinfo: pg_sys::FunctionCallInfo) -> Option<Vec<Option<String>>> {
    // SAFETY: fcinfo is this call's own.
    let function = unsafe { statements::called_function(fcinfo) };
    let ids = ids?;
    when_distributed(function, || ids.iter().map(|id| Some(shard_queue_of(function, id))).collect())
}

/// `f`'s answer on a distributed table, connected to SPI; None on one
/// server (known without SPI once this backend has asked).
fn when_distributed<T>(function: pg_sys::Oid, f: impl FnOnce() -> T) -> Option<T> {
    if DISTRIBUTED.get() == Some(false) {
        return None;
    }
    statements::connect();
    let answer = is_distributed(function).then(f);
    statements::finish();
    answer
}

/// The queue that sends a statement about job `id` to its shard: the job's
/// queue, or an empty name when no shard has the job.
fn shard_queue_of(function: pg_sys::Oid, id: Option<pgrx::Uuid>) -> String {
    id.and_then(|id| queue_of(function, id.into_datum()?)).unwrap_or_default()
}

/// A claim on a distributed table: up to `batch` jobs of `queues` (None:
/// any queue), waiting up to `wait_ms` for one. Each statement's rows go
/// into the call's result set as they come; returns how many in all.
///
/// # Safety
/// `fcinfo` is the call's own, set up by `InitMaterializedSRF`; connected to SPI.
pub unsafe fn claim(
    fcinfo: pg_sys::FunctionCallInfo,
    function: pg_sys::Oid,
    queues: Option<&[&str]>,
    worker: Option<pg_sys::Datum>,
    batch: i32,
    lease_ms: i64,
    wait_ms: i64,
) -> u64 {
    let deadline = now_ms() + wait_ms;
    let hashes: Option<Vec<u32>> = queues.map(|q| q.iter().map(|name| waiters::queue_hash(name)).collect());
    let mut claimed = 0;
    loop {
        if wait_ms > 0 {
            // before the claim: a commit between it and the sleep still wakes
            waiters::register(hashes.as_deref(), None);
        }
        let now = now_ms();
        let order = match queues {
            Some([one]) => vec![one.to_string()],
            Some(several) => by_best_job(function, several, now),
            None => ready_queues(function, now),
        };
        for queue in order {
            if claimed >= batch as u64 {
                break;
            }
            // SAFETY: per this function's contract.
            claimed += unsafe { claim_from(fcinfo, function, &queue, worker, batch - claimed as i32, lease_ms, now) };
        }
        let now = now_ms();
        if claimed > 0 || now >= deadline {
            break;
        }
        // Woken at once by a commit on this node; jobs committed on other
        // nodes are found by looking again.
        waiters::sleep(deadline.min(now + POLL_MS) - now);
        if waiters::told_to_give_up() {
            break;
        }
    }
    if wait_ms > 0 {
        waiters::unregister();
    }
    claimed
}

/// Claims up to `batch` ready jobs of `queue`, in one statement of its shard.
///
/// # Safety
/// As `claim`.
unsafe fn claim_from(
    fcinfo: pg_sys::FunctionCallInfo,
    function: pg_sys::Oid,
    queue: &str,
    worker: Option<pg_sys::Datum>,
    batch: i32,
    lease_ms: i64,
    now: i64,
) -> u64 {
    let text = || {
        statements::fill(
            transitions::CLAIM_DISTRIBUTED,
            &[("@jobs@", &statements::in_schema_of(function, "jobs")), ("@batch@", &batch.to_string())],
        )
    };
    let statement = Statement {
        shape: Shape { name: "distributed_claim", variant: i64::from(batch) },
        text: &text,
        types: &[pg_sys::TEXTOID, pg_sys::TEXTOID, pg_sys::INT8OID, pg_sys::INT8OID],
    };
    let rows = statements::run(function, &statement, &[queue.into_datum(), worker, now.into_datum(), lease_ms.into_datum()]);
    if rows > 0 {
        crate::metrics::note_claimed_rows();
        QUEUES.with_borrow_mut(|remembered| {
            if remembered.len() + rows as usize > REMEMBERED {
                remembered.clear();
            }
            for row in 0..rows as usize {
                // SAFETY: the claim returned `rows` jobs rows; column 1 is the id.
                if let Some(id) = unsafe { statements::value::<pgrx::Uuid>(row, 1) } {
                    remembered.insert(id, queue.to_string());
                }
            }
        });
        // SAFETY: per this function's contract; the last result is the claim's rows.
        unsafe { statements::return_rows(fcinfo) };
    }
    statements::free_result();
    rows
}

/// `queues` that have a ready job, best job first (one probe each).
fn by_best_job(function: pg_sys::Oid, queues: &[&str], now: i64) -> Vec<String> {
    let text = || statements::fill(BEST, &[("@jobs@", &statements::in_schema_of(function, "jobs"))]);
    let statement = Statement { shape: Shape { name: "distributed_best", variant: 0 }, text: &text, types: &[pg_sys::TEXTOID, pg_sys::INT8OID] };
    let mut best = Vec::with_capacity(queues.len());
    for (position, queue) in queues.iter().enumerate() {
        if statements::run(function, &statement, &[queue.into_datum(), now.into_datum()]) > 0 {
            // SAFETY: one row of priority and scheduled_at.
            let (priority, scheduled_at) = unsafe { (statements::value::<i32>(0, 1), statements::value::<i64>(0, 2)) };
            best.push((std::cmp::Reverse(priority.unwrap_or(0)), scheduled_at.unwrap_or(0), position, queue.to_string()));
        }
        statements::free_result();
    }
    best.sort();
    best.into_iter().map(|(_, _, _, queue)| queue).collect()
}

/// Every queue with a ready job, best first (one statement across the shards).
fn ready_queues(function: pg_sys::Oid, now: i64) -> Vec<String> {
    let text = || statements::fill(READY_QUEUES, &[("@jobs@", &statements::in_schema_of(function, "jobs"))]);
    let statement = Statement { shape: Shape { name: "distributed_ready_queues", variant: 0 }, text: &text, types: &[pg_sys::INT8OID] };
    let rows = statements::run(function, &statement, &[now.into_datum()]);
    // SAFETY: `rows` rows of one text column.
    let queues = (0..rows as usize).filter_map(|row| unsafe { statements::value::<String>(row, 1) }).collect();
    statements::free_result();
    queues
}
