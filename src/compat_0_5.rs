//! C symbols that the 0.5.0 install script (sql/raquel--0.5.0.sql)
//! declares and 0.6.0 no longer does, kept with 0.5.0's behaviour for a
//! database not yet updated with ALTER EXTENSION raquel UPDATE: their
//! attempt may be left out, and rq_fail, rq_fail_and_claim and rq_step take
//! it last. 0.6.0 requires the attempt of every verb that acts on a claimed
//! job, as its second argument, and declares the `_fenced_c` symbols
//! (src/finish.rs, src/claim.rs, src/steps.rs); the update replaces the
//! declarations.

use crate::errors::Refusal;
use crate::{claim, finish, steps};
use pgrx::prelude::*;

// rq_complete(id uuid, attempt integer DEFAULT NULL, result jsonb)
function_info_v1!(pg_finfo_rq_complete_c);

/// # Safety
/// Called by the function manager with the arguments 0.5.0 (or older) declares.
#[pg_guard]
#[unsafe(no_mangle)]
pub unsafe extern "C-unwind" fn rq_complete_c(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    // SAFETY: id, attempt, result (absent before 0.5.0).
    unsafe { finish::complete_from_args(fcinfo, 2, false) }
}

// rq_fail(id uuid, error text, error_trace text, attempt integer DEFAULT NULL)
function_info_v1!(pg_finfo_rq_fail_c);

/// # Safety
/// Called by the function manager with the arguments 0.5.0 (or older) declares.
#[pg_guard]
#[unsafe(no_mangle)]
pub unsafe extern "C-unwind" fn rq_fail_c(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    // SAFETY: id, error, error_trace, attempt.
    unsafe { finish::fail_from_args(fcinfo, false) }
}

// rq_complete_batch(ids uuid[], attempts integer[] DEFAULT NULL, results jsonb[])
function_info_v1!(pg_finfo_rq_complete_batch_c);

/// # Safety
/// Called by the function manager with the arguments 0.5.0 (or older)
/// declares, in a context that accepts a materialized set.
#[pg_guard]
#[unsafe(no_mangle)]
pub unsafe extern "C-unwind" fn rq_complete_batch_c(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    // SAFETY: ids and attempts; it returns SETOF jobs.
    unsafe {
        pg_sys::InitMaterializedSRF(fcinfo, 0);
        finish::complete_batch_from_args(fcinfo, 2, true, false);
    }
    pg_sys::Datum::from(0)
}

// rq_complete_and_claim(id, attempt, queues, worker, batch, lease, wait, result)
function_info_v1!(pg_finfo_rq_complete_and_claim_c);

/// # Safety
/// Called by the function manager with the arguments 0.5.0 (or older)
/// declares, in a context that accepts a materialized set.
#[pg_guard]
#[unsafe(no_mangle)]
pub unsafe extern "C-unwind" fn rq_complete_and_claim_c(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    // SAFETY: the arguments as 0.5.0 declares them, the same order as 0.6.0's.
    unsafe { claim::complete_and_claim_from_args(fcinfo, false) }
}

// rq_complete_batch_and_claim(ids, attempts, queues, worker, batch, lease, wait, results)
function_info_v1!(pg_finfo_rq_complete_batch_and_claim_c);

/// # Safety
/// Called by the function manager with the arguments 0.5.0 declares, in a
/// context that accepts a materialized set.
#[pg_guard]
#[unsafe(no_mangle)]
pub unsafe extern "C-unwind" fn rq_complete_batch_and_claim_c(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    // SAFETY: the arguments as 0.5.0 declares them, the same order as 0.6.0's.
    unsafe { claim::complete_batch_and_claim_from_args(fcinfo, false) }
}

// rq_fail_and_claim(id, error, error_trace, attempt, queues, worker, batch, lease, wait)
function_info_v1!(pg_finfo_rq_fail_and_claim_c);

/// # Safety
/// Called by the function manager with the arguments 0.5.0 (or older)
/// declares, in a context that accepts a materialized set.
#[pg_guard]
#[unsafe(no_mangle)]
pub unsafe extern "C-unwind" fn rq_fail_and_claim_c(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    // SAFETY: rq_fail's arguments in 0.5.0's order, then rq_claim's.
    unsafe { claim::fail_and_claim_from_args(fcinfo, false) }
}

// rq_step(id uuid, name text, result jsonb, attempt integer DEFAULT NULL)
function_info_v1!(pg_finfo_rq_step_c);

/// # Safety
/// Called by the function manager with the arguments 0.5.0 declares.
#[pg_guard]
#[unsafe(no_mangle)]
pub unsafe extern "C-unwind" fn rq_step_c(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    // SAFETY: id, name, result, attempt.
    unsafe { steps::step_from_args(fcinfo, false) }
}

// raquel_internal.rq_claim_ended(queue text), which 0.3.0 to 0.5.0 declare
// (0.6.0: what follows a job's end is src/ended.rs's, rq_ended): a job of
// `queue` stopped being claimed, for a role that may update jobs.
function_info_v1!(pg_finfo_rq_claim_ended_wrapper);

/// # Safety
/// Called by the function manager with the argument 0.5.0 (or older) declares.
#[pg_guard]
#[unsafe(no_mangle)]
pub unsafe extern "C-unwind" fn rq_claim_ended_wrapper(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    // SAFETY: fcinfo is this call's own; argument 0 is a text.
    let (function, queue) = unsafe { (crate::statements::called_function(fcinfo), pgrx::fcinfo::pg_getarg::<String>(fcinfo, 0)) };
    crate::privileges::require_update(function, "rq_claim_ended");
    if let Some(queue) = queue {
        crate::statements::connect();
        if crate::flow::some_queue_counts_claims(function) {
            crate::flow::claim_ended(&queue);
        }
        crate::statements::finish();
    }
    pg_sys::Datum::from(0)
}

// raquel_internal.rq_jobs_ended(ids uuid[]), which 0.5.0 declares: wakes
// the awaiters of the jobs `ids` at commit.
function_info_v1!(pg_finfo_rq_jobs_ended_wrapper);

/// # Safety
/// Called by the function manager with the argument 0.5.0 declares.
#[pg_guard]
#[unsafe(no_mangle)]
pub unsafe extern "C-unwind" fn rq_jobs_ended_wrapper(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    // SAFETY: argument 0 is a uuid[].
    let ids = unsafe { pgrx::fcinfo::pg_getarg::<pgrx::Array<pgrx::Uuid>>(fcinfo, 0) };
    for id in ids.iter().flat_map(|ids| ids.iter()).flatten() {
        crate::waiters::note_ended(&id);
    }
    pg_sys::Datum::from(0)
}

// raquel_internal.rq_claim_ready(queues text[], worker text, batch integer,
// lease_ms bigint), which 0.3.0 to 0.5.0 declare: the plain claim that
// their PL/pgSQL flow claim, rq_claim_flow, called. rq_claim no longer
// calls rq_claim_flow (0.6.0's flow claim is src/claim/flow_claim.rs), and
// rq_claim_ready ran only inside it: it refuses as it did outside it.
function_info_v1!(pg_finfo_rq_claim_ready_c);

/// # Safety
/// Called by the function manager with the arguments 0.5.0 (or older) declares.
#[pg_guard]
#[unsafe(no_mangle)]
pub unsafe extern "C-unwind" fn rq_claim_ready_c(_fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    crate::flow::require_flow_claim("rq_claim_ready");
    // a flow claim of 0.6.0 never calls it
    Refusal::new(PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE, "rq_claim_ready is gone in raquel 0.6.0")
        .hint("Update the extension: ALTER EXTENSION raquel UPDATE.")
        .raise()
}
