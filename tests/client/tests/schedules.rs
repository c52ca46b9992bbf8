//! Recurring jobs (sql/schedules.sql, src/schedules.rs): the background
//! worker enqueues each slot once and soon after it; missed slots follow
//! catch_up; a round rolled back (a crash between enqueue and commit) leaves
//! the slot for the next; concurrent rounds never enqueue a slot twice; bad
//! patterns, zones and names are refused. (Daylight-saving days are unit
//! tests of src/schedules.rs.)

use postgres::Client;
use raquel_client_tests::{connect, eventually, fresh_db, sqlstate};
use std::thread;

fn count(c: &mut Client, condition: &str) -> i64 {
    c.query_one(&format!("SELECT count(*) FROM jobs WHERE {condition}"), &[]).unwrap().get(0)
}

/// Every slot (scheduled_at) of queue `queue`'s jobs, in order.
fn slots(c: &mut Client, queue: &str) -> Vec<i64> {
    c.query("SELECT scheduled_at FROM jobs WHERE queue = $1 ORDER BY scheduled_at", &[&queue])
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect()
}

#[test]
fn the_worker_enqueues_each_slot_once_soon_after_it() {
    let db = fresh_db("sched_worker");
    let mut c = connect(&db);
    c.batch_execute("SELECT rq_schedule('tick', '* * * * * *', 'ticks', '{\"n\": 1}'::jsonb)").unwrap();
    assert!(eventually(30, || count(&mut c, "queue = 'ticks'") >= 15), "the worker fires a per-second schedule");
    c.batch_execute("SELECT rq_pause_schedule('tick')").unwrap();
    let fired = slots(&mut c, "ticks");
    // one job a second, none twice (each slot is a key), none skipped
    for pair in fired.windows(2) {
        assert_eq!(pair[1] - pair[0], 1000, "consecutive slots: {fired:?}");
    }
    let keys: i64 = c.query_one("SELECT count(DISTINCT key) FROM jobs WHERE queue = 'ticks'", &[]).unwrap().get(0);
    assert_eq!(keys as usize, fired.len());
    // how long after its slot each job appeared (the figure for the README)
    let lateness: Vec<i64> = c
        .query("SELECT enqueued_at - scheduled_at FROM jobs WHERE queue = 'ticks' ORDER BY 1", &[])
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    let p = |q: f64| lateness[((lateness.len() as f64 - 1.0) * q).round() as usize];
    eprintln!("slot to enqueue over {} slots: p50 {} ms, p99 {} ms, max {} ms", lateness.len(), p(0.5), p(0.99), p(1.0));
    let view: String = c.query_one("SELECT last_job_id::text FROM rq_schedules WHERE name = 'tick'", &[]).unwrap().get(0);
    assert!(!view.is_empty());
}

/// Creates schedule `name` on queue `name` with `cron` and `catch_up`, as if
/// the server had been down since `since_sql` (its next slot then), and runs
/// one round by hand in the same transaction, so the worker (which passes
/// over a locked schedule) cannot take it first. The jobs it enqueued.
fn missed(c: &mut Client, name: &str, cron: &str, catch_up: &str, since_sql: &str) -> i64 {
    let mut t = c.transaction().unwrap();
    t.batch_execute(&format!("SELECT rq_schedule('{name}', '{cron}', '{name}', catch_up => '{catch_up}')")).unwrap();
    t.batch_execute(&format!("UPDATE schedules SET next_run_at = ({since_sql}) WHERE name = '{name}'")).unwrap();
    t.query_one("SELECT rq_fire_schedules()", &[]).unwrap();
    t.commit().unwrap();
    count(c, &format!("queue = '{name}'"))
}

#[test]
fn missed_slots_follow_catch_up() {
    let db = fresh_db("sched_catch_up");
    let mut c = connect(&db);
    // a yearly slot months ago: late, so 'none' skips it; 'last' and 'all' run it once
    let new_year = "(extract(epoch FROM date_trunc('year', now())) * 1000)::bigint";
    assert_eq!(missed(&mut c, "yearly_none", "0 0 1 1 *", "none", new_year), 0);
    assert_eq!(missed(&mut c, "yearly_last", "0 0 1 1 *", "last", new_year), 1);
    assert_eq!(missed(&mut c, "yearly_all", "0 0 1 1 *", "all", new_year), 1);
    // ten minutes of a per-minute schedule missed: 'all' runs each slot,
    // 'last' one, 'none' only the slot still on time (this minute's)
    let ten_minutes_ago = "(extract(epoch FROM date_trunc('minute', now() - interval '10 minutes')) * 1000)::bigint";
    let all = missed(&mut c, "minutely_all", "* * * * *", "all", ten_minutes_ago);
    assert!((11..=12).contains(&all), "every missed minute: {all}");
    assert_eq!(missed(&mut c, "minutely_last", "* * * * *", "last", ten_minutes_ago), 1);
    assert_eq!(missed(&mut c, "minutely_none", "* * * * *", "none", ten_minutes_ago), 1);
    // 'all' has a cap: the last 1000 slots
    let an_hour_ago = "(extract(epoch FROM date_trunc('second', now() - interval '1 hour')) * 1000)::bigint";
    assert_eq!(missed(&mut c, "secondly_all", "* * * * * *", "all", an_hour_ago), 1000);
    // each schedule's next slot is after now
    let stale: i64 = c
        .query_one("SELECT count(*) FROM schedules WHERE next_run_at <= rq_now_ms() - 2000", &[])
        .unwrap()
        .get(0);
    assert_eq!(stale, 0);
    // no schedule left firing on the shared server, where its rounds would
    // make other databases' rounds late (they start at most once a second)
    c.batch_execute("UPDATE schedules SET enabled = false").unwrap();
}

#[test]
fn a_round_rolled_back_leaves_its_slot_for_the_next_and_rounds_at_once_fire_it_once() {
    let db = fresh_db("sched_once");
    let mut c = connect(&db);
    let since = "(extract(epoch FROM date_trunc('minute', now() - interval '5 minutes')) * 1000)::bigint";
    // made disabled, so that the worker leaves it alone until the test lets it
    c.batch_execute(&format!(
        "BEGIN; SELECT rq_schedule('s', '* * * * *', 's', catch_up => 'all');
         UPDATE schedules SET next_run_at = {since}, enabled = false WHERE name = 's'; COMMIT;"
    ))
    .unwrap();
    let next_before: i64 = c.query_one("SELECT next_run_at FROM schedules", &[]).unwrap().get(0);
    // a crash between the enqueue and the commit: nothing, and the slots stay due
    let mut t = c.transaction().unwrap();
    t.batch_execute("UPDATE schedules SET enabled = true").unwrap();
    let fired: i64 = t.query_one("SELECT rq_fire_schedules()", &[]).unwrap().get(0);
    assert!(fired >= 6, "the round enqueued the missed slots: {fired}");
    t.rollback().unwrap();
    assert_eq!(count(&mut c, "queue = 's'"), 0);
    let next_after: i64 = c.query_one("SELECT next_run_at FROM schedules", &[]).unwrap().get(0);
    assert_eq!(next_after, next_before);
    c.batch_execute("UPDATE schedules SET enabled = true").unwrap();
    // now rounds in four sessions at once, and the worker's: each slot once
    let rounds: Vec<_> = (0..4)
        .map(|_| {
            let db = db.clone();
            thread::spawn(move || {
                let mut c = connect(&db);
                c.query_one("SELECT rq_fire_schedules()", &[]).unwrap().get::<_, i64>(0)
            })
        })
        .collect();
    rounds.into_iter().for_each(|r| {
        r.join().unwrap();
    });
    let fired = slots(&mut c, "s");
    let distinct: std::collections::BTreeSet<i64> = fired.iter().copied().collect();
    assert_eq!(distinct.len(), fired.len(), "a slot enqueued twice: {fired:?}");
    assert!((6..=7).contains(&fired.len()), "every missed minute once: {fired:?}");
    c.batch_execute("UPDATE schedules SET enabled = false").unwrap();
}

#[test]
fn bad_schedules_are_refused_and_change_nothing() {
    let db = fresh_db("sched_bad");
    let mut c = connect(&db);
    for (call, state) in [
        ("SELECT rq_schedule('s', '* * *', 'q')", "22023"),
        ("SELECT rq_schedule('s', '61 * * * *', 'q')", "22023"),
        ("SELECT rq_schedule('s', '@sometimes', 'q')", "22023"),
        ("SELECT rq_schedule('s', '0 0 30 2 *', 'q')", "22023"),
        ("SELECT rq_schedule('s', '* * * * *', 'q', timezone => 'Mars/Olympus')", "22023"),
        ("SELECT rq_schedule('s', '* * * * *', 'q', catch_up => 'some')", "22023"),
        ("SELECT rq_schedule(NULL, '* * * * *', 'q')", "22023"),
        ("SELECT rq_schedule('s', NULL, 'q')", "22023"),
        ("SELECT rq_schedule('s', '* * * * *', '')", "22023"),
        ("SELECT rq_schedule('s', '* * * * *', 'q', max_age => '-1 second')", "22023"),
        ("SELECT rq_pause_schedule('nope')", "P0002"),
        ("SELECT rq_resume_schedule('nope')", "P0002"),
    ] {
        assert_eq!(sqlstate(c.batch_execute(call)), state, "{call}");
    }
    let n: i64 = c.query_one("SELECT count(*) FROM schedules", &[]).unwrap().get(0);
    assert_eq!(n, 0);
    // the good forms, for the record: @daily, six fields, a zone
    for good in [
        "SELECT rq_schedule('a', '@daily', 'q')",
        "SELECT rq_schedule('b', '*/5 * * * * *', 'q', 'p')",
        "SELECT rq_schedule('c', '30 2 * * *', 'q', timezone => 'Europe/Berlin', catch_up => 'none')",
    ] {
        c.batch_execute(good).unwrap();
    }
    let replaced: String = c
        .query_one("SELECT (rq_schedule('a', '@hourly', 'q2')).cron", &[])
        .unwrap()
        .get(0);
    assert_eq!(replaced, "@hourly", "a schedule is replaced by name");
    assert!(c.query_one("SELECT rq_unschedule('a')", &[]).unwrap().get::<_, bool>(0));
    assert!(!c.query_one("SELECT rq_unschedule('a')", &[]).unwrap().get::<_, bool>(0));
    c.batch_execute("UPDATE schedules SET enabled = false").unwrap();
}

#[test]
fn a_crash_and_restart_during_due_slots_enqueue_each_slot_once() {
    // A server of this test's own (port 54417): a per-second schedule runs,
    // the server is killed (every process at once, mid-round or not) and
    // started again three seconds later. Every slot, those missed while it
    // was down too (catch_up 'all'), has exactly one job.
    use raquel_client_tests::cluster::Cluster;
    use std::time::Duration;
    let server = Cluster::create("schedules", 54417, &[("raquel.worker_interval", "200ms")]);
    server.start();
    server.checked_connection("postgres").batch_execute("CREATE DATABASE rq").unwrap();
    let mut c = server.checked_connection("rq");
    c.batch_execute("CREATE EXTENSION raquel; SELECT rq_schedule('tick', '* * * * * *', 'ticks', catch_up => 'all')")
        .unwrap();
    assert!(eventually(20, || count(&mut c, "true") >= 3), "the schedule fires before the crash");
    server.stop_immediate();
    thread::sleep(Duration::from_secs(3));
    server.start();
    assert!(server.wait_until_up("rq", Duration::from_secs(60)).is_some());
    let mut c = server.checked_connection("rq");
    let restarted: i64 = c.query_one("SELECT rq_now_ms()", &[]).unwrap().get(0);
    assert!(
        eventually(30, || count(&mut c, &format!("scheduled_at >= {restarted} + 2000")) >= 1),
        "the schedule fires after the restart"
    );
    c.batch_execute("SELECT rq_pause_schedule('tick')").unwrap();
    let fired = slots(&mut c, "ticks");
    for pair in fired.windows(2) {
        assert_eq!(pair[1] - pair[0], 1000, "each slot once, none missed: {fired:?}");
    }
    assert!(fired.len() >= 7, "before, during and after the downtime: {fired:?}");
}
