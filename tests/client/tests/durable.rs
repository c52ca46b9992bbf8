//! Results and steps (sql/results.sql, sql/steps.sql) across real sessions:
//! a job completed with a result keeps it, in every verb that completes;
//! rq_await in one session returns when another session's commit ends the
//! job (woken, not at its timeout), with the job's status and result, and
//! returns the unfinished row when its timeout passes; steps recorded by
//! one attempt are read back by the next; a step is recorded once (a second
//! record, a stale attempt's, a rolled-back or killed transaction's are
//! not), and its inside-the-database effect with it; steps go with their
//! job.

use raquel_client_tests::{connect, fresh_db, sqlstate};
use std::thread;
use std::time::{Duration, Instant};

fn one<T: for<'a> postgres::types::FromSql<'a>>(c: &mut postgres::Client, sql: &str) -> T {
    c.query_one(sql, &[]).unwrap().get(0)
}

/// Enqueues one job into `queue` and claims it: (id, attempt).
fn claimed(c: &mut postgres::Client, queue: &str) -> (String, i32) {
    c.execute("SELECT rq_enqueue($1, 'p')", &[&queue]).unwrap();
    let row = c.query_one("SELECT id::text, attempts FROM rq_claim(ARRAY[$1])", &[&queue]).unwrap();
    (row.get(0), row.get(1))
}

#[test]
fn every_verb_that_completes_keeps_the_result_it_is_given() {
    let db = fresh_db("raquel_durable_results");
    let mut c = connect(&db);
    let (one_id, attempt) = claimed(&mut c, "r");
    let row = c
        .query_one("SELECT status, result::text FROM rq_complete($1::text::uuid, $2, '{\"total\": 42}')", &[&one_id, &attempt])
        .unwrap();
    assert_eq!(row.get::<_, String>(0), "success");
    assert_eq!(row.get::<_, String>(1), r#"{"total": 42}"#);
    // without a result, none
    let (plain, plain_attempt) = claimed(&mut c, "r");
    c.execute("SELECT rq_complete($1::text::uuid, $2)", &[&plain, &plain_attempt]).unwrap();
    // a batch, results paired by position, a null for none
    c.execute("SELECT rq_enqueue_batch('b', ARRAY['1', '2', '3'])", &[]).unwrap();
    let (ids, attempts): (Vec<String>, Vec<i32>) = c
        .query("SELECT id::text, attempts FROM rq_claim(ARRAY['b'], batch => 3) ORDER BY id", &[])
        .unwrap()
        .iter()
        .map(|r| (r.get::<_, String>(0), r.get::<_, i32>(1)))
        .unzip();
    c.execute(
        "SELECT count(*) FROM rq_complete_batch($1::text[]::uuid[], $2, results => ARRAY['1', NULL, '\"three\"']::jsonb[])",
        &[&ids, &attempts],
    )
    .unwrap();
    let stored: Vec<Option<String>> =
        c.query("SELECT result::text FROM jobs WHERE id = ANY ($1::text[]::uuid[]) ORDER BY id", &[&ids]).unwrap().iter().map(|r| r.get(0)).collect();
    assert_eq!(stored, vec![Some("1".into()), None, Some(r#""three""#.into())]);
    // results of another length than the ids: refused, nothing changed
    c.execute("SELECT rq_enqueue('b', 'x')", &[]).unwrap();
    let row = c.query_one("SELECT id::text, attempts FROM rq_claim(ARRAY['b'])", &[]).unwrap();
    let (x, x_attempt): (String, i32) = (row.get(0), row.get(1));
    let refused = c.query(
        "SELECT * FROM rq_complete_batch(ARRAY[$1::text::uuid], ARRAY[$2::integer], results => ARRAY['1', '2']::jsonb[])",
        &[&x, &x_attempt],
    );
    assert_eq!(sqlstate(refused), "22023");
    assert_eq!(one::<String>(&mut c, &format!("SELECT status FROM jobs WHERE id = '{x}'")), "claimed");
    // the one-call loops: the job in hand completed with its result
    c.execute("SELECT rq_enqueue('loop', 'y')", &[]).unwrap();
    let next = c.query_one(
        "SELECT id::text, attempts FROM rq_complete_and_claim($1::text::uuid, $2, queues => ARRAY['loop'], result => '\"x done\"')",
        &[&x, &x_attempt],
    );
    assert!(next.is_ok(), "{next:?}");
    let (y, y_attempt): (String, i32) = next.map(|r| (r.get(0), r.get(1))).unwrap();
    c.execute(
        "SELECT count(*) FROM rq_complete_batch_and_claim(ARRAY[$1::text::uuid], ARRAY[$2::integer], ARRAY['loop'], results => ARRAY['\"y done\"']::jsonb[])",
        &[&y, &y_attempt],
    )
    .unwrap();
    let results: Vec<String> = c
        .query("SELECT result::text FROM jobs WHERE id IN ($1::text::uuid, $2::text::uuid) ORDER BY id", &[&x, &y])
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(results, vec![r#""x done""#.to_string(), r#""y done""#.to_string()]);
    // rq_jobs shows it
    assert_eq!(one::<String>(&mut c, &format!("SELECT result::text FROM rq_jobs WHERE id = '{one_id}'")), r#"{"total": 42}"#);
}

#[test]
fn a_queue_without_history_keeps_a_job_completed_with_a_result() {
    let db = fresh_db("raquel_durable_history");
    let mut c = connect(&db);
    c.execute("SELECT rq_set_history('gone', false)", &[]).unwrap();
    let (kept, kept_attempt) = claimed(&mut c, "gone");
    c.execute("SELECT rq_complete($1::text::uuid, $2, result => '7')", &[&kept, &kept_attempt]).unwrap();
    let (deleted, deleted_attempt) = claimed(&mut c, "gone");
    c.execute("SELECT rq_step($1::text::uuid, $2, 'only', '1')", &[&deleted, &deleted_attempt]).unwrap();
    c.execute("SELECT rq_complete($1::text::uuid, $2)", &[&deleted, &deleted_attempt]).unwrap();
    assert_eq!(one::<String>(&mut c, &format!("SELECT result::text FROM jobs WHERE id = '{kept}'")), "7");
    assert_eq!(one::<i64>(&mut c, &format!("SELECT count(*) FROM jobs WHERE id = '{deleted}'")), 0);
    assert_eq!(one::<i64>(&mut c, &format!("SELECT count(*) FROM job_steps WHERE job_id = '{deleted}'")), 0, "its steps went with it");
}

#[test]
fn await_returns_at_the_commit_that_ends_the_job_with_its_status_and_result() {
    let db = fresh_db("raquel_durable_await");
    let mut c = connect(&db);
    let (id, attempt) = claimed(&mut c, "a");
    let (fails, fail_attempt) = claimed(&mut c, "a");
    c.execute("UPDATE jobs SET max_retry_count = 0 WHERE id = $1::text::uuid", &[&fails]).unwrap();
    let awaiter = |id: String| {
        let db = db.clone();
        thread::spawn(move || {
            let mut w = connect(&db);
            let started = Instant::now();
            let row = w.query_one("SELECT status, result::text, error FROM rq_await($1::text::uuid, '60 seconds')", &[&id]).unwrap();
            (row.get::<_, String>(0), row.get::<_, Option<String>>(1), row.get::<_, Option<String>>(2), started.elapsed())
        })
    };
    let waiting = [awaiter(id.clone()), awaiter(id.clone()), awaiter(fails.clone())];
    // they wait: nothing has ended
    thread::sleep(Duration::from_millis(1500));
    assert!(waiting.iter().all(|w| !w.is_finished()), "an awaiter returned before its job ended");
    let mut tx = c.transaction().unwrap();
    tx.execute("SELECT rq_complete($1::text::uuid, $2, '{\"ok\": true}')", &[&id, &attempt]).unwrap();
    tx.execute("SELECT rq_fail($1::text::uuid, $2, 'boom')", &[&fails, &fail_attempt]).unwrap();
    thread::sleep(Duration::from_millis(500));
    assert!(waiting.iter().all(|w| !w.is_finished()), "an awaiter returned before the ending commit");
    let committed = Instant::now();
    tx.commit().unwrap();
    let ends: Vec<_> = waiting.into_iter().map(|w| w.join().unwrap()).collect();
    let woken_after = committed.elapsed();
    // Not woken, an awaiter would look again only 5 s after it started
    // (src/results.rs LOOK_AGAIN_MS), some 3 s after this commit.
    assert!(woken_after < Duration::from_secs(2), "awaiters returned {woken_after:?} after the commit, not woken by it");
    assert_eq!((ends[0].0.as_str(), ends[0].1.as_deref()), ("success", Some(r#"{"ok": true}"#)));
    assert_eq!((ends[1].0.as_str(), ends[1].1.as_deref()), ("success", Some(r#"{"ok": true}"#)));
    assert_eq!((ends[2].0.as_str(), ends[2].2.as_deref()), ("exhausted", Some("boom")));
    // a cancel wakes its awaiter too
    let (cancelled, _) = claimed(&mut c, "a");
    let waiting = awaiter(cancelled.clone());
    thread::sleep(Duration::from_millis(500));
    let committed = Instant::now();
    c.execute("SELECT rq_cancel($1::text::uuid)", &[&cancelled]).unwrap();
    assert_eq!(waiting.join().unwrap().0, "cancelled");
    assert!(committed.elapsed() < Duration::from_secs(2), "the cancel's commit did not wake its awaiter");
    // a job that does not end in time: its row as it is, at the timeout
    let (open, _) = claimed(&mut c, "a");
    let started = Instant::now();
    let status: String = c.query_one("SELECT status FROM rq_await($1::text::uuid, '300 milliseconds')", &[&open]).unwrap().get(0);
    assert_eq!(status, "claimed");
    assert!(started.elapsed() >= Duration::from_millis(300));
    // an ended job: at once; an unknown one: P0002
    assert_eq!(one::<String>(&mut c, &format!("SELECT status FROM rq_await('{id}')")), "success");
    assert_eq!(sqlstate(c.query_one("SELECT rq_await(rq_uuid7())", &[])), "P0002");
}

#[test]
fn a_later_attempt_reads_the_steps_an_earlier_one_recorded() {
    let db = fresh_db("raquel_durable_steps");
    let mut c = connect(&db);
    c.execute("SELECT rq_enqueue('s', 'p', min_retry_delay => '0', backoff_base => '0')", &[]).unwrap();
    let row = c.query_one("SELECT id::text, attempts FROM rq_claim(ARRAY['s'])", &[]).unwrap();
    let (id, first): (String, i32) = (row.get(0), row.get(1));
    let step = c.query_one("SELECT name, result::text, attempt FROM rq_step($1::text::uuid, $2, 'charge', '{\"receipt\": 7}')", &[&id, &first]).unwrap();
    assert_eq!((step.get::<_, String>(0), step.get::<_, String>(1), step.get::<_, i32>(2)), ("charge".into(), r#"{"receipt": 7}"#.into(), first));
    c.execute("SELECT rq_fail($1::text::uuid, $2, 'the next step failed')", &[&id, &first]).unwrap();
    let second: i32 = one(&mut c, "SELECT attempts FROM rq_claim(ARRAY['s'])");
    assert_eq!(second, first + 1);
    let recorded: Vec<(String, String)> = c
        .query("SELECT name, result::text FROM job_steps WHERE job_id = $1::text::uuid ORDER BY recorded_at", &[&id])
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    assert_eq!(recorded, vec![("charge".to_string(), r#"{"receipt": 7}"#.to_string())]);
    // recorded again: refused (23505), and the transaction's effect with it
    c.batch_execute("CREATE TABLE effects (job uuid, step text)").unwrap();
    let mut tx = c.transaction().unwrap();
    tx.execute("INSERT INTO effects VALUES ($1::text::uuid, 'charge')", &[&id]).unwrap();
    assert_eq!(sqlstate(tx.query_one("SELECT rq_step($1::text::uuid, $2, 'charge', '1')", &[&id, &second])), "23505");
    drop(tx);
    assert_eq!(one::<i64>(&mut c, "SELECT count(*) FROM effects"), 0);
    // the stale first attempt cannot record anything; an ended job neither,
    // not even under the attempt that ended it
    assert_eq!(sqlstate(c.query_one("SELECT rq_step($1::text::uuid, $2, 'ship', NULL)", &[&id, &first])), "55000");
    c.execute("SELECT rq_step($1::text::uuid, $2, 'ship', '\"parcel 9\"')", &[&id, &second]).unwrap();
    c.execute("SELECT rq_complete($1::text::uuid, $2, '\"done\"')", &[&id, &second]).unwrap();
    assert_eq!(sqlstate(c.query_one("SELECT rq_step($1::text::uuid, $2, 'late', NULL)", &[&id, &second])), "55000");
    assert_eq!(one::<i64>(&mut c, &format!("SELECT count(*) FROM job_steps WHERE job_id = '{id}'")), 2);
    // steps go with their job (the prune duty)
    c.execute("UPDATE jobs SET finished_at = 0 WHERE id = $1::text::uuid", &[&id]).unwrap();
    c.execute("SELECT rq_prune(retention => '1 second')", &[]).unwrap();
    assert_eq!(one::<i64>(&mut c, &format!("SELECT count(*) FROM job_steps WHERE job_id = '{id}'")), 0);
}

/// Four workers in their own sessions each try to record the same steps of
/// the same job, each inside a transaction with its own effect: every step
/// is recorded once and its effect committed once. A worker whose session
/// is terminated in the middle of its transaction leaves neither.
#[test]
fn a_step_and_its_effect_commit_once_among_several_sessions() {
    let db = fresh_db("raquel_durable_once");
    let mut c = connect(&db);
    c.batch_execute("CREATE TABLE effects (step text NOT NULL)").unwrap();
    let (id, attempt) = claimed(&mut c, "once");
    // a session killed between its effect and its commit
    let mut doomed = connect(&db);
    let pid: i32 = one(&mut doomed, "SELECT pg_backend_pid()");
    doomed.batch_execute("BEGIN").unwrap();
    doomed.execute("INSERT INTO effects VALUES ('s0')", &[]).unwrap();
    doomed.execute("SELECT rq_step($1::text::uuid, $2, 's0', '0')", &[&id, &attempt]).unwrap();
    c.execute("SELECT pg_terminate_backend($1)", &[&pid]).unwrap();
    assert_eq!(one::<i64>(&mut c, "SELECT count(*) FROM effects"), 0);
    assert_eq!(one::<i64>(&mut c, "SELECT count(*) FROM job_steps"), 0);
    let workers: Vec<_> = (0..4)
        .map(|_| {
            let (db, id) = (db.clone(), id.clone());
            thread::spawn(move || {
                let mut w = connect(&db);
                let mut recorded = 0;
                for n in 0..20 {
                    let step = format!("s{n}");
                    let mut tx = w.transaction().unwrap();
                    tx.execute("INSERT INTO effects VALUES ($1)", &[&step]).unwrap();
                    match tx.query_one("SELECT rq_step($1::text::uuid, $2, $3, to_jsonb($4::int))", &[&id, &attempt, &step, &n]) {
                        Ok(_) => {
                            tx.commit().unwrap();
                            recorded += 1;
                        }
                        Err(e) => assert_eq!(e.code().map(|c| c.code()), Some("23505"), "{e}"),
                    }
                }
                recorded
            })
        })
        .collect();
    let recorded: i32 = workers.into_iter().map(|w| w.join().unwrap()).sum();
    assert_eq!(recorded, 20, "each step recorded by exactly one session");
    assert_eq!(one::<i64>(&mut c, "SELECT count(*) FROM job_steps"), 20);
    assert_eq!(one::<i64>(&mut c, "SELECT count(DISTINCT step) FROM effects"), 20);
    assert_eq!(one::<i64>(&mut c, "SELECT count(*) FROM effects"), 20, "no effect committed twice");
}

/// A step being recorded holds the job against a rescue: the rescue duty
/// passes over a job whose row another session holds (SKIP LOCKED), so the
/// step commits under the attempt that held the claim, and only then can
/// the job go back; after that, the stale attempt records nothing.
#[test]
fn a_rescue_passes_over_a_job_whose_step_is_being_recorded() {
    let db = fresh_db("raquel_durable_fence");
    let mut c = connect(&db);
    c.execute("SELECT rq_enqueue('f', 'p')", &[]).unwrap();
    let row = c.query_one("SELECT id::text, attempts FROM rq_claim(ARRAY['f'], lease => '1 second')", &[]).unwrap();
    let (id, attempt): (String, i32) = (row.get(0), row.get(1));
    let mut worker = connect(&db);
    let mut tx = worker.transaction().unwrap();
    tx.execute("SELECT rq_step($1::text::uuid, $2, 'slow', NULL)", &[&id, &attempt]).unwrap();
    thread::sleep(Duration::from_millis(1200));
    assert_eq!(one::<i64>(&mut c, "SELECT rq_rescue()"), 0, "the rescue took a job whose step was being recorded");
    tx.commit().unwrap();
    // Now the job goes back: by this call, or by the background worker's
    // rescue duty if its round came first.
    one::<i64>(&mut c, "SELECT rq_rescue()");
    let status: String = one(&mut c, &format!("SELECT status FROM jobs WHERE id = '{id}'"));
    assert_ne!(status, "claimed", "the job whose step committed was rescued once released");
    assert_eq!(one::<i32>(&mut c, &format!("SELECT attempt FROM job_steps WHERE job_id = '{id}'")), attempt);
    assert_eq!(sqlstate(c.query_one("SELECT rq_step($1::text::uuid, $2, 'after', NULL)", &[&id, &attempt])), "55000");
}
