//! Job ids.

use pgrx::prelude::*;

/// A new time-ordered UUID (version 7). Ids made one after the other land
/// next to each other in the primary key, so enqueueing touches the right edge
/// of the index instead of random pages, as a version-4 id would.
#[pg_extern(schema = "raquel_internal", volatile, parallel_safe)]
fn rq_uuid7() -> pgrx::Uuid {
    new_id()
}

/// A new job id (rq_uuid7, the jobs table's default; src/direct.rs makes
/// its rows' ids here too).
pub fn new_id() -> pgrx::Uuid {
    pgrx::Uuid::from_bytes(*uuid::Uuid::now_v7().as_bytes())
}
