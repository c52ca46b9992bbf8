//! Durable functions through faults (sql/steps.sql, sql/waits.sql): the
//! Rust durable example (examples/durable.rs: a reservation written with
//! its step, a sleep, a wait for the order's payment event, a wait for a
//! packing child it enqueued, a shipment written with its step and the
//! job's completion) runs as worker processes
//! on a server of its own, restarted whenever one ends, while the test
//! SIGKILLs them (between steps and inside them), terminates their backends
//! and stops the server with `-m immediate`; an emitter sends every order's
//! payment, again after a lost connection. At the end every order has
//! succeeded with its result, its six steps each recorded once, one
//! reservation, one packing child that succeeded, one packing and one
//! shipment (the effect tables have no key here, so a write made twice
//! would show), and no job sleeps or waits any longer.
//! `RAQUEL_FAULT_SEED` replays a run's faults.

mod fault_load;

use fault_load::Rng;
use raquel_client_tests::cluster::{Cluster, LibraryWatch};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::{self, sleep};
use std::time::{Duration, Instant};

const PORT: u16 = 25418;
const DB: &str = "rq_durable_faults";
const ORDERS: usize = 40;
const WORKERS: usize = 4;

/// The worker processes, each restarted when it ends (killed, or exited
/// after losing its connection).
struct Workers {
    dsn: String,
    children: Vec<Child>,
    started: usize,
}

impl Workers {
    fn spawn(dsn: &str) -> Child {
        Command::new(env!("CARGO_BIN_EXE_durable-example"))
            .args(["orders", "--lease", "2", "--cool-off", "1"])
            .env("RAQUEL_DSN", dsn)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("starting the durable example")
    }

    fn start(dsn: &str) -> Workers {
        Workers {
            dsn: dsn.to_string(),
            children: (0..WORKERS).map(|_| Workers::spawn(dsn)).collect(),
            started: WORKERS,
        }
    }

    /// Restarts the workers that ended.
    fn keep_up(&mut self) {
        for child in &mut self.children {
            if child.try_wait().ok().flatten().is_some() {
                *child = Workers::spawn(&self.dsn);
                self.started += 1;
            }
        }
    }

    fn kill_one(&mut self, rng: &mut Rng) {
        let child = &mut self.children[rng.below(WORKERS)];
        let _ = child.kill(); // SIGKILL
        let _ = child.wait();
    }

    fn stop(&mut self) {
        for child in &mut self.children {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

#[test]
fn every_durable_job_ends_once_with_its_steps_through_kills_and_crashes() {
    let (mut rng, seed) = Rng::from_env();
    println!("durable faults (RAQUEL_FAULT_SEED={seed}): {ORDERS} orders, {WORKERS} worker processes");
    let _library = LibraryWatch::new();
    let cluster = Cluster::create("durable-faults", PORT, &[("raquel.worker_interval", "200ms")]);
    cluster.start();
    cluster.connect("postgres").unwrap().batch_execute(&format!("CREATE DATABASE {DB}")).unwrap();
    let mut c = cluster.connect(DB).unwrap();
    c.batch_execute(&format!(
        "CREATE EXTENSION raquel;
         CREATE TABLE reservations (order_id text, job_id uuid);
         CREATE TABLE packings (order_id text, job_id uuid);
         CREATE TABLE shipments (order_id text, amount numeric);
         SELECT rq_enqueue_batch('orders', ARRAY(SELECT 'o' || n FROM generate_series(1, {ORDERS}) n),
                                 max_retry_count => NULL, min_retry_delay => '0', backoff_base => '0')"
    ))
    .unwrap();
    drop(c);
    let dsn = format!("{} application_name=durable-example", cluster.dsn(DB));
    let mut workers = Workers::start(&dsn);

    // the payments, each emitted until one emit is seen to commit
    let emitted = Arc::new(AtomicBool::new(false));
    let emitter = {
        let (dsn, emitted) = (cluster.dsn(DB), emitted.clone());
        thread::spawn(move || {
            sleep(Duration::from_secs(3));
            let mut client: Option<postgres::Client> = None;
            let mut order = 1;
            let deadline = Instant::now() + Duration::from_secs(120);
            while order <= ORDERS && Instant::now() < deadline {
                if client.as_ref().is_none_or(|c| c.is_closed()) {
                    client = postgres::Client::connect(&dsn, postgres::NoTls).ok();
                }
                let sent = client.as_mut().is_some_and(|c| {
                    c.execute(
                        "SELECT rq_emit('paid:o' || $1::int, jsonb_build_object('amount', $1::int), keep => '1 hour')",
                        &[&(order as i32)],
                    )
                    .is_ok()
                });
                if sent {
                    order += 1;
                } else {
                    client = None;
                    sleep(Duration::from_millis(100));
                }
            }
            emitted.store(order > ORDERS, Ordering::SeqCst);
        })
    };

    // the faults, one a second, while the workers are kept up
    let mut faults = [vec!["kill"; 6], vec!["terminate"; 6], vec!["stop"]].concat();
    rng.shuffle(&mut faults);
    for fault in &faults {
        let until = Instant::now() + Duration::from_secs(1);
        while Instant::now() < until {
            workers.keep_up();
            sleep(Duration::from_millis(50));
        }
        match *fault {
            "kill" => workers.kill_one(&mut rng),
            "terminate" => {
                if let Ok(mut admin) = cluster.connect("postgres") {
                    let _ = admin.execute(
                        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity
                         WHERE application_name = 'durable-example' ORDER BY random() LIMIT 1",
                        &[],
                    );
                }
            }
            _ => {
                cluster.stop_immediate();
                sleep(Duration::from_millis(500));
                cluster.start();
            }
        }
        println!("  {fault}");
    }

    // every order shipped, the workers kept up meanwhile
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut shipped = 0;
    while Instant::now() < deadline {
        workers.keep_up();
        if let Ok(mut c) = cluster.connect(DB) {
            shipped = c
                .query_one("SELECT count(*) FROM jobs WHERE queue = 'orders' AND status = 'success'", &[])
                .map_or(0, |r| r.get::<_, i64>(0));
            if shipped == ORDERS as i64 {
                break;
            }
        }
        sleep(Duration::from_millis(200));
    }
    workers.stop();
    emitter.join().unwrap();
    println!("  {shipped} of {ORDERS} orders shipped; {} worker processes in all", workers.started);
    assert!(emitted.load(Ordering::SeqCst), "every payment was emitted");

    let mut c = cluster.checked_connection(DB);
    let row = c
        .query_one(
            "SELECT (SELECT count(*) FROM jobs WHERE status = 'success' AND result->>'shipped' = payload),
                    (SELECT count(*) FROM reservations), (SELECT count(DISTINCT order_id) FROM reservations),
                    (SELECT count(*) FROM shipments),
                    (SELECT count(*) FROM shipments s WHERE s.amount = substr(s.order_id, 2)::int),
                    (SELECT count(*) FROM (SELECT j.id FROM jobs j JOIN job_steps st ON st.job_id = j.id GROUP BY j.id
                                            HAVING string_agg(st.name, '+' ORDER BY st.name)
                                                   = 'cool-off+pack-job+packed+payment+reserve+ship') d),
                    (SELECT count(*) FROM job_waits),
                    (SELECT count(*) FROM jobs WHERE status <> 'success'),
                    (SELECT count(*) FROM jobs WHERE queue = 'orders-packing'),
                    (SELECT count(*) FROM packings), (SELECT count(DISTINCT order_id) FROM packings),
                    (SELECT count(*) FROM jobs WHERE queue = 'orders' AND result->>'box' = 'B-' || payload),
                    (SELECT count(*) FROM job_dependencies)",
            &[],
        )
        .unwrap();
    let n = ORDERS as i64;
    let got: Vec<i64> = (0..13).map(|i| row.get(i)).collect();
    assert_eq!(
        got,
        vec![n, n, n, n, n, n, 0, 0, n, n, n, n, 0],
        "(succeeded with their result, reservations, orders reserved, shipments, shipped with their payment, \
         jobs with their six steps once, waits left, jobs not succeeded, packing children, packings, orders packed, \
         orders shipped in their child's box, edges left)"
    );
}
