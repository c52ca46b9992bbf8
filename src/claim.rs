//! Handing jobs to workers: `rq_claim` (declared in sql/claim.sql).
//!
//! It is a C function because every worker calls it for every job: the
//! arguments are checked here, and the claim statement is prepared once per
//! backend for each queue filter and batch size: sql/claim.ready.sql for one
//! queue or any (from the index of every queue's ready jobs),
//! sql/claim.ready_several.sql for several. Each skips along
//! a ready index from priority to priority (sql/claim.priorities*.sql), so
//! a claim costs what its own queues' ready jobs and priorities cost, not
//! other queues' backlogs nor jobs scheduled for later. A claim with a
//! `wait` loops here too, with the same kept plan: claim; if nothing, sleep
//! on the latch until a commit that made jobs of these queues ready wakes
//! it (src/waiters.rs), the next job scheduled for later is due
//! (sql/claim.next_due.sql), or the wait ends.
//!
//! A claim of one queue with flow control (a row in queue_limits: limited
//! or grouped; src/flow.rs) that is not paused obeys it here: places and
//! tokens from shared memory (src/claim_slots.rs, src/rate_buckets.rs), the
//! plain claim for the jobs without a group, then the fair claim of the
//! grouped ones (src/fair.rs). Any other claim whose queues have flow
//! control (several queues, any queue, a paused queue, a queue whose
//! limits are kept in its row) is the flow claim (src/claim/flow_claim.rs),
//! which takes each such queue's turn the same way. A waiting claim makes
//! each such attempt in a subtransaction and undoes one that claimed
//! nothing, so that it sleeps holding no queue's row lock and no group's
//! lock.

use crate::clock::now_ms;
use crate::cursors;
use crate::deadlines;
use crate::distributed;
use crate::flow::{self, ClaimFlow};
use crate::durations::interval_ms_within;
use crate::errors::Refusal;
use crate::limits::{self, MAX_WAIT_MS};
use crate::claim_slots;
use crate::rate_buckets;
use crate::statements::{self, Shape, Statement, nullable_arg};
use crate::transitions;
use crate::waiters;
use pgrx::fcinfo::pg_getarg;
use pgrx::prelude::*;

mod flow_claim;

const READY: &str = include_str!("../sql/claim.ready.sql");
const READY_SEVERAL: &str = include_str!("../sql/claim.ready_several.sql");
const PRIORITIES: &str = include_str!("../sql/claim.priorities.sql");
const PRIORITIES_SEVERAL: &str = include_str!("../sql/claim.priorities_several.sql");
const QUEUES_NAMED: &str = "SELECT DISTINCT q.name FROM unnest($1) AS q (name) WHERE q.name IS NOT NULL";
const QUEUES_ANY: &str = include_str!("../sql/claim.queues_any.sql");
const NEXT_DUE: &str = include_str!("../sql/claim.next_due.sql");
const TAKE: &str = include_str!("../sql/claim.take.sql");
const LANES: &str = include_str!("../sql/claim.lanes.sql");
const LANE: &str = include_str!("../sql/claim.lane.sql");

/// A claim on several queues merges their due jobs: each queue and priority
/// offers this many more than the batch, so that a few rows other claimers
/// hold do not leave it short (sql/claim.ready_several.sql).
const SEVERAL_QUEUES_SPARE: i32 = 32;

/// Without the preloaded library no commit wakes a waiting claim, so it
/// looks again this often.
const POLL_WITHOUT_WAKEUPS_MS: i64 = 100;

/// How the claim picks queues: the statement differs so that each plan walks
/// a ready index in claim order.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum QueueFilter {
    One,
    Several,
    /// Any queue, from the index of every queue's ready jobs (jobs_ready_idx,
    /// sql/schema.sql), like one queue's claim from its own.
    Any,
    /// Any queue on a jobs table without that index (one declared by 0.5.0,
    /// whose update has not run): queue by queue
    /// (sql/claim.queues_any.sql), a probe for every queue with jobs.
    AnyQueueByQueue,
}

/// The condition, true of every row, that only the statements of a claim on
/// any queue state: it lets them, and no other, use jobs_ready_idx.
const ANY_QUEUE: &str = "AND j.priority >= -2147483648";

impl QueueFilter {
    /// The condition that picks a queue's jobs out of the ready index.
    fn condition(self) -> &'static str {
        match self {
            QueueFilter::One => "AND j.queue = $1[1]",
            QueueFilter::Any => ANY_QUEUE,
            QueueFilter::Several | QueueFilter::AnyQueueByQueue => "AND j.queue = p.queue",
        }
    }

    /// The queues of sql/claim.priorities_several.sql, and the condition
    /// that keeps a claimed job in them (sql/claim.ready_several.sql).
    fn queues(self) -> [(&'static str, &'static str); 2] {
        match self {
            QueueFilter::Any | QueueFilter::AnyQueueByQueue => [("@queues@", QUEUES_ANY), ("@in_queues@", "")],
            QueueFilter::One | QueueFilter::Several => {
                [("@queues@", QUEUES_NAMED), ("@in_queues@", "AND j.queue = ANY ($1)")]
            }
        }
    }

    /// The filter of a claim on this many queues (None: any queue), by
    /// `function` of an install whose jobs table may lack jobs_ready_idx.
    fn of(queues: Option<usize>, function: pg_sys::Oid) -> QueueFilter {
        match queues {
            // an index a jobs table declared by an older version lacks
            None if crate::privileges::table_of(function, "jobs_ready_idx") != pg_sys::InvalidOid => QueueFilter::Any,
            None => QueueFilter::AnyQueueByQueue,
            Some(1) => QueueFilter::One,
            Some(_) => QueueFilter::Several,
        }
    }

    /// The statements' shape: one queue's, or the merge of several.
    fn single_lane(self) -> bool {
        matches!(self, QueueFilter::One | QueueFilter::Any)
    }

    /// The priorities the statements look at (sql/claim.priorities*.sql).
    fn priorities(self) -> &'static str {
        if self.single_lane() { PRIORITIES } else { PRIORITIES_SEVERAL }
    }
}

/// What a claim does with the ready jobs it locks.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Mode {
    /// rq_claim: claims them, each an attempt under a lease.
    Lease,
    /// rq_take: writes nothing; this transaction finishes them (src/take.rs).
    Take,
    /// rq_take(complete => true): completes them in the same write.
    TakeAndComplete,
    /// The same where some queue keeps no history (src/history.rs): those
    /// queues' jobs are deleted instead, $5 naming the queues.
    TakeAndCompleteDeleting,
}

impl Mode {
    /// What the walk reads of a ready job, and what becomes of it
    /// (sql/claim.ready.sql's @ready@ and @claimed@).
    fn statement_parts(self) -> (&'static str, &'static str) {
        match self {
            Mode::Lease => ("id", transitions::CLAIM),
            Mode::Take => ("*", TAKE),
            Mode::TakeAndComplete => ("id", transitions::TAKE_COMPLETE),
            Mode::TakeAndCompleteDeleting => ("id", transitions::TAKE_DELETING),
        }
    }
}

/// One call's claim: what it asks for, and the statements that serve it.
struct Claim {
    function: pg_sys::Oid,
    filter: QueueFilter,
    mode: Mode,
    batch: i32,
    /// $1 queues, $2 worker, $3 now (filled in per claim), $4 lease, and
    /// for TakeAndCompleteDeleting $5 the queues without history
    args: [Option<pg_sys::Datum>; 5],
    /// The queues' flow settings, when any has some.
    flow: Option<ClaimFlow>,
    /// The jobs table has groups (0.3.0 on), which the plain claim leaves out.
    grouped_table: bool,
    /// The queues by name (None: any queue, or not needed), kept by a
    /// waiting claim to look at their flow settings again after each sleep,
    /// and by the flow claim (src/claim/flow_claim.rs).
    queue_names: Option<Vec<Option<String>>>,
    /// One queue's claim that may start where its lanes' cursors are
    /// (src/cursors.rs): the queue.
    cursors_of: Option<String>,
    /// The jobs of the last attempt when it claimed directly
    /// (src/direct.rs); None: its rows are the last SPI result.
    direct: Option<Vec<crate::direct::ClaimedJob>>,
    /// The queues without history, for TakeAndCompleteDeleting.
    without_history: Vec<String>,
    /// The jobs (id, attempt) of the last attempt when it put its rows in
    /// the set it returns as it went (a grouped queue's claim, which runs
    /// more than one statement); None: they are `direct`, or the last SPI
    /// result.
    returned: Option<Vec<(pgrx::Uuid, i32)>>,
    /// The call, whose materialized set the rows go to.
    fcinfo: pg_sys::FunctionCallInfo,
}

impl Claim {
    /// Claims up to `batch` ready jobs, as the queues' flow settings allow;
    /// how many it got (their rows are the last SPI result). `undo_if_none`:
    /// a flow-controlled attempt that claims nothing releases the locks it
    /// took.
    fn run(&mut self, now_ms: i64, undo_if_none: bool) -> u64 {
        self.direct = None;
        self.returned = None;
        let Some(flow) = &self.flow else { return self.run_ready(now_ms) };
        let one_queue = flow.one_queue.clone();
        if let Some(one) = one_queue {
            // a waiting claim under group_max_claimed that got nothing lets
            // go of the groups' locks it took before it sleeps
            let locks_groups = undo_if_none && one.grouped && one.group_max_claimed.is_some();
            let mut limited = None;
            let mut attempt = || {
                limited = self.run_limited(&one, now_ms);
                limited.unwrap_or(0)
            };
            let claimed = if locks_groups { in_subtransaction_kept_if_rows(attempt) } else { attempt() };
            if limited.is_some() {
                return claimed;
            }
            // its limits are kept in its row: the flow claim of that queue
            if self.queue_names.is_none() {
                self.queue_names = Some(vec![Some(one.queue.clone())]);
            }
        }
        // several queues, any queue, a paused queue, or limits kept in a row
        let queues = flow::queues_with_settings(self.function, self.queue_names.as_deref());
        let mut attempt = || self.run_flow(&queues, now_ms);
        if undo_if_none { in_subtransaction_kept_if_rows(attempt) } else { attempt() }
    }

    /// The claim of one queue that is not paused: places reserved under
    /// its max_claimed (src/claim_slots.rs), tokens taken from its rate's
    /// bucket (src/rate_buckets.rs), as many jobs claimed (`run_allowed`),
    /// and what was not used given back. None, having claimed nothing and
    /// kept nothing, when the queue's limits are kept in its row (no slot
    /// or no bucket for it): the flow claim serves it (src/claim/flow_claim.rs).
    fn run_limited(&mut self, one: &flow::OneQueue, now_ms: i64) -> Option<u64> {
        let places = match one.max_claimed {
            Some(max) => Some(claim_slots::reserve(self.function, &one.queue, max, self.batch, now_ms)?),
            None => None,
        };
        let mut allowed = places.as_ref().map_or(self.batch, |p| p.count);
        let mut tokens = None;
        if let (Some((rate, per_ms)), true) = (one.rate, allowed > 0) {
            let table = crate::privileges::jobs_of(self.function);
            match rate_buckets::take(table, &one.queue, rate, per_ms, allowed, now_ms) {
                Some(took) => (allowed, tokens) = (took, Some((table, took))),
                None => {
                    if let Some(places) = &places {
                        claim_slots::took(places, &[]);
                    }
                    return None;
                }
            }
        }
        let claimed = if allowed > 0 { self.run_allowed(one, allowed, now_ms) } else { 0 };
        if let Some((table, took)) = tokens {
            rate_buckets::give_back(table, &one.queue, took - claimed as i32);
        }
        if let Some(places) = &places {
            claim_slots::took(places, &self.claimed_jobs());
        }
        Some(claimed)
    }

    /// Up to `allowed` jobs of one queue: those without a group by the
    /// plain claim, then, for a grouped queue, its grouped jobs in the fair
    /// order (src/fair.rs). When both run, the rows go into the set as they
    /// come (`returned`).
    fn run_allowed(&mut self, one: &flow::OneQueue, allowed: i32, now_ms: i64) -> u64 {
        let batch = self.batch;
        self.batch = allowed;
        let ungrouped = self.run_ready(now_ms);
        self.batch = batch;
        // (ungrouped jobs claimed by a statement rather than directly are
        // the last SPI result, which the fair claim's would replace: they
        // are what this attempt returns)
        if !one.grouped || ungrouped >= allowed as u64 || (ungrouped > 0 && self.direct.is_none()) {
            return ungrouped;
        }
        let mut returned = Vec::new();
        if let Some(jobs) = self.direct.take() {
            self.return_direct(&jobs);
            returned.extend(jobs.iter().map(|job| (job.id, job.attempt)));
        }
        let fcinfo = self.fcinfo;
        let fair = crate::fair::FairClaim {
            function: self.function,
            queue: &one.queue,
            worker: self.args[1],
            lease_ms: self.args[3],
            now_ms,
        };
        let queue = one.queue.as_str();
        returned.extend(fair.run(allowed - ungrouped as i32, one.group_max_claimed, |direct| match direct {
            Some(jobs) => return_claimed_directly(fcinfo, queue, jobs),
            None => {
                crate::metrics::note_claimed_rows();
                // SAFETY: the call's materialized set (set up before the
                // claim); the last SPI result is the fair claim's rows of `jobs`.
                unsafe { statements::return_rows(fcinfo) };
            }
        }));
        let count = returned.len() as u64;
        self.returned = Some(returned);
        count
    }

    /// Puts jobs claimed directly under a lease into the set the call
    /// returns, and counts them (src/metrics.rs).
    fn return_direct(&self, jobs: &[crate::direct::ClaimedJob]) {
        return_claimed_directly(self.fcinfo, self.cursors_of.as_deref().unwrap_or_default(), jobs);
    }

    /// The id and attempt of each job the last attempt claimed.
    fn claimed_jobs(&self) -> Vec<(pgrx::Uuid, i32)> {
        if let Some(jobs) = &self.returned {
            return jobs.clone();
        }
        if let Some(jobs) = &self.direct {
            return jobs.iter().map(|job| (job.id, job.attempt)).collect();
        }
        jobs_in_last_result()
    }

    /// Which of the statements' shapes: the queue filter, whether the
    /// table has groups, and the mode.
    fn variant(&self) -> i64 {
        self.filter as i64 + if self.grouped_table { 10 } else { 0 } + 100 * self.mode as i64
    }

    fn ungrouped(&self) -> &'static str {
        if self.grouped_table { "AND j.group_key IS NULL" } else { "" }
    }

    /// The plain claim: up to `batch` ready jobs in claim order.
    fn run_ready(&mut self, now_ms: i64) -> u64 {
        self.args[2] = now_ms.into_datum();
        let lanes = self.lanes(now_ms);
        if let Some(jobs) = self.claimed_directly(now_ms, lanes.as_ref()) {
            let queue = self.cursors_of.as_deref().unwrap_or_default();
            self.locked(lanes.as_ref(), jobs.iter().map(|job| (queue, job.priority, job.key)));
            let count = jobs.len() as u64;
            self.direct = Some(jobs);
            return count;
        }
        let [queues, in_queues] = self.filter.queues();
        let text = || {
            let (template, priorities) = match (&lanes, self.filter) {
                (Some(l), _) if l.lanes.len() == 1 => (LANE, ""),
                (Some(_), _) => (LANES, ""),
                (None, filter) if filter.single_lane() => (READY, PRIORITIES),
                (None, _) => (READY_SEVERAL, PRIORITIES_SEVERAL),
            };
            let (ready, claimed) = self.mode.statement_parts();
            statements::fill(
                template,
                &[
                    ("@claimed@", claimed),
                    ("@ready@", ready),
                    ("@sets_off@", &if self.completes() { crate::finish::sets_off(self.function, false) } else { String::new() }),
                    ("@sets_off_condition@", &crate::finish::sets_off_condition(self.function, false)),
                    ("@priorities@", priorities),
                    queues,
                    in_queues,
                    ("@ungrouped@", self.ungrouped()),
                    ("@jobs@", &statements::in_schema_of(self.function, "jobs")),
                    ("@queue_filter@", self.filter.condition()),
                    ("@batch@", &self.batch.to_string()),
                    ("@window@", &(self.batch + SEVERAL_QUEUES_SPARE).to_string()),
                    ("@order_by@", if self.batch == 1 { "" } else { "ORDER BY c.priority DESC, c.scheduled_at, c.id" }),
                ],
            )
        };
        let types = [
            pg_sys::TEXTARRAYOID,
            pg_sys::TEXTOID,
            pg_sys::INT8OID,
            pg_sys::INT8OID,
            pg_sys::TEXTARRAYOID,
            pg_sys::INT4ARRAYOID,
            pg_sys::INT8ARRAYOID,
            pg_sys::UUIDARRAYOID,
        ];
        let deleting = self.mode == Mode::TakeAndCompleteDeleting;
        let mut args = [None; 8];
        args[..5].copy_from_slice(&self.args);
        let count = match &lanes {
            Some(lanes) => {
                args[5] = lanes.lanes.iter().map(|l| l.priority).collect::<Vec<_>>().into_datum();
                args[6] = lanes.lanes.iter().map(|l| l.cursor.0).collect::<Vec<_>>().into_datum();
                args[7] = lanes.lanes.iter().map(|l| pgrx::Uuid::from_bytes(l.cursor.1)).collect::<Vec<_>>().into_datum();
                8
            }
            None if deleting => 5,
            None => 4,
        };
        let name = match &lanes {
            Some(l) if l.lanes.len() == 1 => "claim_lane",
            Some(_) => "claim_lanes",
            None => "claim",
        };
        let statement = Statement {
            shape: Shape { name, variant: self.variant() * 1_000_000 + i64::from(self.batch) },
            text: &text,
            types: &types[..count],
        };
        let run = || statements::run(self.function, &statement, &args[..count]);
        let rows = if deleting { crate::history::as_owner(self.function, run) } else { run() };
        self.locked_rows(lanes.as_ref());
        rows
    }

    /// A claim or take of one queue, written directly (src/direct.rs): the
    /// jobs, or None when the claim runs its statement.
    fn claimed_directly(&self, now_ms: i64, lanes: Option<&cursors::Lanes>) -> Option<Vec<crate::direct::ClaimedJob>> {
        use crate::direct::Action;
        // (a one-queue claim on a single server: see claim_from_args)
        let queue = self.cursors_of.as_deref()?;
        let action = match self.mode {
            // SAFETY: the lease argument is a bigint datum.
            Mode::Lease => Action::Lease(self.args[3].and_then(|lease| unsafe { i64::from_datum(lease, false) })?),
            Mode::Take => Action::Take,
            Mode::TakeAndComplete => Action::TakeAndComplete { keeps_history: true },
            Mode::TakeAndCompleteDeleting => {
                Action::TakeAndComplete { keeps_history: !self.without_history.iter().any(|q| q == queue) }
            }
        };
        let request = crate::direct::ClaimRequest {
            queue,
            lanes: lanes.map(|l| &l.lanes[..]),
            batch: usize::try_from(self.batch).ok()?,
            now_ms,
            worker: self.args[1],
            action,
        };
        let (jobs, dependencies) =
            (crate::privileges::jobs_of(self.function), crate::privileges::table_of(self.function, "job_dependencies"));
        let claim = || crate::direct::claim(jobs, dependencies, &request);
        match action {
            // a queue without history: its jobs are deleted as the owner, as
            // the statement deletes them (src/history.rs)
            Action::TakeAndComplete { keeps_history: false } => crate::history::as_owner(self.function, claim),
            _ => claim(),
        }
    }

    /// The lanes of the queue of a claim that may use cursors: known, or
    /// found now (a statement, run before the claim's). None: the claim
    /// walks from the start of the index.
    fn lanes(&self, now_ms: i64) -> Option<cursors::Lanes> {
        let queue = self.cursors_of.as_deref()?;
        let table = crate::privileges::jobs_of(self.function);
        if cursors::ready_here(table, queue) {
            return None;
        }
        match cursors::lookup(table, queue, now_ms) {
            cursors::Found::Lanes(lanes) => Some(lanes),
            cursors::Found::None => None,
            cursors::Found::Unknown(place) => {
                let text = || {
                    statements::fill(
                        "WITH RECURSIVE @priorities@ SELECT p.priority FROM priorities p WHERE p.priority IS NOT NULL",
                        &[
                            ("@priorities@", PRIORITIES),
                            ("@ungrouped@", self.ungrouped()),
                            ("@jobs@", &statements::in_schema_of(self.function, "jobs")),
                            ("@queue_filter@", QueueFilter::One.condition()),
                        ],
                    )
                };
                let statement = Statement {
                    shape: Shape { name: "claim_lanes_found", variant: i64::from(self.grouped_table) },
                    text: &text,
                    types: &[pg_sys::TEXTARRAYOID],
                };
                let found = statements::run(self.function, &statement, &self.args[..1]);
                // SAFETY: the statement returned `found` rows of one integer column.
                let priorities: Vec<i32> =
                    (0..found as usize).filter_map(|row| unsafe { statements::value::<i32>(row, 1) }).collect();
                statements::free_result();
                cursors::discovered(place, &priorities)
            }
        }
    }

    /// After the claim (each job by queue, priority and place in its
    /// lane): each job it locked is ready again if this transaction rolls
    /// back (and a take's, if it commits without finishing it), and its
    /// lane's cursor moves to the last one it took (src/cursors.rs).
    fn locked<'q>(&self, lanes: Option<&cursors::Lanes>, jobs: impl Iterator<Item = (&'q str, i32, cursors::Key)>) {
        let table = crate::privileges::jobs_of(self.function);
        let mut claimed = Vec::new();
        for (queue, priority, key) in jobs {
            cursors::note_locked(table, queue, priority, key, self.mode == Mode::Take);
            claimed.push((priority, key));
        }
        if let Some(lanes) = lanes {
            cursors::advance(lanes, &claimed);
        }
    }

    /// `locked`, for the rows of the claim statement (the last SPI result).
    fn locked_rows(&self, lanes: Option<&cursors::Lanes>) {
        // SAFETY: set by the claim statement that just ran.
        if unsafe { pg_sys::SPI_processed } == 0 {
            return;
        }
        let mut jobs = Vec::new();
        let mut each = |row: &mut statements::Row| {
            if let (Some(queue), Some(priority), Some(due), Some(id)) = (
                row.get::<&str>(c"queue"),
                row.get::<i32>(c"priority"),
                row.get::<i64>(c"scheduled_at"),
                row.get::<pgrx::Uuid>(c"id"),
            ) {
                jobs.push((queue.to_owned(), priority, (due, cursors::id_bytes(&id))));
            }
        };
        // SAFETY: connected; the last SPI result is the claim's rows.
        unsafe { statements::each_row(&mut each) };
        self.locked(lanes, jobs.iter().map(|(queue, priority, key)| (queue.as_str(), *priority, *key)));
    }

    /// How many jobs the last attempt claimed.
    fn claimed_count(&self) -> u64 {
        if let Some(jobs) = &self.returned {
            return jobs.len() as u64;
        }
        match &self.direct {
            Some(jobs) => jobs.len() as u64,
            // SAFETY: set by the claim statement that ran last.
            None => unsafe { pg_sys::SPI_processed },
        }
    }

    /// Whether the claim completes what it takes (rq_take(complete => true)).
    fn completes(&self) -> bool {
        matches!(self.mode, Mode::TakeAndComplete | Mode::TakeAndCompleteDeleting)
    }

    /// When the next of these queues' jobs scheduled after `now_ms` is due.
    fn next_due(&self, now_ms: i64) -> Option<i64> {
        let text = || {
            let jobs = statements::in_schema_of(self.function, "jobs");
            statements::fill(
                NEXT_DUE,
                &[
                    ("@priorities@", self.filter.priorities()),
                    self.filter.queues()[0], // the statement has no claimed job to keep
                    ("@ungrouped@", self.ungrouped()),
                    ("@jobs@", &jobs),
                    ("@queue_filter@", self.filter.condition()),
                    ("@same_queue@", self.filter.condition()),
                ],
            )
        };
        let statement = Statement {
            shape: Shape { name: "next_due", variant: self.variant() },
            text: &text,
            types: &[pg_sys::TEXTARRAYOID, pg_sys::INT8OID],
        };
        statements::run(self.function, &statement, &[self.args[0], now_ms.into_datum()]);
        // SAFETY: an aggregate without GROUP BY returns one row.
        let due = unsafe { statements::value::<i64>(0, 1) };
        statements::free_result();
        due
    }

    /// Claims, and while nothing is ready, sleeps until woken, the next job
    /// is due or `wait_ms` passes. The waiter registers before it claims, so
    /// a commit between the claim and the sleep still wakes it. `queues`:
    /// the hashes of the queue names (None: any queue).
    fn run_waiting(&mut self, wait_ms: i64, queues: Option<Vec<u32>>) {
        // SAFETY: a global of the backend, read in its own thread.
        if unsafe { pg_sys::XactIsoLevel } >= pg_sys::XACT_REPEATABLE_READ as i32 {
            let level = if unsafe { pg_sys::XactIsoLevel } == pg_sys::XACT_SERIALIZABLE as i32 {
                "serializable"
            } else {
                "repeatable read"
            };
            Refusal::invalid_parameter(format!("rq_claim with a wait needs READ COMMITTED, not {level}"))
                .detail("A waiting claim looks again with a new snapshot each time it is woken.")
                .hint("A snapshot that never changes would never see the job it waits for.")
                .raise()
        }
        let deadline = now_ms() + wait_ms;
        let mut declined = None;
        let mut first = true;
        loop {
            let registered = waiters::register(queues.as_deref(), declined);
            if let Some(queue) = declined {
                // registered again, declining it: the wake-up goes elsewhere
                waiters::pass_on(queue);
            }
            if !first {
                // settings changed while it slept (rq_resume, rq_set_limits)
                // hold now: read from the table, since the change that woke
                // it may have committed without its invalidation sent yet
                // SAFETY: processes pending invalidations, as any lock acquisition does.
                unsafe { pg_sys::AcceptInvalidationMessages() };
                flow::forget_settings();
                self.flow = flow::for_claim(self.function, self.queue_names.as_deref());
            }
            first = false;
            // Each claim is a new statement with a new snapshot (READ COMMITTED).
            if self.run(now_ms(), true) > 0 {
                break;
            }
            let now = now_ms();
            if now >= deadline {
                break;
            }
            statements::free_result();
            let next_due = self.next_due(now).unwrap_or(deadline);
            let mut poll = if registered { deadline } else { now + POLL_WITHOUT_WAKEUPS_MS };
            if let Some(flow_poll) = self.flow.as_ref().and_then(|f| f.poll_ms) {
                poll = poll.min(now + flow_poll);
            }
            waiters::sleep(deadline.min(next_due).min(poll) - now);
            if waiters::told_to_give_up() {
                // a DROP EXTENSION waits for the locks this claim holds
                break;
            }
            // A claim on more queues than a slot names is woken for any
            // queue; woken for one it does not wait on, it passes it on.
            declined = waiters::woken_for().filter(|queue| queues.as_ref().is_some_and(|mine| !mine.contains(queue)));
        }
        waiters::unregister();
    }
}

/// The dimensions of an array datum.
///
/// # Safety
/// `array` is a (maybe toasted) array datum.
pub unsafe fn array_dimensions(array: pg_sys::Datum) -> i32 {
    // SAFETY: per the contract above.
    unsafe { array_shape(array).0 }
}

/// The dimensions of an array datum, and the lower bound of its first.
///
/// # Safety
/// `array` is a (maybe toasted) array datum.
unsafe fn array_shape(array: pg_sys::Datum) -> (i32, i32) {
    // SAFETY: per the contract above; an ArrayType header is followed by its
    // `ndim` dimensions and then their `ndim` lower bounds (array.h).
    unsafe {
        let array = pg_sys::pg_detoast_datum(array.cast_mut_ptr()) as *const pg_sys::ArrayType;
        let dimensions = (*array).ndim;
        let lower_bound = if dimensions > 0 { *(array.add(1) as *const i32).add(dimensions as usize) } else { 1 };
        (dimensions, lower_bound)
    }
}

// rq_claim(queues text[], worker text, batch integer, lease interval,
// wait interval) RETURNS SETOF jobs. See sql/claim.sql.
function_info_v1!(pg_finfo_rq_claim_c);

/// # Safety
/// Called by the function manager with the arguments sql/claim.sql declares,
/// in a context that accepts a materialized set.
#[pg_guard]
#[unsafe(no_mangle)]
pub unsafe extern "C-unwind" fn rq_claim_c(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    // SAFETY: fcinfo is this call's own, with rq_claim's arguments first.
    unsafe { claim_from_args(fcinfo, 0, false) }
}

// rq_take(queues text[], worker text, batch integer, complete boolean, wait
// interval) RETURNS SETOF jobs: a claim that only locks (src/take.rs). See
// sql/claim.sql.
function_info_v1!(pg_finfo_rq_take_c);

/// # Safety
/// Called by the function manager with the arguments sql/claim.sql declares,
/// in a context that accepts a materialized set.
#[pg_guard]
#[unsafe(no_mangle)]
pub unsafe extern "C-unwind" fn rq_take_c(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    // SAFETY: fcinfo is this call's own, with rq_take's arguments.
    unsafe { claim_from_args(fcinfo, 0, true) }
}

// rq_complete_and_claim(id uuid, attempt integer, queues text[], worker
// text, batch integer, lease interval, wait interval, result jsonb) RETURNS SETOF jobs:
// a worker's loop in one call. See sql/claim.sql.
// (The symbols of the scripts before 0.6.0, whose attempts may be left
// out: src/compat_0_5.rs.)
function_info_v1!(pg_finfo_rq_complete_and_claim_fenced_c);

/// # Safety
/// Called by the function manager with the arguments sql/claim.sql declares,
/// in a context that accepts a materialized set.
#[pg_guard]
#[unsafe(no_mangle)]
pub unsafe extern "C-unwind" fn rq_complete_and_claim_fenced_c(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    // SAFETY: fcinfo is this call's own.
    unsafe { complete_and_claim_from_args(fcinfo, true) }
}

/// rq_complete_and_claim: id and attempt first (as rq_complete's), then
/// rq_claim's arguments, then the result; `fenced` (0.6.0 on), an id needs
/// its attempt.
///
/// # Safety
/// `fcinfo` is a call with the arguments sql/claim.sql declares, in a
/// context that accepts a materialized set.
pub unsafe fn complete_and_claim_from_args(fcinfo: pg_sys::FunctionCallInfo, fenced: bool) -> pg_sys::Datum {
    // SAFETY: per the contract above.
    unsafe {
        if nullable_arg(fcinfo, 0).is_some() {
            crate::finish::complete_from_args(fcinfo, 7, fenced);
        }
        claim_from_args(fcinfo, 2, false)
    }
}

// rq_complete_batch_and_claim(ids uuid[], attempts integer[], queues text[],
// worker text, batch integer, lease interval, wait interval, results
// jsonb[]) RETURNS SETOF jobs: a worker's loop in batches. See sql/claim.sql.
function_info_v1!(pg_finfo_rq_complete_batch_and_claim_fenced_c);

/// # Safety
/// Called by the function manager with the arguments sql/claim.sql declares,
/// in a context that accepts a materialized set.
#[pg_guard]
#[unsafe(no_mangle)]
pub unsafe extern "C-unwind" fn rq_complete_batch_and_claim_fenced_c(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    // SAFETY: fcinfo is this call's own.
    unsafe { complete_batch_and_claim_from_args(fcinfo, true) }
}

/// rq_complete_batch_and_claim: ids and attempts first (as
/// rq_complete_batch's), then rq_claim's arguments, then the results;
/// `fenced` (0.6.0 on), every id needs its attempt.
///
/// # Safety
/// `fcinfo` is a call with the arguments sql/claim.sql declares, in a
/// context that accepts a materialized set.
pub unsafe fn complete_batch_and_claim_from_args(fcinfo: pg_sys::FunctionCallInfo, fenced: bool) -> pg_sys::Datum {
    // SAFETY: per the contract above.
    unsafe {
        if nullable_arg(fcinfo, 0).is_some_and(|ids| array_dimensions(ids) > 0) {
            crate::finish::complete_batch_from_args(fcinfo, 7, false, fenced);
        }
        claim_from_args(fcinfo, 2, false)
    }
}

// rq_fail_and_claim(id uuid, attempt integer, error text, error_trace text,
// queues text[], worker text, batch integer, lease interval, wait interval)
// RETURNS SETOF jobs. See sql/claim.sql.
function_info_v1!(pg_finfo_rq_fail_and_claim_fenced_c);

/// # Safety
/// Called by the function manager with the arguments sql/claim.sql declares,
/// in a context that accepts a materialized set.
#[pg_guard]
#[unsafe(no_mangle)]
pub unsafe extern "C-unwind" fn rq_fail_and_claim_fenced_c(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    // SAFETY: fcinfo is this call's own.
    unsafe { fail_and_claim_from_args(fcinfo, true) }
}

/// rq_fail_and_claim: rq_fail's four arguments first (in `fenced`'s layout,
/// src/finish.rs fail_from_args), then rq_claim's.
///
/// # Safety
/// `fcinfo` is a call with the arguments sql/claim.sql declares (or, not
/// `fenced`, an older script), in a context that accepts a materialized set.
pub unsafe fn fail_and_claim_from_args(fcinfo: pg_sys::FunctionCallInfo, fenced: bool) -> pg_sys::Datum {
    // SAFETY: per the contract above.
    unsafe {
        if nullable_arg(fcinfo, 0).is_some() {
            crate::finish::fail_from_args(fcinfo, fenced);
        }
        claim_from_args(fcinfo, 4, false)
    }
}

/// rq_claim, with its five arguments from argument `first` of `fcinfo` on;
/// or, `take`, rq_take's (its fourth is `complete` instead of a lease).
///
/// # Safety
/// `fcinfo` is a call whose arguments `first`.. are rq_claim's (or
/// rq_take's), in a context that accepts a materialized set.
unsafe fn claim_from_args(fcinfo: pg_sys::FunctionCallInfo, first: usize, take: bool) -> pg_sys::Datum {
    // SAFETY: the arguments are read as the types the SQL declaration gives them.
    let (wait, batch, queues) = unsafe {
        (
            pg_getarg::<Interval>(fcinfo, first + 4).map_or(0, |wait| interval_ms_within(wait, "wait", 0, MAX_WAIT_MS)),
            limits::check_batch(pg_getarg::<i32>(fcinfo, first + 2)),
            pg_getarg::<Array<&str>>(fcinfo, first),
        )
    };
    // SAFETY: argument first + 3 is the lease (an interval), or rq_take's complete (a boolean).
    let (mode, lease_ms) = unsafe {
        match take {
            false => (Mode::Lease, limits::lease_ms(pg_getarg::<Interval>(fcinfo, first + 3))),
            true if pg_getarg::<bool>(fcinfo, first + 3) == Some(true) => (Mode::TakeAndComplete, 0),
            true => (Mode::Take, 0),
        }
    };
    // SAFETY: argument first + 1 is the worker's name, a text.
    limits::check_name(unsafe { pg_getarg::<&str>(fcinfo, first + 1) }, "worker");
    // SAFETY: argument `first` is a text[] when not null.
    let lower_bound = unsafe { nullable_arg(fcinfo, first).map(|queues| array_shape(queues)) }.map(|(dimensions, lower_bound)| {
        limits::check_dimensions(dimensions, "queues");
        lower_bound
    });
    if let Some(queues) = &queues {
        queues.iter().for_each(limits::check_queue);
    }
    // SAFETY: fcinfo is this call's own.
    let function = unsafe { statements::called_function(fcinfo) };
    let filter = QueueFilter::of(queues.as_ref().map(|q| q.len()), function);
    // SAFETY: arguments first and first + 1 exist.
    let (mut queues_arg, worker_arg) = unsafe { (nullable_arg(fcinfo, first), nullable_arg(fcinfo, first + 1)) };
    if lower_bound.is_some_and(|bound| bound != 1) {
        // '[5:5]={q}' is a fine one-queue array, but the statement reads
        // $1[1]: hand it the same names from 1.
        queues_arg = queues.as_ref().and_then(|q| q.iter().collect::<Vec<_>>().into_datum());
    }
    // SAFETY: rq_claim returns SETOF jobs, called where a set may be returned.
    unsafe { pg_sys::InitMaterializedSRF(fcinfo, 0) };
    statements::connect();
    let install = crate::install::mode(function);
    let distributed = install.distributed;
    let names: Option<Vec<Option<&str>>> = queues.as_ref().map(|q| q.iter().collect());
    let mut claim = Claim {
        function,
        filter,
        mode,
        batch,
        args: [queues_arg, worker_arg, None, lease_ms.into_datum(), None],
        flow: flow::for_claim(function, names.as_deref()),
        grouped_table: install.groups(),
        queue_names: None,
        cursors_of: None,
        direct: None,
        without_history: Vec::new(),
        returned: None,
        fcinfo,
    };
    if claim.flow.as_ref().is_some_and(|f| f.one_queue.is_none()) || wait > 0 {
        // the names, for the flow claim (not a one-queue claim's: it sets
        // them itself if its limits are kept in a row) and a waiting claim's
        // look at the settings after each sleep
        claim.queue_names = names.as_ref().map(|n| n.iter().map(|q| q.map(str::to_owned)).collect());
    }
    if filter == QueueFilter::One && !distributed {
        claim.cursors_of = names.as_ref().and_then(|n| n.first().copied().flatten()).map(str::to_owned);
    }
    if take {
        if distributed {
            distributed::refuse("rq_take (a claim that only locks)")
        }
        if claim.flow.is_some() {
            let named: Vec<String> = names.as_ref().map_or_else(Vec::new, |n| n.iter().flatten().map(|q| format!("'{q}'")).collect());
            let message = match named.len() {
                0 => "rq_take cannot take jobs of any queue while a queue is paused, limited or grouped".to_string(),
                1 => format!("rq_take cannot take jobs of queue {}: it is paused, limited or grouped", named[0]),
                _ => format!("rq_take cannot take jobs of queues {}: one of them is paused, limited or grouped", named.join(", ")),
            };
            Refusal::new(PgSqlErrorCode::ERRCODE_FEATURE_NOT_SUPPORTED, message)
            .detail("Flow settings count claimed jobs, and a job taken for a transaction is never claimed in the table.")
            .hint("Claim that queue's jobs with rq_claim.")
            .raise()
        }
        if claim.mode == Mode::TakeAndComplete {
            let without_history = crate::history::queues_without(function);
            if !without_history.is_empty() {
                claim.mode = Mode::TakeAndCompleteDeleting;
                claim.args[4] = without_history.clone().into_datum();
                claim.without_history = without_history;
            }
        }
    }
    if distributed {
        if claim.flow.is_some() {
            distributed::refuse("flow control (a paused, limited or grouped queue)")
        }
        let names: Option<Vec<&str>> = names.map(|n| n.into_iter().flatten().collect());
        // SAFETY: set up as a materialized set above; connected to SPI.
        let claimed = unsafe { distributed::claim(fcinfo, function, names.as_deref(), worker_arg, batch, lease_ms, wait) };
        if claimed > 0 {
            deadlines::note(now_ms().saturating_add(lease_ms));
        }
        statements::finish();
        return pg_sys::Datum::from(0);
    }
    if wait > 0 {
        let hashes = queues.as_ref().map(|q| q.iter().flatten().map(waiters::queue_hash).collect());
        claim.run_waiting(wait, hashes);
    } else {
        claim.run(now_ms(), false);
    }
    if mode == Mode::Lease && claim.claimed_count() > 0 {
        // the rescue duty's deadline, told to the background worker at commit
        deadlines::note(now_ms().saturating_add(lease_ms));
    }
    if claim.returned.is_some() {
        // the claim put its rows in the set as it went (a grouped queue's)
        statements::finish();
        return pg_sys::Datum::from(0);
    }
    match claim.direct.take() {
        Some(jobs) => {
            let queue = claim.cursors_of.as_deref().unwrap_or_default();
            claim.return_direct(&jobs);
            match mode {
                Mode::Lease => {}
                Mode::Take => crate::take::taken_directly(&jobs, worker_arg),
                Mode::TakeAndComplete | Mode::TakeAndCompleteDeleting => {
                    crate::take::completed_directly(function, queue, &jobs)
                }
            }
        }
        None => match mode {
            Mode::Lease => {
                crate::metrics::note_claimed_rows();
                // SAFETY: the last SPI result is the claim's rows; still connected.
                unsafe { statements::return_rows(fcinfo) };
            }
            // SAFETY: the last SPI result is the taken rows; still connected.
            Mode::Take => unsafe { crate::take::return_taken_rows(fcinfo, worker_arg) },
            // SAFETY: as above: the taken and completed rows.
            Mode::TakeAndComplete | Mode::TakeAndCompleteDeleting => unsafe {
                crate::take::return_completed_rows(fcinfo, function)
            },
        },
    }
    statements::finish();
    pg_sys::Datum::from(0)
}

/// Puts the jobs of `queue` claimed directly under a lease into the set the
/// call `fcinfo` returns (a materialized set, set up before the claim), and
/// counts them (src/metrics.rs).
fn return_claimed_directly(fcinfo: pg_sys::FunctionCallInfo, queue: &str, jobs: &[crate::direct::ClaimedJob]) {
    for job in jobs {
        crate::metrics::note(queue, crate::metrics::Event::Claimed, Some(job.waited_ms));
    }
    // SAFETY: per the contract above: a materialized set of the table's rows.
    unsafe { return_jobs(fcinfo, jobs) };
}

/// The id and attempt of each row of the last SPI result, rows of `jobs`
/// (or of its id and attempts). Connected to SPI.
pub(crate) fn jobs_in_last_result() -> Vec<(pgrx::Uuid, i32)> {
    let mut jobs = Vec::new();
    let mut each = |row: &mut statements::Row| {
        if let (Some(id), Some(attempt)) = (row.get::<pgrx::Uuid>(c"id"), row.get::<i32>(c"attempts")) {
            jobs.push((id, attempt));
        }
    };
    // SAFETY: connected; the last SPI result is rows with those columns.
    unsafe { statements::each_row(&mut each) };
    jobs
}

/// Hands the jobs claimed directly to the caller, in claim order.
///
/// # Safety
/// `fcinfo` returns a materialized set of the jobs table's rows.
unsafe fn return_jobs(fcinfo: pg_sys::FunctionCallInfo, jobs: &[crate::direct::ClaimedJob]) {
    // SAFETY: per the contract above: the rows are the table's, whose row
    // type the set has.
    unsafe {
        let rsinfo = (*fcinfo).resultinfo as *mut pg_sys::ReturnSetInfo;
        for job in jobs {
            pg_sys::tuplestore_puttuple((*rsinfo).setResult, job.row);
        }
    }
}

/// Runs `attempt` in a subtransaction that is kept when it processed rows and
/// rolled back (with the locks it took) when it processed none.
fn in_subtransaction_kept_if_rows(attempt: impl FnOnce() -> u64) -> u64 {
    // SAFETY: the memory context and resource owner are put back as they
    // were after the subtransaction ends, as PL/pgSQL does around an
    // exception block; SPI stays connected across it (the connection is
    // older). An error inside aborts the whole transaction.
    unsafe {
        let (context, owner) = (pg_sys::CurrentMemoryContext, pg_sys::CurrentResourceOwner);
        pg_sys::BeginInternalSubTransaction(std::ptr::null());
        pg_sys::MemoryContextSwitchTo(context);
        let rows = attempt();
        if rows > 0 {
            pg_sys::ReleaseCurrentSubTransaction();
        } else {
            pg_sys::RollbackAndReleaseCurrentSubTransaction();
            // its (empty) result was freed with it
            pg_sys::SPI_tuptable = std::ptr::null_mut();
        }
        pg_sys::MemoryContextSwitchTo(context);
        pg_sys::CurrentResourceOwner = owner;
        rows
    }
}
