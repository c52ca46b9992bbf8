//! The fair claim of one grouped queue's grouped jobs, inside rq_claim
//! (src/claim.rs runs it after the plain claim of the queue's jobs without
//! a group). sql/flow.sql says what fair groups are: jobs come in the fair
//! order, priority, then turn, so the groups take turns.
//!
//! It is written directly where it may be (src/direct.rs claim_fair), and
//! otherwise runs statements. Without group_max_claimed, one
//! (sql/claim.fair.sql). With it, the claims of one queue keep one
//! protocol, written directly or not, so that they may claim side by side
//! and keep every group within its limit: a walk of the next due jobs, unlocked
//! (sql/claim.fair_walk.sql); each candidate's group locked for the rest of
//! the transaction (the transaction-level advisory lock on the hashes of
//! the queue and the group, as `pg_try_advisory_xact_lock(hashtext(queue),
//! hashtext(group))` takes it; a group another claim holds is passed over);
//! then one statement, whose snapshot is newer than the locks, claims the
//! candidates of groups with fewer claimed jobs than the limit
//! (sql/claim.fair_group.sql). One job a group a walk; the claim walks
//! again while a walk claimed some and the batch is not full.

use crate::direct::ClaimedJob;
use crate::statements::{self, Shape, Statement};
use crate::transitions;
use pgrx::prelude::*;

const FAIR: &str = include_str!("../sql/claim.fair.sql");
const WALK: &str = include_str!("../sql/claim.fair_walk.sql");
const GROUP: &str = include_str!("../sql/claim.fair_group.sql");

/// The first walk of a claim of `wanted` jobs reads this many candidates
/// and so many more a job wanted; a walk that finds nothing it may claim
/// among them reads up to `LONGEST_WALK` before it gives up (the groups
/// another claim holds or that are at their limit come first in the fair
/// order, by as many jobs as they have claimed).
const FIRST_WALK: i32 = 16;
const LONGEST_WALK: i32 = 1000;

/// One fair claim: the queue, the claim's worker and lease (the datums of
/// rq_claim's arguments) and when it runs.
pub struct FairClaim<'a> {
    pub function: pg_sys::Oid,
    pub queue: &'a str,
    pub worker: Option<pg_sys::Datum>,
    pub lease_ms: Option<pg_sys::Datum>,
    pub now_ms: i64,
}

impl FairClaim<'_> {
    /// Claims up to `wanted` grouped jobs, at most `group_max_claimed`
    /// claimed in any group when given. Each time some are claimed,
    /// `claimed` is called: with the jobs claimed directly, or with None
    /// while they are the rows of the last SPI result. Returns the jobs
    /// claimed (id, attempt). Connected to SPI.
    pub fn run(
        &self,
        wanted: i32,
        group_max_claimed: Option<i32>,
        mut claimed: impl FnMut(Option<&[ClaimedJob]>),
    ) -> Vec<(pgrx::Uuid, i32)> {
        let mut jobs = Vec::new();
        if wanted <= 0 {
            return jobs;
        }
        let queue_hash = hash_text(self.queue);
        let lock = |group: &str| try_group_lock(queue_hash, hash_text(group));
        let limit = group_max_claimed.map(|max| crate::direct::GroupLimit { max, lock: &lock, walk: LONGEST_WALK as usize });
        if let Some(direct) = self.claim_fair_directly(wanted, limit.as_ref()) {
            if !direct.is_empty() {
                claimed(Some(&direct));
            }
            return direct.iter().map(|job| (job.id, job.attempt)).collect();
        }
        let Some(max) = group_max_claimed else {
            self.claim_fair(wanted);
            self.read_claimed(&mut jobs, &mut claimed);
            return jobs;
        };
        let mut walk = FIRST_WALK + 2 * wanted;
        while (jobs.len() as i32) < wanted {
            let found = self.candidates(walk.min(LONGEST_WALK));
            let mut tried: Vec<&str> = Vec::new();
            let mut picked = Vec::new();
            let mut claimed_in_walk = 0;
            let mut rest = found.iter();
            loop {
                // candidates of groups not yet tried this walk, whose lock
                // this transaction has, until as many as are still wanted
                picked.clear();
                let room = wanted as usize - jobs.len();
                for (id, group) in rest.by_ref() {
                    if tried.contains(&group.as_str()) {
                        continue;
                    }
                    tried.push(group);
                    if lock(group) {
                        picked.push(*id);
                        if picked.len() == room {
                            break;
                        }
                    }
                }
                if picked.is_empty() {
                    break;
                }
                let before = jobs.len();
                self.claim_group_candidates(&picked, max);
                self.read_claimed(&mut jobs, &mut claimed);
                claimed_in_walk += jobs.len() - before;
                if jobs.len() as i32 >= wanted {
                    break;
                }
            }
            if claimed_in_walk == 0 {
                // nothing to claim among these: look further once, then stop
                if (found.len() as i32) < walk || walk >= LONGEST_WALK {
                    break;
                }
                walk = LONGEST_WALK;
            }
        }
        jobs
    }

    fn jobs_table(&self) -> String {
        statements::in_schema_of(self.function, "jobs")
    }

    /// sql/claim.fair.sql written directly (src/direct.rs), or None when
    /// its statement must run.
    fn claim_fair_directly(&self, wanted: i32, limit: Option<&crate::direct::GroupLimit>) -> Option<Vec<ClaimedJob>> {
        // SAFETY: rq_claim's lease argument, a bigint datum.
        let lease_ms = self.lease_ms.and_then(|lease| unsafe { i64::from_datum(lease, false) })?;
        let request = crate::direct::ClaimRequest {
            queue: self.queue,
            lanes: None,
            batch: usize::try_from(wanted).ok()?,
            now_ms: self.now_ms,
            worker: self.worker,
            action: crate::direct::Action::Lease(lease_ms),
        };
        crate::direct::claim_fair(crate::privileges::jobs_of(self.function), &request, limit)
    }

    /// sql/claim.fair.sql: up to `wanted` jobs in the fair order.
    fn claim_fair(&self, wanted: i32) {
        let text = || {
            statements::fill(
                FAIR,
                &[
                    ("@claimed@", transitions::CLAIM),
                    ("@jobs@", &self.jobs_table()),
                    ("@batch@", &wanted.to_string()),
                    ("@order_by@", if wanted == 1 { "" } else { "ORDER BY c.priority DESC, c.turn, c.scheduled_at, c.id" }),
                ],
            )
        };
        let statement = Statement {
            shape: Shape { name: "claim_fair", variant: i64::from(wanted) },
            text: &text,
            types: &[pg_sys::TEXTOID, pg_sys::TEXTOID, pg_sys::INT8OID, pg_sys::INT8OID],
        };
        statements::run(self.function, &statement, &[self.queue.into_datum(), self.worker, self.now_ms.into_datum(), self.lease_ms]);
    }

    /// sql/claim.fair_walk.sql: the next `walk` due grouped jobs (id, group).
    fn candidates(&self, walk: i32) -> Vec<(pgrx::Uuid, String)> {
        let text = || statements::fill(WALK, &[("@jobs@", &self.jobs_table()), ("@walk@", &walk.to_string())]);
        let statement = Statement {
            shape: Shape { name: "claim_fair_walk", variant: i64::from(walk) },
            text: &text,
            types: &[pg_sys::TEXTOID, pg_sys::INT8OID],
        };
        let rows = statements::run(self.function, &statement, &[self.queue.into_datum(), self.now_ms.into_datum()]);
        // SAFETY: the statement returned `rows` rows of (uuid, text).
        let found = (0..rows as usize)
            .filter_map(|row| unsafe { statements::value::<pgrx::Uuid>(row, 1).zip(statements::value::<String>(row, 2)) })
            .collect();
        statements::free_result();
        found
    }

    /// sql/claim.fair_group.sql: `candidates` (one a group, each group
    /// locked) claimed where their group is under `max`.
    fn claim_group_candidates(&self, candidates: &[pgrx::Uuid], max: i32) {
        let text = || statements::fill(GROUP, &[("@claimed@", transitions::CLAIM), ("@jobs@", &self.jobs_table())]);
        let statement = Statement {
            shape: Shape { name: "claim_fair_group", variant: 0 },
            text: &text,
            types: &[pg_sys::TEXTOID, pg_sys::TEXTOID, pg_sys::INT8OID, pg_sys::INT8OID, pg_sys::UUIDARRAYOID, pg_sys::INT4OID],
        };
        let args = [
            self.queue.into_datum(),
            self.worker,
            self.now_ms.into_datum(),
            self.lease_ms,
            candidates.to_vec().into_datum(),
            max.into_datum(),
        ];
        statements::run(self.function, &statement, &args);
    }

    /// Adds the jobs of the last statement (rows of `jobs`) to `jobs`, and
    /// tells `claimed` of them.
    fn read_claimed(&self, jobs: &mut Vec<(pgrx::Uuid, i32)>, claimed: &mut impl FnMut(Option<&[ClaimedJob]>)) {
        // SAFETY: set by the claim statement that just ran.
        if unsafe { pg_sys::SPI_processed } == 0 {
            return;
        }
        jobs.extend(crate::claim::jobs_in_last_result());
        claimed(None);
    }
}

/// hashtext(text) as SQL computes it for a text argument or column: under
/// the default collation.
fn hash_text(text: &str) -> pg_sys::Datum {
    /// hashtext under the default collation.
    unsafe fn hashtext(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
        // SAFETY: the call's own fcinfo, set up by direct_function_call.
        unsafe {
            (*fcinfo).fncollation = pg_sys::DEFAULT_COLLATION_OID;
            pg_sys::hashtext(fcinfo)
        }
    }
    // SAFETY: hashtext takes one text and returns an integer.
    unsafe { pgrx::direct_function_call_as_datum(hashtext, &[text.into_datum()]) }.unwrap_or(pg_sys::Datum::from(0))
}

/// pg_try_advisory_xact_lock(queue_hash, group_hash).
fn try_group_lock(queue_hash: pg_sys::Datum, group_hash: pg_sys::Datum) -> bool {
    // SAFETY: the function takes two integers and returns a boolean.
    unsafe {
        pgrx::direct_function_call::<bool>(pg_sys::pg_try_advisory_xact_lock_int4, &[Some(queue_hash), Some(group_hash)])
    }
    .unwrap_or(false)
}
