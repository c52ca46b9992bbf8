//! rq_enqueue, rq_claim and rq_complete: the calls made for every job.
//!
//! They are C-language functions (declared in sql/enqueue.sql, sql/claim.sql
//! and sql/finish.sql) rather than PL/pgSQL because the benchmark showed the
//! PL/pgSQL around the same statements costing as much again as the
//! statements: a new set of expression states every transaction, a nested
//! function call to check each queue name, the row copied out twice. Here the
//! arguments are checked in Rust, and each statement (sql/statements/) is
//! prepared once per backend and kept, so a call runs one cached plan.
//!
//! The plans are kept per function OID: after DROP and CREATE EXTENSION the
//! functions are new, and their plans are made afresh for the (possibly new)
//! schema. A kept plan is replanned by PostgreSQL itself when the table or
//! its indexes change.

use crate::checks;
use crate::clock::now_ms;
use crate::durations::rq_interval_ms;
use crate::errors::invalid_parameter;
use crate::job_options;
use pgrx::fcinfo::{pg_arg_is_null, pg_getarg, pg_getarg_datum_raw};
use pgrx::prelude::*;
use std::cell::RefCell;
use std::ffi::{CStr, CString, c_char};

const CLAIM_STATEMENT: &str = include_str!("../sql/statements/claim.sql");
const COMPLETE_STATEMENT: &str = include_str!("../sql/statements/complete.sql");
const ENQUEUE_STATEMENT: &str = include_str!("../sql/statements/enqueue.sql");

/// The most plans a backend keeps: a worker needs a few (its queue filter
/// and batch size, complete, enqueue). Past this, calls plan every time.
const MAX_KEPT_PLANS: usize = 32;

/// How the claim picks queues: the statement differs so that each plan walks
/// a ready index in claim order.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum QueueFilter {
    One,
    Several,
    Any,
}

impl QueueFilter {
    fn condition(self) -> &'static str {
        match self {
            QueueFilter::One => "AND j.queue = $1[1]",
            QueueFilter::Several => "AND j.queue = ANY ($1)",
            QueueFilter::Any => "",
        }
    }
}

/// Which statement a kept plan runs.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Statement {
    Claim(QueueFilter, i32),
    Complete,
    Enqueue,
}

/// The plans this backend keeps, each for the SQL function (by OID) that
/// made it: after DROP and CREATE EXTENSION the functions are new, and make
/// new plans for the (maybe different) schema.
struct KeptPlans(Vec<(pg_sys::Oid, Statement, pg_sys::SPIPlanPtr)>);

impl KeptPlans {
    /// The kept plan of `function` for `statement`, prepared by `prepare` on
    /// first use; None when the backend keeps too many plans already.
    unsafe fn get(
        &mut self,
        function: pg_sys::Oid,
        statement: Statement,
        prepare: impl FnOnce() -> pg_sys::SPIPlanPtr,
    ) -> Option<pg_sys::SPIPlanPtr> {
        if let Some((_, _, plan)) = self.0.iter().find(|(f, s, _)| *f == function && *s == statement) {
            return Some(*plan);
        }
        if !self.0.iter().any(|(f, _, _)| *f == function) {
            // A function new to this backend: maybe the extension was made
            // again. Plans of functions that are gone go.
            self.0.retain(|(f, _, plan)| {
                let exists = unsafe {
                    pg_sys::SearchSysCacheExists(
                        pg_sys::SysCacheIdentifier::PROCOID as i32,
                        f.into_datum().unwrap(),
                        pg_sys::Datum::from(0),
                        pg_sys::Datum::from(0),
                        pg_sys::Datum::from(0),
                    )
                };
                if !exists {
                    unsafe { pg_sys::SPI_freeplan(*plan) };
                }
                exists
            });
        }
        if self.0.len() >= MAX_KEPT_PLANS {
            return None;
        }
        let plan = prepare();
        unsafe { pg_sys::SPI_keepplan(plan) };
        self.0.push((function, statement, plan));
        Some(plan)
    }
}

thread_local! {
    static KEPT_PLANS: RefCell<KeptPlans> = const { RefCell::new(KeptPlans(Vec::new())) };
}

/// Runs `statement` of `function` with `args`: with its kept plan, or, when
/// the backend keeps too many, with a plan made for this call.
unsafe fn run(
    function: pg_sys::Oid,
    statement: Statement,
    prepare: impl Fn() -> pg_sys::SPIPlanPtr,
    args: &[Option<pg_sys::Datum>],
) {
    unsafe {
        match KEPT_PLANS.with_borrow_mut(|kept| kept.get(function, statement, &prepare)) {
            Some(plan) => {
                execute(plan, args);
            }
            None => {
                let plan = prepare();
                execute(plan, args);
                pg_sys::SPI_freeplan(plan);
            }
        }
    }
}

/// The OID of the SQL function being called.
unsafe fn called_function(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Oid {
    unsafe { (*(*fcinfo).flinfo).fn_oid }
}

/// `name` qualified with the (quoted) schema of `function`, as the install
/// script's `@extschema@.name`.
unsafe fn in_schema_of(function: pg_sys::Oid, name: &str) -> String {
    unsafe {
        let schema = pg_sys::get_namespace_name(pg_sys::get_func_namespace(function));
        let quoted = CStr::from_ptr(pg_sys::quote_identifier(schema)).to_string_lossy();
        format!("{quoted}.{name}")
    }
}

/// A statement template from sql/statements/ with its placeholders filled.
fn fill(template: &str, values: &[(&str, &str)]) -> CString {
    let mut text = template.to_string();
    for (placeholder, value) in values {
        text = text.replace(placeholder, value);
    }
    CString::new(text).expect("statement templates contain no NUL")
}

unsafe fn prepare(statement: &CString, types: &mut [pg_sys::Oid]) -> pg_sys::SPIPlanPtr {
    // A generic plan from the start: the statements are written so that it
    // is the plan we want, and PostgreSQL need not compare it with custom
    // plans on the first calls.
    let plan = unsafe {
        pg_sys::SPI_prepare_cursor(
            statement.as_ptr(),
            types.len() as i32,
            types.as_mut_ptr(),
            pg_sys::CURSOR_OPT_GENERIC_PLAN as i32,
        )
    };
    if plan.is_null() {
        error!("raquel: could not prepare a statement (SPI result {})", unsafe { pg_sys::SPI_result });
    }
    plan
}

/// Runs `plan` with `args` (None is SQL NULL); returns the SPI result code.
unsafe fn execute(plan: pg_sys::SPIPlanPtr, args: &[Option<pg_sys::Datum>]) -> i32 {
    // On the stack: this runs for every job. No statement takes more than 11.
    let mut values = [pg_sys::Datum::from(0); 11];
    let mut nulls = [b'n' as c_char; 11];
    for (i, arg) in args.iter().enumerate() {
        if let Some(value) = arg {
            values[i] = *value;
            nulls[i] = b' ' as c_char;
        }
    }
    unsafe { pg_sys::SPI_execute_plan(plan, values.as_mut_ptr(), nulls.as_ptr(), false, 0) }
}

/// Prepares `statement`, runs it once with `args` and frees the plan: for the
/// rare paths (a waiting claim, a key, an error) not worth a kept plan.
unsafe fn run_once(statement: String, types: &mut [pg_sys::Oid], args: &[Option<pg_sys::Datum>]) {
    let statement = CString::new(statement).expect("statements contain no NUL");
    unsafe {
        let plan = prepare(&statement, types);
        execute(plan, args);
        pg_sys::SPI_freeplan(plan);
    }
}

/// The argument, or None when it is SQL NULL.
unsafe fn nullable_datum(fcinfo: pg_sys::FunctionCallInfo, n: usize) -> Option<pg_sys::Datum> {
    unsafe { if pg_arg_is_null(fcinfo, n) { None } else { Some(pg_getarg_datum_raw(fcinfo, n)) } }
}

/// Copies every row of the last SPI result into the set this function
/// returns. The rows are `jobs` rows, column for column; when the result
/// type also holds dropped columns (left NULL), each row is rebuilt.
unsafe fn return_spi_rows(fcinfo: pg_sys::FunctionCallInfo) {
    unsafe {
        let rsinfo = (*fcinfo).resultinfo as *mut pg_sys::ReturnSetInfo;
        let (store, desc) = ((*rsinfo).setResult, (*rsinfo).setDesc);
        let table = pg_sys::SPI_tuptable;
        if pg_sys::SPI_processed == 0 || table.is_null() {
            return;
        }
        let rows = std::slice::from_raw_parts((*table).vals, pg_sys::SPI_processed as usize);
        let natts = (*desc).natts as usize;
        let attrs = (*desc).attrs.as_slice(natts);
        if !attrs.iter().any(|a| a.attisdropped) && (*(*table).tupdesc).natts as usize == natts {
            for &tuple in rows {
                pg_sys::tuplestore_puttuple(store, tuple);
            }
            return;
        }
        let spi_natts = (*(*table).tupdesc).natts as usize;
        let (mut spi_values, mut spi_nulls) = (vec![pg_sys::Datum::from(0); spi_natts], vec![true; spi_natts]);
        let (mut values, mut nulls) = (vec![pg_sys::Datum::from(0); natts], vec![true; natts]);
        for &tuple in rows {
            pg_sys::heap_deform_tuple(tuple, (*table).tupdesc, spi_values.as_mut_ptr(), spi_nulls.as_mut_ptr());
            let mut column = 0;
            for (i, attr) in attrs.iter().enumerate() {
                if attr.attisdropped {
                    nulls[i] = true;
                } else {
                    (values[i], nulls[i]) = (spi_values[column], spi_nulls[column]);
                    column += 1;
                }
            }
            pg_sys::tuplestore_putvalues(store, desc, values.as_mut_ptr(), nulls.as_mut_ptr());
        }
    }
}

// rq_claim(queues text[], worker text, batch integer, lease interval,
// wait interval) RETURNS SETOF jobs. See sql/claim.sql.
function_info_v1!(pg_finfo_rq_claim_c);

#[pg_guard]
#[unsafe(no_mangle)]
pub unsafe extern "C-unwind" fn rq_claim_c(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    unsafe {
        let now = now_ms();
        let wait = pg_getarg::<Interval>(fcinfo, 4)
            .map_or(0, |wait| rq_interval_ms(wait, "wait", 0, 86_400_000));
        let batch = checks::check_batch(pg_getarg::<i32>(fcinfo, 2));
        let Some(lease) = pg_getarg::<Interval>(fcinfo, 3) else {
            invalid_parameter("lease must not be null".into(), Some("Leave it out for one minute."))
        };
        let lease_ms = rq_interval_ms(lease, "lease", 1, 31_536_000_000);
        let queues = pg_getarg::<Array<&str>>(fcinfo, 0);
        if let Some(queues) = &queues {
            queues.iter().for_each(checks::check_queue);
        }
        let filter = match &queues {
            None => QueueFilter::Any,
            Some(q) if q.len() == 1 => QueueFilter::One,
            Some(_) => QueueFilter::Several,
        };

        pg_sys::InitMaterializedSRF(fcinfo, 0);
        pg_sys::SPI_connect();
        let function = called_function(fcinfo);
        if wait > 0 {
            claim_waiting(fcinfo, function, wait);
        } else {
            let args = [nullable_datum(fcinfo, 0), nullable_datum(fcinfo, 1), now.into_datum(), lease_ms.into_datum()];
            let prepare_claim = || {
                let statement = fill(
                    CLAIM_STATEMENT,
                    &[
                        ("@jobs@", &in_schema_of(function, "jobs")),
                        ("@queue_filter@", filter.condition()),
                        ("@batch@", &batch.to_string()),
                        ("@order_by@", if batch == 1 { "" } else { "ORDER BY c.priority DESC, c.scheduled_at, c.id" }),
                    ],
                );
                let mut types = [pg_sys::TEXTARRAYOID, pg_sys::TEXTOID, pg_sys::INT8OID, pg_sys::INT8OID];
                prepare(&statement, &mut types)
            };
            run(function, Statement::Claim(filter, batch), prepare_claim, &args);
        }
        return_spi_rows(fcinfo);
        pg_sys::SPI_finish();
        pg_sys::Datum::from(0)
    }
}

/// A claim that may wait: rq_claim_waiting (sql/claim.sql) loops over
/// claims and sleeps; its rows become this call's rows.
unsafe fn claim_waiting(fcinfo: pg_sys::FunctionCallInfo, function: pg_sys::Oid, wait_ms: i64) {
    unsafe {
        let statement = format!("SELECT * FROM {}($1, $2, $3, $4, $5)", in_schema_of(function, "rq_claim_waiting"));
        let mut types = [pg_sys::TEXTARRAYOID, pg_sys::TEXTOID, pg_sys::INT4OID, pg_sys::INTERVALOID, pg_sys::INT8OID];
        let args = [
            nullable_datum(fcinfo, 0),
            nullable_datum(fcinfo, 1),
            nullable_datum(fcinfo, 2),
            nullable_datum(fcinfo, 3),
            wait_ms.into_datum(),
        ];
        run_once(statement, &mut types, &args);
    }
}

// rq_complete(id uuid, attempt integer) RETURNS jobs. See sql/finish.sql.
function_info_v1!(pg_finfo_rq_complete_c);

#[pg_guard]
#[unsafe(no_mangle)]
pub unsafe extern "C-unwind" fn rq_complete_c(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    unsafe {
        let args = [nullable_datum(fcinfo, 0), nullable_datum(fcinfo, 1), now_ms().into_datum()];
        let function = called_function(fcinfo);
        pg_sys::SPI_connect();
        if args[0].is_some() {
            let prepare_complete = || {
                let statement = fill(COMPLETE_STATEMENT, &[("@jobs@", &in_schema_of(function, "jobs"))]);
                prepare(&statement, &mut [pg_sys::UUIDOID, pg_sys::INT4OID, pg_sys::INT8OID])
            };
            run(function, Statement::Complete, prepare_complete, &args);
            if pg_sys::SPI_processed == 1 {
                return finish_with_row();
            }
        }
        raise_cannot(function, &args[..2], "complete");
    }
}

/// Ends the SPI session and returns the first column of the first row of
/// its last result (a whole `jobs` row), copied into the caller's memory.
unsafe fn finish_with_row() -> pg_sys::Datum {
    unsafe {
        let table = pg_sys::SPI_tuptable;
        let mut isnull = false;
        let row = pg_sys::SPI_getbinval(*(*table).vals, (*table).tupdesc, 1, &mut isnull);
        let row = pg_sys::SPI_datumTransfer(row, false, -1);
        pg_sys::SPI_finish();
        row
    }
}

/// Raises the error that explains why a verb matched no row (unknown id,
/// wrong status, stale token): rq_raise_cannot in sql/checks.sql.
unsafe fn raise_cannot(function: pg_sys::Oid, id_and_attempt: &[Option<pg_sys::Datum>], verb: &str) -> ! {
    unsafe {
        let statement = format!("SELECT {}($1, $2, '{verb}', '{{claimed}}')", in_schema_of(function, "rq_raise_cannot"));
        run_once(statement, &mut [pg_sys::UUIDOID, pg_sys::INT4OID], id_and_attempt);
    }
    error!("raquel: rq_raise_cannot returned instead of raising")
}

// rq_enqueue(queue, payload text or jsonb, at, delay, max_age,
// max_retry_count, min_retry_delay, max_retry_delay, backoff_base, priority,
// key) RETURNS jobs. See sql/enqueue.sql: both overloads are this function,
// SECURITY DEFINER with a pinned search_path.
function_info_v1!(pg_finfo_rq_enqueue_c);

#[pg_guard]
#[unsafe(no_mangle)]
pub unsafe extern "C-unwind" fn rq_enqueue_c(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    unsafe {
        let options = job_options::check(
            pg_getarg::<&str>(fcinfo, 0),
            pg_getarg(fcinfo, 2),
            pg_getarg(fcinfo, 3),
            pg_getarg(fcinfo, 4),
            pg_getarg(fcinfo, 5),
            pg_getarg(fcinfo, 6),
            pg_getarg(fcinfo, 7),
            pg_getarg(fcinfo, 8),
        );
        let function = called_function(fcinfo);
        let payload_type = pg_sys::get_fn_expr_argtype((*fcinfo).flinfo, 1);
        let as_text = if payload_type == pg_sys::JSONBOID { "::pg_catalog.text" } else { "" };
        pg_sys::SPI_connect();
        if pg_arg_is_null(fcinfo, 10) {
            let int = |ms: i64| Some((ms as i32).into_datum().unwrap());
            let args = [
                nullable_datum(fcinfo, 0),
                nullable_datum(fcinfo, 1),
                options.max_age_ms.and_then(|ms| ms.into_datum()),
                nullable_datum(fcinfo, 5),
                int(options.min_retry_delay_ms),
                int(options.max_retry_delay_ms),
                int(options.backoff_base_ms),
                options.now_ms.into_datum(),
                options.due_ms.into_datum(),
                pg_getarg::<i32>(fcinfo, 9).unwrap_or(0).into_datum(),
            ];
            let prepare_enqueue = || {
                let statement = fill(
                    ENQUEUE_STATEMENT,
                    &[("@jobs@", &in_schema_of(function, "jobs")), ("@payload_as_text@", as_text)],
                );
                let int4 = pg_sys::INT4OID;
                let mut types =
                    [pg_sys::TEXTOID, payload_type, pg_sys::INT8OID, int4, int4, int4, int4, pg_sys::INT8OID, pg_sys::INT8OID, int4];
                prepare(&statement, &mut types)
            };
            run(function, Statement::Enqueue, prepare_enqueue, &args);
        } else {
            // A key may give back the unfinished job that holds it, and may
            // wait for a concurrent enqueue of the same key: that logic is
            // rq_enqueue_batch's (sql/enqueue.sql), run for one job.
            let statement = format!(
                "SELECT j FROM {}($1, ARRAY[$2{as_text}], $3, $4, $5, $6, $7, $8, $9, $10, ARRAY[$11]) j",
                in_schema_of(function, "rq_enqueue_batch")
            );
            let int4 = pg_sys::INT4OID;
            let interval = pg_sys::INTERVALOID;
            let mut types = [
                pg_sys::TEXTOID, payload_type, pg_sys::TIMESTAMPTZOID, interval, interval, int4,
                interval, interval, interval, int4, pg_sys::TEXTOID,
            ];
            let args: Vec<_> = (0..11).map(|n| nullable_datum(fcinfo, n)).collect();
            run_once(statement, &mut types, &args);
        }
        let rows = pg_sys::SPI_processed;
        if rows != 1 {
            error!("raquel: enqueueing one job gave {rows} rows");
        }
        finish_with_row()
    }
}
