//! Jobs taken for this transaction (`rq_take`, declared in sql/claim.sql):
//! a claim that only locks. For work done inside the claim's transaction
//! the row lock is the lease: the job is written once, when this
//! transaction finishes it (rq_complete, rq_fail), and a crash or a
//! rollback leaves it ready at once, with no attempt counted. What it trades:
//! no `claimed` row is visible while the job is worked, no attempt is
//! counted for a transaction that rolls back (a job that crashes its worker
//! every time is retried forever), and flow settings cannot count such
//! jobs (rq_take refuses a queue that has them).
//!
//! This backend remembers each job it took in this transaction: the attempt
//! the take handed out (the fencing token, as a claim's), when, and by
//! which worker. A rolled-back savepoint forgets the jobs it
//! took (their locks went with it); the transaction's end forgets them all,
//! and its commit lets go of those not finished: they stay as they were.

use pgrx::prelude::*;
use pgrx::{PgSubXactCallbackEvent, PgXactCallbackEvent};
use std::cell::{Cell, RefCell};
use std::collections::HashMap;

/// A job taken in this transaction, as its take handed it out.
#[derive(Clone, Debug)]
pub struct Taken {
    /// The attempt the take counts (attempts + 1): the fencing token.
    pub attempt: i32,
    pub claimed_at: i64,
    pub worker: Option<String>,
    subtransaction: pg_sys::SubTransactionId,
}

thread_local! {
    static TAKEN: RefCell<HashMap<pgrx::Uuid, Taken>> = RefCell::new(HashMap::new());
    static CALLBACKS: Cell<bool> = const { Cell::new(false) };
}

/// Remembers that this transaction took job `id`.
pub fn remember(id: pgrx::Uuid, attempt: i32, claimed_at: i64, worker: Option<String>) {
    if !CALLBACKS.replace(true) {
        let forget_all = || {
            TAKEN.with_borrow_mut(HashMap::clear);
            CALLBACKS.set(false);
        };
        pgrx::register_xact_callback(PgXactCallbackEvent::Commit, forget_all);
        pgrx::register_xact_callback(PgXactCallbackEvent::Abort, forget_all);
        pgrx::register_subxact_callback(PgSubXactCallbackEvent::AbortSub, |aborted, _parent| {
            // the locks of the savepoint and of those inside it are gone
            TAKEN.with_borrow_mut(|taken| taken.retain(|_, t| t.subtransaction < aborted));
        });
    }
    // SAFETY: reads the current subtransaction's id, a backend global.
    let subtransaction = unsafe { pg_sys::GetCurrentSubTransactionId() };
    TAKEN.with_borrow_mut(|taken| taken.insert(id, Taken { attempt, claimed_at, worker, subtransaction }));
}

/// The job `id` if this transaction took it and has not finished it yet.
pub fn taken(id: &pgrx::Uuid) -> Option<Taken> {
    TAKEN.with_borrow(|taken| taken.get(id).cloned())
}

/// Forgets job `id`: this transaction finished it.
pub fn finished(id: &pgrx::Uuid) {
    TAKEN.with_borrow_mut(|taken| taken.remove(id));
}

/// Whether this transaction holds taken jobs it has not finished (a cheap
/// test for the verbs that end a job: most transactions hold none).
pub fn any() -> bool {
    CALLBACKS.get() && TAKEN.with_borrow(|taken| !taken.is_empty())
}

/// Hands back the rows rq_take locked (the last SPI result, jobs as they are
/// stored) as a claim would make them: claimed, attempts + 1, by `worker`,
/// now, with no lease; remembers each, and counts it claimed for the
/// metrics with its wait from due.
///
/// # Safety
/// As `statements::return_rows`: connected to SPI, whose last result holds
/// `jobs` rows, in a call set up as a materialized set.
pub unsafe fn return_taken_rows(fcinfo: pg_sys::FunctionCallInfo, worker: Option<pg_sys::Datum>) {
    let now = crate::clock::now_ms();
    // SAFETY: worker is the call's text argument (or NULL).
    let worker_name = worker.and_then(|w| unsafe { String::from_datum(w, false) });
    // SAFETY: per the contract above.
    unsafe {
        crate::statements::return_rows_changed(fcinfo, |row| {
            let attempt = row.get::<i32>(c"attempts").unwrap_or(0).saturating_add(1);
            let queue = row.get::<String>(c"queue").unwrap_or_default();
            let wait = row.get::<i64>(c"scheduled_at").map(|due| now - due);
            row.set(c"status", "claimed".into_datum());
            row.set(c"attempts", attempt.into_datum());
            row.set(c"claimed_by", worker);
            row.set(c"claimed_at", now.into_datum());
            row.set(c"lease_expires_at", None);
            row.set(c"finished_at", None);
            if let Some(id) = row.get::<pgrx::Uuid>(c"id") {
                crate::metrics::note(&queue, crate::metrics::Event::Claimed, wait);
                remember(id, attempt, now, worker_name.clone());
            }
        })
    }
}

/// Hands back the rows rq_take(complete => true) completed (the last SPI
/// result: each jobs row, then whether its end sets something off), counts
/// each claimed, and then runs what follows their ends (src/ended.rs).
///
/// # Safety
/// As `return_taken_rows`.
pub unsafe fn return_completed_rows(fcinfo: pg_sys::FunctionCallInfo, function: pg_sys::Oid) {
    let mut ended = Vec::new();
    // SAFETY: per the contract above.
    unsafe {
        crate::statements::return_rows_changed(fcinfo, |row| {
            let queue = row.get::<String>(c"queue").unwrap_or_default();
            let wait = match (row.get::<i64>(c"scheduled_at"), row.get::<i64>(c"claimed_at")) {
                (Some(due), Some(claimed)) => Some(claimed - due),
                _ => None,
            };
            crate::metrics::note(&queue, crate::metrics::Event::Claimed, wait);
            if let Some(id) = row.get::<pgrx::Uuid>(c"id") {
                let sets_off = row.get::<bool>(c"sets_off") == Some(true);
                // (claimed and completed at one instant; never claimed
                // under a lease, so it held no slot)
                let outcome = crate::ended::Outcome::Succeeded;
                ended.push(crate::ended::Ended { id, queue, outcome, run_ms: Some(0), was_claimed: false, sets_off });
            }
        })
    };
    crate::ended::jobs_ended(function, false, &ended);
}

/// What `return_taken_rows` does for each job, for jobs taken directly
/// (src/direct.rs), whose rows are already as a claim makes them (and
/// counted claimed by the caller): remembers each.
pub fn taken_directly(jobs: &[crate::direct::ClaimedJob], worker: Option<pg_sys::Datum>) {
    // SAFETY: worker is the call's text argument (or NULL).
    let worker_name = worker.and_then(|w| unsafe { String::from_datum(w, false) });
    for job in jobs {
        remember(job.id, job.attempt, job.key.0 + job.waited_ms, worker_name.clone());
    }
}

/// What `return_completed_rows` does after the rows, for jobs of `queue`
/// taken and completed directly (src/direct.rs, counted claimed by the
/// caller): runs what follows their ends (src/ended.rs).
pub fn completed_directly(function: pg_sys::Oid, queue: &str, jobs: &[crate::direct::ClaimedJob]) {
    let ended: Vec<_> = jobs
        .iter()
        .map(|job| {
            // (claimed and completed at one instant; never claimed under a
            // lease, so it held no slot)
            let outcome = crate::ended::Outcome::Succeeded;
            crate::ended::Ended { id: job.id, queue: queue.to_owned(), outcome, run_ms: Some(0), was_claimed: false, sets_off: job.sets_off }
        })
        .collect();
    crate::ended::jobs_ended(function, false, &ended);
}
