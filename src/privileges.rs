//! What a caller may learn (declared with the grants in sql/privileges.sql).
//!
//! rq_enqueue and rq_enqueue_batch run with the extension owner's rights, so
//! that a producer needs no privilege on the table. A keyed enqueue whose key
//! an unfinished job already holds returns that job instead of a new one; a
//! producer who could not SELECT from jobs gets only what it told us itself
//! (the queue and the key) and the job's id, never its payload, error or
//! worker.

use pgrx::prelude::*;

/// Whether the role that called into the extension (the session's role, or
/// the role it SET ROLE to; not the owner a SECURITY DEFINER function runs
/// as) may SELECT from table `relation`.
pub fn caller_may_read(relation: pg_sys::Oid) -> bool {
    // SAFETY: GetOuterUserId reads a backend global; pg_class_aclcheck looks
    // the relation up in the catalog cache, inside the caller's transaction.
    unsafe {
        pg_sys::pg_class_aclcheck(relation, pg_sys::GetOuterUserId(), pg_sys::ACL_SELECT as pg_sys::AclMode)
            == pg_sys::AclResult::ACLCHECK_OK
    }
}

/// Whether the current role (a verb's caller: the verbs that call this run
/// with their caller's rights) may UPDATE table `relation`.
pub fn may_update(relation: pg_sys::Oid) -> bool {
    // SAFETY: GetUserId reads a backend global; pg_class_aclcheck looks the
    // relation up in the catalog cache, inside the caller's transaction.
    unsafe {
        pg_sys::pg_class_aclcheck(relation, pg_sys::GetUserId(), pg_sys::ACL_UPDATE as pg_sys::AclMode)
            == pg_sys::AclResult::ACLCHECK_OK
    }
}

/// Refuses (42501) a call of `name`, the function `function`, by a role that
/// may not update the jobs table beside it: for the helpers that wake
/// waiting claims or note deadlines, which only a role that could have made
/// the change itself may ask for.
pub fn require_update(function: pg_sys::Oid, name: &str) {
    require_update_of(function, "jobs", name)
}

/// require_update for the table named `table` beside `function`.
pub fn require_update_of(function: pg_sys::Oid, table: &'static str, name: &str) {
    if !may_update(table_of(function, table)) {
        crate::errors::Refusal::new(
            PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE,
            format!("{name} is for roles that may update the {table} table"),
        )
        .raise()
    }
}

/// Raises `error` (42501, a statement refused a table) again with a HINT
/// that names the grant functions, when it has no HINT of its own: the
/// message names only the table, and a role that lacks raquel's grants (a
/// producer calling a worker's verb) would not learn from it what to do.
pub fn teach_the_grant(error: pgrx::pg_sys::panic::CaughtError) -> ! {
    let report = match &error {
        pgrx::pg_sys::panic::CaughtError::PostgresError(report) if report.hint().is_none() => report,
        _ => error.rethrow(),
    };
    // SAFETY: a backend global, and a catalog lookup inside the transaction
    // (noerr: a role dropped meanwhile has no name).
    let role = unsafe {
        let name = pg_sys::GetUserNameFromId(pg_sys::GetOuterUserId(), true);
        if name.is_null() { String::from("role") } else { std::ffi::CStr::from_ptr(name).to_string_lossy().into_owned() }
    };
    let role = role.replace('\'', "''");
    crate::errors::Refusal::new(PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE, report.message())
        .hint(format!(
            "raquel's verbs need its grants, which its owner gives: rq_grant_worker('{role}') for a worker's verbs \
             (claim, finish, extend, cancel, retry), rq_grant_producer('{role}') for a producer's (enqueue)."
        ))
        .raise()
}

/// The jobs table of `function`'s install (in the extension's schema).
pub fn jobs_of(function: pg_sys::Oid) -> pg_sys::Oid {
    table_of(function, "jobs")
}

/// The table (or index) named `table` of `function`'s install (in the
/// extension's schema, src/statements.rs); InvalidOid when there is none.
pub fn table_of(function: pg_sys::Oid, table: &'static str) -> pg_sys::Oid {
    crate::install::table(function, table, || {
        let name = std::ffi::CString::new(table).expect("a table name has no NUL");
        // SAFETY: catalog lookups by OID and by name, inside a transaction.
        unsafe { pg_sys::get_relname_relid(name.as_ptr(), crate::statements::extension_schema(function)) }
    })
}

/// The role that called into the extension (not the owner a SECURITY
/// DEFINER function runs as): for rq_emit's scope (sql/waits.sql).
#[pg_extern(stable, parallel_safe, schema = "raquel_internal")]
fn rq_caller() -> pg_sys::Oid {
    // SAFETY: GetOuterUserId reads a backend global.
    unsafe { pg_sys::GetOuterUserId() }
}

/// caller_may_read for rq_enqueue_batch_planned (PL/pgSQL, run as the
/// extension's owner by rq_enqueue_batch).
#[pg_extern(stable, strict, parallel_safe, schema = "raquel_internal")]
fn rq_caller_may_read(relation: pg_sys::Oid) -> bool {
    caller_may_read(relation)
}
