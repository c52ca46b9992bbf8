//! A claim costs what its own queues hold ready, not other queues' backlogs
//! nor jobs scheduled for later (0.1.0's kept plans walked an index past a
//! million other jobs: 400 ms for a claim that should take half a
//! millisecond). Measured without a clock: the index pages a claim touches,
//! from pg_statio_user_indexes, with the plans rq_claim keeps.

use raquel_client_tests::{connect, fresh_db};

/// Index pages (hits and reads) of the jobs table's indexes so far.
fn index_pages(observer: &mut postgres::Client) -> i64 {
    observer.batch_execute("SELECT pg_stat_clear_snapshot()").unwrap();
    observer
        .query_one(
            "SELECT coalesce(sum(idx_blks_hit + idx_blks_read), 0)::bigint FROM pg_statio_user_indexes WHERE relname = 'jobs'",
            &[],
        )
        .unwrap()
        .get(0)
}

/// The index pages one `claim` touches in `worker`'s session (its second
/// call, with the plan kept from the first), rolled back so the table stays
/// as it was.
fn pages_of(worker: &mut postgres::Client, observer: &mut postgres::Client, claim: &str) -> i64 {
    for _ in 0..2 {
        worker.batch_execute(&format!("BEGIN; {claim}; ROLLBACK")).unwrap();
    }
    worker.batch_execute("SELECT pg_stat_force_next_flush()").unwrap();
    worker.batch_execute("SELECT 1").unwrap();
    let before = index_pages(observer);
    worker.batch_execute(&format!("BEGIN; {claim}; ROLLBACK")).unwrap();
    worker.batch_execute("SELECT pg_stat_force_next_flush()").unwrap();
    worker.batch_execute("SELECT 1").unwrap();
    index_pages(observer) - before
}

/// A database with 'small' (5 ready jobs), 'big' (50000 ready, all due
/// before 'tail''s 5, in the order of the index of every queue), and with
/// `later` also 50000 jobs of 'big' at a higher priority and 50000 of queue
/// 'later', all due in an hour.
fn database(name: &str, later: bool) -> String {
    let db = fresh_db(name);
    let mut setup = connect(&db);
    setup
        .batch_execute(
            "INSERT INTO jobs (queue, payload) SELECT 'small', 'p' FROM generate_series(1, 5);
             INSERT INTO jobs (queue, payload, scheduled_at) SELECT 'big', 'p', rq_now_ms() - 1000 FROM generate_series(1, 50000);
             INSERT INTO jobs (queue, payload) SELECT 'tail', 'p' FROM generate_series(1, 5)",
        )
        .unwrap();
    if later {
        setup
            .batch_execute(
                "INSERT INTO jobs (queue, payload, scheduled_at, priority) SELECT 'big', 'p', rq_now_ms() + 3600000, 5 FROM generate_series(1, 50000);
                 INSERT INTO jobs (queue, payload, scheduled_at) SELECT 'later', 'p', rq_now_ms() + 3600000 FROM generate_series(1, 50000)",
            )
            .unwrap();
    }
    setup.batch_execute("VACUUM ANALYZE jobs").unwrap();
    db
}

#[test]
fn a_claim_touches_as_much_index_whatever_other_queues_and_later_jobs_hold() {
    let (plain, loaded) = (database("rq_it_claim_cost_plain", false), database("rq_it_claim_cost_loaded", true));
    let mut costs = Vec::new();
    for (claim, found) in [
        ("SELECT count(*) FROM rq_claim(ARRAY['small'])", 1),
        ("SELECT count(*) FROM rq_claim(ARRAY['later'])", 0),
        ("SELECT count(*) FROM rq_claim(ARRAY['big'])", 1),
        ("SELECT count(*) FROM rq_claim(ARRAY['tail'])", 1),
        ("SELECT count(*) FROM rq_claim(ARRAY['tail'], batch => 5)", 5),
        ("SELECT count(*) FROM rq_claim(ARRAY['small', 'later'])", 1),
        ("SELECT count(*) FROM rq_claim(ARRAY['small', 'later'], batch => 10)", 5),
        ("SELECT count(*) FROM rq_claim(NULL)", 1),
        ("SELECT count(*) FROM rq_claim(NULL, batch => 100)", 100),
        ("SELECT count(*) FROM rq_claim(ARRAY['nothing'], wait => '10 ms')", 0),
        ("SELECT count(*) FROM rq_claim(ARRAY['later', 'nothing'], wait => '10 ms')", 0),
    ] {
        let mut pages = Vec::new();
        for db in [&plain, &loaded] {
            let (mut worker, mut observer) = (connect(db), connect(db));
            worker.batch_execute("BEGIN").unwrap();
            let got: i64 = worker.query_one(claim, &[]).unwrap().get(0);
            worker.batch_execute("ROLLBACK").unwrap();
            assert_eq!(got, found, "{claim} in {db}");
            pages.push(pages_of(&mut worker, &mut observer, claim));
        }
        costs.push((claim, found, pages[0], pages[1]));
    }
    // 100000 jobs due later take about 500 index pages: a claim whose plan
    // walked past them would touch hundreds more where they are. Each of
    // these makes a probe more per priority; and the indexes, twice as
    // large, are a level deeper for each row the claim's UPDATE indexes.
    // And a claim of 'tail' that walked the index of every queue would step
    // over 'big''s 50000 ready jobs (250 pages) in either database.
    // A claim on any queue also skips along the ready index from queue to
    // queue and takes candidates from each (queue, priority) lane
    // (sql/claim.queues_any.sql): the loaded database has one more queue and
    // one more lane, each some probes more, far fewer than a walk's 250.
    let any_queue = |claim: &str| if claim.contains("rq_claim(NULL") { 100 } else { 0 };
    let walks: Vec<_> = costs
        .iter()
        .filter(|(claim, found, plain, loaded)| {
            *loaded > *plain + 30 + 3 * found + any_queue(claim) || *plain > 60 + 10 * found
        })
        .collect();
    assert!(
        walks.is_empty(),
        "claims that cost more beside jobs due later (claim, jobs, pages without, pages with): {walks:?}\nall: {costs:?}"
    );
}
