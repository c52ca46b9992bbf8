//! A raquel worker in Rust (the `postgres` crate).
//!
//! Works one job at a time from a queue, one round trip a job: each
//! transaction does the job in hand's work, then completes it (or fails it)
//! and claims the next in one call (rq_complete_and_claim), so database-only
//! work commits exactly once, with its completion.
//! When the queue is empty its claim waits (no polling) until an enqueue
//! commits or a scheduled job falls due.
//!
//! ```sh
//! RAQUEL_DSN="host=/tmp/raquel-dev port=54320 user=postgres dbname=raquel" \
//!     cargo run --manifest-path tests/client/Cargo.toml --example worker -- emails
//! ```

use postgres::{Client, NoTls};
use std::time::{Duration, Instant};

/// The job's work. Here: refuse payloads that say so, accept the rest.
#[allow(dead_code)] // the client tests and the peers benchmark bring their own
pub fn handle(payload: Option<&str>) -> Result<(), String> {
    match payload {
        Some("fail") => Err("this payload always fails".into()),
        _ => Ok(()),
    }
}

/// Works `queue` with `handle` as each job's work until it has been idle for
/// `idle_exit` (forever if None); returns how many jobs it handled.
pub fn work(
    dsn: &str,
    queue: &str,
    worker: &str,
    idle_exit: Option<Duration>,
    mut handle: impl FnMut(Option<&str>) -> Result<(), String>,
) -> Result<usize, postgres::Error> {
    let mut client = Client::connect(dsn, NoTls)?;

    let mut handled = 0;
    let mut idle_since = Instant::now();
    // The job in hand: its id, attempt (the fencing token) and payload.
    let mut in_hand: Option<(String, i32, Option<String>)> = None;
    loop {
        // One transaction, one round trip a job: the work of the job in
        // hand, then its completion (or failure) and the claim of the next.
        // With nothing ready, the claim waits up to a second for a job to
        // be committed (or fall due) before it returns none.
        let mut tx = client.transaction()?;
        let next = match in_hand.take() {
            None => tx.query_opt(
                "SELECT id::text, attempts, payload FROM rq_complete_and_claim(NULL, NULL, ARRAY[$1], $2, wait => '1 second')",
                &[&queue, &worker],
            )?,
            Some((id, attempt, payload)) => {
                handled += 1;
                match handle(payload.as_deref()) {
                    Ok(()) => tx.query_opt(
                        "SELECT id::text, attempts, payload FROM rq_complete_and_claim($1::text::uuid, $2, ARRAY[$3], $4, \
                         wait => '1 second')",
                        &[&id, &attempt, &queue, &worker],
                    )?,
                    Err(error) => tx.query_opt(
                        "SELECT id::text, attempts, payload FROM rq_fail_and_claim($1::text::uuid, $2, NULL, $3, ARRAY[$4], $5, \
                         wait => '1 second')",
                        &[&id, &error, &attempt, &queue, &worker],
                    )?,
                }
            }
        };
        tx.commit()?;
        in_hand = next.map(|job| (job.get(0), job.get(1), job.get(2)));
        if in_hand.is_some() {
            idle_since = Instant::now();
        } else if idle_exit.is_some_and(|limit| idle_since.elapsed() >= limit) {
            return Ok(handled);
        }
    }
}

#[allow(dead_code)] // the client tests and the peers benchmark use `work` and not `main`
fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dsn = std::env::var("RAQUEL_DSN")?;
    let queue = std::env::args().nth(1).unwrap_or_else(|| "default".into());
    let worker = format!("rust-{}", std::process::id());
    work(&dsn, &queue, &worker, None, handle)?;
    Ok(())
}
