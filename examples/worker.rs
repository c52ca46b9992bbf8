//! A raquel worker in Rust (the `postgres` crate).
//!
//! Works one job at a time from a queue, one round trip a job: after the job
//! in hand's work, one call (rq_complete_and_claim, its own transaction)
//! completes it (or fails it) and claims the next.
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
    // Prepared once: each job then costs one round trip for the call, with
    // no parsing or planning of the statement. A NULL id only claims.
    let complete_and_claim = client.prepare(
        "SELECT id::text, attempts, payload FROM rq_complete_and_claim($1::text::uuid, $2, ARRAY[$3], $4, wait => '1 second')",
    )?;
    let fail_and_claim = client.prepare(
        "SELECT id::text, attempts, payload FROM rq_fail_and_claim($1::text::uuid, $2, $3, NULL, ARRAY[$4], $5, \
         wait => '1 second')",
    )?;

    let mut handled = 0;
    let mut idle_since = Instant::now();
    // The job in hand: its id, attempt (the fencing token) and payload.
    let mut in_hand: Option<(String, i32, Option<String>)> = None;
    loop {
        // One round trip a job: the work of the job in hand (outside the
        // database here), then one call, its own transaction, that
        // completes (or fails) it and claims the next. With nothing ready,
        // the claim waits up to a second for a job to be committed (or fall
        // due) before it returns none. Work that writes to the database goes
        // in a transaction with the call instead, as examples/worker.py does.
        let next = match in_hand.take() {
            None => client.query_opt(&complete_and_claim, &[&None::<String>, &None::<i32>, &queue, &worker])?,
            Some((id, attempt, payload)) => {
                handled += 1;
                match handle(payload.as_deref()) {
                    Ok(()) => client.query_opt(&complete_and_claim, &[&id, &attempt, &queue, &worker])?,
                    Err(error) => client.query_opt(&fail_and_claim, &[&id, &attempt, &error, &queue, &worker])?,
                }
            }
        };
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
