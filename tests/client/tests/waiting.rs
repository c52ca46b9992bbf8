//! Waiting claims: `rq_claim(…, wait => …)` blocks until a job it may take is
//! committed, becomes due, or the wait ends; it honours cancel and
//! statement_timeout; and one committed job wakes one waiter.
//!
//! Times here only tell a wake-up from a timeout (a claim that returns a job
//! well before its wait ends was woken); speed is the benchmark's business.

use raquel_client_tests::{connect, eventually, fresh_db, sqlstate, wait_for_sleepers};
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

/// A queue's first claim finds its lanes (none: the queue is empty) and
/// waits; the first job's commit must put the job in a lane before it wakes
/// the claim. Until 0.6.0 the wake-up could come first: the woken claim
/// looked at no lanes, found nothing and slept to the end of its wait (about
/// one round in forty with one queue, a CI failure of
/// `a_commit_wakes_a_waiting_claim`). Four queues' first jobs in one commit
/// widen the window between the two.
#[test]
fn a_queues_first_job_wakes_its_first_waiting_claim_every_time() {
    let db = fresh_db("rq_it_wait_first");
    let mut producer = connect(&db);
    for round in 0..20 {
        let queues: Vec<String> = (0..4).map(|q| format!("first_{round}_{q}")).collect();
        let waiters: Vec<_> = queues
            .iter()
            .map(|queue| {
                let (db, queue) = (db.clone(), queue.clone());
                thread::spawn(move || {
                    let started = Instant::now();
                    let row = connect(&db)
                        .query_opt("SELECT id::text FROM rq_claim(ARRAY[$1], wait => '5 seconds')", &[&queue])
                        .unwrap();
                    (row.map(|r| r.get::<_, String>(0)), started.elapsed())
                })
            })
            .collect();
        wait_for_sleepers(&db, 4);
        let mut tx = producer.transaction().unwrap();
        let ids: Vec<String> =
            queues.iter().map(|q| tx.query_one("SELECT id::text FROM rq_enqueue($1, 'x')", &[q]).unwrap().get(0)).collect();
        tx.commit().unwrap();
        for (waiter, id) in waiters.into_iter().zip(ids) {
            let (got, took) = waiter.join().unwrap();
            assert_eq!(got, Some(id), "round {round}");
            assert!(took < Duration::from_secs(4), "round {round}: woken at the commit, not at the end of the wait ({took:?})");
        }
    }
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
    let waiters: Vec<_> = (0..3).map(|_| waiting_claim(&db, "ARRAY['q']", "12 seconds")).collect();
    wait_for_sleepers(&db, 3);
    let mut producer = connect(&db);
    producer.batch_execute("SELECT rq_enqueue('q', 'one')").unwrap();
    // the first back (within seconds under load: a fresh clone's run, with
    // three builds beside it, took longer than one), then a while for
    // another one that was woken wrongly to come back too
    let finished = || waiters.iter().filter(|w| w.is_finished()).count();
    assert!(eventually(6, || finished() > 0), "a waiter back for the job");
    thread::sleep(Duration::from_millis(500));
    assert_eq!(finished(), 1, "one job, one waiter back; the others still wait");
    // two more jobs in one transaction: the two others get one each
    producer.batch_execute("SELECT rq_enqueue_batch('q', ARRAY['two', 'three'])").unwrap();
    let results: Vec<_> = waiters.into_iter().map(|w| w.join().unwrap()).collect();
    let mut ids: Vec<String> = results.iter().filter_map(|(id, _)| id.clone()).collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 3, "three jobs, three waiters, no job twice: {results:?}");
    assert!(results.iter().all(|(_, took)| *took < Duration::from_secs(12)), "all woken: {results:?}");
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

#[test]
fn a_rescheduled_job_wakes_a_waiting_claim_when_it_is_due() {
    // 0.1.0 woke waiters for enqueues, rejects and retries only: a job
    // rescheduled while a claim slept stayed unclaimed until the wait ended.
    let db = fresh_db("rq_it_wait_reschedule");
    let mut worker = connect(&db);
    let id: String = worker.query_one("SELECT id::text FROM rq_enqueue('q', 'x')", &[]).unwrap().get(0);
    let attempt: i32 = worker.query_one("SELECT attempts FROM rq_claim(ARRAY['q'])", &[]).unwrap().get(0);
    let waiter = waiting_claim(&db, "ARRAY['q']", "20 seconds");
    wait_for_sleepers(&db, 1);
    worker
        .batch_execute(&format!("SELECT rq_reschedule('{id}', {attempt}, delay => '500 ms')"))
        .unwrap();
    let (got, took) = waiter.join().unwrap();
    assert_eq!(got, Some(id));
    assert!(took < Duration::from_secs(10), "woken when the job was due, not at the end of the wait ({took:?})");
}

#[test]
fn a_job_failed_for_a_retry_wakes_a_waiting_claim_when_it_is_due() {
    let db = fresh_db("rq_it_wait_retry_due");
    let mut worker = connect(&db);
    let id: String = worker
        .query_one("SELECT id::text FROM rq_enqueue('q', 'x', min_retry_delay => '300 ms', backoff_base => '300 ms')", &[])
        .unwrap()
        .get(0);
    let attempt: i32 = worker.query_one("SELECT attempts FROM rq_claim(ARRAY['q'])", &[]).unwrap().get(0);
    let waiter = waiting_claim(&db, "ARRAY['q']", "20 seconds");
    wait_for_sleepers(&db, 1);
    worker.batch_execute(&format!("SELECT rq_fail('{id}', {attempt}, 'try again')")).unwrap();
    let (got, took) = waiter.join().unwrap();
    assert_eq!(got, Some(id));
    assert!(took < Duration::from_secs(10), "woken for the retry ({took:?})");
}

#[test]
fn a_wake_up_reaches_a_waiter_of_the_queue_past_waiters_on_many_other_queues() {
    // 0.1.0 treated a waiter on more than eight queues as one on any queue:
    // it took other queues' wake-ups, and the job waited for the next look.
    let db = fresh_db("rq_it_wait_many_queues");
    let many = |first: usize| -> &'static str {
        let names: Vec<String> = (first..first + 20).map(|n| format!("'m{n}'")).collect();
        Box::leak(format!("ARRAY[{}]", names.join(", ")).into_boxed_str())
    };
    // three waiters on twenty queues each, none of them 'x' ...
    let others: Vec<_> = (0..3).map(|i| waiting_claim(&db, many(i * 20), "4 seconds")).collect();
    wait_for_sleepers(&db, 3);
    // ... and one on twenty queues that include 'x'
    let names: Vec<String> = (100..119).map(|n| format!("'m{n}'")).chain(["'x'".to_string()]).collect();
    let wanted = waiting_claim(&db, Box::leak(format!("ARRAY[{}]", names.join(", ")).into_boxed_str()), "20 seconds");
    wait_for_sleepers(&db, 4);
    let id: String = connect(&db).query_one("SELECT id::text FROM rq_enqueue('x', 'for x')", &[]).unwrap().get(0);
    let (got, took) = wanted.join().unwrap();
    assert_eq!(got, Some(id));
    assert!(took < Duration::from_secs(3), "the wake-up was passed on at once ({took:?})");
    for other in others {
        assert_eq!(other.join().unwrap().0, None, "a waiter on other queues took nothing");
    }
}

#[test]
fn drop_extension_does_not_wait_for_sleeping_claims() {
    let db = fresh_db("rq_it_wait_drop");
    let waiter = waiting_claim(&db, "ARRAY['q']", "60 seconds");
    wait_for_sleepers(&db, 1);
    let started = Instant::now();
    connect(&db).batch_execute("DROP EXTENSION raquel").unwrap();
    assert!(started.elapsed() < Duration::from_secs(5), "DROP EXTENSION waited {:?}", started.elapsed());
    let (got, took) = waiter.join().unwrap();
    assert_eq!(got, None);
    assert!(took < Duration::from_secs(10), "the wait ended early, with nothing ({took:?})");
}

#[test]
fn a_waiting_claim_whose_client_is_killed_ends_and_takes_no_job() {
    // A worker killed (SIGKILL) while its claim waits: the backend notices
    // the closed socket at once and ends, instead of taking the next job for
    // a client that is gone (held until its lease lapsed, an attempt used).
    let db = fresh_db("rq_it_waiting_gone");
    let mut c = connect(&db);
    let mut client = std::process::Command::new("psql")
        .args(["-X", "-q", "-d", &format!("{} dbname={db} application_name=rq_gone_client", raquel_client_tests::server_dsn())])
        .args(["-c", "SELECT id FROM rq_claim(ARRAY['gone'], wait => '60 seconds')"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("psql runs");
    let backend = || -> Option<i32> {
        connect(&db)
            .query_opt("SELECT pid FROM pg_stat_activity WHERE application_name = 'rq_gone_client' AND state = 'active'", &[])
            .unwrap()
            .map(|r| r.get(0))
    };
    assert!(eventually(10, || backend().is_some()), "the claim waits");
    client.kill().unwrap();
    client.wait().unwrap();
    assert!(eventually(5, || backend().is_none()), "its backend ends once its client is gone, well before its wait would");
    let id: String = c.query_one("SELECT id::text FROM rq_enqueue('gone', 'x')", &[]).unwrap().get(0);
    thread::sleep(Duration::from_millis(500));
    let (status, attempts): (String, i32) = {
        let row = c.query_one("SELECT status, attempts FROM jobs WHERE id = $1::text::uuid", &[&id]).unwrap();
        (row.get(0), row.get(1))
    };
    assert_eq!((status.as_str(), attempts), ("queued", 0), "no claim took the job for the dead client");
}
