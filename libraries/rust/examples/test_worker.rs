//! A worker as an OS process of its own, for the tests that SIGKILL or
//! SIGTERM one (tests/processes.rs); not an example for users.
//!
//! `test_worker DSN QUEUE LEASE_SECS CONCURRENCY SHUTDOWN_SECS`. Each job's
//! handler prints `started <id> <attempt>` (flushed), then sleeps for the
//! payloads that say so (`hang` an hour, `slow` a minute, `mid` a second),
//! then records `(job id, attempt, worker pid)` in the table `handled` and
//! returns. Prints `stats <claimed> <completed> <handed_back>` when it stops.

use raquel_pg::Worker;
use std::io::Write;
use std::time::Duration;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() != 5 {
        return Err("usage: test_worker DSN QUEUE LEASE_SECS CONCURRENCY SHUTDOWN_SECS".into());
    }
    let (dsn, queue) = (args[0].clone(), args[1].clone());
    let lease: f64 = args[2].parse()?;
    let concurrency: usize = args[3].parse()?;
    let shutdown: f64 = args[4].parse()?;
    let stats = Worker::new(dsn)
        .handle(queue, |job| async move {
            println!("started {} {}", job.id(), job.attempt());
            std::io::stdout().flush()?;
            match job.payload() {
                Some("hang") => tokio::time::sleep(Duration::from_secs(3600)).await,
                Some("slow") => tokio::time::sleep(Duration::from_secs(60)).await,
                Some("mid") => tokio::time::sleep(Duration::from_secs(1)).await,
                _ => {}
            }
            let pid = std::process::id() as i32;
            job.client()
                .execute("INSERT INTO handled VALUES ($1, $2, $3)", &[&job.id(), &job.attempt(), &pid])
                .await?;
            Ok(())
        })
        .lease(Duration::from_secs_f64(lease))
        .concurrency(concurrency)
        .shutdown_timeout(Duration::from_secs_f64(shutdown))
        .claim_wait(Duration::from_secs(1))
        .run()
        .await?;
    println!("stats {} {} {}", stats.claimed, stats.completed, stats.handed_back);
    Ok(())
}
