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
    // a name near the limit of 1000 bytes fires like any other: in 0.4.0 its
    // slot key passed the key limit from 988 bytes and the duty failed
    c.batch_execute("SELECT rq_schedule(repeat('n', 990), '* * * * * *', 'long_name')").unwrap();
    assert!(eventually(30, || count(&mut c, "queue = 'ticks'") >= 15), "the worker fires a per-second schedule");
    assert!(eventually(10, || count(&mut c, "queue = 'long_name'") >= 3), "a schedule with a 990-byte name fires");
    c.batch_execute("SELECT rq_pause_schedule('tick'), rq_pause_schedule(repeat('n', 990))").unwrap();
    let fired = slots(&mut c, "ticks");
    // one job a second, none twice, none skipped
    for pair in fired.windows(2) {
        assert_eq!(pair[1] - pair[0], 1000, "consecutive slots: {fired:?}");
    }
    // the schedule's jobs are its own: no key another role could hold
    assert_eq!(count(&mut c, "queue = 'ticks' AND key IS NULL") as usize, fired.len());
    // how long after its slot each job appeared (the figure for the README)
    let lateness: Vec<i64> = c
        .query("SELECT enqueued_at - scheduled_at FROM jobs WHERE queue = 'ticks' ORDER BY 1", &[])
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    let p = |q: f64| lateness[((lateness.len() as f64 - 1.0) * q).round() as usize];
    eprintln!("slot to enqueue over {} slots: p50 {} ms, p99 {} ms, max {} ms", lateness.len(), p(0.5), p(0.99), p(1.0));
    let (last_job, last_error): (String, Option<String>) = c
        .query_one("SELECT last_job_id::text, last_error FROM rq_schedules WHERE name = 'tick'", &[])
        .map(|r| (r.get(0), r.get(1)))
        .unwrap();
    let newest: String = c
        .query_one("SELECT id::text FROM jobs WHERE queue = 'ticks' ORDER BY scheduled_at DESC LIMIT 1", &[])
        .unwrap()
        .get(0);
    assert_eq!(last_job, newest, "last_job_id is the schedule's latest job");
    assert_eq!(last_error, None);
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
    // ten minutes of a per-minute schedule missed: the slot of the last
    // minute is on time and runs whatever the policy; of the nine or ten
    // older ones 'all' runs each, 'last' one, 'none' none
    let ten_minutes_ago = "(extract(epoch FROM date_trunc('minute', now() - interval '10 minutes')) * 1000)::bigint";
    let all = missed(&mut c, "minutely_all", "* * * * *", "all", ten_minutes_ago);
    assert!((11..=12).contains(&all), "every missed minute: {all}");
    assert_eq!(missed(&mut c, "minutely_last", "* * * * *", "last", ten_minutes_ago), 2);
    assert_eq!(missed(&mut c, "minutely_none", "* * * * *", "none", ten_minutes_ago), 1);
    // 'all' has a cap: the latest 1000 missed slots, and the on-time ones
    // of the last minute
    let an_hour_ago = "(extract(epoch FROM date_trunc('second', now() - interval '1 hour')) * 1000)::bigint";
    let secondly = missed(&mut c, "secondly_all", "* * * * * *", "all", an_hour_ago);
    assert!((1060..=1061).contains(&secondly), "1000 missed and a minute on time: {secondly}");
    // a per-second schedule three seconds late: every slot is on time, so
    // 'none' and 'last' run each one too
    let three_seconds_ago = "(extract(epoch FROM date_trunc('second', now() - interval '3 seconds')) * 1000)::bigint";
    for policy in ["none", "last"] {
        let late = missed(&mut c, &format!("late_{policy}"), "* * * * * *", policy, three_seconds_ago);
        assert!((4..=5).contains(&late), "{policy}: every slot of the last three seconds: {late}");
    }
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
    // A server of this test's own (port 25417): per-second schedules run,
    // the server is killed (every process at once, mid-round or not) and
    // started again three seconds later. Every slot, those missed while it
    // was down too, has exactly one job, whatever the catch-up: a slot a
    // round reaches within a minute is on time (0.4.0's 'last' and 'none'
    // each kept 43 of 61 slots across restarts).
    use raquel_client_tests::cluster::Cluster;
    use std::time::Duration;
    let server = Cluster::create("schedules", 25417, &[("raquel.worker_interval", "200ms")]);
    server.start();
    server.checked_connection("postgres").batch_execute("CREATE DATABASE rq").unwrap();
    let mut c = server.checked_connection("rq");
    c.batch_execute(
        "CREATE EXTENSION raquel;
         SELECT rq_schedule('tick_' || p, '* * * * * *', 'ticks_' || p, catch_up => p) FROM unnest(ARRAY['all', 'last', 'none']) p",
    )
    .unwrap();
    assert!(eventually(20, || count(&mut c, "true") >= 9), "the schedules fire before the crash");
    server.stop_immediate();
    thread::sleep(Duration::from_secs(3));
    server.start();
    assert!(server.wait_until_up("rq", Duration::from_secs(60)).is_some());
    let mut c = server.checked_connection("rq");
    let restarted: i64 = c.query_one("SELECT rq_now_ms()", &[]).unwrap().get(0);
    assert!(
        eventually(30, || count(&mut c, &format!("scheduled_at >= {restarted} + 2000")) >= 3),
        "the schedules fire after the restart"
    );
    c.batch_execute("SELECT rq_pause_schedule(name) FROM schedules").unwrap();
    for policy in ["all", "last", "none"] {
        let fired = slots(&mut c, &format!("ticks_{policy}"));
        for pair in fired.windows(2) {
            assert_eq!(pair[1] - pair[0], 1000, "{policy}: each slot once, none missed: {fired:?}");
        }
        assert!(fired.len() >= 7, "{policy}: before, during and after the downtime: {fired:?}");
    }
}

#[test]
fn a_schedules_jobs_are_its_own_whatever_a_producer_enqueued_first() {
    // 0.4.0 keyed a slot's job 'rq_schedule:<name>@<slot ms>': a producer
    // that enqueued those keys ahead, with a 100-year delay, replaced every
    // slot of the schedule with its own job, and last_job_id pointed at it.
    let db = fresh_db("sched_own_jobs");
    let mut c = connect(&db);
    c.batch_execute(
        "DROP ROLE IF EXISTS rq_it_slot_taker; CREATE ROLE rq_it_slot_taker LOGIN;
         SELECT rq_grant_producer('rq_it_slot_taker')",
    )
    .unwrap();
    let mut producer = raquel_client_tests::connect_as(&db, "rq_it_slot_taker");
    producer
        .batch_execute(
            "SELECT rq_enqueue('ticks', 'taken', delay => '36500 days',
                               key => format('rq_schedule:tick@%s', (rq_now_ms() / 1000 + s) * 1000))
             FROM generate_series(0, 30) s",
        )
        .unwrap();
    c.batch_execute("SELECT rq_schedule('tick', '* * * * * *', 'ticks', 'from the schedule')").unwrap();
    let own = |c: &mut Client| count(c, "queue = 'ticks' AND payload = 'from the schedule'");
    assert!(eventually(15, || own(&mut c) >= 3), "the schedule fires jobs of its own");
    c.batch_execute("SELECT rq_pause_schedule('tick')").unwrap();
    let last: String = c
        .query_one("SELECT j.payload FROM rq_schedules s JOIN jobs j ON j.id = s.last_job_id WHERE s.name = 'tick'", &[])
        .unwrap()
        .get(0);
    assert_eq!(last, "from the schedule", "last_job_id is the schedule's job");
    assert_eq!(count(&mut c, "queue = 'ticks' AND payload = 'taken'"), 31, "the producer's jobs are left as they were");
}
