//! raquel's driver for the peers benchmark (bench/peers/README.md has the
//! protocol): `peer-raquel raquel COMMAND [OPTIONS]`, the database from
//! PEER_URL. Its `work` runs the Rust worker example (examples/worker.rs),
//! one thread and connection per worker, with a job's work that only traces
//! and counts; enqueueing is rq_enqueue / rq_enqueue_batch from one
//! connection.

#[path = "../../../../examples/worker.rs"]
mod worker;

use postgres::{Client, NoTls};
use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

fn now_us() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).expect("the clock is after 1970").as_micros() as u64
}

fn connect(url: &str) -> Client {
    Client::connect(url, NoTls).unwrap_or_else(|error| fail(&format!("connecting to {url}: {error}")))
}

fn fail(message: &str) -> ! {
    eprintln!("peer-raquel: {message}");
    std::process::exit(1)
}

/// `--name value` options after the command.
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

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (Some(system), Some(command)) = (args.first(), args.get(1)) else {
        fail("usage: peer-raquel raquel COMMAND [--option value]…")
    };
    if system != "raquel" {
        fail(&format!("unknown system {system}: this driver runs raquel"));
    }
    let url = std::env::var("PEER_URL").unwrap_or_else(|_| fail("PEER_URL is not set"));
    let options = options(&args[2..]);
    match command.as_str() {
        "describe" => describe(&url),
        "setup" => {
            connect(&url).batch_execute("CREATE EXTENSION IF NOT EXISTS raquel").unwrap_or_else(|e| fail(&e.to_string()))
        }
        "enqueue" => enqueue(&url, number(&options, "jobs", None) as usize, number(&options, "batch", Some(1.0)) as usize),
        "fill" => fill(&url, number(&options, "jobs", None) as usize),
        "produce" => produce(&url, number(&options, "rate", None), number(&options, "seconds", None), trace_file(&options)),
        "work" => work(&url, &options),
        other => fail(&format!("unknown command {other}")),
    }
}

fn describe(url: &str) {
    let version: String = connect(url)
        .query_one("SELECT extversion FROM pg_extension WHERE extname = 'raquel'", &[])
        .map(|row| row.get(0))
        .unwrap_or_else(|_| "not installed".into());
    println!(
        "{{\"version\": \"{version}\", \"settings\": \"examples/worker.rs: one thread and connection per worker; \
         rq_complete_and_claim (the job in hand completed and the next claimed in one call and one transaction); \
         an empty queue's claim waits (wait => 1 s), woken at the enqueue's commit; a finished job stays as a row \
         with status success\"}}"
    );
}

fn enqueue(url: &str, jobs: usize, batch: usize) {
    let mut client = connect(url);
    let started = Instant::now();
    if batch <= 1 {
        let statement = client.prepare("SELECT rq_enqueue('bench', $1)").unwrap();
        for seq in 0..jobs {
            client.query_one(&statement, &[&seq.to_string()]).unwrap_or_else(|e| fail(&e.to_string()));
        }
    } else {
        let statement = client.prepare("SELECT count(*) FROM rq_enqueue_batch('bench', $1::text[])").unwrap();
        for first in (0..jobs).step_by(batch) {
            let payloads: Vec<String> = (first..jobs.min(first + batch)).map(|seq| seq.to_string()).collect();
            client.query_one(&statement, &[&payloads]).unwrap_or_else(|e| fail(&e.to_string()));
        }
    }
    println!("{{\"jobs\": {jobs}, \"seconds\": {}}}", started.elapsed().as_secs_f64());
}

fn fill(url: &str, jobs: usize) {
    connect(url)
        .execute(
            "SELECT count(*) FROM rq_enqueue_batch('bench', ARRAY(SELECT i::text FROM generate_series(0, $1 - 1) i))",
            &[&(jobs as i32)],
        )
        .unwrap_or_else(|e| fail(&e.to_string()));
    println!("{{\"jobs\": {jobs}}}");
}

fn produce(url: &str, rate: f64, seconds: f64, trace_to: Option<Mutex<File>>) {
    let mut client = connect(url);
    let statement = client.prepare("SELECT rq_enqueue('bench', $1)").unwrap();
    let jobs = (rate * seconds) as usize;
    let started = Instant::now();
    for seq in 0..jobs {
        let due = Duration::from_secs_f64(seq as f64 / rate);
        if let Some(wait) = due.checked_sub(started.elapsed()) {
            std::thread::sleep(wait);
        }
        let seq = seq.to_string();
        client.query_one(&statement, &[&seq]).unwrap_or_else(|e| fail(&e.to_string()));
        trace(&trace_to, &seq, now_us());
    }
    println!("{{\"jobs\": {jobs}}}");
}

/// What the worker threads share: the trace, how many jobs they handled,
/// when the first began and the last ended.
struct Tally {
    trace: Option<Mutex<File>>,
    handled: AtomicUsize,
    first_start: AtomicU64,
    last_end: AtomicU64,
}

fn work(url: &str, options: &HashMap<String, String>) {
    let workers = number(options, "workers", Some(1.0)) as usize;
    let expect = options.get("expect").map(|_| number(options, "expect", None) as usize);
    let max_seconds = number(options, "max-seconds", Some(f64::INFINITY));
    let tally = Arc::new(Tally {
        trace: trace_file(options),
        handled: AtomicUsize::new(0),
        first_start: AtomicU64::new(0),
        last_end: AtomicU64::new(0),
    });
    for n in 0..workers {
        let (url, tally) = (url.to_string(), tally.clone());
        std::thread::spawn(move || {
            let handle = |payload: Option<&str>| {
                let started = now_us();
                let _ = tally.first_start.compare_exchange(0, started, Ordering::SeqCst, Ordering::SeqCst);
                trace(&tally.trace, payload.unwrap_or("-"), started);
                tally.last_end.fetch_max(now_us(), Ordering::SeqCst);
                tally.handled.fetch_add(1, Ordering::SeqCst);
                Ok(())
            };
            if let Err(error) = worker::work(&url, "bench", &format!("bench-{n}"), None, handle) {
                fail(&format!("worker {n}: {error}"));
            }
        });
    }
    // Started once every worker's connection is waiting in, or running, its claim.
    let mut watcher = connect(url);
    while watcher
        .query_one(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND query LIKE '%rq_complete_and_claim%' \
             AND pid <> pg_backend_pid()",
            &[],
        )
        .map(|row| row.get::<_, i64>(0))
        .unwrap_or(0)
        < workers as i64
    {
        std::thread::sleep(Duration::from_millis(20));
    }
    drop(watcher);
    println!("ready");
    loop {
        std::thread::sleep(Duration::from_millis(5));
        let Some(expect) = expect else { continue };
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
