//! The flow claim: a claim whose queues have flow settings (src/flow.rs)
//! other than the claim of one queue that is not paused and keeps its
//! limits in shared memory (src/claim.rs `run_limited`): several queues,
//! any queue, a paused queue, or a queue whose limits are kept in its row.
//!
//! Each queue with settings is claimed from on its own, as the claim of
//! one queue claims from it: a paused one not at all; a limited one within
//! its places (src/claim_slots.rs) and tokens (src/rate_buckets.rs), its
//! jobs without a group by the plain claim, then its grouped jobs fairly
//! (src/fair.rs). The queues without settings are claimed from together by
//! the plain claim. The turns these take to fill the batch start at a
//! random one, so that none of them always goes first. For any queue, the
//! queues without settings are those with ready jobs (one probe of the
//! ready index for each).
//!
//! A queue whose state cannot be kept in shared memory (`max_claimed`
//! above what a slot holds, a name longer than a slot's, every slot or
//! bucket in use, a server without raquel preloaded) keeps it in its
//! `queue_limits` row: the claim locks the row (rq_flow_lock, FOR UPDATE,
//! until the transaction ends), reads how many of the jobs it lists are
//! still claimed and the tokens left, claims within them, and writes the
//! row (rq_flow_took). So such a queue's claims run one at a time. A claim
//! of several such queues locks their rows up front, in name order, so
//! that two never wait for each other in a circle whatever their turns.
//! rq_flow_lock and rq_flow_took run as the extension's owner and refuse
//! to run outside this claim (sql/flow.sql).
//!
//! The rows of every turn go into the set the call returns as they come
//! (`Claim.returned`).

use super::{Claim, QueueFilter};
use crate::flow::{self, OneQueue, Settings};
use crate::statements::{self, Shape, Statement};
use pgrx::prelude::*;

const READY_QUEUES: &str = include_str!("../../sql/claim.ready_queues.sql");
const ROW_STATE: &str = include_str!("../../sql/claim.row_state.sql");

impl Claim {
    /// Claims up to `batch` jobs of the claim's queues (`flow.queues` are
    /// those with settings), as their settings allow; how many. Their rows
    /// are in the call's set, their ids in `returned`.
    pub(super) fn run_flow(&mut self, limited: &[(String, Settings)], now_ms: i64) -> u64 {
        let others = self.queues_without_settings(limited);
        let kept_in_rows: Vec<&str> =
            limited.iter().filter(|(q, s)| !s.paused && flow::kept_in_row(q, s)).map(|(q, _)| q.as_str()).collect();
        // the flow claim's helpers refuse to run outside it (src/flow.rs)
        let _inside = flow::InsideFlowClaim::enter();
        if limited.len() > 1 && !kept_in_rows.is_empty() {
            self.lock_rows(&kept_in_rows);
        }
        let saved = (self.filter, self.args[0], self.cursors_of.take(), self.batch);
        let mut returned = Vec::new();
        let turns = limited.len() + 1;
        let first = random_below(turns);
        for turn in 0..turns {
            let wanted = saved.3 - returned.len() as i32;
            if wanted <= 0 {
                break;
            }
            self.batch = wanted;
            let member = (first + turn) % turns;
            if let Some((queue, settings)) = limited.get(member) {
                if settings.paused {
                    continue;
                }
                self.claim_from(&[queue.as_str()]);
                let one = OneQueue::of(queue, settings);
                match self.run_limited(&one, now_ms) {
                    Some(_) => self.hand_over(&mut returned),
                    None => self.run_kept_in_row(&one, now_ms, &mut returned),
                }
            } else if !others.is_empty() {
                let names: Vec<&str> = others.iter().map(String::as_str).collect();
                self.claim_from(&names);
                self.run_ready(now_ms);
                self.hand_over(&mut returned);
            }
        }
        (self.filter, self.args[0], self.cursors_of, self.batch) = saved;
        let count = returned.len() as u64;
        self.direct = None;
        self.returned = Some(returned);
        count
    }

    /// The claim's queues that have no settings: the names it was given,
    /// or for any queue, those with ready jobs without a group.
    fn queues_without_settings(&self, limited: &[(String, Settings)]) -> Vec<String> {
        let limited_names: Vec<&str> = limited.iter().map(|(q, _)| q.as_str()).collect();
        if let Some(names) = &self.queue_names {
            let mut others: Vec<String> = names.iter().flatten().filter(|q| !limited_names.contains(&q.as_str())).cloned().collect();
            others.sort();
            others.dedup();
            return others;
        }
        let text = || {
            statements::fill(
                READY_QUEUES,
                &[
                    ("@queues@", super::QUEUES_ANY),
                    ("@ungrouped@", self.ungrouped()),
                    ("@jobs@", &statements::in_schema_of(self.function, "jobs")),
                ],
            )
        };
        let statement = Statement {
            shape: Shape { name: "ready_queues", variant: i64::from(self.grouped_table) },
            text: &text,
            types: &[pg_sys::TEXTARRAYOID],
        };
        let rows = statements::run(self.function, &statement, &[limited_names.into_datum()]);
        // SAFETY: the statement returned `rows` rows of one text column.
        let others = (0..rows as usize).filter_map(|row| unsafe { statements::value::<String>(row, 1) }).collect();
        statements::free_result();
        others
    }

    /// Points the claim at `queues`: the plain claim's statement for one
    /// queue (written directly where it may be) or for several.
    fn claim_from(&mut self, queues: &[&str]) {
        self.filter = if queues.len() == 1 { QueueFilter::One } else { QueueFilter::Several };
        self.args[0] = queues.to_vec().into_datum();
        self.cursors_of = (queues.len() == 1).then(|| queues[0].to_owned());
    }

    /// Puts the rows of the turn that just ran into the call's set (those
    /// claimed directly or by the last statement; a grouped queue's are in
    /// already), and their ids into `returned`.
    fn hand_over(&mut self, returned: &mut Vec<(pgrx::Uuid, i32)>) {
        if let Some(jobs) = self.returned.take() {
            returned.extend(jobs);
        } else if let Some(jobs) = self.direct.take() {
            self.return_direct(&jobs);
            returned.extend(jobs.iter().map(|job| (job.id, job.attempt)));
        } else {
            let jobs = super::jobs_in_last_result();
            if !jobs.is_empty() {
                crate::metrics::note_claimed_rows();
                // SAFETY: the call's materialized set (set up before the
                // claim); the last SPI result is the claim's rows of `jobs`.
                unsafe { statements::return_rows(self.fcinfo) };
                returned.extend(jobs);
            }
            statements::free_result();
        }
    }

    /// The claim of one queue whose limits' state is kept in its row: the
    /// row locked, the state read, as many jobs claimed as it allows, and
    /// the state written.
    fn run_kept_in_row(&mut self, one: &OneQueue, now_ms: i64, returned: &mut Vec<(pgrx::Uuid, i32)>) {
        self.lock_rows(&[one.queue.as_str()]);
        // read by a new statement after the lock, which sees what the claims
        // that held the lock before committed
        let text = || {
            statements::fill(
                ROW_STATE,
                &[
                    ("@queue_limits@", &statements::in_schema_of(self.function, "queue_limits")),
                    ("@jobs@", &statements::in_schema_of(self.function, "jobs")),
                ],
            )
        };
        let statement = Statement { shape: Shape { name: "row_state", variant: 0 }, text: &text, types: &[pg_sys::TEXTOID] };
        if statements::run(self.function, &statement, &[one.queue.as_str().into_datum()]) == 0 {
            statements::free_result();
            return;
        }
        // SAFETY: the statement returned one row of these seven columns.
        let (paused, max_claimed, rate, per_ms, tokens, tokens_at, live) = unsafe {
            (
                statements::value::<bool>(0, 1).unwrap_or(false),
                statements::value::<i32>(0, 2),
                statements::value::<i32>(0, 3),
                statements::value::<i64>(0, 4),
                statements::value::<f64>(0, 5),
                statements::value::<i64>(0, 6),
                statements::value::<Vec<pgrx::Uuid>>(0, 7).unwrap_or_default(),
            )
        };
        statements::free_result();
        if paused {
            return;
        }
        let mut allowed = self.batch;
        if let Some(max) = max_claimed {
            allowed = allowed.min(max - live.len() as i32);
        }
        let mut bucket = None;
        if let (Some(rate), Some(per_ms)) = (rate, per_ms) {
            // (a row without tokens yet holds a full bucket)
            let now = crate::rate_buckets::refilled(tokens.unwrap_or(f64::from(rate)), tokens_at.unwrap_or(now_ms), rate, per_ms, now_ms);
            allowed = allowed.min(now.floor() as i32);
            bucket = Some(now);
        }
        if allowed <= 0 {
            return;
        }
        let one = OneQueue { max_claimed, rate: rate.zip(per_ms), ..one.clone() };
        let before = returned.len();
        self.run_allowed(&one, allowed, now_ms);
        self.hand_over(returned);
        let got = &returned[before..];
        if got.is_empty() {
            return;
        }
        let claimed: Vec<pgrx::Uuid> =
            if max_claimed.is_some() { live.into_iter().chain(got.iter().map(|(id, _)| *id)).collect() } else { Vec::new() };
        let tokens = bucket.map(|b| b - got.len() as f64);
        self.flow_helper(
            "rq_flow_took",
            "SELECT @helper@($1, $2, $3, $4)",
            "UPDATE @queue_limits@ l
             SET claimed = CASE WHEN l.max_claimed IS NULL THEN '{}' ELSE $2 END,
                 tokens = CASE WHEN l.rate IS NULL THEN NULL ELSE $3 END,
                 tokens_at = CASE WHEN l.rate IS NULL THEN NULL ELSE $4 END
             WHERE l.queue = $1",
            &[pg_sys::TEXTOID, pg_sys::UUIDARRAYOID, pg_sys::FLOAT8OID, pg_sys::INT8OID],
            &[one.queue.as_str().into_datum(), claimed.into_datum(), tokens.into_datum(), now_ms.into_datum()],
        );
    }

    /// The helper `name` (rq_flow_lock, rq_flow_took) as a statement
    /// calling it, in `call`; in an install older than 0.5.0 (not yet
    /// updated), which has no such helper, `older`, the same done by the
    /// caller under its own privileges, as those versions did.
    fn flow_helper(&self, name: &'static str, call: &str, older: &str, types: &'static [pg_sys::Oid], args: &[Option<pg_sys::Datum>]) {
        let helpers = statements::helper_schema(self.function);
        let current = helpers != statements::extension_schema(self.function);
        let text = || {
            let template = if current { call } else { older };
            statements::fill(
                template,
                &[
                    ("@helper@", &statements::helper_of(helpers, name)),
                    ("@queue_limits@", &statements::in_schema_of(self.function, "queue_limits")),
                ],
            )
        };
        let statement = Statement { shape: Shape { name, variant: i64::from(helpers.to_u32()) }, text: &text, types };
        statements::run(self.function, &statement, args);
        statements::free_result();
    }

    /// Locks the `queue_limits` rows of `queues` (in name order) until the
    /// transaction ends.
    fn lock_rows(&self, queues: &[&str]) {
        self.flow_helper(
            "rq_flow_lock",
            "SELECT count(*) FROM @helper@($1)",
            "SELECT count(*) FROM (SELECT FROM @queue_limits@ l
                                   WHERE l.queue = ANY ($1) AND (l.max_claimed IS NOT NULL OR l.rate IS NOT NULL)
                                   ORDER BY l.queue FOR UPDATE) locked",
            &[pg_sys::TEXTARRAYOID],
            &[queues.to_vec().into_datum()],
        );
    }
}

/// A number from 0 to `n` - 1, from the backend's random source.
fn random_below(n: usize) -> usize {
    // SAFETY: the backend's global generator, seeded at backend start.
    unsafe { pg_sys::pg_prng_uint64_range(&raw mut pg_sys::pg_global_prng_state, 0, n as u64 - 1) as usize }
}
