//! Everything happens inside the caller's transaction.

use raquel_client_tests::{connect, fresh_db, jobs_digest, sqlstate};

#[test]
fn a_claim_and_the_callers_own_write_commit_or_roll_back_together() {
    let db = fresh_db("rq_it_claim_tx");
    let mut c = connect(&db);
    c.batch_execute("CREATE TABLE receipts (job_id uuid PRIMARY KEY, attempt integer); SELECT rq_enqueue('q', 'x')")
        .unwrap();

    // Rolled back: the claim never happened, and neither did the write.
    let mut tx = c.transaction().unwrap();
    tx.batch_execute(
        "INSERT INTO receipts SELECT id, attempts FROM rq_claim(ARRAY['q']); \
         SELECT rq_complete(job_id, attempt) FROM receipts",
    )
    .unwrap();
    tx.rollback().unwrap();
    let row = c.query_one("SELECT status, attempts, (SELECT count(*) FROM receipts) FROM jobs", &[]).unwrap();
    assert_eq!(row.get::<_, String>(0), "queued");
    assert_eq!(row.get::<_, i32>(1), 0, "a rolled-back claim used no attempt");
    assert_eq!(row.get::<_, i64>(2), 0);

    // Committed: both are there.
    let mut tx = c.transaction().unwrap();
    tx.batch_execute(
        "INSERT INTO receipts SELECT id, attempts FROM rq_claim(ARRAY['q']); \
         SELECT rq_complete(job_id, attempt) FROM receipts",
    )
    .unwrap();
    tx.commit().unwrap();
    let row = c.query_one("SELECT status, attempts, (SELECT count(*) FROM receipts) FROM jobs", &[]).unwrap();
    assert_eq!(row.get::<_, String>(0), "success");
    assert_eq!(row.get::<_, i32>(1), 1);
    assert_eq!(row.get::<_, i64>(2), 1);
}

#[test]
fn a_rolled_back_enqueue_leaves_nothing() {
    let db = fresh_db("rq_it_enqueue_tx");
    let mut producer = connect(&db);
    let mut worker = connect(&db);

    let mut tx = producer.transaction().unwrap();
    tx.query("SELECT rq_enqueue('q', 'never')", &[]).unwrap();
    tx.execute("INSERT INTO jobs (queue, payload) VALUES ('q', 'never either')", &[]).unwrap();
    // Not visible to a worker before commit…
    assert_eq!(worker.query("SELECT * FROM rq_claim(ARRAY['q'])", &[]).unwrap().len(), 0);
    tx.rollback().unwrap();
    // …and gone after the rollback.
    let n: i64 = worker.query_one("SELECT count(*) FROM jobs", &[]).unwrap().get(0);
    assert_eq!(n, 0);
    assert_eq!(worker.query("SELECT * FROM rq_claim()", &[]).unwrap().len(), 0);
}

#[test]
fn an_enqueue_is_claimable_from_another_connection_once_committed() {
    let db = fresh_db("rq_it_enqueue_commit");
    let mut producer = connect(&db);
    let mut worker = connect(&db);
    let id: String = producer.query_one("SELECT id::text FROM rq_enqueue('q', 'x')", &[]).unwrap().get(0);
    let claimed: String = worker.query_one("SELECT id::text FROM rq_claim(ARRAY['q'])", &[]).unwrap().get(0);
    assert_eq!(claimed, id);
}

#[test]
fn every_bad_input_returns_its_sqlstate_and_changes_nothing() {
    let db = fresh_db("rq_it_errors");
    let mut c = connect(&db);
    c.batch_execute(
        "SELECT rq_enqueue('q', 'queued'); \
         SELECT rq_enqueue('d', 'done'); SELECT rq_complete(id, attempts) FROM rq_claim(ARRAY['d']); \
         SELECT rq_enqueue('h', 'held'); SELECT rq_claim(ARRAY['h'])",
    )
    .unwrap();
    let queued: String = c.query_one("SELECT id::text FROM jobs WHERE payload = 'queued'", &[]).unwrap().get(0);
    let done: String = c.query_one("SELECT id::text FROM jobs WHERE payload = 'done'", &[]).unwrap().get(0);
    let held: String = c.query_one("SELECT id::text FROM jobs WHERE payload = 'held'", &[]).unwrap().get(0);
    let unknown = "00000000-0000-7000-8000-000000000000";
    let before = jobs_digest(&mut c);

    let cases: Vec<(String, &str)> = vec![
        ("SELECT rq_enqueue(NULL, 'x')".into(), "22023"),
        ("SELECT rq_enqueue('q', 'x', delay => '-1 s')".into(), "22023"),
        ("SELECT rq_enqueue('q', 'x', max_age => '-1 s')".into(), "22023"),
        ("SELECT rq_enqueue('q', 'x', max_retry_count => -2)".into(), "22023"),
        ("SELECT rq_enqueue('q', 'x', backoff_base => '1000 years')".into(), "22023"),
        ("SELECT rq_claim(ARRAY['q'], batch => 0)".into(), "22023"),
        ("SELECT rq_claim(ARRAY['q'], lease => '-1 s')".into(), "22023"),
        ("SELECT rq_claim(ARRAY[NULL::text])".into(), "22023"),
        (format!("SELECT rq_complete('{unknown}', 1)"), "P0002"),
        (format!("SELECT rq_fail('{unknown}', 1)"), "P0002"),
        (format!("SELECT rq_complete('{queued}', 0)"), "55000"),
        (format!("SELECT rq_fail('{done}', 1)"), "55000"),
        (format!("SELECT rq_complete('{held}', 7)"), "55000"),
        (format!("SELECT rq_fail('{held}', 0, 'late')"), "55000"),
        (format!("SELECT rq_complete('{held}', NULL)"), "22004"),
        (format!("SELECT rq_fail('{held}', NULL, 'late')"), "22004"),
    ];
    for (sql, expected) in &cases {
        assert_eq!(sqlstate(c.batch_execute(sql)), *expected, "{sql}");
        assert_eq!(jobs_digest(&mut c), before, "{sql} changed the table");
    }
}
