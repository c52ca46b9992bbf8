//! A key held for a period after its job ends (rq_enqueue's key_period):
//! "at most once an hour" jobs.

use raquel_client_tests::{connect, fresh_db, sqlstate};

#[test]
fn a_key_enqueued_again_within_its_period_gets_the_ended_job_back() {
    let db = fresh_db("key_period");
    let mut c = connect(&db);
    let once = |c: &mut postgres::Client, period: &str| -> (String, String) {
        let row = c
            .query_one(&format!("SELECT id::text, status FROM rq_enqueue('hourly', 'p', key => 'k', key_period => '{period}')"), &[])
            .unwrap();
        (row.get(0), row.get(1))
    };
    let (first, status) = once(&mut c, "1 hour");
    assert_eq!(status, "queued");
    // while unfinished, the key gives it back as any key does
    assert_eq!(once(&mut c, "1 hour").0, first);
    c.batch_execute("SELECT rq_complete(id, attempts) FROM rq_claim(ARRAY['hourly'])").unwrap();
    // ended less than an hour ago: the same job, finished
    let (again, status) = once(&mut c, "1 hour");
    assert_eq!((again.as_str(), status.as_str()), (first.as_str(), "success"));
    // an enqueue of the key without key_period does not look at the hold
    let plain: String = c.query_one("SELECT id::text FROM rq_enqueue('hourly', 'p', key => 'k')", &[]).unwrap().get(0);
    assert_ne!(plain, first);
    c.batch_execute(&format!("SELECT rq_cancel('{plain}')")).unwrap();

    // a short period runs out: then a new job
    let (short, _) = {
        let row = c
            .query_one("SELECT id::text, status FROM rq_enqueue('brief', 'p', key => 'b', key_period => '200 milliseconds')", &[])
            .unwrap();
        (row.get::<_, String>(0), row.get::<_, String>(1))
    };
    c.batch_execute("SELECT rq_complete(id, attempts) FROM rq_claim(ARRAY['brief'])").unwrap();
    let within: String = c
        .query_one("SELECT id::text FROM rq_enqueue('brief', 'p', key => 'b', key_period => '200 milliseconds')", &[])
        .unwrap()
        .get(0);
    assert_eq!(within, short);
    std::thread::sleep(std::time::Duration::from_millis(300));
    let after: String = c
        .query_one("SELECT id::text FROM rq_enqueue('brief', 'p', key => 'b', key_period => '200 milliseconds')", &[])
        .unwrap()
        .get(0);
    assert_ne!(after, short, "the period is over");
    // the prune duty forgets holds whose time is up
    c.batch_execute("SELECT rq_prune()").unwrap();
    let holds: i64 = c.query_one("SELECT count(*) FROM key_holds WHERE queue = 'brief'", &[]).unwrap().get(0);
    assert_eq!(holds, 0);

    assert_eq!(sqlstate(c.batch_execute("SELECT rq_enqueue('q', 'p', key_period => '1 hour')")), "22023");
    assert_eq!(sqlstate(c.batch_execute("SELECT rq_enqueue('q', 'p', key => 'x', key_period => '0 seconds')")), "22023");
}
