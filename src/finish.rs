//! Finishing a claimed job: `rq_complete` (declared in sql/finish.sql with
//! rq_fail and rq_complete_batch).
//!
//! It is a C function because it is every job's last call: one kept plan of
//! sql/finish.complete.sql; only when it matches nothing does it look at the
//! job to say why (src/errors.rs).

use crate::clock::now_ms;
use crate::distributed;
use crate::errors;
use crate::flow;
use crate::statements::{self, Shape, Statement, nullable_arg};
use pgrx::fcinfo::pg_getarg;
use pgrx::prelude::*;

const COMPLETE: &str = include_str!("../sql/finish.complete.sql");
/// A completed job whose end sets something off (sql/finish.sql).
const JOB_ENDED: &str = "SELECT @schema@rq_job_ended($1)";

// rq_complete(id uuid, attempt integer) RETURNS jobs. See sql/finish.sql.
function_info_v1!(pg_finfo_rq_complete_c);

/// # Safety
/// Called by the function manager with the arguments sql/finish.sql declares.
#[pg_guard]
#[unsafe(no_mangle)]
pub unsafe extern "C-unwind" fn rq_complete_c(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    // SAFETY: fcinfo is this call's own, with the two arguments declared first.
    unsafe { complete_from_args(fcinfo) }
}

/// Completes the claimed job of arguments 0 (id) and 1 (attempt) of
/// `fcinfo`'s call, with what its end sets off; its row, in the caller's
/// memory. Raises (rq_raise_cannot) when it cannot. For rq_complete and
/// rq_complete_and_claim (src/claim.rs).
///
/// # Safety
/// `fcinfo` is a call whose arguments 0 and 1 are a uuid and an integer.
pub unsafe fn complete_from_args(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    // SAFETY: per the contract above.
    let (function, mut args) = unsafe {
        (statements::called_function(fcinfo), [nullable_arg(fcinfo, 0), nullable_arg(fcinfo, 1), now_ms().into_datum(), None])
    };
    statements::connect();
    // On Citus the UPDATE names the job's queue, to run in its shard; a job
    // no shard has is not there to complete.
    let distributed = distributed::is_distributed(function);
    let queue = if distributed { args[0].and_then(|id| distributed::queue_of(function, id)) } else { None };
    args[3] = queue.as_deref().and_then(|q| q.into_datum());
    // Before the UPDATE: reading the settings may run a statement, which
    // would replace the UPDATE's result.
    let frees_slots = flow::some_queue_counts_claims(function);
    if args[0].is_some() && (!distributed || queue.is_some()) {
        // a table not yet updated to 0.3.0 has no workflows (nor key periods)
        let workflows = statements::jobs_have(function, c"key_period");
        // On Citus no job has children (workflows are refused there), and
        // a shard's UPDATE cannot read the coordinator's job_dependencies.
        let sets_off = || {
            if distributed {
                ", j.key_period IS NOT NULL".to_string()
            } else {
                format!(
                    ", j.key_period IS NOT NULL OR EXISTS (SELECT FROM {} d WHERE d.parent_id = j.id)",
                    statements::in_schema_of(function, "job_dependencies")
                )
            }
        };
        let text = || {
            statements::fill(
                COMPLETE,
                &[
                    ("@jobs@", &statements::in_schema_of(function, "jobs")),
                    ("@sets_off@", &if workflows { sets_off() } else { String::new() }),
                    ("@row@", &distributed::whole_row(function)),
                    ("@same_queue@", if distributed { "AND j.queue = $4" } else { "" }),
                ],
            )
        };
        let complete = Statement {
            shape: Shape { name: "complete", variant: i64::from(workflows) },
            text: &text,
            types: &[pg_sys::UUIDOID, pg_sys::INT4OID, pg_sys::INT8OID, pg_sys::TEXTOID][..if distributed { 4 } else { 3 }],
        };
        if statements::run(function, &complete, &args[..if distributed { 4 } else { 3 }]) == 1 {
            // SAFETY: the UPDATE returned the completed row, its queue and when it was claimed.
            if let Some(queue) = unsafe { statements::value::<&str>(0, 2) } {
                if frees_slots {
                    flow::claim_ended(queue);
                }
                let claimed_at = unsafe { statements::value::<i64>(0, 3) };
                crate::metrics::note(queue, crate::metrics::Event::Succeeded, claimed_at.map(|at| now_ms() - at));
            }
            // SAFETY: the UPDATE returned the completed row, its queue, its claim's time and whether it sets something off.
            if workflows && unsafe { statements::value::<bool>(0, 4) } == Some(true) {
                // SAFETY: as above.
                let row = unsafe { statements::first_row_copied() };
                let text = || statements::fill(JOB_ENDED, &[("@schema@", &statements::in_schema_of(function, ""))]);
                let released = Statement { shape: Shape { name: "job_ended", variant: 0 }, text: &text, types: &[pg_sys::UUIDOID] };
                statements::run(function, &released, &args[..1]);
                statements::finish();
                return row;
            }
            // SAFETY: the UPDATE returned the completed row.
            return unsafe { statements::finish_with_first_row() };
        }
    }
    // SAFETY: the arguments as declared: uuid and integer.
    let (id, attempt) = unsafe { (pg_getarg::<pgrx::Uuid>(fcinfo, 0), pg_getarg::<i32>(fcinfo, 1)) };
    errors::raise_cannot(function, id, attempt, "complete", &["claimed"])
}
