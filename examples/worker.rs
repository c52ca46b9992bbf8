//! A raquel worker in Rust (the `postgres` crate).
//!
//! Claims one job at a time from a queue and completes it in the same
//! transaction as its own work, so database-only work happens exactly once.
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
fn handle(payload: Option<&str>) -> Result<(), String> {
    match payload {
        Some("fail") => Err("this payload always fails".into()),
        _ => Ok(()),
    }
}

/// Works `queue` until it has been idle for `idle_exit` (forever if None);
/// returns how many jobs it handled.
pub fn work(dsn: &str, queue: &str, worker: &str, idle_exit: Option<Duration>) -> Result<usize, postgres::Error> {
    let mut client = Client::connect(dsn, NoTls)?;

    let mut handled = 0;
    let mut idle_since = Instant::now();
    loop {
        let mut tx = client.transaction()?;
        // With nothing ready, the claim waits up to a second for a job to be
        // committed (or fall due) before it returns none.
        let job = tx.query_opt(
            "SELECT id::text, attempts, payload FROM rq_claim(ARRAY[$1], worker => $2, wait => '1 second')",
            &[&queue, &worker],
        )?;
        if let Some(job) = job {
            let (id, attempt, payload): (String, i32, Option<String>) = (job.get(0), job.get(1), job.get(2));
            match handle(payload.as_deref()) {
                Ok(()) => tx.execute("SELECT rq_complete($1::text::uuid, attempt => $2)", &[&id, &attempt])?,
                Err(error) => tx.execute(
                    "SELECT rq_fail($1::text::uuid, $2, attempt => $3)",
                    &[&id, &error, &attempt],
                )?,
            };
            tx.commit()?;
            handled += 1;
            idle_since = Instant::now();
            continue;
        }
        tx.commit()?;
        if idle_exit.is_some_and(|limit| idle_since.elapsed() >= limit) {
            return Ok(handled);
        }
    }
}

#[allow(dead_code)] // the client tests use `work` and not `main`
fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dsn = std::env::var("RAQUEL_DSN")?;
    let queue = std::env::args().nth(1).unwrap_or_else(|| "default".into());
    let worker = format!("rust-{}", std::process::id());
    work(&dsn, &queue, &worker, None)?;
    Ok(())
}
