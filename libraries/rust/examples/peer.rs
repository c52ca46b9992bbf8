//! raquel-pg's driver in the peers benchmark (bench/peers/README.md has the
//! protocol): `peer raquel-pg-rs COMMAND [OPTIONS]`, the database from
//! PEER_URL. Enqueueing goes through raquel_pg::enqueue / enqueue_batch;
//! `work` runs raquel_pg::Worker with concurrency W (one process) and a
//! handler that only traces and counts.

use raquel_pg::{enqueue, enqueue_batch, EnqueueOptions, Payload, Worker};
use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

fn now_us() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).expect("the clock is after 1970").as_micros() as u64
}

fn fail(message: &str) -> ! {
    eprintln!("peer raquel-pg-rs: {message}");
    std::process::exit(1)
}

fn options(args: &[String]) -> HashMap<String, String> {
    args.chunks(2)
        .map(|pair| match pair {
            [name, value] if name.starts_with("--") => (name[2..].to_string(), value.clone()),
            _ => fail(&format!("expected --option value pairs, got {pair:?}")),
        })
        .collect()
}

fn number(options: &HashMap<String, String>, name: &str, default: Option<f64>) -> f64 {
    match options.get(name) {
        Some(value) => value.parse().unwrap_or_else(|_| fail(&format!("--{name} {value}: not a number"))),
        None => default.unwrap_or_else(|| fail(&format!("--{name} is required"))),
    }
}

fn trace_file(options: &HashMap<String, String>) -> Option<Mutex<File>> {
    options.get("trace").map(|path| {
        let file = OpenOptions::new().create(true).append(true).open(path);
        Mutex::new(file.unwrap_or_else(|error| fail(&format!("opening {path}: {error}"))))
    })
}

fn trace(file: &Option<Mutex<File>>, seq: &str, at: u64) {
    if let Some(file) = file {
        let line = format!("{seq} {at}\n");
        file.lock().unwrap().write_all(line.as_bytes()).unwrap_or_else(|error| fail(&format!("tracing: {error}")));
    }
}

async fn connect(url: &str) -> tokio_postgres::Client {
    raquel_pg::connect(url).await.unwrap_or_else(|error| fail(&error.to_string()))
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (Some(system), Some(command)) = (args.first(), args.get(1)) else {
        fail("usage: peer raquel-pg-rs COMMAND [--option value]…")
    };
    if system != "raquel-pg-rs" {
        fail(&format!("unknown system {system}: this driver runs raquel-pg-rs"));
    }
    let url = std::env::var("PEER_URL").unwrap_or_else(|_| fail("PEER_URL is not set"));
    let options = options(&args[2..]);
    match command.as_str() {
        "describe" => describe(&url).await,
        "setup" => {
            connect(&url).await.batch_execute("CREATE EXTENSION IF NOT EXISTS raquel").await.unwrap_or_else(|e| fail(&e.to_string()))
        }
        "enqueue" => {
            enqueue_jobs(&url, number(&options, "jobs", None) as usize, number(&options, "batch", Some(1.0)) as usize).await
        }
        "fill" => fill(&url, number(&options, "jobs", None) as usize).await,
        "produce" => {
            produce(&url, number(&options, "rate", None), number(&options, "seconds", None), trace_file(&options)).await
        }
        "work" => work(&url, &options).await,
        other => fail(&format!("unknown command {other}")),
    }
}

/// The local queue: jobs claimed beyond the W slots, per slot (`--prefetch N`
/// sets the total instead).
const PREFETCH_PER_WORKER: usize = 16;

async fn describe(url: &str) {
    let version: String = connect(url)
        .await
        .query_one("SELECT extversion FROM pg_extension WHERE extname = 'raquel'", &[])
        .await
        .map(|row| row.get(0))
        .unwrap_or_else(|_| "not installed".into());
    println!(
        "{{\"version\": \"raquel-pg {} on raquel {version}\", \"settings\": \"raquel_pg::Worker in one process: \
         concurrency W (W handler slots on tokio tasks) and prefetch {}×W (a local queue of claimed jobs waiting \
         for a slot); one claim connection claims a batch once that many jobs have ended and sends the completions \
         in hand in the same rq_complete_batch_and_claim call; an empty queue's claim \
         waits (claim_wait 5 s), woken at the enqueue's commit; a completion waits at most 20 ms to be batched; a \
         side connection for failures and lease extensions; a finished job stays as a row with status success\"}}",
        env!("CARGO_PKG_VERSION"),
        PREFETCH_PER_WORKER
    );
}

async fn enqueue_jobs(url: &str, jobs: usize, batch: usize) {
    let client = connect(url).await;
    let options = EnqueueOptions::new();
    let started = Instant::now();
    if batch <= 1 {
        for seq in 0..jobs {
            enqueue(&client, "bench", seq.to_string(), &options).await.unwrap_or_else(|e| fail(&e.to_string()));
        }
    } else {
        for first in (0..jobs).step_by(batch) {
            let payloads: Vec<Payload> = (first..jobs.min(first + batch)).map(|seq| Payload::Text(seq.to_string())).collect();
            enqueue_batch(&client, "bench", payloads, None, &options).await.unwrap_or_else(|e| fail(&e.to_string()));
        }
    }
    println!("{{\"jobs\": {jobs}, \"seconds\": {}}}", started.elapsed().as_secs_f64());
}

async fn fill(url: &str, jobs: usize) {
    let client = connect(url).await;
    let options = EnqueueOptions::new();
    // rq_enqueue_batch takes up to 100 000 jobs a call
    for first in (0..jobs).step_by(100_000) {
        let payloads: Vec<Payload> = (first..jobs.min(first + 100_000)).map(|seq| Payload::Text(seq.to_string())).collect();
        enqueue_batch(&client, "bench", payloads, None, &options).await.unwrap_or_else(|e| fail(&e.to_string()));
    }
    println!("{{\"jobs\": {jobs}}}");
}

async fn produce(url: &str, rate: f64, seconds: f64, trace_to: Option<Mutex<File>>) {
    let client = connect(url).await;
    let options = EnqueueOptions::new();
    let jobs = (rate * seconds) as usize;
    let started = Instant::now();
    for seq in 0..jobs {
        let due = Duration::from_secs_f64(seq as f64 / rate);
        if let Some(wait) = due.checked_sub(started.elapsed()) {
            tokio::time::sleep(wait).await;
        }
        let seq = seq.to_string();
        enqueue(&client, "bench", seq.as_str(), &options).await.unwrap_or_else(|e| fail(&e.to_string()));
        trace(&trace_to, &seq, now_us());
    }
    println!("{{\"jobs\": {jobs}}}");
}

/// What the handlers share: the trace, how many jobs they handled, when the
/// first began and the last ended.
struct Tally {
    trace: Option<Mutex<File>>,
    handled: AtomicUsize,
    first_start: AtomicU64,
    last_end: AtomicU64,
}

async fn work(url: &str, options: &HashMap<String, String>) {
    let workers = number(options, "workers", Some(1.0)) as usize;
    let prefetch = number(options, "prefetch", Some((PREFETCH_PER_WORKER * workers) as f64)) as usize;
    let expect = options.get("expect").map(|_| number(options, "expect", None) as usize);
    let max_seconds = number(options, "max-seconds", Some(f64::INFINITY));
    let tally = Arc::new(Tally {
        trace: trace_file(options),
        handled: AtomicUsize::new(0),
        first_start: AtomicU64::new(0),
        last_end: AtomicU64::new(0),
    });
    let handler_tally = tally.clone();
    let worker = Worker::new(url).name(format!("bench-{}", std::process::id())).concurrency(workers).prefetch(prefetch).handle(
        "bench",
        move |job| {
            let tally = handler_tally.clone();
            async move {
                let started = now_us();
                let _ = tally.first_start.compare_exchange(0, started, Ordering::SeqCst, Ordering::SeqCst);
                trace(&tally.trace, job.payload().unwrap_or("-"), started);
                tally.last_end.fetch_max(now_us(), Ordering::SeqCst);
                tally.handled.fetch_add(1, Ordering::SeqCst);
                Ok(())
            }
        },
    );
    let running = tokio::spawn(async move {
        if let Err(error) = worker.run().await {
            fail(&format!("worker: {error}"));
        }
    });
    // Started once the claim loop's connection is waiting in, or running, its claim.
    let watcher = connect(url).await;
    loop {
        let claiming: i64 = watcher
            .query_one(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() \
                 AND query LIKE '%rq_complete_batch_and_claim%' AND pid <> pg_backend_pid()",
                &[],
            )
            .await
            .map(|row| row.get(0))
            .unwrap_or(0);
        if claiming >= 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    drop(watcher);
    println!("ready");
    std::io::stdout().flush().unwrap_or_else(|error| fail(&format!("stdout: {error}")));
    let Some(expect) = expect else {
        let _ = running.await;
        return;
    };
    loop {
        tokio::time::sleep(Duration::from_millis(5)).await;
        let first = tally.first_start.load(Ordering::SeqCst);
        let handled = tally.handled.load(Ordering::SeqCst);
        let out_of_time = first > 0 && (now_us() - first) as f64 > max_seconds * 1e6;
        if handled >= expect || out_of_time {
            let seconds = (tally.last_end.load(Ordering::SeqCst) - first) as f64 / 1e6;
            println!("{{\"jobs\": {handled}, \"seconds\": {seconds}}}");
            std::process::exit(0);
        }
    }
}
