//! Jobs taken for a transaction (rq_take, src/take.rs), across real
//! sessions: every job is done exactly once by four workers taking at once
//! (one at a time, in batches, and taken and completed in one statement); a
//! worker whose session dies mid-job leaves the job ready, with no attempt
//! counted and none of its work; a taken job is fenced (a wrong token, or
//! another session, cannot finish it); a savepoint rolled back forgets what
//! it took; a commit lets go of what it did not finish; a queue with flow
//! settings is refused.

use raquel_client_tests::{connect, eventually, fresh_db, sqlstate};
use std::collections::HashSet;
use std::thread;

const JOBS: i64 = 2000;
const WORKERS: usize = 4;

fn enqueue_jobs(c: &mut postgres::Client, queue: &str, n: i64) {
    let made: i64 = c
        .query_one("SELECT count(rq_enqueue($1, i::text)) FROM generate_series(1, $2::bigint) i", &[&queue, &n])
        .unwrap()
        .get(0);
    assert_eq!(made, n);
}

fn one<T: for<'a> postgres::types::FromSql<'a>>(c: &mut postgres::Client, sql: &str) -> T {
    c.query_one(sql, &[]).unwrap().get(0)
}

/// Four workers, each running `work` on its own connection until it returns
/// nothing; every job id each one did.
fn run_workers(db: &str, work: fn(&str, &mut postgres::Client) -> Vec<String>) -> Vec<String> {
    let handles: Vec<_> = (0..WORKERS)
        .map(|n| {
            let db = db.to_string();
            thread::spawn(move || {
                let mut client = connect(&db);
                let mut mine = Vec::new();
                loop {
                    let done = work(&format!("w{n}"), &mut client);
                    if done.is_empty() {
                        break mine;
                    }
                    mine.extend(done);
                }
            })
        })
        .collect();
    handles.into_iter().flat_map(|h| h.join().expect("worker panicked")).collect()
}

/// Every job of the table succeeded in one attempt, each id was done once,
/// and each job's inside work committed once.
fn assert_each_job_done_once(c: &mut postgres::Client, done: &[String]) {
    let distinct: HashSet<&String> = done.iter().collect();
    assert_eq!(done.len() as i64, JOBS, "jobs done across all workers");
    assert_eq!(distinct.len() as i64, JOBS, "no job done twice");
    let row = c
        .query_one("SELECT count(*) FILTER (WHERE status = 'success'), count(*), min(attempts), max(attempts) FROM jobs", &[])
        .unwrap();
    assert_eq!(row.get::<_, i64>(0), JOBS, "every job succeeded");
    assert_eq!(row.get::<_, i64>(1), JOBS, "no job appeared or vanished");
    assert_eq!((row.get::<_, i32>(2), row.get::<_, i32>(3)), (1, 1), "every job took one attempt");
    let inside: i64 = one(c, "SELECT count(*) FROM done");
    assert_eq!(inside, JOBS, "every job's own write committed once");
}

fn fresh_db_with_jobs(name: &str) -> String {
    let db = fresh_db(name);
    let mut c = connect(&db);
    c.batch_execute("CREATE TABLE done (job_id uuid PRIMARY KEY, attempt integer NOT NULL)").unwrap();
    enqueue_jobs(&mut c, "work", JOBS);
    db
}

#[test]
fn four_workers_taking_jobs_do_each_exactly_once() {
    let db = fresh_db_with_jobs("rq_it_take_once");
    // take one, its own write, complete, commit: one write of the job
    let done = run_workers(&db, |name, c| {
        let mut tx = c.transaction().unwrap();
        let rows = tx.query("SELECT id::text, attempts FROM rq_take(ARRAY['work'], worker => $1)", &[&name]).unwrap();
        let Some(row) = rows.first() else { return Vec::new() };
        let (id, attempt): (String, i32) = (row.get(0), row.get(1));
        tx.execute("INSERT INTO done VALUES ($1::text::uuid, $2)", &[&id, &attempt]).unwrap();
        tx.query("SELECT rq_complete($1::text::uuid, attempt => $2)", &[&id, &attempt]).unwrap();
        tx.commit().unwrap();
        vec![id]
    });
    assert_each_job_done_once(&mut connect(&db), &done);
}

#[test]
fn four_workers_taking_batches_do_each_exactly_once() {
    let db = fresh_db_with_jobs("rq_it_take_batches");
    let done = run_workers(&db, |name, c| {
        let mut tx = c.transaction().unwrap();
        let (ids, attempts): (Vec<String>, Vec<i32>) = tx
            .query("SELECT id::text, attempts FROM rq_take(ARRAY['work'], worker => $1, batch => 25)", &[&name])
            .unwrap()
            .iter()
            .map(|r| (r.get::<_, String>(0), r.get::<_, i32>(1)))
            .unzip();
        if ids.is_empty() {
            return ids;
        }
        tx.execute("INSERT INTO done SELECT unnest($1::text[]::uuid[]), 1", &[&ids]).unwrap();
        let completed: i64 = tx
            .query_one("SELECT count(*) FROM rq_complete_batch($1::text[]::uuid[], $2)", &[&ids, &attempts])
            .unwrap()
            .get(0);
        assert_eq!(completed as usize, ids.len());
        tx.commit().unwrap();
        ids
    });
    assert_each_job_done_once(&mut connect(&db), &done);
}

#[test]
fn four_workers_taking_and_completing_in_one_statement_do_each_exactly_once() {
    let db = fresh_db_with_jobs("rq_it_take_complete");
    let done = run_workers(&db, |name, c| {
        let mut tx = c.transaction().unwrap();
        let rows = tx
            .query("SELECT id::text, status FROM rq_take(ARRAY['work'], worker => $1, batch => 3, complete => true)", &[&name])
            .unwrap();
        let ids: Vec<String> = rows.iter().map(|r| r.get(0)).collect();
        assert!(rows.iter().all(|r| r.get::<_, String>(1) == "success"));
        if !ids.is_empty() {
            tx.execute("INSERT INTO done SELECT unnest($1::text[]::uuid[]), 1", &[&ids]).unwrap();
        }
        tx.commit().unwrap();
        ids
    });
    assert_each_job_done_once(&mut connect(&db), &done);
}

#[test]
fn four_workers_in_a_queue_without_history_delete_each_job_once() {
    // Half the workers take and complete in one statement, half claim
    // batches and complete them: every job is done once, each success
    // deletes its row, and the metrics count them all.
    let db = fresh_db_with_jobs("rq_it_take_no_history");
    connect(&db).batch_execute("SELECT rq_set_history('work', false)").unwrap();
    let done = run_workers(&db, |name, c| {
        let mut tx = c.transaction().unwrap();
        let ids: Vec<String> = if name.ends_with(['0', '2']) {
            let rows = tx
                .query("SELECT id::text, status FROM rq_take(ARRAY['work'], worker => $1, batch => 3, complete => true)", &[&name])
                .unwrap();
            assert!(rows.iter().all(|r| r.get::<_, String>(1) == "success"));
            rows.iter().map(|r| r.get(0)).collect()
        } else {
            let (ids, attempts): (Vec<String>, Vec<i32>) = tx
                .query("SELECT id::text, attempts FROM rq_claim(ARRAY['work'], worker => $1, batch => 5)", &[&name])
                .unwrap()
                .iter()
                .map(|r| (r.get::<_, String>(0), r.get::<_, i32>(1)))
                .unzip();
            if !ids.is_empty() {
                let statuses: Vec<String> = tx
                    .query("SELECT status FROM rq_complete_batch($1::text[]::uuid[], $2)", &[&ids, &attempts])
                    .unwrap()
                    .iter()
                    .map(|r| r.get(0))
                    .collect();
                assert!(statuses.len() == ids.len() && statuses.iter().all(|s| s == "success"));
            }
            ids
        };
        if !ids.is_empty() {
            tx.execute("INSERT INTO done SELECT unnest($1::text[]::uuid[]), 1", &[&ids]).unwrap();
        }
        tx.commit().unwrap();
        ids
    });
    let mut c = connect(&db);
    let distinct: HashSet<&String> = done.iter().collect();
    assert_eq!(done.len() as i64, JOBS, "jobs done across all workers");
    assert_eq!(distinct.len() as i64, JOBS, "no job done twice");
    assert_eq!(one::<i64>(&mut c, "SELECT count(*) FROM done"), JOBS, "every job's own write committed once");
    assert_eq!(one::<i64>(&mut c, "SELECT count(*) FROM jobs"), 0, "every success deleted its row");
    let counted = eventually(10, || {
        one::<i64>(&mut c, "SELECT raquel_internal.rq_record_metrics()");
        one::<Option<i64>>(&mut c, "SELECT sum(succeeded)::bigint FROM rq_metrics('work', '1 hour')") == Some(JOBS)
    });
    assert!(counted, "the metrics count every success");
}

#[test]
fn a_worker_that_dies_mid_job_leaves_it_ready_with_nothing_of_its_work() {
    let db = fresh_db("rq_it_take_crash");
    let mut c = connect(&db);
    c.batch_execute("CREATE TABLE done (job_id uuid PRIMARY KEY, attempt integer NOT NULL)").unwrap();
    enqueue_jobs(&mut c, "work", 1);
    let mut dying = connect(&db);
    let pid: i32 = one(&mut dying, "SELECT pg_backend_pid()");
    dying.batch_execute("BEGIN").unwrap();
    let id: String = dying.query_one("SELECT id::text FROM rq_take(ARRAY['work'], 'dying')", &[]).unwrap().get(0);
    dying.execute("INSERT INTO done VALUES ($1::text::uuid, 1)", &[&id]).unwrap();
    // while it works: the job is still as it was, and no other taker gets it
    let (status, attempts): (String, i32) =
        c.query_one("SELECT status, attempts FROM jobs WHERE id = $1::text::uuid", &[&id]).map(|r| (r.get(0), r.get(1))).unwrap();
    assert_eq!((status.as_str(), attempts), ("queued", 0), "a taken job is not written");
    assert!(c.query("SELECT id FROM rq_take(ARRAY['work'])", &[]).unwrap().is_empty(), "locked: skipped");
    c.query_one("SELECT pg_terminate_backend($1)", &[&pid]).unwrap();
    drop(dying);
    // at once (no lease to run out), ready again: taken and completed by another
    let taken = eventually(10, || !c.query("SELECT id FROM rq_take(ARRAY['work'], 'heir')", &[]).unwrap().is_empty());
    assert!(taken, "the job is ready again once its taker's session ends");
    let inside: i64 = one(&mut c, "SELECT count(*) FROM done");
    assert_eq!(inside, 0, "the dead worker's own write rolled back with it");
    c.batch_execute("BEGIN").unwrap();
    let (again, attempt): (String, i32) =
        c.query_one("SELECT id::text, attempts FROM rq_take(ARRAY['work'], 'heir')", &[]).map(|r| (r.get(0), r.get(1))).unwrap();
    assert_eq!((again.as_str(), attempt), (id.as_str(), 1), "no attempt was counted for the rolled-back take");
    c.query_one("SELECT rq_complete($1::text::uuid, $2)", &[&again, &attempt]).unwrap();
    c.batch_execute("COMMIT").unwrap();
    let status: String = c.query_one("SELECT status FROM jobs WHERE id = $1::text::uuid", &[&id]).unwrap().get(0);
    assert_eq!(status, "success");
}

#[test]
fn a_taken_job_is_fenced_and_ends_with_its_transaction() {
    let db = fresh_db("rq_it_take_fence");
    let mut c = connect(&db);
    enqueue_jobs(&mut c, "work", 3);
    let mut other = connect(&db);
    c.batch_execute("BEGIN").unwrap();
    let (id, attempt): (String, i32) =
        c.query_one("SELECT id::text, attempts FROM rq_take(ARRAY['work'], 'w')", &[]).map(|r| (r.get(0), r.get(1))).unwrap();
    // another session can neither complete nor fail it, even with its token:
    // it is not claimed
    other.batch_execute("SET lock_timeout = '2s'").unwrap();
    for verb in ["rq_complete($1::text::uuid, $2)", "rq_fail($1::text::uuid, $2, 'x')"] {
        assert_eq!(sqlstate(other.query(&format!("SELECT {verb}"), &[&id, &attempt])), "55000", "{verb} from another session");
    }
    // nor can this one with a wrong token
    assert_eq!(sqlstate(c.query("SELECT rq_complete($1::text::uuid, 7)", &[&id])), "55000");
    c.batch_execute("ROLLBACK").unwrap();

    // a savepoint rolled back forgets what it took
    c.batch_execute("BEGIN; SAVEPOINT s").unwrap();
    let (id, attempt): (String, i32) =
        c.query_one("SELECT id::text, attempts FROM rq_take(ARRAY['work'], 'w')", &[]).map(|r| (r.get(0), r.get(1))).unwrap();
    c.batch_execute("ROLLBACK TO SAVEPOINT s").unwrap();
    let state = sqlstate(c.query("SELECT rq_complete($1::text::uuid, $2)", &[&id, &attempt]));
    assert_eq!(state, "55000", "a job whose take was rolled back is not this transaction's");
    c.batch_execute("ROLLBACK").unwrap();

    // a commit lets go of what it did not finish: as it was, no attempt
    c.batch_execute("BEGIN").unwrap();
    let kept: String = c.query_one("SELECT id::text FROM rq_take(ARRAY['work'], 'w')", &[]).unwrap().get(0);
    c.batch_execute("COMMIT").unwrap();
    let (status, attempts): (String, i32) =
        c.query_one("SELECT status, attempts FROM jobs WHERE id = $1::text::uuid", &[&kept]).map(|r| (r.get(0), r.get(1))).unwrap();
    assert_eq!((status.as_str(), attempts), ("queued", 0));

    // a failure counts the attempt and retries as rq_fail does
    c.batch_execute("BEGIN").unwrap();
    let (failed, attempt): (String, i32) =
        c.query_one("SELECT id::text, attempts FROM rq_take(ARRAY['work'], 'w')", &[]).map(|r| (r.get(0), r.get(1))).unwrap();
    c.query_one("SELECT rq_fail($1::text::uuid, $2, 'boom')", &[&failed, &attempt]).unwrap();
    c.batch_execute("COMMIT").unwrap();
    let row = c.query_one("SELECT status, attempts, error, claimed_by FROM jobs WHERE id = $1::text::uuid", &[&failed]).unwrap();
    assert_eq!(row.get::<_, String>(0), "failed");
    assert_eq!(row.get::<_, i32>(1), 1);
    assert_eq!(row.get::<_, String>(2), "boom");
    assert_eq!(row.get::<_, String>(3), "w");

    // flow settings cannot count taken jobs: refused
    c.batch_execute("SELECT rq_set_limits('limited', max_claimed => 1)").unwrap();
    assert_eq!(sqlstate(c.query("SELECT * FROM rq_take(ARRAY['limited'])", &[])), "0A000");
}
