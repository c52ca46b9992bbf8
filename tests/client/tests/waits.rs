//! Durable sleep and events (sql/waits.sql) across real sessions: a job put
//! to sleep wakes at its instant (a waiting claim in another session takes
//! it then, not before), uses up no retry, and passes its sleep on the next
//! attempt; a job parked for an event resumes when another session emits
//! it, reads the payload as its step, and a parked job times out; an emit
//! kept reaches a wait that begins after it; a wait and an emit that race
//! (each in a transaction still open when the other starts) lose no
//! wake-up, whichever commits first; many workers and emitters at once,
//! some of them in REPEATABLE READ, end every job once with its own
//! payload; a parked job and its children can be cancelled.

use raquel_client_tests::{connect, fresh_db, sqlstate};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

fn one<T: for<'a> postgres::types::FromSql<'a>>(c: &mut postgres::Client, sql: &str) -> T {
    c.query_one(sql, &[]).unwrap().get(0)
}

/// Enqueues one job into `queue` (with `options`, SQL after the payload)
/// and claims it: (id, attempt).
fn claimed(c: &mut postgres::Client, queue: &str, options: &str) -> (String, i32) {
    c.execute(&format!("SELECT rq_enqueue($1, 'p'{options})"), &[&queue]).unwrap();
    let row = c.query_one("SELECT id::text, attempts FROM rq_claim(ARRAY[$1])", &[&queue]).unwrap();
    (row.get(0), row.get(1))
}

/// rq_wait_event's answer, for job `id` under its claim's `attempt`:
/// (parked, payload as text, timed_out).
fn wait_event(
    c: &mut impl postgres::GenericClient,
    id: &str,
    attempt: i32,
    step: &str,
    event: &str,
    more: &str,
) -> (bool, Option<String>, bool) {
    let row = c
        .query_one(
            &format!("SELECT parked, payload::text, timed_out FROM rq_wait_event($1::text::uuid, $2, $3, $4{more})"),
            &[&id, &attempt, &step, &event],
        )
        .unwrap();
    (row.get(0), row.get(1), row.get(2))
}

/// A claim in another session that waits up to `wait`: the job it got
/// (id, attempt) and how long it took.
fn claim_in_another_session(
    db: &str,
    queue: &str,
    wait: &str,
) -> thread::JoinHandle<(Option<(String, i32)>, Duration)> {
    let (db, queue, wait) = (db.to_string(), queue.to_string(), wait.to_string());
    thread::spawn(move || {
        let mut c = connect(&db);
        let began = Instant::now();
        let row = c
            .query_opt(
                "SELECT id::text, attempts FROM rq_claim(ARRAY[$1], wait => $2::text::interval)",
                &[&queue, &wait],
            )
            .unwrap();
        (row.map(|r| (r.get(0), r.get(1))), began.elapsed())
    })
}

#[test]
fn a_sleeping_job_wakes_at_its_instant_uses_no_retry_and_passes_its_sleep_next_time() {
    let db = fresh_db("raquel_waits_sleep");
    let mut c = connect(&db);
    let (id, attempt) = claimed(&mut c, "s", ", max_retry_count => 1");
    let slept_at = Instant::now();
    let sleeping: bool = c
        .query_one("SELECT rq_sleep($1::text::uuid, $2, 'nap', delay => '1 second')", &[&id, &attempt])
        .unwrap()
        .get(0);
    assert!(sleeping, "the job sleeps");
    let row = c
        .query_one("SELECT status, requeues, lease_expires_at IS NULL FROM jobs WHERE id = $1::text::uuid", &[&id])
        .unwrap();
    assert_eq!((row.get::<_, String>(0), row.get::<_, i32>(1), row.get::<_, bool>(2)), ("queued".into(), 1, true));
    // the sleeping worker's claim is over: its token is refused
    let stale = c.query("SELECT rq_complete($1::text::uuid, $2)", &[&id, &attempt]);
    assert_eq!(sqlstate(stale), "55000");
    // a waiting claim in another session takes it when it wakes, not before
    let (got, _) = claim_in_another_session(&db, "s", "10 seconds").join().unwrap();
    let woke_after = slept_at.elapsed();
    let (got_id, next) = got.expect("the job woke within the claim's wait");
    assert_eq!((got_id.as_str(), next), (id.as_str(), 2));
    assert!(woke_after >= Duration::from_millis(900), "claimed {woke_after:?} after it went to sleep for 1 s");
    assert!(woke_after < Duration::from_secs(3), "claimed {woke_after:?} after it went to sleep for 1 s");
    // the next attempt passes the sleep it did (the recorded instant, not a new delay)
    let again: bool =
        c.query_one("SELECT rq_sleep($1::text::uuid, 2, 'nap', delay => '1 hour')", &[&id]).unwrap().get(0);
    assert!(!again, "the sleep is over");
    assert_eq!(one::<i64>(&mut c, &format!("SELECT count(*) FROM job_steps WHERE job_id = '{id}'")), 1);
    assert!(one::<bool>(
        &mut c,
        &format!("SELECT result ? 'sleep_until' FROM job_steps WHERE job_id = '{id}' AND name = 'nap'")
    ));
    // the sleep used up no retry: a failure now still has its one retry left
    let status: String =
        c.query_one("SELECT status FROM rq_fail($1::text::uuid, 2, 'boom')", &[&id]).unwrap().get(0);
    assert_eq!(status, "failed", "max_retry_count 1: one failure after a sleep leaves a retry");
}

#[test]
fn an_emit_resumes_the_parked_job_with_its_payload_and_a_parked_job_times_out() {
    let db = fresh_db("raquel_waits_emit");
    let mut c = connect(&db);
    let (id, attempt) = claimed(&mut c, "e", "");
    let answer = wait_event(&mut c, &id, attempt, "paid", "order-1-paid", "");
    assert_eq!(answer, (true, None, false), "parked");
    assert_eq!(one::<String>(&mut c, &format!("SELECT status FROM jobs WHERE id = '{id}'")), "queued");
    // the parked job is counted where operators look
    assert_eq!(one::<i64>(&mut c, "SELECT waiting_for_event FROM rq_stats() WHERE queue = 'e'"), 1);
    let metrics: String = one(&mut c, "SELECT rq_prometheus()");
    assert!(metrics.lines().any(|l| l == "raquel_jobs_waiting_for_event_all 1"), "{metrics}");
    // a waiting claim in another session, woken by the emit of a third
    let claim = claim_in_another_session(&db, "e", "20 seconds");
    thread::sleep(Duration::from_millis(300));
    let emitted_at = Instant::now();
    let resumed: i64 = connect(&db).query_one("SELECT rq_emit('order-1-paid', '{\"amount\": 5}')", &[]).unwrap().get(0);
    assert_eq!(resumed, 1);
    let (got, _) = claim.join().unwrap();
    assert_eq!(got, Some((id.clone(), 2)), "the resumed job, on its next attempt");
    assert!(emitted_at.elapsed() < Duration::from_secs(2), "woken by the emit, not by a timeout");
    let answer = wait_event(&mut c, &id, 2, "paid", "order-1-paid", "");
    assert_eq!(answer, (false, Some(r#"{"amount": 5}"#.into()), false));
    assert_eq!(one::<i64>(&mut c, "SELECT count(*) FROM job_waits"), 0);
    c.execute("SELECT rq_complete($1::text::uuid, 2)", &[&id]).unwrap();

    // no emit: the wait times out, and the next attempt hears so
    let (late, attempt) = claimed(&mut c, "t", "");
    let answer = wait_event(&mut c, &late, attempt, "paid", "never", ", timeout => '1 second'");
    assert!(answer.0, "parked");
    let (got, took) = claim_in_another_session(&db, "t", "10 seconds").join().unwrap();
    assert_eq!(got, Some((late.clone(), 2)));
    assert!(took >= Duration::from_millis(700), "back after its timeout, not before ({took:?})");
    assert_eq!(wait_event(&mut c, &late, 2, "paid", "never", ""), (false, None, true));
    // and an emit after the timeout changes nothing: the step keeps its
    // timeout (the name called again in this attempt would be the next
    // wait, paid#2: a_loop_that_sleeps_or_waits_under_one_name_does_so_each_time)
    assert_eq!(one::<i64>(&mut c, "SELECT rq_emit('never')"), 0);
    let recorded: String = one(&mut c, &format!("SELECT result::text FROM job_steps WHERE job_id = '{late}' AND name = 'paid'"));
    assert_eq!(recorded, r#"{"event": "never", "timed_out": true}"#);
}

#[test]
fn an_emit_reaches_a_wait_that_begins_while_it_is_kept_and_not_after() {
    let db = fresh_db("raquel_waits_keep");
    let mut c = connect(&db);
    c.execute("SELECT rq_emit('early', '\"here\"', keep => '1 minute')", &[]).unwrap();
    c.execute("SELECT rq_emit('gone', '\"lost\"', keep => '0')", &[]).unwrap();
    // (the instants are ms: a wait in the emit's own ms would still get it)
    thread::sleep(Duration::from_millis(10));
    let (id, attempt) = claimed(&mut c, "k", "");
    assert_eq!(wait_event(&mut c, &id, attempt, "a", "early", ""), (false, Some(r#""here""#.into()), false));
    assert_eq!(
        wait_event(&mut c, &id, attempt, "b", "gone", ""),
        (true, None, false),
        "keep '0': only the waits already there"
    );
}

#[test]
fn a_wait_and_an_emit_that_race_lose_no_wake_up_whichever_commits_first() {
    let db = fresh_db("raquel_waits_race");
    let mut c = connect(&db);
    // the wait's transaction is open when the emit comes: the emit waits for
    // its turn, then sees the wait, even with keep '0'
    let (id, attempt) = claimed(&mut c, "r", "");
    let mut tx = c.transaction().unwrap();
    assert!(wait_event(&mut tx, &id, attempt, "w", "race-1", "").0);
    let emit = {
        let db = db.clone();
        thread::spawn(move || {
            connect(&db).query_one("SELECT rq_emit('race-1', '1', keep => '0')", &[]).unwrap().get::<_, i64>(0)
        })
    };
    thread::sleep(Duration::from_millis(300));
    assert!(!emit.is_finished(), "the emit waits for the wait's commit");
    tx.commit().unwrap();
    assert_eq!(emit.join().unwrap(), 1, "the emit resumed the job parked while it waited");
    assert!(one::<bool>(&mut c, &format!("SELECT scheduled_at <= rq_now_ms() FROM jobs WHERE id = '{id}'")));

    // the emit's transaction is open when the wait begins: the wait takes its
    // turn after the emit commits, and gets it (kept: it was made before the
    // wait began)
    let (id, attempt) = claimed(&mut c, "r2", "");
    let mut emitter = connect(&db);
    let mut etx = emitter.transaction().unwrap();
    etx.execute("SELECT rq_emit('race-2', '2', keep => '1 minute')", &[]).unwrap();
    let wait = {
        let (db, id) = (db.clone(), id.clone());
        thread::spawn(move || wait_event(&mut connect(&db), &id, attempt, "w", "race-2", ""))
    };
    thread::sleep(Duration::from_millis(300));
    assert!(!wait.is_finished(), "the wait waits for the emit's commit");
    etx.commit().unwrap();
    assert_eq!(wait.join().unwrap(), (false, Some("2".into()), false));
}

#[test]
fn many_workers_and_emitters_at_once_end_every_job_once_with_its_own_payload() {
    let db = fresh_db("raquel_waits_many");
    const JOBS: usize = 200;
    let mut c = connect(&db);
    c.execute(
        "SELECT rq_enqueue_batch('m', ARRAY(SELECT 'job-' || n FROM generate_series(1, $1) n))",
        &[&(JOBS as i32)],
    )
    .unwrap();
    let done = Arc::new(AtomicUsize::new(0));
    let workers: Vec<_> = (0..4)
        .map(|w| {
            let (db, done) = (db.clone(), done.clone());
            thread::spawn(move || {
                let mut c = connect(&db);
                // half the workers wait in REPEATABLE READ: their races with an
                // emit are settled by the background worker
                let isolation = if w % 2 == 0 {
                    postgres::IsolationLevel::ReadCommitted
                } else {
                    postgres::IsolationLevel::RepeatableRead
                };
                let deadline = Instant::now() + Duration::from_secs(90);
                while done.load(Ordering::SeqCst) < JOBS && Instant::now() < deadline {
                    let Some(row) =
                        c.query_opt("SELECT id::text, attempts, payload FROM rq_claim(ARRAY['m'], wait => '200 ms')", &[]).unwrap()
                    else {
                        continue;
                    };
                    let (id, attempt, payload): (String, i32, String) = (row.get(0), row.get(1), row.get(2));
                    let event = format!("ev-{payload}");
                    let worked = (|| {
                        let mut tx = c.build_transaction().isolation_level(isolation).start()?;
                        let row = tx.query_one(
                            "SELECT parked, payload::text, timed_out FROM rq_wait_event($1::text::uuid, $2, 'w', $3)",
                            &[&id, &attempt, &event],
                        )?;
                        let (parked, got, timed_out): (bool, Option<String>, bool) = (row.get(0), row.get(1), row.get(2));
                        assert!(!timed_out);
                        if !parked {
                            tx.execute("SELECT rq_complete($1::text::uuid, $2, result => $3::text::jsonb)", &[&id, &attempt, &got])?;
                        }
                        tx.commit()?;
                        Ok::<bool, postgres::Error>(!parked)
                    })();
                    match worked {
                        Ok(true) => {
                            done.fetch_add(1, Ordering::SeqCst);
                        }
                        Ok(false) => {}
                        // REPEATABLE READ: a row changed since the snapshot (an
                        // emit's delivery): hand the job back and go on
                        Err(e) if e.code().is_some_and(|c| c.code() == "40001") => {
                            c.execute("SELECT rq_reject($1::text::uuid, $2)", &[&id, &attempt]).unwrap();
                        }
                        Err(e) => panic!("worker {w}: {e}"),
                    }
                }
            })
        })
        .collect();
    let emitters: Vec<_> = (0..2)
        .map(|e| {
            let db = db.clone();
            thread::spawn(move || {
                let mut c = connect(&db);
                for n in (1..=JOBS).filter(|n| n % 2 == e) {
                    // keep '0': only the waits that began before the emit
                    // (or race it) get it; the others park and get it later
                    // from the emit made again below
                    c.execute("SELECT rq_emit($1::text, to_jsonb($1::text), keep => '0')", &[&format!("ev-job-{n}")])
                        .unwrap();
                }
            })
        })
        .collect();
    for emitter in emitters {
        emitter.join().unwrap();
    }
    // the jobs that parked after their emit: emitted again, kept this time
    thread::sleep(Duration::from_secs(2));
    for n in 1..=JOBS {
        c.execute("SELECT rq_emit($1::text, to_jsonb($1::text), keep => '1 hour')", &[&format!("ev-job-{n}")]).unwrap();
    }
    for worker in workers {
        worker.join().unwrap();
    }
    assert_eq!(done.load(Ordering::SeqCst), JOBS, "every job ended");
    let row = c
        .query_one(
            "SELECT count(*) FILTER (WHERE status = 'success'),
                    count(*) FILTER (WHERE result = to_jsonb('ev-' || payload)),
                    (SELECT count(*) FROM job_steps),
                    (SELECT count(*) FROM job_waits)
             FROM jobs",
            &[],
        )
        .unwrap();
    let counts: (i64, i64, i64, i64) = (row.get(0), row.get(1), row.get(2), row.get(3));
    assert_eq!(
        counts,
        (JOBS as i64, JOBS as i64, JOBS as i64, 0),
        "(succeeded, with their own payload, steps, waits left)"
    );
}

#[test]
fn a_parked_job_and_its_children_can_be_cancelled_and_an_emit_then_resumes_nothing() {
    let db = fresh_db("raquel_waits_cancel");
    let mut c = connect(&db);
    let (parent, attempt) = claimed(&mut c, "p", "");
    let child: String =
        one(&mut c, &format!("SELECT id::text FROM rq_enqueue('c', 'child', after => ARRAY['{parent}'::uuid])"));
    assert!(wait_event(&mut c, &parent, attempt, "w", "never-comes", "").0);
    c.execute("SELECT rq_cancel($1::text::uuid)", &[&parent]).unwrap();
    let statuses: Vec<String> = c
        .query(
            "SELECT status FROM jobs WHERE id IN ($1::text::uuid, $2::text::uuid) ORDER BY id = $2::text::uuid",
            &[&parent, &child],
        )
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(statuses, vec!["cancelled", "cancelled"], "the parked parent, and its child with it");
    assert_eq!(one::<i64>(&mut c, "SELECT rq_emit('never-comes')"), 0, "nothing parked to resume");
    assert_eq!(one::<String>(&mut c, &format!("SELECT status FROM jobs WHERE id = '{parent}'")), "cancelled");
    assert_eq!(one::<i64>(&mut c, "SELECT count(*) FROM job_waits"), 0, "the emit ended the cancelled job's wait");
}

#[test]
fn a_step_name_recorded_as_another_kind_is_refused_naming_both() {
    // 0.5.0: after rq_step(id, 'pay', …), rq_wait_event(id, 'pay', …)
    // answered parked = f, payload = NULL for an event never emitted, and
    // rq_sleep(id, 'pay', delay => '1 hour') skipped the hour.
    let db = fresh_db("raquel_waits_kinds");
    let mut c = connect(&db);
    let (id, attempt) = claimed(&mut c, "kinds", "");
    c.execute("SELECT rq_step($1::text::uuid, $2, 'pay', '{\"charged\": true}')", &[&id, &attempt]).unwrap();
    let refused = |c: &mut postgres::Client, sql: &str| -> (String, String, String) {
        let e = c.batch_execute(sql).expect_err(sql);
        let e = e.as_db_error().expect("a server error").clone();
        (e.code().code().to_string(), e.message().to_string(), e.detail().unwrap_or_default().to_string())
    };
    let (code, message, detail) = refused(&mut c, &format!("SELECT rq_wait_event('{id}', {attempt}, 'pay', 'paid:16')"));
    assert_eq!(code, "55000");
    assert!(message.contains("is a step (rq_step), not a wait for an event (rq_wait_event)"), "{message}");
    assert!(detail.starts_with(&format!("Attempt {attempt} recorded it at ")), "{detail}");
    let (code, message, _) = refused(&mut c, &format!("SELECT rq_sleep('{id}', {attempt}, 'pay', delay => '1 hour')"));
    assert_eq!((code.as_str(), message.contains("is a step (rq_step), not a sleep (rq_sleep)")), ("55000", true), "{message}");
    // and the other way round: a sleep's name given to rq_step
    assert!(!one::<bool>(&mut c, &format!("SELECT rq_sleep('{id}', {attempt}, 'nap', at => now())")), "a sleep already over");
    let (code, message, _) = refused(&mut c, &format!("SELECT rq_step('{id}', {attempt}, 'nap', '1')"));
    assert_eq!((code.as_str(), message.contains("is a sleep (rq_sleep), not a step (rq_step)")), ("55000", true), "{message}");
    // nothing changed: the job still claimed on its attempt, its steps as they were
    assert_eq!(one::<String>(&mut c, &format!("SELECT status || ' ' || attempts FROM jobs WHERE id = '{id}'")), format!("claimed {attempt}"));
    assert_eq!(one::<String>(&mut c, "SELECT string_agg(name || ':' || kind, ' ' ORDER BY name) FROM job_steps"), "nap:sleep pay:step");
}

#[test]
fn an_emit_waits_for_its_reader_long_after_and_is_read_once() {
    // 0.5.0 kept an emit 10 minutes by default: the wait that came later
    // parked until the year 9999.
    let db = fresh_db("raquel_waits_reader");
    let mut c = connect(&db);
    c.execute("SELECT rq_emit('paid:16', '{\"amount\": 16}')", &[]).unwrap();
    // eleven minutes pass (the emit's times moved back)
    c.batch_execute("UPDATE emitted_events SET emitted_at = emitted_at - 660000, kept_until = kept_until - 660000").unwrap();
    let (id, attempt) = claimed(&mut c, "reader", "");
    assert_eq!(wait_event(&mut c, &id, attempt, "payment", "paid:16", ""), (false, Some(r#"{"amount": 16}"#.into()), false));
    assert_eq!(one::<i64>(&mut c, "SELECT count(*) FROM emitted_events"), 0, "read, and gone");
    // read once: a second wait for it parks
    let (other, attempt2) = claimed(&mut c, "reader-2", "");
    assert_eq!(wait_event(&mut c, &other, attempt2, "payment", "paid:16", ""), (true, None, false));
    // an emit that finds jobs parked resumes them all and is read by them
    assert_eq!(one::<i64>(&mut c, "SELECT rq_emit('paid:16', '2')"), 1);
    assert_eq!(one::<i64>(&mut c, "SELECT count(*) FROM emitted_events"), 0);
    // unread past raquel.event_retention, it goes
    c.batch_execute("SET raquel.event_retention = 1").unwrap();
    c.execute("SELECT rq_emit('brief', '3')", &[]).unwrap();
    thread::sleep(Duration::from_millis(1100));
    let (late, attempt3) = claimed(&mut c, "reader-3", "");
    assert_eq!(wait_event(&mut c, &late, attempt3, "w", "brief", ""), (true, None, false), "past its retention");
}

#[test]
fn a_wait_without_a_timeout_ends_at_raquel_max_event_wait() {
    // 0.5.0: such a wait was due at 9999-12-31, for ever if its event was lost
    let db = fresh_db("raquel_waits_longest");
    let mut c = connect(&db);
    let (id, attempt) = claimed(&mut c, "longest", "");
    assert!(wait_event(&mut c, &id, attempt, "w", "never-emitted", "").0);
    let due_in_days: f64 =
        one(&mut c, &format!("SELECT (scheduled_at - rq_now_ms()) / 86400000.0::float8 FROM jobs WHERE id = '{id}'"));
    assert!((29.9..=30.0).contains(&due_in_days), "due after raquel.max_event_wait (30 days), not at the end of time: {due_in_days}");
    // a setting of one second: the wait times out then
    c.batch_execute("SET raquel.max_event_wait = 1").unwrap();
    let (short, attempt) = claimed(&mut c, "longest-short", "");
    assert!(wait_event(&mut c, &short, attempt, "w", "never-emitted", "").0);
    let (got, took) = claim_in_another_session(&db, "longest-short", "10 seconds").join().unwrap();
    assert_eq!(got, Some((short.clone(), attempt + 1)));
    assert!(took >= Duration::from_millis(700), "due after its second, not before ({took:?})");
    assert_eq!(wait_event(&mut c, &short, attempt + 1, "w", "never-emitted", ""), (false, None, true));
}

#[test]
fn a_loop_that_sleeps_or_waits_under_one_name_does_so_each_time() {
    // 0.5.0: the second rq_sleep of a name returned at once, so a loop of
    // sleeps slept once
    let db = fresh_db("raquel_waits_loop");
    let mut c = connect(&db);
    let (id, first) = claimed(&mut c, "loop", "");
    let sleep = |c: &mut postgres::Client, attempt: i32| -> bool {
        one(c, &format!("SELECT rq_sleep('{id}', {attempt}, 'tick', delay => '300 milliseconds')"))
    };
    assert!(sleep(&mut c, first), "the first turn sleeps");
    let mut attempt = first;
    for turn in 2..=3 {
        let (got, _) = claim_in_another_session(&db, "loop", "10 seconds").join().unwrap();
        attempt = got.expect("woken").1;
        // the replay goes past every sleep done, then sleeps the next turn's
        for _ in 1..turn {
            assert!(!sleep(&mut c, attempt), "turn {turn}: a sleep done is passed");
        }
        assert!(sleep(&mut c, attempt), "turn {turn}: the next sleep sleeps");
    }
    let names: String = one(&mut c, &format!("SELECT string_agg(name, ' ' ORDER BY name) FROM job_steps WHERE job_id = '{id}'"));
    assert_eq!(names, "tick tick#2 tick#3");
    assert_eq!(one::<i32>(&mut c, &format!("SELECT requeues FROM jobs WHERE id = '{id}'")), attempt, "each sleep used up no retry");

    // waits too: the same name in one attempt is the next wait
    let (waiter, attempt) = claimed(&mut c, "loop-waits", "");
    c.execute("SELECT rq_emit('answer:1', '1')", &[]).unwrap();
    assert_eq!(wait_event(&mut c, &waiter, attempt, "ask", "answer:1", ""), (false, Some("1".into()), false));
    assert_eq!(wait_event(&mut c, &waiter, attempt, "ask", "answer:2", ""), (true, None, false), "ask#2 waits for its own");
    assert_eq!(one::<String>(&mut c, &format!("SELECT name FROM job_waits WHERE job_id = '{waiter}'")), "ask#2");
}

/// rq_wait_job's answer for job `id` under `attempt`, waiting as step
/// `step` for `job`: (parked, status, result as text, error, timed_out).
fn wait_job(
    c: &mut postgres::Client,
    id: &str,
    attempt: i32,
    step: &str,
    job: &str,
) -> (bool, Option<String>, Option<String>, Option<String>, bool) {
    let row = c
        .query_one(
            "SELECT parked, status, result::text, error, timed_out FROM rq_wait_job($1::text::uuid, $2, $3, $4::text::uuid)",
            &[&id, &attempt, &step, &job],
        )
        .unwrap();
    (row.get(0), row.get(1), row.get(2), row.get(3), row.get(4))
}

#[test]
fn a_job_that_waits_for_another_parks_and_gets_its_end_at_the_ending_commit() {
    // 0.5.0 had no durable await of a job: rq_await held a connection for
    // the whole wait
    let db = fresh_db("raquel_waits_job");
    let mut c = connect(&db);
    let (parent, attempt) = claimed(&mut c, "parents", "");
    let child: String = one(&mut c, "SELECT id::text FROM rq_enqueue('children', 'work')");
    assert_eq!(wait_job(&mut c, &parent, attempt, "child", &child), (true, None, None, None, false), "parked");
    assert_eq!(one::<String>(&mut c, &format!("SELECT status FROM jobs WHERE id = '{parent}'")), "queued");
    // a claim of the parents' queue waits in another session; the child's
    // worker, in a third, completes it with a result
    let claim = claim_in_another_session(&db, "parents", "20 seconds");
    thread::sleep(Duration::from_millis(300));
    let mut worker = connect(&db);
    worker
        .batch_execute("SELECT rq_complete(id, attempts, '{\"n\": 1}') FROM rq_claim(ARRAY['children'])")
        .unwrap();
    // handed on in the ending transaction: due, and its step recorded, at that commit
    let due: bool = one(&mut worker, &format!("SELECT scheduled_at <= rq_now_ms() FROM jobs WHERE id = '{parent}'"));
    assert!(due, "the waiting job is due at the child's commit");
    let (got, _) = claim.join().unwrap();
    assert_eq!(got, Some((parent.clone(), attempt + 1)), "woken by the child's end");
    assert_eq!(
        wait_job(&mut c, &parent, attempt + 1, "child", &child),
        (false, Some("success".into()), Some(r#"{"n": 1}"#.into()), None, false)
    );
    assert_eq!(one::<i32>(&mut c, &format!("SELECT requeues FROM jobs WHERE id = '{parent}'")), 1, "the wait used up no retry");
    // a job already ended answers at once, an exhausted one with its error
    let failed: String = one(&mut c, "SELECT id::text FROM rq_enqueue('children', 'fails', max_retry_count => 0)");
    c.batch_execute("SELECT rq_fail(id, attempts, 'boom') FROM rq_claim(ARRAY['children'])").unwrap();
    assert_eq!(
        wait_job(&mut c, &parent, attempt + 1, "second", &failed),
        (false, Some("exhausted".into()), None, Some("boom".into()), false)
    );
    assert_eq!(one::<i64>(&mut c, "SELECT count(*) FROM job_waits"), 0);
    assert_eq!(one::<i64>(&mut c, "SELECT count(*) FROM job_dependencies"), 0, "no edge left");
    // what it refuses
    for (sql, code) in [
        (format!("SELECT parked FROM rq_wait_job('{parent}', {}, 'self', '{parent}')", attempt + 1), "22023"),
        (format!("SELECT parked FROM rq_wait_job('{parent}', {}, 'none', NULL)", attempt + 1), "22023"),
        (format!("SELECT parked FROM rq_wait_job('{parent}', {}, 'unknown', '00000000-0000-7000-8000-000000000000')", attempt + 1), "P0002"),
        (format!("SELECT parked FROM rq_wait_job('{parent}', {}, 'child', '{child}')", attempt), "55000"),
        ("SELECT rq_emit('raquel:job:' || gen_random_uuid())".to_string(), "22023"),
    ] {
        assert_eq!(sqlstate(c.execute(sql.as_str(), &[])), code, "{sql}");
    }
}

#[test]
fn a_wait_for_a_job_and_that_jobs_end_that_race_lose_no_hand_on() {
    // The wait locks the awaited job; its end, begun meanwhile in another
    // session, waits for that lock and goes on after the wait's commit with
    // a snapshot taken before it, which cannot see the wait's edge: it hands
    // nothing on. The background worker, asked to look in at the wait's
    // commit, does (found by the Python library's tests: the parked job
    // stayed parked until a visit minutes later).
    let db = fresh_db("raquel_waits_job_race");
    // the background worker's first visits of a new database (CREATE
    // EXTENSION asks for one) are over, so that none settles the wait by
    // chance: the next is due at a lease's end, a minute away
    thread::sleep(Duration::from_secs(3));
    let mut c = connect(&db);
    let (parent, attempt) = claimed(&mut c, "race-parents", "");
    let (child, child_attempt) = claimed(&mut c, "race-children", "");
    let mut tx = c.transaction().unwrap();
    let parked: bool = tx
        .query_one("SELECT parked FROM rq_wait_job($1::text::uuid, $2, 'child', $3::text::uuid)", &[&parent, &attempt, &child])
        .unwrap()
        .get(0);
    assert!(parked);
    let end = {
        let (db, child) = (db.clone(), child.clone());
        thread::spawn(move || {
            connect(&db).execute("SELECT rq_complete($1::text::uuid, $2, '{\"n\": 2}')", &[&child, &child_attempt]).unwrap()
        })
    };
    thread::sleep(Duration::from_millis(300));
    assert!(!end.is_finished(), "the end waits for the wait's lock");
    tx.commit().unwrap();
    end.join().unwrap();
    let handed_on = Instant::now();
    let mut due = false;
    while !due && handed_on.elapsed() < Duration::from_secs(15) {
        thread::sleep(Duration::from_millis(100));
        due = one(&mut c, &format!("SELECT scheduled_at <= rq_now_ms() FROM jobs WHERE id = '{parent}'"));
    }
    assert!(due, "the parked job is due within 15 s of its awaited job's end");
    let again: i32 = one(&mut c, "SELECT attempts FROM rq_claim(ARRAY['race-parents'])");
    assert_eq!(
        wait_job(&mut c, &parent, again, "child", &child),
        (false, Some("success".into()), Some(r#"{"n": 2}"#.into()), None, false),
        "and its step holds the end"
    );
}

#[test]
fn a_failed_workflow_hands_its_end_to_a_waiting_job_and_leaves_that_jobs_children_alone() {
    // P fails; X, blocked after P, is cancelled with it; W waits for X and
    // has a child D of its own, blocked after W: W gets X's end, and D,
    // which runs after W and not after P, stays blocked
    let db = fresh_db("raquel_waits_job_workflow");
    let mut c = connect(&db);
    let p: String = one(&mut c, "SELECT id::text FROM rq_enqueue('wf-p', 'p', max_retry_count => 0)");
    let x: String = one(&mut c, &format!("SELECT id::text FROM rq_enqueue('wf-x', 'x', after => ARRAY['{p}'::uuid])"));
    let (w, attempt) = claimed(&mut c, "wf-w", "");
    let d: String = one(&mut c, &format!("SELECT id::text FROM rq_enqueue('wf-d', 'd', after => ARRAY['{w}'::uuid])"));
    assert!(wait_job(&mut c, &w, attempt, "x", &x).0, "W waits for X");
    c.batch_execute("SELECT rq_fail(id, attempts, 'p broke') FROM rq_claim(ARRAY['wf-p'])").unwrap();
    let status = |c: &mut postgres::Client, id: &str| -> String { one(c, &format!("SELECT status FROM jobs WHERE id = '{id}'")) };
    assert_eq!(status(&mut c, &x), "cancelled");
    assert_eq!(status(&mut c, &d), "blocked", "W's own child is not P's");
    assert!(one::<bool>(&mut c, &format!("SELECT scheduled_at <= rq_now_ms() FROM jobs WHERE id = '{w}'")), "W is due at once");
    let row = c.query_one("SELECT id::text, attempts FROM rq_claim(ARRAY['wf-w'])", &[]).unwrap();
    let (again, attempt): (String, i32) = (row.get(0), row.get(1));
    assert_eq!(again, w);
    let (parked, got, _, _, _) = wait_job(&mut c, &w, attempt, "x", &x);
    assert_eq!((parked, got.as_deref()), (false, Some("cancelled")));
    c.execute("SELECT rq_complete($1::text::uuid, $2)", &[&w, &attempt]).unwrap();
    assert_eq!(status(&mut c, &d), "queued", "released by W's success");
}

#[test]
fn the_background_worker_hands_on_an_end_its_transaction_missed_and_a_wait_times_out() {
    let db = fresh_db("raquel_waits_job_duty");
    let mut c = connect(&db);
    let (w, attempt) = claimed(&mut c, "duty-w", "");
    let job: String = one(&mut c, "SELECT id::text FROM rq_enqueue('duty-j', 'j')");
    assert!(wait_job(&mut c, &w, attempt, "j", &job).0);
    // the end and the wait raced: the ending statement saw no edge
    c.batch_execute(&format!("DELETE FROM job_dependencies WHERE child_id = '{w}'; SELECT rq_worker_wake();")).unwrap();
    c.batch_execute("SELECT rq_complete(id, attempts) FROM rq_claim(ARRAY['duty-j'])").unwrap();
    let handed = raquel_client_tests::eventually(10, || {
        one::<i64>(&mut c, &format!("SELECT count(*) FROM job_steps WHERE job_id = '{w}' AND result->>'status' = 'success'")) == 1
    });
    assert!(handed, "the settle duty handed the end on");
    assert!(one::<bool>(&mut c, &format!("SELECT scheduled_at <= rq_now_ms() FROM jobs WHERE id = '{w}'")));
    // a wait with a timeout, for a job that does not end: timed out
    let row = c.query_one("SELECT id::text, attempts FROM rq_claim(ARRAY['duty-w'])", &[]).unwrap();
    let attempt: i32 = row.get(1);
    let never: String = one(&mut c, "SELECT id::text FROM rq_enqueue('duty-never', 'n')");
    let parked: bool = one(
        &mut c,
        &format!("SELECT parked FROM rq_wait_job('{w}', {attempt}, 'never', '{never}', timeout => '1 second')"),
    );
    assert!(parked);
    let (got, took) = claim_in_another_session(&db, "duty-w", "10 seconds").join().unwrap();
    assert_eq!(got, Some((w.clone(), attempt + 1)));
    assert!(took >= Duration::from_millis(700), "back after its timeout ({took:?})");
    assert_eq!(wait_job(&mut c, &w, attempt + 1, "never", &never), (false, None, None, None, true));
}
