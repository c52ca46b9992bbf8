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

/// The index pages one `claim` touches in `worker`'s session (with the
/// plan kept from the calls before), rolled back so the table stays as it
/// was: the fewest of three calls. The figure counts every session's
/// touches of the database's indexes, and under load a housekeeping visit
/// or autovacuum can fall into one call's (a waiting claim on PostgreSQL
/// 15 read 75 pages once, beside the 17 and 18 builds, against at most 33
/// allowed); a claim that walks the index walks it in every call.
fn pages_of(worker: &mut postgres::Client, observer: &mut postgres::Client, claim: &str) -> i64 {
    for _ in 0..2 {
        worker.batch_execute(&format!("BEGIN; {claim}; ROLLBACK")).unwrap();
    }
    let mut fewest = i64::MAX;
    for _ in 0..3 {
        worker.batch_execute("SELECT pg_stat_force_next_flush()").unwrap();
        worker.batch_execute("SELECT 1").unwrap();
        let before = index_pages(observer);
        worker.batch_execute(&format!("BEGIN; {claim}; ROLLBACK")).unwrap();
        worker.batch_execute("SELECT pg_stat_force_next_flush()").unwrap();
        worker.batch_execute("SELECT 1").unwrap();
        fewest = fewest.min(index_pages(observer) - before);
    }
    fewest
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

/// A claim on any queue costs what the ready queues hold, not every queue
/// with jobs: 0.5.0 probed each queue's part of the ready index, so 50,000
/// queues that each held one job due later (any role that may enqueue can
/// make them) cost every `rq_claim(NULL)` 0.5 to 1.6 s. Here those queues
/// would cost a walk 50,000 probes, more than 100,000 index pages; the
/// index of every queue's ready jobs (jobs_ready_idx) costs it a few.
#[test]
fn a_claim_on_any_queue_costs_the_same_beside_fifty_thousand_queues_of_jobs_due_later() {
    let (plain, loaded) = (fresh_db("rq_it_claim_cost_any_plain"), fresh_db("rq_it_claim_cost_any_loaded"));
    for db in [&plain, &loaded] {
        let mut setup = connect(db);
        setup
            .batch_execute(
                "INSERT INTO jobs (queue, payload) SELECT 'ready-' || i, 'p' FROM generate_series(1, 5) i;
                 INSERT INTO jobs (queue, payload, priority) SELECT 'urgent', 'p', 9 FROM generate_series(1, 3)",
            )
            .unwrap();
        if db == &loaded {
            // one job due in an hour in each of 50,000 queues, at the highest
            // priority, ahead of every ready job in claim order
            setup
                .batch_execute(
                    "INSERT INTO jobs (queue, payload, scheduled_at, priority)
                     SELECT 'later-' || i, 'p', rq_now_ms() + 3600000, 100 FROM generate_series(1, 50000) i",
                )
                .unwrap();
        }
        setup.batch_execute("VACUUM ANALYZE jobs").unwrap();
    }
    let mut costs = Vec::new();
    for (claim, found, first) in [
        ("SELECT count(*), min(priority) FROM rq_claim(NULL)", 1, 9),
        ("SELECT count(*), min(priority) FROM rq_claim(NULL, batch => 5)", 5, 0),
        ("SELECT count(*), min(priority) FROM rq_take(NULL, batch => 2)", 2, 9),
    ] {
        let mut pages = Vec::new();
        for db in [&plain, &loaded] {
            let (mut worker, mut observer) = (connect(db), connect(db));
            worker.batch_execute("BEGIN").unwrap();
            let row = worker.query_one(claim, &[]).unwrap();
            worker.batch_execute("ROLLBACK").unwrap();
            assert_eq!((row.get::<_, i64>(0), row.get::<_, Option<i32>>(1)), (found, Some(first)), "{claim} in {db}");
            pages.push(pages_of(&mut worker, &mut observer, claim));
        }
        costs.push((claim, pages[0], pages[1]));
    }
    // The loaded index is a level deeper and its priority 100 is one probe
    // more; and each job claimed writes entries into the primary key and
    // the lease index, a level deeper too (measured: 11 pages for 5 jobs
    // alone, 43 beside the queues). A walk would touch over 100,000.
    let walks: Vec<_> = costs.iter().zip([1, 5, 2]).filter(|((_, plain, loaded), found)| *loaded > *plain + 30 + 8 * found).collect();
    assert!(walks.is_empty(), "claims on any queue that cost more beside 50,000 queues of later jobs (claim, pages without, pages with): {walks:?}");

    // And a waiting claim on any queue, which looks for the next job due
    // later, finds it beside them without a walk too.
    let (mut worker, mut observer) = (connect(&loaded), connect(&loaded));
    worker.batch_execute("UPDATE jobs SET status = 'cancelled', finished_at = rq_now_ms() WHERE queue NOT LIKE 'later-%'").unwrap();
    let pages = pages_of(&mut worker, &mut observer, "SELECT count(*) FROM rq_claim(NULL, wait => '10 ms')");
    assert!(pages < 60, "a waiting claim on any queue beside 50,000 queues of later jobs touched {pages} index pages");
}
