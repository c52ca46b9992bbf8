//! Steps: what a job's run has done so far, kept across its attempts
//! (declared in sql/steps.sql). `rq_step` records one: it is called once
//! per step of every durable job, so it is C, writes the step's row
//! directly where it may (src/direct/step.rs) and otherwise with one
//! statement (sql/steps.record.sql), and writes nothing else.

use crate::clock::now_ms;
use crate::errors::{self, Cannot};
use crate::statements::{self, nullable_arg, Shape, Statement};
use pgrx::fcinfo::pg_getarg;
use pgrx::prelude::*;

const RECORD: &str = include_str!("../sql/steps.record.sql");
const RECORDED_BY: &str = include_str!("../sql/steps.recorded_by.sql");

/// The longest step name, in bytes: a name is a label, not a payload.
const MAX_NAME_BYTES: usize = 1000;

/// Refuses a step name that is NULL, empty or too long, wherever a step is
/// recorded (rq_step, rq_sleep, rq_wait_event): `verb` says what the refused
/// call was doing ("record a step of", "put to sleep", "park").
pub fn check_name(id: Option<pgrx::Uuid>, name: Option<&str>, verb: &str) {
    match name {
        None | Some("") => errors::named("step_name_empty", &[id.map(|id| id.to_string()), Some(verb.into())]).raise(),
        Some(name) if name.len() > MAX_NAME_BYTES => {
            errors::named("step_name_long", &[Some(name.len().to_string()), Some(name.chars().take(20).collect())])
                .raise()
        }
        Some(_) => {}
    }
}

/// check_name for the verbs written in PL/pgSQL (rq_sleep, rq_wait_event).
#[pg_extern(stable, parallel_safe, schema = "raquel_internal")]
#[search_path(pg_catalog, pg_temp)]
fn rq_check_step_name(id: Option<pgrx::Uuid>, name: Option<&str>, verb: Option<&str>) {
    check_name(id, name, verb.unwrap_or("record a step of"));
}

// rq_step(id uuid, attempt integer, name text, result jsonb) RETURNS
// job_steps. See sql/steps.sql. (rq_step_c, of 0.5.0's script, whose
// attempt came last and could be left out: src/compat_0_5.rs.)
function_info_v1!(pg_finfo_rq_step_fenced_c);

/// # Safety
/// Called by the function manager with the arguments sql/steps.sql declares.
#[pg_guard]
#[unsafe(no_mangle)]
pub unsafe extern "C-unwind" fn rq_step_fenced_c(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    // SAFETY: fcinfo is this call's own.
    unsafe { step_from_args(fcinfo, true) }
}

/// rq_step of `fcinfo`'s call: `fenced` (0.6.0 on), arguments 0 (id), 1
/// (attempt, required), 2 (name) and 3 (result); in 0.5.0's script 0 (id),
/// 1 (name), 2 (result) and 3 (attempt, optional).
///
/// # Safety
/// `fcinfo` is a call whose arguments are rq_step's, in that layout.
pub unsafe fn step_from_args(fcinfo: pg_sys::FunctionCallInfo, fenced: bool) -> pg_sys::Datum {
    let (attempt_arg, name_arg, result_arg) = if fenced { (1, 2, 3) } else { (3, 1, 2) };
    // SAFETY: the arguments as declared: a uuid, a text, a jsonb, an integer.
    let (function, id, name, result, attempt) = unsafe {
        (
            statements::called_function(fcinfo),
            pg_getarg::<pgrx::Uuid>(fcinfo, 0),
            pg_getarg::<&str>(fcinfo, name_arg),
            nullable_arg(fcinfo, result_arg),
            pg_getarg::<i32>(fcinfo, attempt_arg),
        )
    };
    if fenced && attempt.is_none() {
        errors::require_attempt(id, "record a step of");
    }
    // SAFETY: the result is a jsonb datum.
    unsafe {
        crate::limits::check_result(result, || {
            format!("the result of step {:?} of job {}", name.unwrap_or_default(), id.map_or("NULL".into(), |id| id.to_string()))
        });
    }
    statements::connect();
    if crate::install::mode(function).distributed {
        crate::distributed::refuse("rq_step")
    }
    check_name(id, name, "record a step of");
    let Some(id) = id else { errors::raise_cannot(function, None, attempt, "step", &["claimed"]) };
    let name = name.unwrap_or_default();
    // written directly where it may be (src/direct/step.rs); the statement
    // otherwise, and to say why a step is refused
    if let (Some(attempt), Some(name)) = (attempt, name.into_datum()) {
        let step = crate::direct::step::NewStep { id, attempt, name, result, now_ms: now_ms() };
        let (jobs, steps) = (crate::privileges::jobs_of(function), crate::privileges::table_of(function, "job_steps"));
        if let Some(row) = crate::direct::step::record(jobs, steps, &step) {
            // SAFETY: a composite datum in SPI's memory, copied out before SPI_finish frees it.
            let row = unsafe { pg_sys::SPI_datumTransfer(row, false, -1) };
            statements::finish();
            return row;
        }
    }
    let job_steps = || statements::in_schema_of(function, "job_steps");
    // the names are looked up only when the plan is made, not on every call
    let text = || {
        statements::fill(
            RECORD,
            &[("@jobs@", &statements::in_schema_of(function, "jobs")), ("@job_steps@", &job_steps())],
        )
    };
    let types = [pg_sys::UUIDOID, pg_sys::TEXTOID, pg_sys::JSONBOID, pg_sys::INT4OID, pg_sys::INT8OID];
    let statement = Statement { shape: Shape { name: "step", variant: 0 }, text: &text, types: &types };
    let args = [id.into_datum(), name.into_datum(), result, attempt.into_datum(), now_ms().into_datum()];
    if statements::run(function, &statement, &args) == 1 {
        // SAFETY: the statement returned one row: the step recorded.
        return unsafe { statements::finish_with_first_row() };
    }
    match errors::cannot(function, Some(id), attempt, &["claimed"]) {
        // claimed on that attempt: the step was recorded before; say by which attempt
        Cannot::Changed => {
            let text = || {
                statements::fill(
                    RECORDED_BY,
                    &[
                        ("@job_steps@", &job_steps()),
                        ("@ms_to_timestamptz@", &statements::own_function(function, "rq_ms_to_timestamptz(bigint)")),
                    ],
                )
            };
            let types = [pg_sys::UUIDOID, pg_sys::TEXTOID];
            let statement =
                Statement { shape: Shape { name: "step_recorded_by", variant: 0 }, text: &text, types: &types };
            if statements::run_once(&statement, &[id.into_datum(), name.into_datum()]) == 1 {
                // SAFETY: one row of (attempt, when, kind).
                let (by, when, kind) = unsafe {
                    (statements::value::<i32>(0, 1), statements::value::<String>(0, 2), statements::value::<String>(0, 3))
                };
                let (by, id) = (by.map(|a| a.to_string()), Some(id.to_string()));
                match kind.as_deref() {
                    // a sleep's or a wait's name, given to rq_step
                    Some(other) if other != "step" => {
                        errors::named("step_kind", &[Some(name.into()), id, Some(other.into()), Some("step".into()), by, when]).raise()
                    }
                    _ => errors::named("step_recorded", &[Some(name.into()), id, by, when]).raise(),
                }
            }
            Cannot::Changed.refusal("step", Some(id), attempt, &["claimed"]).raise()
        }
        other => other.refusal("step", Some(id), attempt, &["claimed"]).raise(),
    }
}
