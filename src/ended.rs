//! What follows a job's end, in one place.
//!
//! A job ends when it succeeds, fails with no retry left (exhausted),
//! expires unclaimed or is cancelled. Every path that ends jobs, in Rust
//! (rq_complete, rq_fail, rq_complete_batch, rq_take(complete => true):
//! src/finish.rs, src/take.rs) or in SQL (rq_cancel, rq_expire on one
//! server and on Citus, a workflow's cancelled children: through
//! `raquel_internal.rq_ended`), runs its statement, reads its rows,
//! then hands each job it ended to `jobs_ended`, which does what every end
//! owes, in this order:
//!
//! 1. the metrics count it (succeeded, failed, expired; a cancel counts none);
//! 2. a job that was claimed frees a slot of a queue that limits claims, and
//!    a waiting claim of that queue is woken at commit to take it;
//! 3. its awaiters (rq_await) are woken at commit;
//! 4. this transaction forgets it if it took it (src/take.rs);
//! 5. what its end sets off, when the ending statement said it sets
//!    something off: the jobs waiting for it are released or cancelled, and
//!    a key enqueued with a key_period stays held (rq_job_ended,
//!    sql/finish.sql).
//!
//! Before 0.6.0 each path did its own share of these, and the copies had
//! drifted: an awaiter of a job ended by rq_take(complete => true), or
//! expired on Citus, was not woken (it found out when it looked again).
//! tests/client/tests/endings.rs ends a job by every path and checks that
//! its awaiter returns at the commit.

use crate::metrics::{self, Event};
use crate::statements::{self, Shape, Statement};
use crate::{flow, privileges, take, waiters};
use pgrx::prelude::*;

/// How a job ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    Succeeded,
    Exhausted,
    Expired,
    Cancelled,
}

impl Outcome {
    fn named(name: &str) -> Option<Outcome> {
        Some(match name {
            "succeeded" => Outcome::Succeeded,
            "exhausted" => Outcome::Exhausted,
            "expired" => Outcome::Expired,
            "cancelled" => Outcome::Cancelled,
            _ => return None,
        })
    }

    /// The metric an end counts: an exhausted job counts as failed (as each
    /// failed attempt does), a cancelled one counts nothing.
    fn event(self) -> Option<Event> {
        match self {
            Outcome::Succeeded => Some(Event::Succeeded),
            Outcome::Exhausted => Some(Event::Failed),
            Outcome::Expired => Some(Event::Expired),
            Outcome::Cancelled => None,
        }
    }
}

/// One job an ending statement ended.
#[derive(Clone, Debug)]
pub struct Ended {
    pub id: pgrx::Uuid,
    pub queue: String,
    pub outcome: Outcome,
    /// From its claim to its end, for the metrics (None: not known).
    pub run_ms: Option<i64>,
    /// It was claimed until it ended (it may have held a slot of its queue).
    pub was_claimed: bool,
    /// Its end sets something off (the ending statement's `sets_off`
    /// column, src/finish.rs `sets_off`).
    pub sets_off: bool,
}

/// What follows the ends of `jobs`, ended by one statement of a call of
/// `function`. `frees_slots`: some queue limits claims
/// (flow::some_queue_counts_claims, asked before the ending statement ran,
/// since it may run a statement of its own). Runs a statement for each job
/// whose end sets something off: call it once the ending statement's rows
/// are read. Connected to SPI.
pub fn jobs_ended(function: pg_sys::Oid, frees_slots: bool, jobs: &[Ended]) {
    for job in jobs {
        if let Some(event) = job.outcome.event() {
            metrics::note(&job.queue, event, job.run_ms);
        }
        if job.was_claimed && frees_slots {
            // (its place given back at commit before a waiting claim wakes,
            // when this is the first to register a commit callback)
            crate::claim_slots::job_ended(privileges::jobs_of(function), &job.queue, &job.id);
            flow::claim_ended(&job.queue);
        }
        waiters::note_ended(&job.id);
        take::finished(&job.id);
    }
    for job in jobs.iter().filter(|job| job.sets_off) {
        sets_off(function, job.id);
    }
}

/// A completed job whose end sets something off (sql/finish.sql).
const JOB_ENDED: &str = "SELECT @rq_job_ended@($1)";

/// Runs rq_job_ended (sql/finish.sql) for job `id`, whose end sets
/// something off. Replaces the last SPI result.
fn sets_off(function: pg_sys::Oid, id: pgrx::Uuid) {
    // a plan per schema of the helpers (src/statements.rs helper_schema)
    let helpers = statements::helper_schema(function);
    let text = || statements::fill(JOB_ENDED, &[("@rq_job_ended@", &statements::helper_of(helpers, "rq_job_ended"))]);
    let shape = Shape { name: "job_ended", variant: i64::from(helpers.to_u32()) };
    let released = Statement { shape, text: &text, types: &[pg_sys::UUIDOID] };
    statements::run(function, &released, &[id.into_datum()]);
}

/// The entry of the paths written in SQL (rq_cancel, rq_expire and its
/// Citus twin, rq_parent_ended's cancelled children): the jobs `ids` of
/// `queues` (paired by position) ended with `outcome` (succeeded,
/// exhausted, expired, cancelled); `was_claimed`, they may have been
/// claimed; `sets_off` (paired by position, null for false), whose end sets
/// something off. For roles that may update jobs, which could have ended
/// them.
#[pg_extern(volatile, parallel_unsafe, schema = "raquel_internal")]
#[search_path(pg_catalog, pg_temp)]
fn rq_ended(
    ids: Option<Vec<Option<pgrx::Uuid>>>,
    queues: Option<Vec<Option<String>>>,
    outcome: &str,
    was_claimed: bool,
    sets_off: Option<Vec<Option<bool>>>,
    fcinfo: pg_sys::FunctionCallInfo,
) {
    // SAFETY: fcinfo is this call's own.
    let function = unsafe { statements::called_function(fcinfo) };
    privileges::require_update(function, "rq_ended");
    let Some(outcome) = Outcome::named(outcome) else {
        crate::errors::Refusal::invalid_parameter(format!("rq_ended: unknown outcome \"{outcome}\""))
            .hint("One of succeeded, exhausted, expired, cancelled.")
            .raise()
    };
    let (ids, queues, sets_off) = (ids.unwrap_or_default(), queues.unwrap_or_default(), sets_off.unwrap_or_default());
    if queues.len() != ids.len() || (!sets_off.is_empty() && sets_off.len() != ids.len()) {
        crate::errors::Refusal::invalid_parameter(format!(
            "rq_ended: {} ids, {} queues and {} sets_off flags do not pair",
            ids.len(),
            queues.len(),
            sets_off.len()
        ))
        .raise()
    }
    let jobs: Vec<Ended> = ids
        .iter()
        .zip(&queues)
        .enumerate()
        .filter_map(|(n, (id, queue))| {
            Some(Ended {
                id: (*id)?,
                queue: queue.clone().unwrap_or_default(),
                outcome,
                run_ms: None,
                was_claimed,
                sets_off: sets_off.get(n).copied().flatten().unwrap_or(false),
            })
        })
        .collect();
    if jobs.is_empty() {
        return;
    }
    statements::connect();
    let frees_slots = was_claimed && flow::some_queue_counts_claims(function);
    jobs_ended(function, frees_slots, &jobs);
    statements::finish();
}
