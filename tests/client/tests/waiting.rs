//! Waiting claims: `rq_claim(…, wait => …)` blocks until a job it may take is
//! committed, becomes due, or the wait ends; it honours cancel and
//! statement_timeout; and one committed job wakes one waiter.
//!
//! Times here only tell a wake-up from a timeout (a claim that returns a job
//! well before its wait ends was woken); speed is the benchmark's business.

use raquel_client_tests::{connect, fresh_db, sqlstate};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

/// Starts a waiting claim on its own connection; yields (job id or None, how long it took).
fn waiting_claim(db: &str, queues: &'static str, wait: &'static str) -> JoinHandle<(Option<String>, Duration)> {
    let db = db.to_string();
    thread::spawn(move || {
        let mut c = connect(&db);
        let started = Instant::now();
        let row = c
            .query_opt(&format!("SELECT id::text FROM rq_claim({queues}, wait => '{wait}')"), &[])
            .unwrap();
        (row.map(|r| r.get(0)), started.elapsed())
    })
}

/// Waits until `n` sessions sleep in a waiting claim.
fn wait_for_sleepers(db: &str, n: i64) {
    let mut c = connect(db);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let sleeping: i64 = c
            .query_one(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() \
                 AND wait_event_type = 'Extension' AND query LIKE '%wait =>%'",
                &[],
            )
            .unwrap()
            .get(0);
        if sleeping >= n {
            return;
        }
        assert!(Instant::now() < deadline, "{n} waiting claims did not start");
        thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_commit_wakes_a_waiting_claim() {
    let db = fresh_db("rq_it_wait_wake");
    let waiter = waiting_claim(&db, "ARRAY['q']", "20 seconds");
    wait_for_sleepers(&db, 1);
    let id: String = connect(&db).query_one("SELECT id::text FROM rq_enqueue('q', 'x')", &[]).unwrap().get(0);
    let (got, took) = waiter.join().unwrap();
    assert_eq!(got, Some(id));
    assert!(took < Duration::from_secs(10), "woken, not timed out ({took:?})");
}

#[test]
fn an_uncommitted_or_other_queues_job_does_not_end_the_wait() {
    let db = fresh_db("rq_it_wait_other");
    let waiter = waiting_claim(&db, "ARRAY['q']", "1500 ms");
    wait_for_sleepers(&db, 1);
    let mut producer = connect(&db);
    producer.batch_execute("SELECT rq_enqueue('other', 'x')").unwrap();
    let mut tx = producer.transaction().unwrap();
    tx.batch_execute("SELECT rq_enqueue('q', 'not yet')").unwrap();
    let (got, took) = waiter.join().unwrap();
    tx.rollback().unwrap();
    assert_eq!(got, None);
    assert!(took >= Duration::from_millis(1500), "waited its whole wait ({took:?})");
}

#[test]
fn a_wait_that_ends_returns_nothing() {
    let db = fresh_db("rq_it_wait_timeout");
    let (got, took) = waiting_claim(&db, "ARRAY['q']", "300 ms").join().unwrap();
    assert_eq!(got, None);
    assert!(took >= Duration::from_millis(300));
}

#[test]
fn a_job_scheduled_later_is_claimed_when_due() {
    let db = fresh_db("rq_it_wait_due");
    let id: String = connect(&db)
        .query_one("SELECT id::text FROM rq_enqueue('q', 'x', delay => '1 second')", &[])
        .unwrap()
        .get(0);
    let (got, took) = waiting_claim(&db, "NULL", "20 seconds").join().unwrap();
    assert_eq!(got, Some(id));
    assert!(took >= Duration::from_millis(900) && took < Duration::from_secs(10), "{took:?}");
}

#[test]
fn one_committed_job_goes_to_one_waiter() {
    let db = fresh_db("rq_it_wait_one");
    let waiters: Vec<_> = (0..3).map(|_| waiting_claim(&db, "ARRAY['q']", "4 seconds")).collect();
    wait_for_sleepers(&db, 3);
    let mut producer = connect(&db);
    producer.batch_execute("SELECT rq_enqueue('q', 'one')").unwrap();
    thread::sleep(Duration::from_millis(1000));
    let finished = waiters.iter().filter(|w| w.is_finished()).count();
    assert_eq!(finished, 1, "one job, one waiter back; the others still wait");
    // two more jobs in one transaction: the two others get one each
    producer.batch_execute("SELECT rq_enqueue_batch('q', ARRAY['two', 'three'])").unwrap();
    let results: Vec<_> = waiters.into_iter().map(|w| w.join().unwrap()).collect();
    let mut ids: Vec<String> = results.iter().filter_map(|(id, _)| id.clone()).collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 3, "three jobs, three waiters, no job twice: {results:?}");
    assert!(results.iter().all(|(_, took)| *took < Duration::from_secs(4)), "all woken: {results:?}");
}

#[test]
fn a_waiting_claim_can_be_cancelled_or_time_out() {
    let db = fresh_db("rq_it_wait_cancel");
    let db_w = db.clone();
    let waiter = thread::spawn(move || {
        let mut c = connect(&db_w);
        let started = Instant::now();
        let result = c.query("SELECT * FROM rq_claim(ARRAY['q'], wait => '30 seconds')", &[]);
        (sqlstate(result), started.elapsed())
    });
    wait_for_sleepers(&db, 1);
    let mut admin = connect(&db);
    admin
        .batch_execute(
            "SELECT pg_cancel_backend(pid) FROM pg_stat_activity \
             WHERE datname = current_database() AND query LIKE '%wait =>%' AND pid <> pg_backend_pid()",
        )
        .unwrap();
    let (state, took) = waiter.join().unwrap();
    assert_eq!(state, "57014", "query_canceled");
    assert!(took < Duration::from_secs(20), "{took:?}");

    let mut c = connect(&db);
    c.batch_execute("SET statement_timeout = '300ms'").unwrap();
    let started = Instant::now();
    assert_eq!(sqlstate(c.query("SELECT * FROM rq_claim(ARRAY['q'], wait => '30 seconds')", &[])), "57014");
    assert!(started.elapsed() < Duration::from_secs(20));
    // the cancelled waiters left no registration behind: a new one is woken
    c.batch_execute("RESET statement_timeout").unwrap();
    let waiter = waiting_claim(&db, "ARRAY['q']", "20 seconds");
    wait_for_sleepers(&db, 1);
    admin.batch_execute("SELECT rq_enqueue('q', 'x')").unwrap();
    let (got, took) = waiter.join().unwrap();
    assert!(got.is_some() && took < Duration::from_secs(10), "{got:?} {took:?}");
}

#[test]
fn a_waiting_claim_needs_read_committed() {
    let db = fresh_db("rq_it_wait_isolation");
    let mut c = connect(&db);
    let mut tx = c.build_transaction().isolation_level(postgres::IsolationLevel::RepeatableRead).start().unwrap();
    assert_eq!(sqlstate(tx.query("SELECT * FROM rq_claim(wait => '1 second')", &[])), "22023");
}
