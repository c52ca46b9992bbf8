//! Metrics over time (sql/metrics.sql, src/metrics.rs): what the verbs did,
//! per queue and minute, recorded by the background worker's duty.

use raquel_client_tests::{connect, eventually, fresh_db, reset_server, set_server, sqlstate};
use std::thread;
use std::time::Duration;

/// The sums over every recorded minute of `queue`: enqueued, claimed,
/// succeeded, failed, rescued, expired. Records first, as the worker does.
fn sums(c: &mut postgres::Client, queue: &str) -> [i64; 6] {
    c.batch_execute("SELECT raquel_internal.rq_record_metrics()").unwrap();
    let row = c
        .query_one(
            "SELECT coalesce(sum(enqueued), 0)::bigint, coalesce(sum(claimed), 0)::bigint, coalesce(sum(succeeded), 0)::bigint,
                    coalesce(sum(failed), 0)::bigint, coalesce(sum(rescued), 0)::bigint, coalesce(sum(expired), 0)::bigint
             FROM rq_metrics($1, '1 hour')",
            &[&queue],
        )
        .unwrap();
    [row.get(0), row.get(1), row.get(2), row.get(3), row.get(4), row.get(5)]
}

#[test]
fn each_verb_is_counted_once_per_committed_job() {
    let db = fresh_db("rq_it_metrics");
    let mut c = connect(&db);
    c.batch_execute(
        "SELECT rq_enqueue('m1', i::text) FROM generate_series(1, 8) i;
         SELECT rq_enqueue_batch('m1', ARRAY['b1']);
         INSERT INTO jobs (queue, payload) VALUES ('m1', 'a plain insert');",
    )
    .unwrap();
    // rolled back: counts nothing
    let mut tx = c.transaction().unwrap();
    tx.batch_execute("SELECT rq_enqueue('m1', 'undone'); SELECT count(*) FROM rq_claim(ARRAY['m1'])").unwrap();
    tx.rollback().unwrap();
    let jobs: Vec<(String, i32)> = c
        .query("SELECT id::text, attempts FROM rq_claim(ARRAY['m1'], batch => 6)", &[])
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    for (id, attempt) in &jobs[..4] {
        c.execute("SELECT rq_complete($1::text::uuid, $2)", &[id, attempt]).unwrap();
    }
    c.execute("SELECT rq_fail($1::text::uuid, $2, 'boom')", &[&jobs[4].0, &jobs[4].1]).unwrap();
    c.execute("SELECT rq_complete_batch(ARRAY[$1::text::uuid], ARRAY[$2::integer])", &[&jobs[5].0, &jobs[5].1]).unwrap();
    // two lapsed claims rescued, two jobs expired
    c.batch_execute(
        "SELECT rq_enqueue('m2', i::text) FROM generate_series(1, 2) i;
         SELECT count(*) FROM rq_claim(ARRAY['m2'], batch => 2, lease => '1 ms');
         SELECT rq_enqueue('m3', 'x', at => now() - interval '1 minute', max_age => '1 second') FROM generate_series(1, 2);",
    )
    .unwrap();
    thread::sleep(Duration::from_millis(20));
    c.batch_execute("SELECT rq_rescue(); SELECT rq_expire();").unwrap();

    // the worker may record some of it first: the sums are what counts
    let want = [("m1", [10, 6, 5, 1, 0, 0]), ("m2", [2, 2, 0, 2, 2, 0]), ("m3", [2, 0, 0, 0, 0, 2])];
    let mut seen = Vec::new();
    let all_counted = eventually(10, || {
        seen = want.iter().map(|(q, _)| sums(&mut c, q)).collect();
        seen.iter().zip(&want).all(|(got, (_, want))| got == want)
    });
    assert!(all_counted, "per queue [enqueued, claimed, succeeded, failed, rescued, expired]: {seen:?}, want {want:?}");

    // a backlog was taken for the minute that ended before the first record
    let backlog: i64 = c.query_one("SELECT count(*) FROM metrics WHERE backlog IS NOT NULL", &[]).unwrap().get(0);
    assert!(backlog >= 1, "a backlog row");
}

#[test]
fn wait_and_run_times_are_percentiles_of_what_happened() {
    let db = fresh_db("rq_it_metrics_times");
    let mut c = connect(&db);
    c.batch_execute("SELECT rq_enqueue('slow', i::text) FROM generate_series(1, 4) i").unwrap();
    for _ in 0..4 {
        let row = c.query_one("SELECT id::text, attempts FROM rq_claim(ARRAY['slow'])", &[]).unwrap();
        let (id, attempt): (String, i32) = (row.get(0), row.get(1));
        thread::sleep(Duration::from_millis(300));
        c.execute("SELECT rq_complete($1::text::uuid, $2)", &[&id, &attempt]).unwrap();
    }
    // a job due 2 s ago waits about 2 s
    c.batch_execute("SELECT rq_enqueue('late', 'x', at => now() - interval '2 seconds')").unwrap();
    c.batch_execute("SELECT count(*) FROM rq_claim(ARRAY['late'])").unwrap();
    c.batch_execute("SELECT raquel_internal.rq_record_metrics()").unwrap();
    let times = |c: &mut postgres::Client, sql: &str| -> Option<f64> {
        c.query_one(sql, &[]).unwrap().get(0)
    };
    // the histograms of every minute added: a minute that began during the
    // runs leaves the claims' minute a row whose run histogram is all zeros
    let run = times(
        &mut c,
        "SELECT raquel_internal.rq_histogram_percentile(array_agg(n ORDER BY i), 0.5)
         FROM (SELECT i, sum(h)::integer AS n FROM metrics, unnest(run_histogram) WITH ORDINALITY u(h, i)
               WHERE queue = 'slow' GROUP BY i) buckets",
    );
    let run = run.expect("run times recorded");
    assert!((240.0..=380.0).contains(&run), "300 ms runs read as {run} ms");
    let wait = times(&mut c, "SELECT max(wait_p50_ms) FROM rq_metrics('late')").expect("a wait recorded");
    assert!((1600.0..=2800.0).contains(&wait), "a 2 s wait reads as {wait} ms");
    let quick = times(&mut c, "SELECT max(wait_p99_ms) FROM rq_metrics('slow')").expect("waits recorded");
    assert!(quick < 1500.0, "jobs claimed as soon as they were due wait little: {quick} ms");
}

#[test]
fn rq_prometheus_writes_the_text_format() {
    let db = fresh_db("rq_it_metrics_prometheus");
    let mut c = connect(&db);
    c.batch_execute(
        "SELECT rq_enqueue('mail', 'x'); SELECT rq_enqueue('mail', 'y');
         SELECT rq_complete(id, attempts) FROM rq_claim(ARRAY['mail']) j;
         SELECT rq_enqueue(E'we\"ird\\\\q', 'z');",
    )
    .unwrap();
    // a transaction of its own: what the one above did is counted at its commit
    c.batch_execute("SELECT raquel_internal.rq_record_metrics()").unwrap();
    let text: String = c.query_one("SELECT rq_prometheus()", &[]).unwrap().get(0);
    for line in [
        "# TYPE raquel_jobs gauge",
        "raquel_jobs{queue=\"mail\",status=\"queued\"} 1",
        "raquel_jobs{queue=\"mail\",status=\"success\"} 1",
        "raquel_events_5m{queue=\"mail\",event=\"enqueued\"} 2",
        "raquel_events_5m{queue=\"mail\",event=\"succeeded\"} 1",
        "raquel_jobs{queue=\"we\\\"ird\\\\q\",status=\"queued\"} 1",
    ] {
        assert!(text.lines().any(|l| l == line), "missing {line:?} in:\n{text}");
    }
    assert!(text.lines().any(|l| l.starts_with("raquel_run_seconds{queue=\"mail\",quantile=\"0.5\"} ")), "{text}");
    // each metric's lines are one group
    let names: Vec<&str> = text.lines().filter(|l| !l.starts_with('#')).map(|l| l.split('{').next().unwrap()).collect();
    let mut groups = names.clone();
    groups.dedup();
    let mut distinct = groups.clone();
    distinct.sort();
    distinct.dedup();
    assert_eq!(groups.len(), distinct.len(), "a metric's lines are split: {groups:?}");
    // every sample line is `name{labels} number`
    for l in text.lines().filter(|l| !l.starts_with('#')) {
        let value = l.rsplit(' ').next().unwrap();
        assert!(value.parse::<f64>().is_ok(), "{l}");
    }
}

#[test]
fn old_minutes_go_with_the_retention_and_metrics_off_counts_nothing() {
    let db = fresh_db("rq_it_metrics_prune");
    let mut c = connect(&db);
    c.batch_execute(
        "INSERT INTO metrics (queue, minute, enqueued) VALUES
             ('old', (rq_now_ms() / 60000 - 60 * 24 * 30) * 60000, 5),
             ('new', (rq_now_ms() / 60000 - 5) * 60000, 7);
         SELECT rq_prune(retention => '1 day');",
    )
    .unwrap();
    let left: Vec<String> = c.query("SELECT queue FROM metrics ORDER BY 1", &[]).unwrap().iter().map(|r| r.get(0)).collect();
    assert_eq!(left, ["new"]);

    c.batch_execute("SET raquel.metrics = off; SELECT rq_enqueue('quiet', 'x'); SELECT raquel_internal.rq_record_metrics();").unwrap();
    let quiet: i64 = c.query_one("SELECT count(*) FROM metrics WHERE queue = 'quiet' AND enqueued > 0", &[]).unwrap().get(0);
    assert_eq!(quiet, 0);
    assert_eq!(sqlstate(c.execute("SELECT raquel_internal.rq_note_metric('q', 'nonsense', NULL)", &[])), "22023");
}

#[test]
fn the_background_worker_records_on_its_own() {
    let db = fresh_db("rq_it_metrics_worker");
    let mut c = connect(&db);
    c.batch_execute("SELECT rq_enqueue('bg', i::text) FROM generate_series(1, 3) i; SELECT rq_worker_wake();").unwrap();
    let recorded = eventually(20, || {
        let n: i64 = c.query_one("SELECT coalesce(sum(enqueued), 0)::bigint FROM metrics WHERE queue = 'bg'", &[]).unwrap().get(0);
        n == 3
    });
    assert!(recorded, "the worker's round added the three enqueues to the metrics table");
}

fn server_log_len() -> usize {
    std::env::var("RAQUEL_TEST_LOG").ok().and_then(|p| std::fs::metadata(p).ok()).map_or(0, |m| m.len() as usize)
}

fn server_log_since(from: usize) -> String {
    let path = std::env::var("RAQUEL_TEST_LOG").expect("RAQUEL_TEST_LOG is not set: run the tests through bin/test");
    String::from_utf8_lossy(&std::fs::read(path).unwrap()[from..]).into_owned()
}

fn lost(c: &mut postgres::Client) -> i64 {
    c.query_one("SELECT rq_metrics_lost()", &[]).unwrap().get(0)
}

/// Puts the served databases back however the test ends.
struct ServedDatabases;

impl ServedDatabases {
    fn only(db: &str) -> ServedDatabases {
        set_server(&[("raquel.databases", db)]);
        ServedDatabases
    }
}

impl Drop for ServedDatabases {
    fn drop(&mut self) {
        reset_server(&["raquel.databases"]);
    }
}

/// Enqueues a job in each of `n` queues named `prefix`1 … `prefix`n.
fn one_job_in_each_of(c: &mut postgres::Client, prefix: &str, n: i32) {
    c.execute("SELECT rq_enqueue($1 || i, 'x') FROM generate_series(1, $2) i", &[&prefix, &n]).unwrap();
}

#[test]
fn a_dropped_databases_metrics_slots_are_freed_and_lost_counts_are_said() {
    // 0.4.0 freed a slot of shared memory only in a round of the worker in
    // the database that filled it: after a database the worker did not
    // serve filled the 256 slots and was dropped, another database counted
    // 0 of 30 enqueues over 3 minutes, with no word of it.
    let (a1, a2) = (fresh_db("rq_it_metrics_slots_a1"), fresh_db("rq_it_metrics_slots_a2"));
    let b = fresh_db("rq_it_metrics_slots_b");
    // the worker serves b alone: a1's and a2's figures stay in their slots
    let served = ServedDatabases::only(&b);
    thread::sleep(Duration::from_millis(500));
    let from = server_log_len();
    let mut cb = connect(&b);
    one_job_in_each_of(&mut connect(&a1), "a", 200);
    one_job_in_each_of(&mut connect(&a2), "a", 200);
    one_job_in_each_of(&mut cb, "full", 30);
    assert_eq!(sums(&mut cb, "full1")[0], 0, "every slot was taken");
    let warned = eventually(10, || server_log_since(from).contains("events were not counted in the metrics"));
    let mut admin = connect("postgres");
    for db in [&a1, &a2] {
        admin.batch_execute(&format!("DROP DATABASE {db} WITH (FORCE)")).unwrap();
    }
    thread::sleep(Duration::from_secs(3)); // the launcher's next rounds free their slots
    one_job_in_each_of(&mut cb, "after", 30);
    let counted: i64 = (1..=30).map(|i| sums(&mut cb, &format!("after{i}"))[0]).sum();
    drop(served);
    assert_eq!(counted, 30, "enqueues counted after the databases that held the slots were dropped");
    assert!(warned, "no WARNING said that events were not counted");
    // a database holds at most half the slots: a1 and a2 each kept 128 and
    // lost 72, b's 30 found none, and a1's and a2's went with them. The
    // other tests of this file share the server: a slot one of their
    // databases let go while b enqueued was b's to take (a CI run saw 1)
    let b_counted: i64 = (1..=30).map(|i| sums(&mut cb, &format!("full{i}"))[0]).sum();
    let lost_events = lost(&mut cb);
    assert!(lost_events >= 2 * 72 + (30 - b_counted) + 2 * 128, "the events with no slot are counted as lost: {lost_events} (b counted {b_counted})");
}

#[test]
fn queues_are_counted_under_their_whole_names() {
    // 0.4.0 kept the first 64 bytes of a queue's name: two queues sharing
    // them were counted as one, and a name could be cut inside a character.
    let db = fresh_db("rq_it_metrics_names");
    let mut c = connect(&db);
    let stem = "x".repeat(63);
    let (first, second, accented) = (format!("{stem}-one"), format!("{stem}-two"), format!("{stem}é{}", "y".repeat(900)));
    for (queue, n) in [(&first, 1), (&second, 2), (&accented, 3)] {
        c.execute("SELECT rq_enqueue($1, 'x') FROM generate_series(1, $2)", &[queue, &n]).unwrap();
    }
    assert_eq!(sums(&mut c, &first)[0], 1);
    assert_eq!(sums(&mut c, &second)[0], 2);
    assert_eq!(sums(&mut c, &accented)[0], 3);
}

#[test]
fn rq_prometheus_and_the_backlog_stay_bounded_with_many_queues() {
    // 0.4.0: rq_prometheus over 10,000 queues took 53.6 s (its text a line
    // per queue and status), and each recording kept a backlog row per
    // queue with ready jobs (200,000 queues: 1.4 M rows in 16 minutes).
    let queues: i32 = std::env::var("RAQUEL_METRICS_QUEUES").ok().and_then(|n| n.parse().ok()).unwrap_or(10_000);
    let db = fresh_db("rq_it_metrics_many");
    let mut c = connect(&db);
    // enqueued without counting, so that no queue had events this minute
    c.batch_execute("SET raquel.metrics = off").unwrap();
    c.execute(
        "INSERT INTO jobs (queue, payload, scheduled_at)
         SELECT 'q' || i, 'x', rq_now_ms() - 1000 FROM generate_series(1, $1) i, generate_series(1, 1 + i % 3)",
        &[&queues],
    )
    .unwrap();
    c.batch_execute("RESET raquel.metrics; DELETE FROM metrics; SELECT raquel_internal.rq_record_metrics()").unwrap();
    let backlog_rows: i64 = c.query_one("SELECT count(*) FROM metrics WHERE backlog IS NOT NULL", &[]).unwrap().get(0);
    assert!(backlog_rows <= 100, "{backlog_rows} backlog rows for {queues} idle queues");
    let longest: i64 = c.query_one("SELECT min(backlog) FROM metrics WHERE backlog IS NOT NULL", &[]).unwrap().get(0);
    assert_eq!(longest, 3, "the longest backlogs are the ones kept");

    let started = std::time::Instant::now();
    let text: String = c.query_one("SELECT rq_prometheus()", &[]).unwrap().get(0);
    let took = started.elapsed();
    let per_queue = text.lines().filter(|l| l.starts_with("raquel_jobs{")).count();
    assert!(per_queue <= 100 * 8, "{per_queue} raquel_jobs lines for the 100 queues shown");
    assert!(text.len() < 200_000, "rq_prometheus wrote {} bytes", text.len());
    let total: i64 = c.query_one("SELECT count(*) FROM jobs", &[]).unwrap().get(0);
    assert!(text.lines().any(|l| l == format!("raquel_jobs_all{{status=\"queued\"}} {total}")), "the totals cover every queue");
    assert!(text.lines().any(|l| l == format!("raquel_queues {queues}")));
    assert!(text.lines().any(|l| l.starts_with("raquel_metrics_lost_total ")));
    // the claim cursors' counts, as rq_cursor_counts() has them
    let cursors = c.query_one("SELECT claims_with_cursors, places_given_up FROM raquel_internal.rq_cursor_counts()", &[]).unwrap();
    let (used, given_up): (i64, i64) = (cursors.get(0), cursors.get(1));
    let line = |name: &str| text.lines().find(|l| l.starts_with(name)).and_then(|l| l.rsplit(' ').next()?.parse::<i64>().ok());
    assert!(line("raquel_cursor_claims_total{cursors=\"used\"} ").is_some_and(|n| n <= used), "{text}");
    assert!(line("raquel_cursor_limits_total{limit=\"places\"} ").is_some_and(|n| n <= given_up), "{text}");
    let shown: i64 = text.lines().filter(|l| l.starts_with("raquel_jobs{")).count() as i64;
    let all: String = c.query_one("SELECT rq_prometheus(100000)", &[]).unwrap().get(0);
    assert_eq!(all.lines().filter(|l| l.starts_with("raquel_jobs{")).count() as i32, queues, "max_queues shows more");
    eprintln!("rq_prometheus over {queues} queues: {took:?}, {} bytes, {shown} per-queue lines", text.len());
}
