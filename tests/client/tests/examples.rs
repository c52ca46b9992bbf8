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
