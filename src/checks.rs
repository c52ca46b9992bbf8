//! Argument checks shared by the verbs written in Rust and in SQL. Each
//! raises 22023 before anything is written, with a message that names the
//! bad value.

use crate::errors::invalid_parameter;
use pgrx::prelude::*;

/// A queue name: not null, not empty.
pub fn check_queue(queue: Option<&str>) {
    match queue {
        None => invalid_parameter(
            "queue must not be null".into(),
            Some("Name a queue, or leave the argument out for 'default'."),
        ),
        Some("") => invalid_parameter("queue must not be an empty name".into(), None),
        Some(_) => {}
    }
}

/// How many jobs one call may handle: 1 to 100000.
pub fn check_batch(batch: Option<i32>) -> i32 {
    match batch {
        Some(b) if (1..=100_000).contains(&b) => b,
        _ => invalid_parameter(
            format!("batch must be between 1 and 100000, got {}", batch.map_or("NULL".into(), |b| b.to_string())),
            None,
        ),
    }
}

/// check_batch for the duties in sql/duties.sql.
#[pg_extern(immutable, parallel_safe)]
fn rq_check_batch(batch: Option<i32>) {
    check_batch(batch);
}
