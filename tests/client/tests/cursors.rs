//! Claim cursors (src/cursors.rs), across real sessions: a claim behind a
//! snapshot held open steps over none of the entries of the jobs claimed
//! before it, and whatever makes a job ready behind a cursor (an insert, a
//! claim or a take rolled back, a take committed unfinished, a verb that
//! makes a job ready again, a new priority) has it claimed next; producers
//! inserting jobs due in the past while four workers claim lose none. The
//! cursors' limits are settings: a server of its own with small ones shows
//! each limit reached in rq_stats and still claims the right job.

use raquel_client_tests::cluster::Cluster;
use raquel_client_tests::{connect, eventually, fresh_db};
use std::collections::HashSet;
use std::thread;
use std::time::Duration;

fn one<T: for<'a> postgres::types::FromSql<'a>>(c: &mut postgres::Client, sql: &str) -> T {
    c.query_one(sql, &[]).unwrap().get(0)
}

/// Claims and completes `n` jobs of `queue`, one a transaction.
fn work(c: &mut postgres::Client, queue: &str, n: usize) {
    for _ in 0..n {
        let done: i64 = c
            .query_one("SELECT count(rq_complete(id, attempts)) FROM rq_claim(ARRAY[$1])", &[&queue])
            .unwrap()
            .get(0);
        assert_eq!(done, 1, "a job of {queue} to work");
    }
}

/// The entries of the ready index one claim of `queue` reads, on a
/// connection of its own (a backend's counts are flushed at most once a
/// second), in a transaction that it rolls back.
fn entries_read_by_a_claim(db: &str, queue: &str) -> i64 {
    let mut c = connect(db);
    let mut tx = c.transaction().unwrap();
    assert_eq!(tx.query("SELECT id FROM rq_claim(ARRAY[$1])", &[&queue]).unwrap().len(), 1);
    let read = tx
        .query_one("SELECT pg_stat_get_xact_tuples_returned('jobs_ready_by_queue_idx'::regclass)", &[])
        .unwrap()
        .get(0);
    tx.rollback().unwrap();
    read
}

/// The payload of the job the next claim of `queue` takes (and completes).
fn next(c: &mut postgres::Client, queue: &str) -> Option<String> {
    c.query("SELECT (rq_complete(id, attempts)).payload FROM rq_claim(ARRAY[$1])", &[&queue])
        .unwrap()
        .first()
        .map(|r| r.get(0))
}

#[test]
fn a_claim_behind_a_held_snapshot_reads_only_the_jobs_after_its_cursor() {
    let db = fresh_db("rq_it_cursor_held");
    let mut c = connect(&db);
    // a name longer than 64 bytes has no cursors: the walk without them
    let long = "q".repeat(70);
    c.execute("SELECT count(rq_enqueue(q, i::text)) FROM unnest(ARRAY['q', $1]) q, generate_series(1, 600) i", &[&long])
        .unwrap();
    let mut holder = connect(&db);
    holder.batch_execute("BEGIN ISOLATION LEVEL REPEATABLE READ; SELECT count(*) FROM jobs").unwrap();
    work(&mut c, &long, 500);
    work(&mut c, "q", 500);
    // (the cursors go back to the start every 10 s: a claim that happens to
    // come just then walks from the start once, so the better of two counts)
    let with_cursor = entries_read_by_a_claim(&db, "q").min(entries_read_by_a_claim(&db, "q"));
    let without = entries_read_by_a_claim(&db, &long);
    holder.batch_execute("COMMIT").unwrap();
    assert!(with_cursor <= 5, "a claim with a cursor read {with_cursor} index entries");
    assert!(without >= 500, "without a cursor, the walk steps over every claimed job's entry: {without}");
}

#[test]
fn a_cursor_moves_forward_while_producers_enqueue_behind_a_held_snapshot() {
    // 0.5.0's first cursors moved forward only when no job was made ready
    // during the claim: a queue enqueued into all the time kept them at the
    // start, and behind a held snapshot its claims walked every claimed
    // job's entry (bench/run --held: 33 jobs/s in the tenth minute).
    let db = fresh_db("rq_it_cursor_busy");
    let mut c = connect(&db);
    c.execute("SELECT count(rq_enqueue('q', i::text)) FROM generate_series(1, 600) i", &[]).unwrap();
    let mut holder = connect(&db);
    holder.batch_execute("BEGIN ISOLATION LEVEL REPEATABLE READ; SELECT count(*) FROM jobs").unwrap();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let producer = {
        let (db, stop) = (db.clone(), stop.clone());
        thread::spawn(move || {
            let mut p = connect(&db);
            let mut made = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                p.execute("SELECT rq_enqueue('q', 'made while claiming')", &[]).unwrap();
                made += 1;
            }
            made
        })
    };
    work(&mut c, "q", 500);
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let made = producer.join().unwrap();
    let read = entries_read_by_a_claim(&db, "q").min(entries_read_by_a_claim(&db, "q"));
    holder.batch_execute("COMMIT").unwrap();
    assert!(made >= 100, "the producer enqueued while the claims ran ({made})");
    assert!(read <= 5, "a claim read {read} index entries after 500 claims beside {made} enqueues");
}

#[test]
fn a_job_ready_behind_the_cursor_is_claimed_next() {
    let db = fresh_db("rq_it_cursor_behind");
    let mut c = connect(&db);
    c.batch_execute("SELECT count(rq_enqueue('q', 'job' || i)) FROM generate_series(1, 5) i").unwrap();
    work(&mut c, "q", 2);
    // a plain INSERT due long ago
    c.batch_execute("INSERT INTO jobs (queue, payload, scheduled_at) VALUES ('q', 'inserted, due in 1970', 0)").unwrap();
    assert_eq!(next(&mut c, "q").as_deref(), Some("inserted, due in 1970"));
    // a job of a higher priority than the queue has had
    c.batch_execute("SELECT rq_enqueue('q', 'urgent', priority => 9)").unwrap();
    assert_eq!(next(&mut c, "q").as_deref(), Some("urgent"));
    // a claim rolled back: its job is first in line again
    let mut other = connect(&db);
    let mut tx = other.transaction().unwrap();
    let held: String = tx.query_one("SELECT payload FROM rq_claim(ARRAY['q'])", &[]).unwrap().get(0);
    assert_eq!(held, "job3");
    assert_eq!(next(&mut c, "q").as_deref(), Some("job4"), "the held job is passed over");
    tx.rollback().unwrap();
    assert_eq!(next(&mut c, "q").as_deref(), Some("job3"), "and claimed next once rolled back");
    // a take committed without finishing its job, and one in a savepoint rolled back
    c.batch_execute("SELECT count(rq_enqueue('q', 'later' || i)) FROM generate_series(1, 3) i").unwrap();
    let take = "SELECT payload FROM rq_take(ARRAY['q'], 'w')";
    let mut tx = other.transaction().unwrap();
    assert_eq!(tx.query_one(take, &[]).unwrap().get::<_, String>(0), "job5");
    assert_eq!(next(&mut c, "q").as_deref(), Some("later1"));
    tx.commit().unwrap();
    let mut tx = other.transaction().unwrap();
    tx.batch_execute("SAVEPOINT s").unwrap();
    assert_eq!(tx.query_one(take, &[]).unwrap().get::<_, String>(0), "job5", "a take committed unfinished leaves its job first");
    assert_eq!(next(&mut c, "q").as_deref(), Some("later2"));
    tx.batch_execute("ROLLBACK TO SAVEPOINT s").unwrap();
    assert_eq!(next(&mut c, "q").as_deref(), Some("job5"), "and so does one rolled back to a savepoint");
    tx.commit().unwrap();
    // a verb that makes a job ready again behind the cursor
    let row = c.query_one("SELECT id::text, attempts FROM rq_claim(ARRAY['q'])", &[]).unwrap();
    let (id, attempt): (String, i32) = (row.get(0), row.get(1));
    assert_eq!(one::<String>(&mut c, &format!("SELECT payload FROM jobs WHERE id = '{id}'")), "later3");
    c.batch_execute(&format!("SELECT rq_reschedule('{id}', {attempt}, at => '2000-01-01')")).unwrap();
    assert_eq!(next(&mut c, "q").as_deref(), Some("later3"));
    assert_eq!(next(&mut c, "q"), None);
    // a transaction that enqueues behind the cursor and claims its own job
    // before it commits (the cursor moves back for others only at commit)
    c.batch_execute("SELECT rq_enqueue('q', 'after'); SELECT rq_complete(id, attempts) FROM rq_claim(ARRAY['q'])").unwrap();
    let mut tx = c.transaction().unwrap();
    tx.batch_execute("SELECT rq_enqueue('q', 'mine, due in 2000', at => '2000-01-01')").unwrap();
    let mine: String = tx.query_one("SELECT payload FROM rq_claim(ARRAY['q'])", &[]).unwrap().get(0);
    assert_eq!(mine, "mine, due in 2000");
    tx.commit().unwrap();
}

#[test]
fn a_job_made_ready_by_hand_behind_the_cursor_waits_at_most_a_rewind() {
    let db = fresh_db("rq_it_cursor_by_hand");
    let mut c = connect(&db);
    c.batch_execute("SELECT count(rq_enqueue('q', 'job' || i)) FROM generate_series(1, 3) i").unwrap();
    work(&mut c, "q", 2);
    // an UPDATE outside raquel's verbs: no cursor hears of it
    c.batch_execute("UPDATE jobs SET status = 'queued', scheduled_at = 0 WHERE payload = 'job1'").unwrap();
    assert_eq!(next(&mut c, "q").as_deref(), Some("job3"));
    let mut got = None;
    // the queue's cursors go back to the start every 10 s (src/cursors.rs REWIND_MS)
    let found = eventually(15, || {
        got = next(&mut c, "q");
        got.is_some()
    });
    assert!(found, "job1 was never claimed");
    assert_eq!(got.as_deref(), Some("job1"));
}

#[test]
fn producers_of_jobs_due_in_the_past_lose_none_to_four_workers() {
    // Two producers insert jobs due at random instants of the last hour, at
    // random priorities (so mostly behind the cursors the workers move),
    // while four workers claim them in batches; when the producers are
    // done, the workers drain the queue without waiting for a rewind.
    const PER_PRODUCER: i64 = 1500;
    let db = fresh_db("rq_it_cursor_race");
    let mut c = connect(&db);
    c.batch_execute("CREATE TABLE done (job_id uuid PRIMARY KEY)").unwrap();
    let producers: Vec<_> = (0..2)
        .map(|_| {
            let db = db.clone();
            thread::spawn(move || {
                let mut c = connect(&db);
                for _ in 0..PER_PRODUCER / 10 {
                    c.batch_execute(
                        "INSERT INTO jobs (queue, payload, scheduled_at, priority)
                         SELECT 'q', 'p', rq_now_ms() - (random() * 3600000)::bigint, (random() * 2)::int
                         FROM generate_series(1, 10)",
                    )
                    .unwrap();
                }
            })
        })
        .collect();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let workers: Vec<_> = (0..4)
        .map(|_| {
            let (db, stop) = (db.clone(), stop.clone());
            thread::spawn(move || {
                let mut c = connect(&db);
                let mut mine = Vec::new();
                let mut idle_since: Option<std::time::Instant> = None;
                loop {
                    let mut tx = c.transaction().unwrap();
                    let (ids, attempts): (Vec<String>, Vec<i32>) = tx
                        .query("SELECT id::text, attempts FROM rq_claim(ARRAY['q'], 'w', 7)", &[])
                        .unwrap()
                        .iter()
                        .map(|r| (r.get::<_, String>(0), r.get::<_, i32>(1)))
                        .unzip();
                    if !ids.is_empty() {
                        tx.execute("INSERT INTO done SELECT unnest($1::text[]::uuid[])", &[&ids]).unwrap();
                        tx.query("SELECT rq_complete_batch($1::text[]::uuid[], $2)", &[&ids, &attempts]).unwrap();
                    }
                    tx.commit().unwrap();
                    if ids.is_empty() {
                        // once the producers are done, a second of nothing is the end
                        let since = *idle_since.get_or_insert_with(std::time::Instant::now);
                        if stop.load(std::sync::atomic::Ordering::SeqCst) && since.elapsed() > Duration::from_secs(1) {
                            break mine;
                        }
                        thread::sleep(Duration::from_millis(5));
                    } else {
                        idle_since = None;
                        mine.extend(ids);
                    }
                }
            })
        })
        .collect();
    producers.into_iter().for_each(|p| p.join().unwrap());
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    let done: Vec<String> = workers.into_iter().flat_map(|w| w.join().unwrap()).collect();
    let distinct: HashSet<&String> = done.iter().collect();
    assert_eq!(distinct.len(), done.len(), "no job claimed twice");
    let left: i64 = one(&mut c, "SELECT count(*) FROM jobs WHERE status <> 'success'");
    assert_eq!(left, 0, "jobs left ready behind the cursors (claimed {} of {})", done.len(), 2 * PER_PRODUCER);
    assert_eq!(done.len() as i64, 2 * PER_PRODUCER);
}

/// A server of its own, for the cursors' sizes (read at server start).
const PORT: u16 = 25422;

/// The cursors' sizes are the server's settings (raquel.cursor_queues,
/// raquel.cursor_priorities, raquel.cursor_name_bytes); past each, claims
/// still take the right job, the limit is counted, and rq_stats says why a
/// queue has no cursors.
#[test]
fn the_cursors_sizes_are_settings_and_rq_stats_shows_each_limit_reached() {
    let server = Cluster::create(
        "cursor-sizes",
        PORT,
        &[("raquel.cursor_queues", "32"), ("raquel.cursor_priorities", "2"), ("raquel.cursor_name_bytes", "4")],
    );
    server.start();
    server.checked_connection("postgres").batch_execute("CREATE DATABASE sizes").unwrap();
    let mut c = server.checked_connection("sizes");
    c.batch_execute("CREATE EXTENSION raquel").unwrap();
    let sizes = c
        .query_one("SELECT places, max_name_bytes, max_priorities FROM raquel_internal.rq_cursor_counts()", &[])
        .unwrap();
    assert_eq!((sizes.get::<_, i32>(0), sizes.get::<_, i32>(1), sizes.get::<_, i32>(2)), (32, 4, 2));
    let state = |c: &mut postgres::Client, queue: &str| -> String {
        c.query_one("SELECT cursors FROM rq_stats() WHERE queue = $1", &[&queue]).unwrap().get(0)
    };

    // two priorities and a name of four bytes: within the limits
    c.batch_execute("SELECT rq_enqueue('fits', 'p' || p, priority => p) FROM generate_series(1, 2) p, generate_series(1, 2)").unwrap();
    assert_eq!(state(&mut c, "fits"), "none", "not claimed yet");
    assert_eq!(next(&mut c, "fits").as_deref(), Some("p2"));
    assert_eq!(state(&mut c, "fits"), "in use");
    // a third priority: too many; the claims still go by priority
    c.batch_execute("SELECT rq_enqueue('fits', 'p3', priority => 3)").unwrap();
    assert_eq!(state(&mut c, "fits"), "too many priorities");
    for expected in ["p3", "p2", "p1", "p1"] {
        assert_eq!(next(&mut c, "fits").as_deref(), Some(expected));
    }
    // a name of five bytes
    c.batch_execute("SELECT rq_enqueue('fives', 'x')").unwrap();
    assert_eq!(next(&mut c, "fives").as_deref(), Some("x"));
    assert_eq!(state(&mut c, "fives"), "name too long");
    // more queues than the places: the least used give theirs up
    let before: i64 = one(&mut c, "SELECT places_given_up FROM raquel_internal.rq_cursor_counts()");
    c.batch_execute("SELECT rq_enqueue('q' || i, i::text) FROM generate_series(1, 200) i").unwrap();
    for i in 1..=200 {
        assert_eq!(next(&mut c, &format!("q{i}")), Some(i.to_string()), "queue q{i}");
    }
    let given_up: i64 = one(&mut c, "SELECT places_given_up FROM raquel_internal.rq_cursor_counts()");
    assert!(given_up - before >= 200 - 32, "200 queues in 32 places gave up {} places", given_up - before);
    let kept: i64 = one(&mut c, "SELECT count(*) FROM rq_stats() WHERE queue LIKE 'q%' AND cursors = 'in use'");
    assert!(kept <= 32 && kept > 0, "{kept} queues kept their cursors in 32 places");
    let left: i64 = one(&mut c, "SELECT count(*) FROM jobs WHERE status <> 'success'");
    assert_eq!(left, 0, "every job claimed and completed once");
}

/// The server's cursor counts (raquel_internal.rq_cursor_counts()): claims
/// that used cursors, that walked, long names, queues with too many
/// priorities, places given up.
fn counts(c: &mut postgres::Client) -> [i64; 5] {
    let row = c
        .query_one(
            "SELECT claims_with_cursors, claims_without_cursors, long_names, too_many_priorities, places_given_up \
             FROM raquel_internal.rq_cursor_counts()",
            &[],
        )
        .unwrap();
    [row.get(0), row.get(1), row.get(2), row.get(3), row.get(4)]
}

/// Each limit of the cursors, exceeded, is counted, and the claims beyond
/// it still take the right job: a name over 64 bytes, a queue with more
/// than 8 priorities, more queues than the 512 places (every part of the
/// shared memory then gives places up).
#[test]
fn claims_beyond_the_cursors_limits_are_counted_and_still_take_the_right_job() {
    let db = fresh_db("rq_it_cursor_limits");
    // 600 queues would take this database's half of the metrics' shared
    // slots until the worker records them, and the tests after this one
    // would lose their events (take.rs's metrics check did, once)
    connect("postgres").batch_execute(&format!("ALTER DATABASE {db} SET raquel.metrics = off")).unwrap();
    let mut c = connect(&db);
    let before = counts(&mut c);
    // a plain queue: the first claim finds its lanes (a walk), the next
    // ones use them
    c.batch_execute("SELECT rq_enqueue('plain', i::text) FROM generate_series(1, 3) i").unwrap();
    for expected in ["1", "2", "3"] {
        assert_eq!(next(&mut c, "plain").as_deref(), Some(expected));
    }
    let plain = counts(&mut c);
    assert_eq!(plain[1] - before[1], 1, "the first claim walked: {before:?} then {plain:?}");
    assert_eq!(plain[0] - before[0], 2, "the next two used the cursors: {before:?} then {plain:?}");

    let long = "l".repeat(65);
    c.execute("SELECT rq_enqueue($1, 'long')", &[&long]).unwrap();
    assert_eq!(next(&mut c, &long).as_deref(), Some("long"));
    let after_long = counts(&mut c);
    assert_eq!(after_long[2] - plain[2], 1, "a name over 64 bytes: {after_long:?}");

    // nine priorities, the highest enqueued first: it is claimed first
    c.batch_execute(
        "SELECT rq_enqueue('many', 'p' || p, priority => p) FROM generate_series(0, 8) p;
         SELECT rq_enqueue('many', 'top', priority => 100)",
    )
    .unwrap();
    assert_eq!(next(&mut c, "many").as_deref(), Some("top"));
    for p in (0..=8).rev() {
        assert_eq!(next(&mut c, "many"), Some(format!("p{p}")), "highest priority first");
    }
    let after_many = counts(&mut c);
    assert!(after_many[3] > after_long[3], "a queue with ten priorities: {after_long:?} then {after_many:?}");
    // more priorities in it are the same queue, not counted again
    c.batch_execute("SELECT rq_enqueue('many', 'q' || p, priority => p) FROM generate_series(50, 52) p").unwrap();
    assert_eq!(counts(&mut c)[3], after_many[3], "the queue with too many priorities counts once");
    for p in (50..=52).rev() {
        assert_eq!(next(&mut c, "many"), Some(format!("q{p}")), "highest priority first");
    }

    // 600 queues of one job, each claimed once and then once more: every
    // job claimed once, and the places given up counted
    c.batch_execute("SELECT rq_enqueue('many-' || i, i::text) FROM generate_series(1, 600) i").unwrap();
    for i in 1..=600 {
        assert_eq!(next(&mut c, &format!("many-{i}")), Some(i.to_string()), "queue many-{i}");
    }
    for i in 1..=600 {
        assert_eq!(next(&mut c, &format!("many-{i}")), None, "queue many-{i} again");
    }
    let after_places = counts(&mut c);
    assert!(after_places[4] >= 600 - 512, "600 queues in 512 places: {after_many:?} then {after_places:?}");
    let unclaimed: i64 = one(&mut c, "SELECT count(*) FROM jobs WHERE status <> 'success'");
    assert_eq!(unclaimed, 0, "every job claimed and completed once");
}
