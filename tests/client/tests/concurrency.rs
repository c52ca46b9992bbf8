//! Several workers on their own connections, at once: every job is handed out
//! exactly once and none is lost.

use raquel_client_tests::{check_every_index, connect, fresh_db};
use std::collections::HashSet;
use std::thread;

const JOBS: i64 = 5000;
const WORKERS: usize = 4;

fn enqueue_jobs(db: &str, queue: &str, n: i64) {
    let mut c = connect(db);
    let made: i64 = c
        .query_one(
            "SELECT count(rq_enqueue($1, i::text)) FROM generate_series(1, $2::bigint) i",
            &[&queue, &n],
        )
        .unwrap()
        .get(0);
    assert_eq!(made, n);
}

/// Runs `WORKERS` threads of `work` (given the worker's name and a connection)
/// and returns every job id each one handled.
fn run_workers(db: &str, work: fn(&str, &mut postgres::Client) -> Vec<String>) -> Vec<Vec<String>> {
    let handles: Vec<_> = (0..WORKERS)
        .map(|n| {
            let db = db.to_string();
            thread::spawn(move || work(&format!("w{n}"), &mut connect(&db)))
        })
        .collect();
    handles.into_iter().map(|h| h.join().expect("worker panicked")).collect()
}

/// Every job handed out once across the workers, and after their
/// concurrent writes every index of jobs whole (amcheck).
fn assert_each_job_once(db: &str, handled: &[Vec<String>], expected: i64) {
    let total: usize = handled.iter().map(Vec::len).sum();
    let distinct: HashSet<&String> = handled.iter().flatten().collect();
    assert_eq!(total as i64, expected, "claims across all workers");
    assert_eq!(distinct.len() as i64, expected, "no job handed out twice");
    check_every_index(&mut connect(db));
}

#[test]
fn four_workers_complete_every_job_exactly_once() {
    let db = fresh_db("rq_it_exactly_once");
    connect(&db)
        .batch_execute("CREATE TABLE done (job_id uuid PRIMARY KEY, worker text NOT NULL)")
        .unwrap();
    enqueue_jobs(&db, "work", JOBS);

    // Each job: claim, the worker's own write, complete, in one transaction.
    let handled = run_workers(&db, |name, client| {
        let mut mine = Vec::new();
        loop {
            let mut tx = client.transaction().unwrap();
            let rows = tx
                .query("SELECT id::text, attempts FROM rq_claim(ARRAY['work'], worker => $1)", &[&name])
                .unwrap();
            let Some(row) = rows.first() else { break };
            let (id, attempt): (String, i32) = (row.get(0), row.get(1));
            tx.execute("INSERT INTO done VALUES ($1::text::uuid, $2)", &[&id, &name]).unwrap();
            tx.query("SELECT rq_complete($1::text::uuid, attempt => $2)", &[&id, &attempt]).unwrap();
            tx.commit().unwrap();
            mine.push(id);
        }
        mine
    });
    assert_each_job_once(&db, &handled, JOBS);

    let mut c = connect(&db);
    // two statements: on Citus (bin/test's Citus stage) a subquery of a
    // local table cannot sit in a query of the distributed jobs table
    let row = c
        .query_one("SELECT count(*) FILTER (WHERE status = 'success'), count(*), max(attempts) FROM jobs", &[])
        .unwrap();
    let writes: i64 = c.query_one("SELECT count(*) FROM done", &[]).unwrap().get(0);
    assert_eq!(row.get::<_, i64>(0), JOBS, "every job succeeded");
    assert_eq!(row.get::<_, i64>(1), JOBS, "no job appeared or vanished");
    assert_eq!(row.get::<_, i32>(2), 1, "every job took one attempt");
    assert_eq!(writes, JOBS, "every job's own write committed once");
}

#[test]
fn four_workers_claiming_batches_get_each_job_once() {
    let db = fresh_db("rq_it_batches");
    enqueue_jobs(&db, "work", JOBS);

    // Claims commit on their own (autocommit); each batch completes in one call.
    let handled = run_workers(&db, |name, client| {
        let mut mine = Vec::new();
        loop {
            let (ids, attempts): (Vec<String>, Vec<i32>) = client
                .query("SELECT id::text, attempts FROM rq_claim(ARRAY['work'], worker => $1, batch => 50)", &[&name])
                .unwrap()
                .iter()
                .map(|r| (r.get::<_, String>(0), r.get::<_, i32>(1)))
                .unzip();
            if ids.is_empty() {
                break;
            }
            let completed: i64 = client
                .query_one("SELECT count(*) FROM rq_complete_batch($1::text[]::uuid[], $2)", &[&ids, &attempts])
                .unwrap()
                .get(0);
            assert_eq!(completed as usize, ids.len());
            mine.extend(ids);
        }
        mine
    });
    assert_each_job_once(&db, &handled, JOBS);
    let row = connect(&db)
        .query_one("SELECT count(*) FILTER (WHERE status = 'success' AND attempts = 1), count(*) FROM jobs", &[])
        .unwrap();
    assert_eq!(row.get::<_, i64>(0), JOBS, "every job completed on its one attempt");
    assert_eq!(row.get::<_, i64>(1), JOBS, "no job appeared or vanished");
}

#[test]
fn four_workers_looping_in_one_round_trip_handle_each_job_once() {
    // Each transaction does the work of the job in hand (its own write),
    // then completes it and claims the next in one call
    // (rq_complete_and_claim); every tenth job fails once instead
    // (rq_fail_and_claim), and comes back for a second attempt.
    let db = fresh_db("rq_it_one_round_trip");
    connect(&db)
        .batch_execute("CREATE TABLE done (job_id uuid, attempt int, PRIMARY KEY (job_id, attempt))")
        .unwrap();
    enqueue_jobs(&db, "work", JOBS);
    let handled = run_workers(&db, |name, client| {
        let mut mine = Vec::new();
        let mut in_hand: Option<(String, i32, String)> = None;
        loop {
            let mut tx = client.transaction().unwrap();
            let next = match &in_hand {
                None => tx.query(
                    "SELECT id::text, attempts, payload FROM rq_complete_and_claim(NULL, NULL, ARRAY['work'], $1)",
                    &[&name],
                ),
                Some((id, attempt, payload)) => {
                    tx.execute("INSERT INTO done VALUES ($1::text::uuid, $2)", &[id, attempt]).unwrap();
                    if payload.parse::<i64>().unwrap() % 10 == 0 && *attempt == 1 {
                        tx.query(
                            "SELECT id::text, attempts, payload FROM rq_fail_and_claim($1::text::uuid, $2, 'once', NULL, \
                             ARRAY['work'], $3)",
                            &[id, attempt, &name],
                        )
                    } else {
                        mine.push(id.clone());
                        tx.query(
                            "SELECT id::text, attempts, payload FROM rq_complete_and_claim($1::text::uuid, $2, ARRAY['work'], $3)",
                            &[id, attempt, &name],
                        )
                    }
                }
            }
            .unwrap();
            tx.commit().unwrap();
            in_hand = next.first().map(|r| (r.get(0), r.get(1), r.get(2)));
            if in_hand.is_none() {
                // the failed ones come back after their retry delay
                let waiting: i64 = client
                    .query_one("SELECT count(*) FROM jobs WHERE status IN ('failed', 'queued')", &[])
                    .unwrap()
                    .get(0);
                if waiting == 0 {
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
        }
        mine
    });
    assert_each_job_once(&db, &handled, JOBS);
    let mut c = connect(&db);
    let row = c.query_one("SELECT count(*) FILTER (WHERE status = 'success'), max(attempts) FROM jobs", &[]).unwrap();
    let writes: i64 = c.query_one("SELECT count(*) FROM done", &[]).unwrap().get(0);
    assert_eq!(row.get::<_, i64>(0), JOBS, "every job succeeded");
    assert_eq!(row.get::<_, i32>(1), 2, "the failed ones took a second attempt");
    assert_eq!(writes, JOBS + JOBS / 10, "every attempt's own write committed once");
}

#[test]
fn four_workers_looping_in_batches_handle_each_job_once() {
    // Each transaction does the work of the 25 jobs in hand (their own
    // writes), then completes them and claims the next 25 in one call
    // (rq_complete_batch_and_claim). Once in a while a worker hands in a
    // stale fencing token with its batch: the whole call fails, nothing of
    // the batch is completed and nothing is claimed, and the worker tries
    // again with the right tokens.
    let db = fresh_db("rq_it_batch_loop");
    connect(&db)
        .batch_execute("CREATE TABLE done (job_id uuid PRIMARY KEY, attempt int)")
        .unwrap();
    enqueue_jobs(&db, "work", JOBS);
    let handled = run_workers(&db, |name, client| {
        let mut mine = Vec::new();
        let (mut ids, mut attempts): (Vec<String>, Vec<i32>) = (Vec::new(), Vec::new());
        let mut rounds = 0;
        loop {
            rounds += 1;
            if rounds % 7 == 0 && !ids.is_empty() {
                // a stale token: refused as a whole, in a transaction of its own
                let mut wrong = attempts.clone();
                wrong[ids.len() - 1] += 1;
                let mut tx = client.transaction().unwrap();
                let refused = tx
                    .query(
                        "SELECT id FROM rq_complete_batch_and_claim($1::text[]::uuid[], $2, ARRAY['work'], $3, 25)",
                        &[&ids, &wrong, &name],
                    )
                    .expect_err("a stale token fails the batch");
                assert_eq!(refused.code().map(|c| c.code()), Some("55000"), "{refused}");
                drop(tx);
                let still: i64 = client
                    .query_one(
                        "SELECT count(*) FROM jobs WHERE id = ANY($1::text[]::uuid[]) AND status = 'claimed' AND claimed_by = $2",
                        &[&ids, &name],
                    )
                    .unwrap()
                    .get(0);
                assert_eq!(still, ids.len() as i64, "a refused batch completes none of its jobs");
            }
            let mut tx = client.transaction().unwrap();
            for (id, attempt) in ids.iter().zip(&attempts) {
                tx.execute("INSERT INTO done VALUES ($1::text::uuid, $2)", &[id, attempt]).unwrap();
            }
            let next = tx
                .query(
                    "SELECT id::text, attempts FROM rq_complete_batch_and_claim($1::text[]::uuid[], $2, ARRAY['work'], $3, 25)",
                    &[&ids, &attempts, &name],
                )
                .unwrap();
            tx.commit().unwrap();
            mine.append(&mut ids);
            attempts.clear();
            if next.is_empty() {
                break mine;
            }
            for row in next {
                ids.push(row.get(0));
                attempts.push(row.get(1));
            }
        }
    });
    assert_each_job_once(&db, &handled, JOBS);
    let mut c = connect(&db);
    let row = c
        .query_one("SELECT count(*) FILTER (WHERE status = 'success' AND attempts = 1), count(*) FROM jobs", &[])
        .unwrap();
    let writes: i64 = c.query_one("SELECT count(*) FROM done", &[]).unwrap().get(0);
    assert_eq!(row.get::<_, i64>(0), JOBS, "every job completed on its one attempt");
    assert_eq!(row.get::<_, i64>(1), JOBS, "no job appeared or vanished");
    assert_eq!(writes, JOBS, "every job's own write committed once");
}

#[test]
fn a_claim_held_by_one_connection_is_skipped_by_another() {
    let db = fresh_db("rq_it_skip_locked");
    enqueue_jobs(&db, "q", 1);
    let mut a = connect(&db);
    let mut b = connect(&db);

    // A's claim is not committed yet: B passes the locked row by.
    let mut tx = a.transaction().unwrap();
    assert_eq!(tx.query("SELECT * FROM rq_claim(ARRAY['q'])", &[]).unwrap().len(), 1);
    assert_eq!(b.query("SELECT * FROM rq_claim(ARRAY['q'])", &[]).unwrap().len(), 0);
    // A commits: the job is A's while its lease lives.
    tx.commit().unwrap();
    assert_eq!(b.query("SELECT * FROM rq_claim(ARRAY['q'])", &[]).unwrap().len(), 0);
}
