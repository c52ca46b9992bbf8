//! The worker examples in examples/, run against the real server: each works
//! a queue to the end, completing good jobs and failing bad ones.

#[path = "../../../examples/worker.rs"]
mod worker;

use raquel_client_tests::{connect, fresh_db, server_dsn};
use std::process::Command;
use std::time::Duration;

/// 100 jobs to complete and 5 that fail with no retry.
fn fill_queue(db: &str) {
    connect(db)
        .batch_execute(
            "SELECT rq_enqueue_batch('work', ARRAY(SELECT 'job ' || i FROM generate_series(1, 100) i)); \
             SELECT rq_enqueue_batch('work', array_fill('fail'::text, ARRAY[5]), max_retry_count => 0)",
        )
        .unwrap();
}

fn assert_queue_worked(db: &str, worker: &str) {
    let row = connect(db)
        .query_one(
            "SELECT count(*) FILTER (WHERE status = 'success' AND attempts = 1), \
                    count(*) FILTER (WHERE status = 'exhausted' AND error = 'this payload always fails'), \
                    count(*) FILTER (WHERE claimed_by = $1), count(*) \
             FROM jobs",
            &[&worker],
        )
        .unwrap();
    assert_eq!(row.get::<_, i64>(0), 100, "good jobs completed once");
    assert_eq!(row.get::<_, i64>(1), 5, "bad jobs failed with the handler's error");
    assert_eq!(row.get::<_, i64>(2), 105, "all by this worker");
    assert_eq!(row.get::<_, i64>(3), 105);
}

#[test]
fn the_rust_worker_example_works_a_queue() {
    let db = fresh_db("rq_it_example_rust");
    fill_queue(&db);
    let dsn = format!("{} dbname={db}", server_dsn());
    let handled = worker::work(&dsn, "work", "rust-example", Some(Duration::from_secs(2)), worker::handle).unwrap();
    assert_eq!(handled, 105);
    assert_queue_worked(&db, "rust-example");
}

#[test]
fn the_python_worker_example_works_a_queue() {
    let python = std::env::var("RAQUEL_TEST_PYTHON")
        .expect("RAQUEL_TEST_PYTHON is not set: run the tests through bin/test, which installs psycopg");
    let db = fresh_db("rq_it_example_python");
    fill_queue(&db);
    let example = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/worker.py");
    let status = Command::new(python)
        .args([example, "work", "--worker", "python-example", "--idle-exit", "2"])
        .env("RAQUEL_DSN", format!("{} dbname={db}", server_dsn()))
        .status()
        .expect("running the Python example");
    assert!(status.success(), "the Python example exited with {status}");
    assert_queue_worked(&db, "python-example");
}

#[test]
fn the_node_worker_example_works_a_queue() {
    // bin/test installs the example's one dependency (node-postgres, pinned
    // in examples/node/package-lock.json) with npm ci.
    let example = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/node/worker.mjs");
    let modules = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/node/node_modules/pg");
    assert!(
        std::path::Path::new(modules).exists(),
        "examples/node/node_modules is missing: run the tests through bin/test, which runs npm ci there"
    );
    let db = fresh_db("rq_it_example_node");
    fill_queue(&db);
    // The example reads libpq's environment variables, as node-postgres does.
    let mut command = Command::new("node");
    command.args([example, "work", "--worker", "node-example", "--idle-exit", "2"]).env("PGDATABASE", &db);
    for pair in server_dsn().split_whitespace() {
        match pair.split_once('=') {
            Some(("host", v)) => command.env("PGHOST", v),
            Some(("port", v)) => command.env("PGPORT", v),
            Some(("user", v)) => command.env("PGUSER", v),
            _ => &mut command,
        };
    }
    let status = command.status().expect("running the Node example (is node installed?)");
    assert!(status.success(), "the Node example exited with {status}");
    assert_queue_worked(&db, "node-example");
}

/// Three orders for a durable example, run by `worker()` (a fresh process
/// each call): the first worker is SIGKILLed right after it printed its
/// first step done, the second too (or, when every order is reserved
/// already, as it waits), and a third takes over; once every
/// order is parked for its payment the test emits the payments. Every order
/// ends once: one reservation, one shipment with its amount, each of its
/// four steps recorded once, its result stored, no wait left.
fn durable_example_survives_kills_between_steps(db: &str, mut worker: impl FnMut() -> Command) {
    use std::io::{BufRead, BufReader};
    use std::process::Stdio;
    use std::sync::mpsc;
    use std::time::Instant;

    let mut c = connect(db);
    // the effect tables without keys (the example makes them with keys when
    // missing): a write made twice would show as a second row
    c.batch_execute(
        "CREATE TABLE reservations (order_id text, job_id uuid); CREATE TABLE shipments (order_id text, amount numeric); \
         SELECT rq_enqueue_batch('orders', ARRAY['o1', 'o2', 'o3'], min_retry_delay => '0', backoff_base => '0')",
    )
    .unwrap();
    let started = |worker: &mut dyn FnMut() -> Command| {
        let mut child = worker().stdout(Stdio::piped()).spawn().expect("starting the durable example");
        let (lines, seen) = mpsc::channel();
        let stdout = child.stdout.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let _ = lines.send(line);
            }
        });
        (child, seen)
    };
    let mut killed = Vec::new();
    for _ in 0..2 {
        let (mut child, seen) = started(&mut worker);
        // A line: a step just done. A worker fast enough (or a test thread
        // slow enough) may have done every order's first step before the
        // last kill landed: the next worker then has no step to do until
        // the payments come, and is killed as it waits (a fresh clone's
        // run once waited 30 s for a line that could not come).
        let deadline = Instant::now() + Duration::from_secs(30);
        let line = loop {
            match seen.recv_timeout(Duration::from_millis(200)) {
                Ok(line) => break line,
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    panic!("the durable example ended before a step: {:?}", child.wait())
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {}
            }
            let reserved: bool = c.query_one("SELECT count(*) = 3 FROM job_steps WHERE name = 'reserve'", &[]).unwrap().get(0);
            if reserved {
                break "(every order reserved before it started: killed as it waited)".to_string();
            }
            if Instant::now() > deadline {
                let jobs: Vec<String> = c
                    .query("SELECT format('%s %s attempt %s, due in %s ms, lease %s ms', payload, status, attempts, \
                            scheduled_at - rq_now_ms(), lease_expires_at - rq_now_ms()) FROM jobs ORDER BY payload", &[])
                    .unwrap()
                    .iter()
                    .map(|r| r.get(0))
                    .collect();
                let sessions: Vec<String> = c
                    .query("SELECT format('%s %s %s: %s', pid, state, wait_event, left(query, 120)) FROM pg_stat_activity \
                            WHERE datname = current_database() AND pid <> pg_backend_pid()", &[])
                    .unwrap()
                    .iter()
                    .map(|r| r.get(0))
                    .collect();
                panic!("no step done within 30 s before kill {} (killed after: {killed:?}); jobs: {jobs:?}; sessions: {sessions:?}", killed.len() + 1)
            }
        };
        child.kill().unwrap(); // SIGKILL: between this step and the next
        child.wait().unwrap();
        killed.push(line);
    }
    let (mut last, _seen) = started(&mut worker);
    let until = |c: &mut postgres::Client, sql: &str, what: &str| {
        let deadline = Instant::now() + Duration::from_secs(60);
        while !c.query_one(sql, &[]).unwrap().get::<_, bool>(0) {
            assert!(Instant::now() < deadline, "{what} within 60 s (killed after: {killed:?})");
            std::thread::sleep(Duration::from_millis(100));
        }
    };
    until(&mut c, "SELECT count(*) = 3 FROM job_waits", "every order parked for its payment");
    for (order, amount) in [("o1", 10), ("o2", 20), ("o3", 30)] {
        c.execute("SELECT rq_emit('paid:' || $1::text, jsonb_build_object('amount', $2::int))", &[&order, &amount]).unwrap();
    }
    until(&mut c, "SELECT count(*) FILTER (WHERE status = 'success') = 3 FROM jobs WHERE queue = 'orders'", "every order shipped");
    last.kill().unwrap();
    last.wait().unwrap();
    let row = c
        .query_one(
            "SELECT (SELECT string_agg(order_id, ',' ORDER BY order_id) FROM reservations),
                    (SELECT string_agg(order_id || '=' || amount, ',' ORDER BY order_id) FROM shipments),
                    (SELECT string_agg(s, ',' ORDER BY s) FROM (
                        SELECT j.payload || ':' || string_agg(st.name, '+' ORDER BY st.name) AS s
                        FROM jobs j JOIN job_steps st ON st.job_id = j.id GROUP BY j.payload) steps),
                    (SELECT string_agg(result->>'shipped', ',' ORDER BY payload) FROM jobs),
                    (SELECT count(*) FROM job_waits),
                    (SELECT string_agg(order_id, ',' ORDER BY order_id) FROM packings),
                    (SELECT string_agg(payload || '=' || (result->>'box'), ',' ORDER BY payload) FROM jobs WHERE queue = 'orders')",
            &[],
        )
        .unwrap();
    assert_eq!(row.get::<_, String>(0), "o1,o2,o3", "one reservation an order");
    assert_eq!(row.get::<_, String>(1), "o1=10,o2=20,o3=30", "one shipment an order, with its payment");
    assert_eq!(
        row.get::<_, String>(2),
        "o1:cool-off+pack-job+packed+payment+reserve+ship,o2:cool-off+pack-job+packed+payment+reserve+ship,\
         o3:cool-off+pack-job+packed+payment+reserve+ship",
        "each step recorded once"
    );
    assert_eq!(row.get::<_, String>(3), "o1,o2,o3", "the results");
    assert_eq!(row.get::<_, i64>(4), 0, "no wait left");
    assert_eq!(row.get::<_, String>(5), "o1,o2,o3", "one packing an order, by the child it waited for");
    assert_eq!(row.get::<_, String>(6), "o1=B-o1,o2=B-o2,o3=B-o3", "each order shipped in its child's box");
}

#[test]
fn the_rust_durable_example_survives_its_worker_killed_between_steps() {
    let db = fresh_db("rq_it_durable_rust");
    let dsn = format!("{} dbname={db}", server_dsn());
    durable_example_survives_kills_between_steps(&db, || {
        let mut command = Command::new(env!("CARGO_BIN_EXE_durable-example"));
        command.args(["orders", "--lease", "2", "--cool-off", "1"]).env("RAQUEL_DSN", &dsn);
        command
    });
}

#[test]
fn the_python_durable_example_survives_its_worker_killed_between_steps() {
    let python = std::env::var("RAQUEL_TEST_PYTHON")
        .expect("RAQUEL_TEST_PYTHON is not set: run the tests through bin/test, which installs psycopg");
    let db = fresh_db("rq_it_durable_python");
    let dsn = format!("{} dbname={db}", server_dsn());
    let example = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/durable.py");
    durable_example_survives_kills_between_steps(&db, || {
        let mut command = Command::new(&python);
        command.args([example, "orders", "--lease", "2", "--cool-off", "1"]).env("RAQUEL_DSN", &dsn);
        command
    });
}
