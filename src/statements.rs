//! Statements run through SPI by the functions written in Rust: prepared once
//! per backend and kept, run with arguments, their rows handed back as the
//! calling function's result. Each statement's text is a file beside the SQL
//! of its idea (`sql/claim.ready.sql` belongs to `sql/claim.sql`), with
//! `@placeholders@` filled before it is prepared.
//!
//! Plans are kept per SQL function (by OID): after DROP and CREATE EXTENSION
//! the functions are new, and make new plans for the (maybe different)
//! schema. PostgreSQL itself replans a kept plan when the table or its
//! indexes change. Every SPI return code is checked: a failure there is a
//! bug or a broken server, never a user's mistake, and is reported as such.

use pgrx::fcinfo::{pg_arg_is_null, pg_getarg_datum_raw};
use pgrx::prelude::*;
use std::cell::RefCell;
use std::ffi::{CStr, CString, c_char};

/// The most plans a backend keeps: a worker needs a few (its queue filter
/// and batch size, complete, enqueue). Past this, the plan used least
/// recently goes to make room (counted: raquel_internal.rq_kept_plans()),
/// unless every kept plan is running (a verb inside a verb): then the call
/// plans for itself once.
const MAX_KEPT_PLANS: usize = 64;

/// The most arguments a statement takes (the enqueue's 13).
const MAX_ARGS: usize = 13;

/// Which statement a kept plan runs: its name and, for statements written
/// in several shapes (a claim's queue filter and batch size), which shape.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Shape {
    pub name: &'static str,
    pub variant: i64,
}

/// A statement to run: its shape, and how to make its text and argument
/// types (only called when no plan is kept for it yet).
pub struct Statement<'a> {
    pub shape: Shape,
    pub text: &'a dyn Fn() -> CString,
    pub types: &'a [pg_sys::Oid],
}

struct KeptPlan {
    function: pg_sys::Oid,
    shape: Shape,
    plan: pg_sys::SPIPlanPtr,
    /// The statement whole, as prepared, and its argument types: for
    /// rq_kept_statements, to be read and EXPLAINed on its own.
    text: String,
    types: Vec<pg_sys::Oid>,
    /// When it last ran (`PlanCounts::runs` then).
    last_used: u64,
    /// Runs of it under way: a plan that runs is never freed.
    running: u32,
}

/// What the backend's kept plans did since it started (rq_kept_plans).
#[derive(Clone, Copy, Default)]
struct PlanCounts {
    /// Runs of a kept plan.
    runs: u64,
    /// Plans made and kept.
    kept: u64,
    /// Kept plans freed to make room for another.
    evicted: u64,
    /// Calls that planned for themselves once: every kept plan was running.
    planned_once: u64,
}

thread_local! {
    // A backend is one thread: a thread_local needs no lock.
    static KEPT_PLANS: RefCell<Vec<KeptPlan>> = const { RefCell::new(Vec::new()) };
    static COUNTS: std::cell::Cell<PlanCounts> = const { std::cell::Cell::new(PlanCounts { runs: 0, kept: 0, evicted: 0, planned_once: 0 }) };
}

fn count(change: impl FnOnce(&mut PlanCounts)) {
    COUNTS.with(|c| {
        let mut counts = c.get();
        change(&mut counts);
        c.set(counts);
    });
}

/// A kept plan marked running (by `kept_plan`) until this is dropped (an
/// error unwinds through it too: pgrx turns an ERROR into a panic that
/// runs Rust's drops).
struct Running(pg_sys::SPIPlanPtr);

impl Drop for Running {
    fn drop(&mut self) {
        KEPT_PLANS.with_borrow_mut(|kept| {
            if let Some(k) = kept.iter_mut().find(|k| k.plan == self.0) {
                k.running = k.running.saturating_sub(1);
            }
        });
    }
}

/// Connects to SPI; every call is paired with `finish`.
pub fn connect() {
    // SAFETY: called from a C function inside a transaction, as SPI requires.
    let code = unsafe { pg_sys::SPI_connect() };
    check(code, pg_sys::SPI_OK_CONNECT as i32, "SPI_connect");
}

/// Disconnects from SPI (frees everything allocated since `connect`).
pub fn finish() {
    // SAFETY: paired with a successful `connect` in the same call.
    let code = unsafe { pg_sys::SPI_finish() };
    check(code, pg_sys::SPI_OK_FINISH as i32, "SPI_finish");
}

fn check(code: i32, expected: i32, call: &str) {
    if code != expected {
        // SAFETY: SPI_result_code_string returns a static string for any code.
        let text = unsafe { CStr::from_ptr(pg_sys::SPI_result_code_string(code)) };
        error!("raquel: {call} failed: {}", text.to_string_lossy());
    }
}

/// Runs `statement` for `function` with `args` (None is SQL NULL), with its
/// kept plan, or with a plan made for this call when the backend keeps too
/// many already. Returns how many rows it processed; the rows are in
/// `SPI_tuptable` until `finish`.
pub fn run(function: pg_sys::Oid, statement: &Statement, args: &[Option<pg_sys::Datum>]) -> u64 {
    run_reading(function, statement, args, Reading::OwnSnapshot)
}

/// `run` reading with a snapshot taken now rather than with the
/// transaction's (REPEATABLE READ and SERIALIZABLE): for a count that must
/// see every commit so far.
pub fn run_with_latest_snapshot(function: pg_sys::Oid, statement: &Statement, args: &[Option<pg_sys::Datum>]) -> u64 {
    run_reading(function, statement, args, Reading::LatestSnapshot)
}

/// Prepares `statement`, runs it once with `args` and frees the plan: for the
/// rare paths not worth a kept plan.
pub fn run_once(statement: &Statement, args: &[Option<pg_sys::Datum>]) -> u64 {
    once(statement, args, Reading::OwnSnapshot)
}

/// The snapshot a statement reads with: its own (the transaction's in
/// REPEATABLE READ), or one taken now.
#[derive(Clone, Copy)]
enum Reading {
    OwnSnapshot,
    LatestSnapshot,
}

fn run_reading(function: pg_sys::Oid, statement: &Statement, args: &[Option<pg_sys::Datum>], reading: Reading) -> u64 {
    match kept_plan(function, statement) {
        Some(running) => execute(running.0, args, reading),
        None => {
            count(|c| c.planned_once += 1);
            once(statement, args, reading)
        }
    }
}

fn once(statement: &Statement, args: &[Option<pg_sys::Datum>], reading: Reading) -> u64 {
    let plan = prepare(statement);
    let rows = execute(plan, args, reading);
    // SAFETY: the plan was made by SPI_prepare_cursor in this SPI session and not kept.
    check(unsafe { pg_sys::SPI_freeplan(plan) }, 0, "SPI_freeplan");
    rows
}

/// The kept plan of `statement` (made and kept on first use), marked
/// running; None when the backend keeps as many as it may and every one
/// is running.
fn kept_plan(function: pg_sys::Oid, statement: &Statement) -> Option<Running> {
    // this run's turn, for the least recently used
    let now = COUNTS.with(|c| c.get().runs) + 1;
    let plan = KEPT_PLANS.with_borrow_mut(|kept| {
        if let Some(k) = kept.iter_mut().find(|k| k.function == function && k.shape == statement.shape) {
            k.last_used = now;
            k.running += 1;
            return Some(k.plan);
        }
        if !kept.iter().any(|k| k.function == function) {
            // A function new to this backend: maybe the extension was made
            // again. Plans of functions that are gone go.
            kept.retain(|k| {
                let exists = function_exists(k.function);
                if !exists {
                    // SAFETY: a kept plan, owned by this list alone.
                    check(unsafe { pg_sys::SPI_freeplan(k.plan) }, 0, "SPI_freeplan");
                }
                exists
            });
        }
        if kept.len() >= MAX_KEPT_PLANS {
            // the plan used least recently that is not running goes
            let (n, _) = kept.iter().enumerate().filter(|(_, k)| k.running == 0).min_by_key(|(_, k)| k.last_used)?;
            let gone = kept.swap_remove(n);
            // SAFETY: a kept plan, owned by this list alone, not running.
            check(unsafe { pg_sys::SPI_freeplan(gone.plan) }, 0, "SPI_freeplan");
            count(|c| c.evicted += 1);
        }
        let text = (statement.text)();
        let plan = prepare_text(&text, statement.types);
        // SAFETY: a plan just made in this SPI session; keeping moves it to a
        // context that lives as long as the backend.
        check(unsafe { pg_sys::SPI_keepplan(plan) }, 0, "SPI_keepplan");
        kept.push(KeptPlan {
            function,
            shape: statement.shape,
            plan,
            text: text.to_string_lossy().into_owned(),
            types: statement.types.to_vec(),
            last_used: now,
            running: 1,
        });
        count(|c| c.kept += 1);
        Some(plan)
    })?;
    count(|c| c.runs += 1);
    Some(Running(plan))
}

/// This backend's kept plans (src/statements.rs): how many it keeps now and
/// at most, and since it started, the runs of a kept plan, the plans made
/// and kept, those freed to make room, and the calls that planned for
/// themselves once. For a contributor or an operator who wonders whether
/// a worker's statements are planned once.
#[pg_extern(volatile, parallel_unsafe, schema = "raquel_internal")]
#[search_path(pg_catalog, pg_temp)]
fn rq_kept_plans() -> TableIterator<
    'static,
    (
        name!(kept, i32),
        name!(max_kept, i32),
        name!(runs, i64),
        name!(made, i64),
        name!(evicted, i64),
        name!(planned_once, i64),
    ),
> {
    let now = KEPT_PLANS.with_borrow(|kept| kept.len()) as i32;
    let c = COUNTS.with(|c| c.get());
    let big = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
    TableIterator::once((now, MAX_KEPT_PLANS as i32, big(c.runs), big(c.kept), big(c.evicted), big(c.planned_once)))
}

/// The statements behind this backend's kept plans, whole: which function
/// keeps each (as `regprocedure` prints it), the statement's name and
/// shape, its argument types and its text as prepared. Each runs and
/// EXPLAINs on its own: `PREPARE s(argument_types) AS sql`, then `EXPLAIN
/// EXECUTE s(…)` (or, from PostgreSQL 16, `EXPLAIN (GENERIC_PLAN) sql`).
/// For a contributor or an operator who wants the plan a verb runs.
#[pg_extern(volatile, parallel_unsafe, schema = "raquel_internal")]
#[search_path(pg_catalog, pg_temp)]
fn rq_kept_statements() -> TableIterator<
    'static,
    (
        name!(function, String),
        name!(statement, &'static str),
        name!(variant, i64),
        name!(argument_types, Vec<String>),
        name!(sql, String),
    ),
> {
    let rows = KEPT_PLANS.with_borrow(|kept| {
        kept.iter()
            .map(|k| {
                // SAFETY: inside a transaction; both return palloc'd text
                // (a dropped function prints as its OID).
                let (function, types) = unsafe {
                    (
                        CStr::from_ptr(pg_sys::format_procedure(k.function)).to_string_lossy().into_owned(),
                        k.types.iter().map(|t| CStr::from_ptr(pg_sys::format_type_be(*t)).to_string_lossy().into_owned()).collect(),
                    )
                };
                (function, k.shape.name, k.shape.variant, types, k.text.clone())
            })
            .collect::<Vec<_>>()
    });
    TableIterator::new(rows)
}

/// Frees every kept plan: the statements change with the mode
/// (src/distributed.rs).
pub fn forget_kept_plans() {
    KEPT_PLANS.with_borrow_mut(|kept| {
        for k in kept.drain(..) {
            // (a plan running under this call is left to the backend's end:
            // freeing it would pull it from under its executor)
            if k.running == 0 {
                // SAFETY: a kept plan, owned by this list alone, not running.
                check(unsafe { pg_sys::SPI_freeplan(k.plan) }, 0, "SPI_freeplan");
            }
        }
    });
}

fn function_exists(function: pg_sys::Oid) -> bool {
    // SAFETY: a syscache lookup by OID, inside a transaction.
    unsafe {
        pg_sys::SearchSysCacheExists(
            pg_sys::SysCacheIdentifier::PROCOID as i32,
            pg_sys::Datum::from(function),
            pg_sys::Datum::from(0),
            pg_sys::Datum::from(0),
            pg_sys::Datum::from(0),
        )
    }
}

fn prepare(statement: &Statement) -> pg_sys::SPIPlanPtr {
    prepare_text(&(statement.text)(), statement.types)
}

fn prepare_text(text: &CStr, types: &[pg_sys::Oid]) -> pg_sys::SPIPlanPtr {
    let mut types = types.to_vec();
    // A generic plan from the start: the statements are written so that it
    // is the plan we want, and PostgreSQL need not compare it with custom
    // plans on the first calls. Not on Citus, which routes a statement by
    // its parameters' values (src/distributed.rs).
    let options = if crate::distributed::known() { 0 } else { pg_sys::CURSOR_OPT_GENERIC_PLAN as i32 };
    // SAFETY: text is NUL-terminated, types has as many entries as we pass.
    let plan = unsafe {
        pg_sys::SPI_prepare_cursor(
            text.as_ptr(),
            types.len() as i32,
            types.as_mut_ptr(),
            options,
        )
    };
    if plan.is_null() {
        // SAFETY: SPI_result is set by the failed SPI_prepare_cursor.
        check(unsafe { pg_sys::SPI_result }, 0, "SPI_prepare");
    }
    plan
}

fn execute(plan: pg_sys::SPIPlanPtr, args: &[Option<pg_sys::Datum>], reading: Reading) -> u64 {
    assert!(args.len() <= MAX_ARGS, "a statement takes at most {MAX_ARGS} arguments");
    // On the stack: this runs for every job.
    let mut values = [pg_sys::Datum::from(0); MAX_ARGS];
    let mut nulls = [b'n' as c_char; MAX_ARGS];
    for (i, arg) in args.iter().enumerate() {
        if let Some(value) = arg {
            values[i] = *value;
            nulls[i] = b' ' as c_char;
        }
    }
    // SAFETY: the plan is valid (kept or just made), and it was prepared with
    // as many argument types as the arrays hold entries for.
    // A role refused the table (permission denied, which names the table
    // alone) is told which of raquel's grants it lacks.
    let code = PgTryBuilder::new(std::panic::AssertUnwindSafe(|| unsafe {
        if let Reading::LatestSnapshot = reading {
            // (pushed as the active snapshot, copied: GetLatestSnapshot's is static)
            let snapshot = pg_sys::GetLatestSnapshot();
            pg_sys::SPI_execute_snapshot(plan, values.as_mut_ptr(), nulls.as_ptr(), snapshot, std::ptr::null_mut(), false, false, 0)
        } else {
            pg_sys::SPI_execute_plan(plan, values.as_mut_ptr(), nulls.as_ptr(), false, 0)
        }
    }))
    .catch_when(PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE, |error| crate::privileges::teach_the_grant(error))
    .execute();
    if code < 0 {
        check(code, 0, "SPI_execute_plan");
    }
    // SAFETY: set by the SPI_execute_plan that just returned.
    unsafe { pg_sys::SPI_processed }
}

/// The OID of the SQL function being called.
///
/// # Safety
/// `fcinfo` is the call's own, as the function manager passed it.
pub unsafe fn called_function(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Oid {
    // SAFETY: per the contract above, fcinfo and its flinfo are valid.
    unsafe { (*(*fcinfo).flinfo).fn_oid }
}

/// Argument `n`, or None when it is SQL NULL.
///
/// # Safety
/// `fcinfo` is the call's own and has more than `n` arguments.
pub unsafe fn nullable_arg(fcinfo: pg_sys::FunctionCallInfo, n: usize) -> Option<pg_sys::Datum> {
    // SAFETY: per the contract above, argument n exists.
    unsafe { if pg_arg_is_null(fcinfo, n) { None } else { Some(pg_getarg_datum_raw(fcinfo, n)) } }
}

/// The schema of raquel's internal helpers (0.5.0 on): the functions the
/// verbs, triggers, column defaults and the background worker call, which
/// are no API. A member of the extension, with the same name whatever
/// schema the extension is in (one install per database).
pub const INTERNAL_SCHEMA: &str = "raquel_internal";

/// The OID of the schema raquel_internal in this database, or InvalidOid.
fn internal_namespace() -> pg_sys::Oid {
    // SAFETY: a catalog lookup by name (missing_ok), inside a transaction.
    unsafe { pg_sys::get_namespace_oid(c"raquel_internal".as_ptr(), true) }
}

thread_local! {
    // The raquel_internal this backend last met (its OID) and the schema of
    // its extension: a function moved there still finds the tables beside
    // its verbs. After DROP and CREATE EXTENSION the schema is a new one,
    // and is looked up again.
    static INTERNAL: std::cell::Cell<(pg_sys::Oid, pg_sys::Oid)> =
        const { std::cell::Cell::new((pg_sys::InvalidOid, pg_sys::InvalidOid)) };
}

/// The extension's schema (the install script's `@extschema@`: its tables,
/// types and public functions) for `function`, one of raquel's functions:
/// the schema `function` is in, or for a helper in raquel_internal, the
/// schema of the extension.
pub fn extension_schema(function: pg_sys::Oid) -> pg_sys::Oid {
    // SAFETY: catalog lookups (syscache, and the extension's row once per
    // new raquel_internal), inside a transaction, for a function being called.
    unsafe {
        let namespace = pg_sys::get_func_namespace(function);
        let (internal, schema) = INTERNAL.get();
        if namespace == internal {
            return schema;
        }
        if namespace != internal_namespace() {
            return namespace;
        }
        // (get_extension_schema is exported from PostgreSQL 16 on: the
        // catalog is asked with SQL, once per backend and schema.)
        let schema = Spi::get_one::<pg_sys::Oid>(
            "SELECT extnamespace FROM pg_catalog.pg_extension WHERE extname = 'raquel'",
        )
        .ok()
        .flatten()
        .unwrap_or(namespace);
        INTERNAL.set((namespace, schema));
        schema
    }
}

/// The quoted name of `schema`.
fn schema_name(schema: pg_sys::Oid) -> String {
    // SAFETY: a catalog lookup of a schema that exists (an extension's);
    // quote_identifier returns a NUL-terminated string.
    unsafe {
        let name = pg_sys::get_namespace_name(schema);
        CStr::from_ptr(pg_sys::quote_identifier(name)).to_string_lossy().into_owned()
    }
}

/// `name` (a table, a type or a public function) qualified with the
/// (quoted) extension schema of `function`, as the install script's
/// `@extschema@.name`.
pub fn in_schema_of(function: pg_sys::Oid, name: &str) -> String {
    format!("{}.{name}", schema_name(extension_schema(function)))
}

thread_local! {
    // The raquel_internal this backend last asked about (its OID), and
    // whether it is the extension's own.
    static INTERNAL_OURS: std::cell::Cell<(pg_sys::Oid, bool)> =
        const { std::cell::Cell::new((pg_sys::InvalidOid, false)) };
}

/// The schema the internal helpers live in for the install of `function`:
/// raquel_internal, or, in an install older than 0.5.0 whose functions run
/// on this library until ALTER EXTENSION UPDATE, the extension's schema.
/// Only a raquel_internal that is the extension's own counts: a schema of
/// that name some role made beside an older install is never called into.
/// Cheap enough for every call (a syscache lookup; whether the schema is the
/// extension's is asked once per schema): a statement that calls a helper
/// keeps a plan per helper schema (its Shape's variant), so that the plans
/// a session kept before the update (naming the helpers in the extension's
/// schema) are not run after it.
pub fn helper_schema(function: pg_sys::Oid) -> pg_sys::Oid {
    // SAFETY: catalog lookups inside a transaction: by name (missing_ok),
    // a function being called, the extension a schema belongs to.
    unsafe {
        let internal = internal_namespace();
        if internal == pg_sys::InvalidOid {
            return extension_schema(function);
        }
        if pg_sys::get_func_namespace(function) == internal {
            return internal;
        }
        let (asked, ours) = INTERNAL_OURS.get();
        let ours = if asked == internal {
            ours
        } else {
            let ours = pg_sys::getExtensionOfObject(pg_sys::NamespaceRelationId, internal)
                == pg_sys::get_extension_oid(c"raquel".as_ptr(), true);
            INTERNAL_OURS.set((internal, ours));
            ours
        };
        if ours { internal } else { extension_schema(function) }
    }
}

/// `name`, an internal helper, qualified with the (quoted) schema
/// `helper_schema` found for it.
pub fn helper_of(schema: pg_sys::Oid, name: &str) -> String {
    format!("{}.{name}", schema_name(schema))
}

/// One of raquel's own functions, `signature` (`rq_backoff(integer,…)`),
/// qualified for a statement of `function`: in raquel_internal, where only
/// the owner may create (sql/privileges.sql says why a name in the
/// extension's schema is never called), or, in an install older than 0.6.0
/// whose functions run on this library until ALTER EXTENSION UPDATE, in the
/// extension's schema, where that version has it. Asked when a plan is made.
pub fn own_function(function: pg_sys::Oid, signature: &str) -> String {
    let name = signature.split('(').next().unwrap_or(signature);
    let helpers = helper_schema(function);
    let internal = helper_of(helpers, signature);
    // SAFETY: to_regprocedure reads the catalog for an exact signature
    // (overloads of other argument types play no part), in a transaction.
    let found = unsafe { pgrx::direct_function_call::<pg_sys::Oid>(pg_sys::to_regprocedure, &[internal.as_str().into_datum()]) };
    if found.is_some_and(|oid| oid != pg_sys::InvalidOid) {
        helper_of(helpers, name)
    } else {
        in_schema_of(function, name)
    }
}

/// A statement template with its `@placeholders@` filled. The comment that
/// heads a file (and each part filled in from one) documents its
/// placeholders, not the statement they make: it is left out, so that the
/// statement as prepared (rq_kept_statements) reads as it runs.
pub fn fill(template: &str, values: &[(&str, &str)]) -> CString {
    let mut text = without_header(template).to_string();
    for (placeholder, value) in values {
        text = text.replace(placeholder, without_header(value));
    }
    CString::new(text).expect("statement templates contain no NUL")
}

/// `text` without the lines of `--` comment it starts with.
fn without_header(text: &str) -> &str {
    let mut rest = text;
    while rest.trim_start_matches([' ', '\t']).starts_with("--") {
        rest = rest.split_once('\n').map_or("", |(_, after)| after);
    }
    rest
}

/// Copies every row of the last SPI result into the set this function
/// returns. The rows are `jobs` rows, column for column; when the result
/// type also holds dropped columns (left NULL), each row is rebuilt.
///
/// # Safety
/// `fcinfo` is the call's own, set up by `InitMaterializedSRF`, and the last
/// SPI result (still connected) holds `jobs` rows.
pub unsafe fn return_rows(fcinfo: pg_sys::FunctionCallInfo) {
    // SAFETY: per the contract above: a materialized SRF's store and
    // descriptor, and SPI's last result, all valid until SPI_finish.
    unsafe {
        let rsinfo = (*fcinfo).resultinfo as *mut pg_sys::ReturnSetInfo;
        let (store, desc) = ((*rsinfo).setResult, (*rsinfo).setDesc);
        let table = pg_sys::SPI_tuptable;
        if pg_sys::SPI_processed == 0 || table.is_null() {
            return;
        }
        let rows = std::slice::from_raw_parts((*table).vals, pg_sys::SPI_processed as usize);
        let natts = (*desc).natts as usize;
        let attrs = columns(desc, natts);
        let spi_natts = (*(*table).tupdesc).natts as usize;
        if !attrs.iter().any(|a| a.attisdropped) && spi_natts == natts {
            for &tuple in rows {
                pg_sys::tuplestore_puttuple(store, tuple);
            }
            return;
        }
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

/// One row of the last SPI result, deformed, while `return_rows_changed`
/// copies it: its columns read and set by name.
pub struct Row<'a> {
    desc: pg_sys::TupleDesc,
    values: &'a mut [pg_sys::Datum],
    nulls: &'a mut [bool],
}

impl Row<'_> {
    fn index(&self, column: &CStr) -> usize {
        // SAFETY: a valid descriptor; SPI_fnumber numbers columns from 1.
        let number = unsafe { pg_sys::SPI_fnumber(self.desc, column.as_ptr()) };
        assert!(number > 0, "raquel: the statement's rows have no column {column:?}");
        number as usize - 1
    }

    pub fn get<T: FromDatum>(&self, column: &CStr) -> Option<T> {
        let i = self.index(column);
        // SAFETY: a value of this row, of the column's type.
        unsafe { T::from_datum(self.values[i], self.nulls[i]) }
    }

    /// Sets `column` to `value` (None: NULL), a datum of the column's type
    /// that lives as long as the SPI session.
    pub fn set(&mut self, column: &CStr, value: Option<pg_sys::Datum>) {
        let i = self.index(column);
        (self.values[i], self.nulls[i]) = (value.unwrap_or(pg_sys::Datum::from(0)), value.is_none());
    }
}

/// Calls `f` with each row of the last SPI result.
///
/// # Safety
/// Connected to SPI.
pub unsafe fn each_row(f: &mut impl FnMut(&mut Row)) {
    // SAFETY: per the contract above: SPI's last result, valid until SPI_finish.
    unsafe {
        let table = pg_sys::SPI_tuptable;
        if pg_sys::SPI_processed == 0 || table.is_null() {
            return;
        }
        let rows = std::slice::from_raw_parts((*table).vals, pg_sys::SPI_processed as usize);
        let desc = (*table).tupdesc;
        let natts = (*desc).natts as usize;
        let (mut values, mut nulls) = (vec![pg_sys::Datum::from(0); natts], vec![true; natts]);
        for &tuple in rows {
            pg_sys::heap_deform_tuple(tuple, desc, values.as_mut_ptr(), nulls.as_mut_ptr());
            f(&mut Row { desc, values: &mut values, nulls: &mut nulls });
        }
    }
}

/// As `return_rows`, with each row changed by `change` first.
///
/// # Safety
/// As `return_rows`.
pub unsafe fn return_rows_changed(fcinfo: pg_sys::FunctionCallInfo, mut change: impl FnMut(&mut Row)) {
    // SAFETY: per the contract above (return_rows's).
    unsafe {
        let rsinfo = (*fcinfo).resultinfo as *mut pg_sys::ReturnSetInfo;
        let (store, desc) = ((*rsinfo).setResult, (*rsinfo).setDesc);
        let table = pg_sys::SPI_tuptable;
        if pg_sys::SPI_processed == 0 || table.is_null() {
            return;
        }
        let rows = std::slice::from_raw_parts((*table).vals, pg_sys::SPI_processed as usize);
        let natts = (*desc).natts as usize;
        let attrs = columns(desc, natts);
        let spi_desc = (*table).tupdesc;
        let spi_natts = (*spi_desc).natts as usize;
        let (mut spi_values, mut spi_nulls) = (vec![pg_sys::Datum::from(0); spi_natts], vec![true; spi_natts]);
        let (mut values, mut nulls) = (vec![pg_sys::Datum::from(0); natts], vec![true; natts]);
        for &tuple in rows {
            pg_sys::heap_deform_tuple(tuple, spi_desc, spi_values.as_mut_ptr(), spi_nulls.as_mut_ptr());
            change(&mut Row { desc: spi_desc, values: &mut spi_values, nulls: &mut spi_nulls });
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

/// Ends the SPI session and returns the first column of the first row of
/// its last result (a whole `jobs` row), copied into the caller's memory.
///
/// # Safety
/// Connected to SPI, and the last result has at least one row.
pub unsafe fn finish_with_first_row() -> pg_sys::Datum {
    // SAFETY: per the contract above.
    let row = unsafe { first_row_copied() };
    finish();
    row
}

/// The first column of the first row of the last SPI result, copied into
/// the memory of the caller of SPI_connect: it outlives later statements and
/// `finish`.
///
/// # Safety
/// Connected to SPI, and the last result has at least one row.
pub unsafe fn first_row_copied() -> pg_sys::Datum {
    // SAFETY: per the contract above, the last result has a first row.
    unsafe {
        let table = pg_sys::SPI_tuptable;
        let mut isnull = false;
        let row = pg_sys::SPI_getbinval(*(*table).vals, (*table).tupdesc, 1, &mut isnull);
        pg_sys::SPI_datumTransfer(row, false, -1)
    }
}

/// Whether the jobs table beside `function` has a column `column`: a table
/// made by an older version of the extension, not yet updated, may not.
pub fn jobs_have(function: pg_sys::Oid, column: &'static CStr) -> bool {
    crate::install::column(function, column, || {
        // SAFETY: catalog lookups by OID and name, inside a transaction.
        unsafe { pg_sys::get_attnum(crate::privileges::jobs_of(function), column.as_ptr()) != pg_sys::InvalidAttrNumber as i16 }
    })
}

/// Frees the last SPI result: for a loop that runs statements until one
/// returns rows, whose empty results would otherwise pile up until `finish`.
pub fn free_result() {
    // SAFETY: SPI_freetuptable takes the current result (or NULL) and
    // frees it; SPI_tuptable is then forgotten, so that a later
    // `return_rows` finds nothing to add and a second free (after a verb
    // that ran no statement in between, src/direct.rs) frees nothing.
    unsafe {
        pg_sys::SPI_freetuptable(pg_sys::SPI_tuptable);
        pg_sys::SPI_tuptable = std::ptr::null_mut();
    }
}

/// Column `column` (from 1) of row `row` of the last SPI result.
///
/// # Safety
/// Connected to SPI, and the last result has more than `row` rows.
pub unsafe fn value<T: FromDatum>(row: usize, column: i32) -> Option<T> {
    // SAFETY: per the contract above, the last result has this row; SPI
    // checks the column number.
    unsafe {
        let table = pg_sys::SPI_tuptable;
        let mut isnull = false;
        let datum = pg_sys::SPI_getbinval(*(*table).vals.add(row), (*table).tupdesc, column, &mut isnull);
        T::from_datum(datum, isnull)
    }
}

/// What these functions read of a column of a tuple descriptor: whether it
/// was dropped. PostgreSQL 18 keeps each column's often-read fields in
/// `TupleDescData.compact_attrs` (`CompactAttribute`, which has
/// `attisdropped`) and no longer has the array `attrs`; 15 and 17 have
/// `attrs` (`FormData_pg_attribute`).
#[cfg(not(feature = "pg18"))]
type Column = pg_sys::FormData_pg_attribute;
#[cfg(feature = "pg18")]
type Column = pg_sys::CompactAttribute;

/// The `natts` columns of `desc`.
///
/// # Safety
/// `desc` is a valid tuple descriptor with `natts` columns that outlives
/// the slice.
unsafe fn columns<'a>(desc: pg_sys::TupleDesc, natts: usize) -> &'a [Column] {
    #[cfg(not(feature = "pg18"))]
    // SAFETY: per the contract above.
    let columns = unsafe { (*desc).attrs.as_slice(natts) };
    #[cfg(feature = "pg18")]
    // SAFETY: per the contract above.
    let columns = unsafe { (*desc).compact_attrs.as_slice(natts) };
    columns
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_filled_statement_leaves_out_the_comments_that_head_its_parts() {
        let template = "-- the template's header\n  -- @part@ is filled in\nSELECT 1 @part@\n-- kept: not a header\n";
        let part = "-- the part's header\nFROM t";
        let text = fill(template, &[("@part@", part)]);
        assert_eq!(text.to_str().unwrap(), "SELECT 1 FROM t\n-- kept: not a header\n");
        assert_eq!(without_header("-- only a comment"), "");
        assert_eq!(without_header("AND j.queue = $1[1]"), "AND j.queue = $1[1]");
    }
}
