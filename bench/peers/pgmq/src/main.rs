//! peer-pgmq: the pgmq driver of the peers benchmark; bench/peers/README.md
//! defines the protocol. A crate of its own; build it from the repository
//! root with
//!
//!   cargo build --release --manifest-path bench/peers/pgmq/Cargo.toml \
//!     --target-dir target/peers/pgmq
//!
//! and run `target/peers/pgmq/release/peer-pgmq pgmq COMMAND [OPTIONS]` with
//! PEER_URL set. pgmq is used as its Rust client's README shows: the SQL is
//! installed from the scripts embedded in the crate, jobs are sent with
//! `send` / `send_batch`, workers `read` with a visibility timeout, wait with
//! `read_with_poll` when the queue is empty, and `delete` finished messages.

use pgmq::{Message, PGMQueueExt};
use serde::{Deserialize, Serialize};
use serde_json::json;
use std::collections::HashMap;
use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

type Res<T = ()> = Result<T, Box<dyn std::error::Error>>;

const QUEUE: &str = "bench";
/// Visibility timeout of a read message, as in the crate's basic example.
const VT_SECONDS: i32 = 30;
/// Batch size of `fill` (one `send_batch` call per chunk).
const FILL_CHUNK: usize = 1000;
/// The resolved pgmq crate version, from Cargo.lock (see build.rs).
const PGMQ_VERSION: &str = env!("PGMQ_VERSION");
/// The pgmq SQL version embedded in that crate (its pgmq.control).
const PGMQ_SQL_VERSION: &str = "1.11.1";

#[derive(Serialize, Deserialize)]
struct Job {
    seq: i64,
}

fn now_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_micros() as u64
}

fn die(e: impl std::fmt::Display) -> ! {
    eprintln!("peer-pgmq: {e}");
    std::process::exit(1)
}

/// `SEQ MICROS` lines appended to a file; File is unbuffered, so every line
/// is written (flushed) at once.
struct Trace(Option<Mutex<std::fs::File>>);

impl Trace {
    fn open(path: Option<&String>) -> Res<Trace> {
        let file = match path {
            Some(p) => Some(Mutex::new(
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(p)?,
            )),
            None => None,
        };
        Ok(Trace(file))
    }
    fn line(&self, seq: i64, micros: u64) {
        if let Some(f) = &self.0 {
            let line = format!("{seq} {micros}\n");
            f.lock()
                .unwrap()
                .write_all(line.as_bytes())
                .unwrap_or_else(|e| die(e));
        }
    }
}

/// A pool of `size` connections to PEER_URL, wrapped in pgmq's client.
async fn connect(size: u32) -> Res<PGMQueueExt> {
    let url = std::env::var("PEER_URL").map_err(|_| "PEER_URL is not set")?;
    let pool = sqlx::postgres::PgPoolOptions::new()
        .max_connections(size)
        .connect(&url)
        .await?;
    Ok(PGMQueueExt::new_with_pool(pool).await)
}

fn jobs(seqs: std::ops::Range<usize>) -> Vec<Job> {
    seqs.map(|s| Job { seq: s as i64 }).collect()
}

fn print(v: serde_json::Value) {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{v}")
        .and_then(|_| out.flush())
        .unwrap_or_else(|e| die(e));
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() < 2 || args[0] != "pgmq" {
        die("usage: peer-pgmq pgmq COMMAND [--option value]...");
    }
    let opts: HashMap<String, String> = args[2..]
        .chunks(2)
        .map(|kv| {
            (
                kv[0].trim_start_matches("--").to_owned(),
                kv.get(1).cloned().unwrap_or_default(),
            )
        })
        .collect();
    let num = |k: &str| -> Option<f64> {
        opts.get(k)
            .map(|v| v.parse().unwrap_or_else(|_| die(format!("bad --{k} {v}"))))
    };
    let need = |k: &str| num(k).unwrap_or_else(|| die(format!("--{k} is required")));
    let result = match args[1].as_str() {
        "describe" => {
            print(json!({"version": PGMQ_VERSION, "settings": format!(
                "pgmq crate {PGMQ_VERSION} (sqlx), pgmq SQL {PGMQ_SQL_VERSION} installed from the \
                 crate's embedded scripts; W tokio tasks, each holding one connection of an \
                 sqlx pool of W+1 for its whole life (W connections); each task loops: \
                 pgmq.read(vt={VT_SECONDS}s, qty=1), and when that finds nothing \
                 pgmq.read_with_poll with the crate's defaults (polling inside Postgres: \
                 pg_sleep every 250 ms, for at most 5 s per call; no LISTEN/NOTIFY), then the \
                 handler, then pgmq.delete (the finished message is deleted, not archived)")}));
            Ok(())
        }
        "setup" => setup().await,
        "enqueue" => enqueue(need("jobs") as usize, need("batch") as usize).await,
        "fill" => fill(need("jobs") as usize).await,
        "produce" => produce(need("rate"), need("seconds"), opts.get("trace")).await,
        "work" => {
            let max = num("max-seconds").map(|s| (s * 1e6) as u64);
            work(
                need("workers") as usize,
                num("expect").map(|n| n as usize),
                max,
                opts.get("trace"),
            )
            .await
        }
        other => die(format!("unknown command {other}")),
    };
    result.unwrap_or_else(|e| die(e));
}

async fn setup() -> Res {
    let q = connect(1).await?;
    q.install_sql_from_embedded().await?;
    q.create(QUEUE).await?;
    Ok(())
}

async fn enqueue(n: usize, batch: usize) -> Res {
    let q = connect(1).await?;
    let mut c = q.connection.acquire().await?; // the one connection, held throughout
    let start = Instant::now();
    if batch <= 1 {
        for s in 0..n {
            q.send_with_cxn(QUEUE, &Job { seq: s as i64 }, &mut *c)
                .await?;
        }
    } else {
        for from in (0..n).step_by(batch) {
            q.send_batch_with_cxn(QUEUE, &jobs(from..n.min(from + batch)), &mut *c)
                .await?;
        }
    }
    print(json!({"jobs": n, "seconds": start.elapsed().as_secs_f64()}));
    Ok(())
}

async fn fill(n: usize) -> Res {
    let q = connect(1).await?;
    for from in (0..n).step_by(FILL_CHUNK) {
        q.send_batch(QUEUE, &jobs(from..n.min(from + FILL_CHUNK)))
            .await?;
    }
    print(json!({"jobs": n}));
    Ok(())
}

async fn produce(rate: f64, seconds: f64, trace: Option<&String>) -> Res {
    let trace = Trace::open(trace)?;
    let q = connect(1).await?;
    let mut c = q.connection.acquire().await?;
    let total = (rate * seconds).round() as i64;
    let start = tokio::time::Instant::now();
    for i in 0..total {
        // Job i is due at start + i/R; sleep_until returns at once when behind.
        tokio::time::sleep_until(start + Duration::from_secs_f64(i as f64 / rate)).await;
        q.send_with_cxn(QUEUE, &Job { seq: i }, &mut *c).await?;
        trace.line(i, now_us());
    }
    print(json!({"jobs": total}));
    Ok(())
}

/// What the worker tasks share: the handler's counts and times.
struct State {
    handled: AtomicUsize,
    first_start: AtomicU64, // 0 until the first handler starts
    last_end: AtomicU64,
    expect: Option<usize>,
    done: AtomicBool,
    trace: Trace,
}

impl State {
    /// The job's work: a no-op apart from tracing and counting.
    fn handle(&self, seq: i64) {
        let start = now_us();
        let _ = self.first_start.compare_exchange(0, start, SeqCst, SeqCst);
        self.trace.line(seq, start);
        self.last_end.fetch_max(now_us(), SeqCst);
        let n = self.handled.fetch_add(1, SeqCst) + 1;
        if Some(n) == self.expect {
            self.finish();
        }
    }
    /// Prints the --expect result (once) and exits without draining.
    fn finish(&self) {
        if !self.done.swap(true, SeqCst) {
            let first = self.first_start.load(SeqCst);
            let span = self.last_end.load(SeqCst).saturating_sub(first);
            print(json!({"jobs": self.handled.load(SeqCst), "seconds": span as f64 / 1e6}));
            std::process::exit(0);
        }
    }
}

async fn work(w: usize, expect: Option<usize>, max_us: Option<u64>, trace: Option<&String>) -> Res {
    let st = Arc::new(State {
        handled: AtomicUsize::new(0),
        first_start: AtomicU64::new(0),
        last_end: AtomicU64::new(0),
        expect,
        done: AtomicBool::new(false),
        trace: Trace::open(trace)?,
    });
    let q = connect(w as u32 + 1).await?;
    for _ in 0..w {
        // Each task owns one connection, opened before `ready`.
        let mut c = q.connection.acquire().await?;
        let (q, st) = (q.clone(), st.clone());
        tokio::spawn(async move {
            let run = async {
                loop {
                    let mut msg: Option<Message<Job>> =
                        q.read_with_cxn(QUEUE, VT_SECONDS, &mut *c).await?;
                    if msg.is_none() {
                        // Queue empty: pgmq's own wait, polling inside Postgres
                        // (None, None = the crate's 5 s / 250 ms defaults).
                        msg = q
                            .read_with_poll_with_cxn(QUEUE, VT_SECONDS, None, None, &mut *c)
                            .await?;
                    }
                    if let Some(m) = msg {
                        st.handle(m.message.seq);
                        q.delete_with_cxn(QUEUE, m.msg_id, &mut *c).await?;
                    }
                }
            };
            let r: Res = run.await;
            r.unwrap_or_else(|e| die(e));
        });
    }
    if let (Some(_), Some(max_us)) = (expect, max_us) {
        // --max-seconds: stop T seconds after the first handler started.
        let st = st.clone();
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_millis(10)).await;
                let first = st.first_start.load(SeqCst);
                if first != 0 && now_us() >= first + max_us {
                    st.finish();
                }
            }
        });
    }
    println!("ready");
    std::io::stdout().flush()?;
    std::future::pending::<()>().await; // until --expect is met or SIGTERM
    Ok(())
}
