//! Errors raised from Rust. Each becomes a PostgreSQL ERROR with a SQLSTATE
//! (never a panic), so the caller's transaction is aborted and nothing changes.

use pgrx::pg_sys::panic::ErrorReport;
use pgrx::prelude::*;

/// Raises 22023 (invalid_parameter_value).
pub fn invalid_parameter(message: String, hint: Option<&str>) -> ! {
    let mut report =
        ErrorReport::new(PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE, message, function_name!());
    if let Some(hint) = hint {
        report = report.set_hint(hint);
    }
    report.report(PgLogLevel::ERROR);
    unreachable!("an ERROR report does not return")
}
