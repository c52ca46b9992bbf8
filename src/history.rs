//! Queues that keep no history (declared in sql/history.sql): their jobs are
//! deleted as they succeed instead of being updated.
//!
//! Every complete must know whether any queue keeps no history, and most
//! databases have none, so each backend keeps the list in memory, as it
//! keeps the flow settings (src/flow.rs): an empty list costs a complete
//! nothing, and its statement is the plain UPDATE. A change to the table
//! drops every backend's copy at commit.
//!
//! The DELETE runs with the rights of the jobs table's owner: a worker role
//! may complete jobs (UPDATE on jobs) but not delete them, and must not
//! gain that by a queue's setting. So a complete that may delete first
//! checks that the caller may update the table (as its UPDATE would have),
//! and its statement, whose conditions are a complete's (the job claimed
//! with this token, or taken by this transaction), deletes nothing else.

use crate::errors::Refusal;
use crate::invalidation;
use crate::privileges;
use crate::statements::{self, Shape, Statement};
use pgrx::prelude::*;
use std::cell::RefCell;

thread_local! {
    /// The queues without history, or None until (re)loaded.
    static WITHOUT: RefCell<Option<Vec<String>>> = const { RefCell::new(None) };
}

/// The queues that keep no history, read from the table beside `function`
/// when the copy was dropped. Connected to SPI; may run a statement (which
/// replaces the last SPI result). A database whose raquel predates the
/// table has none.
pub fn queues_without(function: pg_sys::Oid) -> Vec<String> {
    if let Some(queues) = WITHOUT.with_borrow(|w| w.clone()) {
        return queues;
    }
    let table_name = statements::in_schema_of(function, "queues_without_history");
    // SAFETY: to_regclass takes a text and returns a regclass or NULL.
    let table = unsafe {
        pgrx::direct_function_call::<pg_sys::Oid>(pg_sys::to_regclass, &[table_name.as_str().into_datum()])
    };
    let Some(table) = table else { return Vec::new() };
    let text = || statements::fill("SELECT h.queue FROM @table@ h ORDER BY h.queue", &[("@table@", &table_name)]);
    let statement = Statement { shape: Shape { name: "queues_without_history", variant: 0 }, text: &text, types: &[] };
    let rows = statements::run_once(&statement, &[]);
    // SAFETY: the query returned `rows` rows of one text column.
    let queues: Vec<String> = (0..rows as usize).filter_map(|row| unsafe { statements::value::<String>(row, 1) }).collect();
    statements::free_result();
    invalidation::forget_when_changed("queues without history", table, || WITHOUT.with_borrow_mut(|w| *w = None));
    WITHOUT.with_borrow_mut(|w| *w = Some(queues.clone()));
    queues
}

/// Runs `run` (a complete that may delete) as the owner of the jobs table
/// beside `function`, after checking that the caller may update that table;
/// an error inside leaves it to the (sub)transaction's abort to restore the
/// caller's role, as it does for SECURITY DEFINER functions.
pub fn as_owner<T>(function: pg_sys::Oid, run: impl FnOnce() -> T) -> T {
    let jobs = privileges::jobs_of(function);
    if !privileges::may_update(jobs) {
        Refusal::new(PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE, "permission denied for table jobs")
            .detail("Completing a job updates (or, in a queue without history, deletes) its row.")
            .hint("A worker role needs rq_grant_worker.")
            .raise()
    }
    let (mut user, mut context) = (pg_sys::Oid::INVALID, 0);
    // SAFETY: backend globals read and set in this backend's own transaction;
    // the relation's owner read from its relcache entry, opened and closed
    // here under the lock the caller's statement holds anyway.
    unsafe {
        let relation = pg_sys::RelationIdGetRelation(jobs);
        let owner = (*(*relation).rd_rel).relowner;
        pg_sys::RelationClose(relation);
        pg_sys::GetUserIdAndSecContext(&mut user, &mut context);
        pg_sys::SetUserIdAndSecContext(owner, context | pg_sys::SECURITY_LOCAL_USERID_CHANGE as i32);
    }
    let result = run();
    // SAFETY: as above: back to the caller's role.
    unsafe { pg_sys::SetUserIdAndSecContext(user, context) };
    result
}
