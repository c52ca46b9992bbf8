//! A job's history (rq_history, jobs.past_attempts): a job failed (E1),
//! then claimed again and rescued after its lease lapsed, then completed
//! shows its three attempts, the first error intact, whether rq_fail wrote
//! the row directly (src/direct.rs, checked: it ran no statement) or ran
//! its statement (raquel.direct_writes off). pg_test/sql/attempts.sql has
//! the other outcomes, the cap and the refusals.

use postgres::Client;
use raquel_client_tests::{connect, fresh_db, ran_a_statement};

/// A job of `queue` failed with E1, rescued, completed: whether the
/// failure ran a statement, and the job's history as (attempt, worker,
/// outcome, error).
fn failed_rescued_completed(c: &mut Client, queue: &str) -> (bool, Vec<(i32, Option<String>, String, Option<String>)>) {
    let id: String = c
        .query_one(&format!("SELECT id::text FROM rq_enqueue('{queue}', 'x', min_retry_delay => '0', backoff_base => '0')"), &[])
        .unwrap()
        .get(0);
    let attempt: i32 = c.query_one(&format!("SELECT attempts FROM rq_claim(ARRAY['{queue}'], 'w1')"), &[]).unwrap().get(0);
    let (ran, status) = ran_a_statement(c, |c| {
        c.query_one("SELECT status::text FROM rq_fail($1::text::uuid, $2, 'E1', 'trace of E1')", &[&id, &attempt]).unwrap().get::<_, String>(0)
    });
    assert_eq!(status, "failed");
    let attempt: i32 =
        c.query_one(&format!("SELECT attempts FROM rq_claim(ARRAY['{queue}'], 'w2', lease => '10 milliseconds')"), &[]).unwrap().get(0);
    assert_eq!(attempt, 2);
    std::thread::sleep(std::time::Duration::from_millis(50));
    c.batch_execute("SELECT rq_rescue()").unwrap(); // (or the background worker did)
    let status: String = c.query_one("SELECT status::text FROM jobs WHERE id = $1::text::uuid", &[&id]).unwrap().get(0);
    assert_eq!(status, "failed");
    let attempt: i32 = c.query_one(&format!("SELECT attempts FROM rq_claim(ARRAY['{queue}'], 'w3')"), &[]).unwrap().get(0);
    c.batch_execute(&format!("SELECT rq_complete('{id}', {attempt})")).unwrap();
    let history = c
        .query("SELECT attempt, worker, outcome, error FROM rq_history($1::text::uuid)", &[&id])
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2), r.get(3)))
        .collect();
    (ran, history)
}

fn check(history: &[(i32, Option<String>, String, Option<String>)]) {
    assert_eq!(history.len(), 3, "{history:?}");
    assert_eq!(history[0], (1, Some("w1".into()), "failed".into(), Some("E1".into())));
    assert_eq!((history[1].0, history[1].1.as_deref(), history[1].2.as_str()), (2, Some("w2"), "failed"));
    assert!(history[1].3.as_deref().is_some_and(|e| e.starts_with("lease expired: worker w2")), "{history:?}");
    assert_eq!(history[2], (3, Some("w3".into()), "success".into(), None));
}

#[test]
fn failed_rescued_then_completed_through_the_direct_path() {
    let db = fresh_db("history_direct");
    let mut c = connect(&db);
    // a first round: the backend's first calls may run statements of their own
    failed_rescued_completed(&mut c, "warm-up");
    let (ran, history) = failed_rescued_completed(&mut c, "direct");
    assert!(!ran, "rq_fail ran a statement: the direct path declined");
    check(&history);
}

#[test]
fn failed_rescued_then_completed_through_the_statement() {
    let db = fresh_db("history_statement");
    let mut c = connect(&db);
    c.batch_execute("SET raquel.direct_writes = off").unwrap();
    let (ran, history) = failed_rescued_completed(&mut c, "statement");
    assert!(ran, "rq_fail ran no statement");
    check(&history);
}

#[test]
fn a_first_attempt_success_writes_no_history() {
    let db = fresh_db("history_once");
    let mut c = connect(&db);
    c.batch_execute("SELECT rq_enqueue('once', 'x')").unwrap();
    let id: String = c
        .query_one("SELECT d.id::text FROM rq_claim(ARRAY['once']) c, rq_complete(c.id, c.attempts) d", &[])
        .unwrap()
        .get(0);
    let row = c
        .query_one(
            "SELECT j.past_attempts IS NULL, (SELECT count(*) FROM rq_history(j.id)) FROM jobs j WHERE j.id = $1::text::uuid",
            &[&id],
        )
        .unwrap();
    assert!(row.get::<_, bool>(0));
    assert_eq!(row.get::<_, i64>(1), 1);
}

/// A jobs table without past_attempts (an install of 0.5.0 whose update has
/// not run, here made by dropping the column): every verb that would append
/// works as before, writing no history, the failure still directly.
#[test]
fn a_table_without_the_column_still_works() {
    let db = fresh_db("history_without_column");
    let mut c = connect(&db);
    c.batch_execute("ALTER TABLE jobs DROP COLUMN past_attempts").unwrap();
    for direct in [true, false] {
        if !direct {
            c.batch_execute("SET raquel.direct_writes = off").unwrap();
        }
        let queue = if direct { "old-direct" } else { "old-statement" };
        let id: String = c
            .query_one(
                &format!("SELECT id::text FROM rq_enqueue('{queue}', 'x', max_retry_count => 1, min_retry_delay => '0', backoff_base => '0')"),
                &[],
            )
            .unwrap()
            .get(0);
        let claim = format!("SELECT attempts FROM rq_claim(ARRAY['{queue}'], 'w')");
        // warm up, then a failure with a retry left
        let attempt: i32 = c.query_one(&claim, &[]).unwrap().get(0);
        let (ran, status) = ran_a_statement(&mut c, |c| {
            c.query_one("SELECT status::text FROM rq_fail($1::text::uuid, $2, 'E1')", &[&id, &attempt]).unwrap().get::<_, String>(0)
        });
        assert_eq!(status, "failed");
        if !direct {
            assert!(ran, "rq_fail ran no statement");
        }
        let mut step = |verb: &str| -> String {
            let attempt: i32 = c.query_one(&claim, &[]).unwrap().get(0);
            c.query_one(&format!("SELECT status::text FROM {verb}('{id}', {attempt})"), &[]).unwrap().get(0)
        };
        assert_eq!(step("rq_reschedule"), "queued");
        assert_eq!(step("rq_reject"), "queued");
        assert_eq!(step("rq_fail"), "exhausted");
        let status: String = c.query_one("SELECT status::text FROM rq_retry($1::text::uuid)", &[&id]).unwrap().get(0);
        assert_eq!(status, "queued");
    }
    // the direct failure, once the backend's first calls are made
    c.batch_execute("RESET raquel.direct_writes").unwrap();
    let id: String = c
        .query_one("SELECT id::text FROM rq_enqueue('old-direct-2', 'x', min_retry_delay => '0', backoff_base => '0')", &[])
        .unwrap()
        .get(0);
    let attempt: i32 = c.query_one("SELECT attempts FROM rq_claim(ARRAY['old-direct-2'], 'w')", &[]).unwrap().get(0);
    let (ran, status) = ran_a_statement(&mut c, |c| {
        c.query_one("SELECT status::text FROM rq_fail($1::text::uuid, $2, 'E1')", &[&id, &attempt]).unwrap().get::<_, String>(0)
    });
    assert_eq!(status, "failed");
    assert!(!ran, "rq_fail ran a statement: the direct path declined a table without past_attempts");
}
