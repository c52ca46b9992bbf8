//! `rq_enqueue_batch`: many jobs of one queue in one call (declared in
//! sql/enqueue.sql, a C function like rq_enqueue, SECURITY DEFINER with a
//! pinned search_path).
//!
//! Plain jobs (no keys, groups or parents) are written directly
//! (src/direct.rs): `table_multi_insert`, as COPY writes, and each row's
//! index entries and insert work in Rust, where the statement paid an
//! executor's row for each job, raquel's two row triggers and a second
//! set of the rows (bench/run: 0.54x a minimal INSERT … SELECT before).
//! Everything else, and plain jobs whenever the table is not as raquel made
//! it, runs sql/transitions.sql's rq_enqueue_batch_planned, whose rows this
//! function returns.

use crate::direct;
use crate::enqueue;
use crate::privileges;
use crate::statements::{self, Shape, Statement, nullable_arg};
use pgrx::fcinfo::{pg_arg_is_null, pg_getarg};
use pgrx::prelude::*;

/// Every case, planned (sql/enqueue.sql): the jsonb overload's payloads as
/// their text, as the table stores them.
const PLANNED: &str = "SELECT * FROM @planned@($1, $2@as_text@, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)";

/// The arguments: queue, payloads, at, delay, max_age, max_retry_count,
/// min_retry_delay, max_retry_delay, backoff_base, priority, keys,
/// group_keys, after.
const ARGS: usize = 13;

// rq_enqueue_batch(queue, payloads text[] or jsonb[], …) RETURNS SETOF jobs.
function_info_v1!(pg_finfo_rq_enqueue_batch_c);

/// # Safety
/// Called by the function manager with the arguments sql/enqueue.sql
/// declares, where a set may be returned.
#[pg_guard]
#[unsafe(no_mangle)]
pub unsafe extern "C-unwind" fn rq_enqueue_batch_c(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    // SAFETY: fcinfo is this call's own; it returns SETOF jobs.
    let (function, payloads_type, nargs) = unsafe {
        pg_sys::InitMaterializedSRF(fcinfo, 0);
        (statements::called_function(fcinfo), pg_sys::get_fn_expr_argtype((*fcinfo).flinfo, 1), (*fcinfo).nargs as usize)
    };
    let jsonb = payloads_type == pg_sys::JSONBARRAYOID;
    // SAFETY: arguments below nargs exist.
    let given = |i: usize| i < nargs && !unsafe { pg_arg_is_null(fcinfo, i) };
    let plain = given(0) && given(1) && !given(10) && !given(11) && !given(12);
    statements::connect();
    // SAFETY: fcinfo is this call's own, its set initialised above.
    if plain && !crate::install::mode(function).distributed && unsafe { written_directly(fcinfo, function, jsonb) } {
        statements::finish();
        return pg_sys::Datum::from(0);
    }
    let planned = statements::helper_of(statements::helper_schema(function), "rq_enqueue_batch_planned");
    let text = || statements::fill(PLANNED, &[("@planned@", &planned), ("@as_text@", if jsonb { "::pg_catalog.text[]" } else { "" })]);
    let (int4, interval, texts) = (pg_sys::INT4OID, pg_sys::INTERVALOID, pg_sys::TEXTARRAYOID);
    let statement = Statement {
        shape: Shape { name: "enqueue_batch", variant: i64::from(jsonb) },
        text: &text,
        types: &[
            pg_sys::TEXTOID,
            if jsonb { pg_sys::JSONBARRAYOID } else { texts },
            pg_sys::TIMESTAMPTZOID,
            interval,
            interval,
            int4,
            interval,
            interval,
            interval,
            int4,
            texts,
            texts,
            pg_sys::UUIDARRAYOID,
        ],
    };
    // SAFETY: arguments below nargs exist; the rest are NULL (defaults).
    let args: Vec<Option<pg_sys::Datum>> =
        (0..ARGS).map(|i| if i < nargs { unsafe { nullable_arg(fcinfo, i) } } else { None }).collect();
    statements::run(function, &statement, &args);
    // SAFETY: the set was initialised above; the last result is jobs rows.
    unsafe { statements::return_rows(fcinfo) };
    statements::finish();
    pg_sys::Datum::from(0)
}

/// Writes the plain jobs of this call directly into the set it returns, or
/// returns false having written nothing (the table is not as raquel made
/// it, or the payloads are not a one-dimensional array: the planned path
/// says what is wrong).
///
/// # Safety
/// `fcinfo` is the call's own, with queue and payloads not null, its set
/// initialised by InitMaterializedSRF.
unsafe fn written_directly(fcinfo: pg_sys::FunctionCallInfo, function: pg_sys::Oid, jsonb: bool) -> bool {
    // SAFETY: per the contract above; the arguments are read as the types
    // sql/enqueue.sql declares; the array is detoasted into this call's
    // memory and its elements read as text or jsonb.
    unsafe {
        let options = enqueue::check(
            pg_getarg::<&str>(fcinfo, 0),
            pg_getarg(fcinfo, 2),
            pg_getarg(fcinfo, 3),
            pg_getarg(fcinfo, 4),
            pg_getarg(fcinfo, 5),
            pg_getarg(fcinfo, 6),
            pg_getarg(fcinfo, 7),
            pg_getarg(fcinfo, 8),
        );
        let values = enqueue::values_of(&options, pg_getarg::<i32>(fcinfo, 5), pg_getarg::<i32>(fcinfo, 9));
        let (Some(queue), Some(array)) = (nullable_arg(fcinfo, 0), nullable_arg(fcinfo, 1)) else { return false };
        let array = pg_sys::pg_detoast_datum(array.cast_mut_ptr()).cast::<pg_sys::ArrayType>();
        if (*array).ndim > 1 {
            return false;
        }
        let element = if jsonb { pg_sys::JSONBOID } else { pg_sys::TEXTOID };
        let (mut elements, mut nulls, mut count) = (std::ptr::null_mut(), std::ptr::null_mut(), 0);
        pg_sys::deconstruct_array(array, element, -1, false, pg_sys::TYPALIGN_INT as std::ffi::c_char, &mut elements, &mut nulls, &mut count);
        let count = count as usize;
        let payloads: Vec<Option<pg_sys::Datum>> = (0..count)
            .map(|i| {
                (!*nulls.add(i)).then(|| {
                    let payload = *elements.add(i);
                    // stored as its text, as the statement's `::text[]` does
                    if jsonb { enqueue::jsonb_as_text(payload) } else { payload }
                })
            })
            .collect();
        let rsinfo = (*fcinfo).resultinfo as *mut pg_sys::ReturnSetInfo;
        let store = (*rsinfo).setResult;
        direct::insert_batch(privileges::jobs_of(function), queue, &payloads, &values, |tuple| {
            pg_sys::tuplestore_puttuple(store, tuple);
        })
    }
}
