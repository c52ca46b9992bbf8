//! The background worker, against a real server that preloads the library:
//! no client calls a duty here, the worker does. Every database these tests
//! use is created after the server started, so each one also shows that such
//! a database is served.

use raquel_client_tests::{connect, connect_as, eventually, fresh_db, reset_server, set_server};
use std::thread::sleep;
use std::time::Duration;

fn status(client: &mut postgres::Client, id: &str) -> String {
    client.query_one("SELECT status FROM jobs WHERE id = $1::text::uuid", &[&id]).unwrap().get(0)
}

fn launcher_pid(client: &mut postgres::Client) -> Option<i32> {
    client
        .query_opt("SELECT pid FROM pg_stat_activity WHERE backend_type = 'raquel launcher'", &[])
        .unwrap()
        .map(|row| row.get(0))
}

#[test]
fn a_job_past_its_max_age_expires_by_itself() {
    let db = fresh_db("rq_it_worker_expire");
    let mut c = connect(&db);
    let id: String = c
        .query_one("SELECT id::text FROM rq_enqueue('q', 'x', max_age => '500 ms')", &[])
        .unwrap()
        .get(0);
    assert!(eventually(15, || status(&mut c, &id) == "expired"), "expired without a client call");
    let finished: bool = c.query_one("SELECT finished_at IS NOT NULL FROM jobs", &[]).unwrap().get(0);
    assert!(finished);
}

#[test]
fn an_abandoned_claim_is_rescued_and_follows_the_retry_rules() {
    let db = fresh_db("rq_it_worker_rescue");
    let mut c = connect(&db);
    let retried: String = c.query_one("SELECT id::text FROM rq_enqueue('r', 'x')", &[]).unwrap().get(0);
    let last: String =
        c.query_one("SELECT id::text FROM rq_enqueue('e', 'y', max_retry_count => 0)", &[]).unwrap().get(0);
    c.batch_execute("SELECT rq_claim(ARRAY['r', 'e'], worker => 'dead', batch => 2, lease => '1 second')")
        .unwrap();

    assert!(eventually(15, || status(&mut c, &retried) == "failed"), "rescued into a retry");
    assert!(eventually(15, || status(&mut c, &last) == "exhausted"), "rescued with no retry left");
    for id in [&retried, &last] {
        let row = c
            .query_one("SELECT attempts, error FROM jobs WHERE id = $1::text::uuid", &[id])
            .unwrap();
        assert_eq!(row.get::<_, i32>(0), 1);
        assert!(row.get::<_, String>(1).starts_with("lease expired"), "{}", row.get::<_, String>(1));
    }
}

#[test]
fn a_row_another_session_holds_locked_is_not_rescued_until_released() {
    let db = fresh_db("rq_it_worker_locked");
    let mut c = connect(&db);
    let mut holder = connect(&db);
    let id: String = c.query_one("SELECT id::text FROM rq_enqueue('q', 'x')", &[]).unwrap().get(0);
    c.batch_execute("SELECT rq_claim(ARRAY['q'], lease => '1 second')").unwrap();

    // The Python library's way: hold the row locked while working on it.
    let mut tx = holder.transaction().unwrap();
    tx.query("SELECT * FROM jobs WHERE id = $1::text::uuid FOR UPDATE", &[&id]).unwrap();
    sleep(Duration::from_secs(4)); // the lease ran out three seconds ago; several worker rounds ran
    assert_eq!(status(&mut c, &id), "claimed", "a locked row is left to its holder");
    tx.commit().unwrap();
    assert!(eventually(15, || status(&mut c, &id) == "failed"), "rescued once released");
}

#[test]
fn the_worker_comes_back_after_pg_terminate_backend() {
    let db = fresh_db("rq_it_worker_restart");
    let mut c = connect(&db);
    let first = launcher_pid(&mut c).expect("a launcher runs");
    let log_start = log_len();
    c.batch_execute(&format!("SELECT pg_terminate_backend({first})")).unwrap();
    let came_back = eventually(30, || launcher_pid(&mut c).is_some_and(|pid| pid != first));
    if !came_back {
        // Seen in CI on PostgreSQL 18 and 15, until the launcher stopped
        // spinning after a SIGTERM that cut a round short (see
        // sleep_until_next_round): say what the server saw, so that a next
        // time leaves its cause behind.
        let processes: Vec<String> = c
            .query(
                "SELECT pid::text || ' ' || coalesce(backend_type, '?') || ' ' || coalesce(state, '') || ' ' \
                 || coalesce(wait_event_type || ':' || wait_event, 'running') FROM pg_stat_activity
                 WHERE backend_type NOT IN ('client backend') ORDER BY pid",
                &[],
            )
            .unwrap()
            .iter()
            .map(|r| r.get(0))
            .collect();
        let said: Vec<String> = log_since(log_start)
            .lines()
            .filter(|l| l.contains("launcher") || l.contains("raquel") || l.contains("background worker"))
            .map(str::to_string)
            .collect();
        panic!(
            "no new launcher within 30 s of pg_terminate_backend({first}); processes now:\n  {}\nthe server's log since, about workers:\n  {}",
            processes.join("\n  "),
            said.join("\n  ")
        );
    }
    let id: String = c
        .query_one("SELECT id::text FROM rq_enqueue('q', 'x', max_age => '200 ms')", &[])
        .unwrap()
        .get(0);
    assert!(eventually(15, || status(&mut c, &id) == "expired"), "and it keeps working");
}

#[test]
fn sighup_changes_the_interval() {
    let db = fresh_db("rq_it_worker_sighup");
    let mut c = connect(&db);
    // Only this database: another one's planned visit would wake the
    // launcher, which then also reads what was noted here.
    set_server(&[("raquel.databases", &db), ("raquel.worker_interval", "1min")]);
    // Every round already asked for must be over before the job below is
    // enqueued, or that round takes its note: the reload's (at once) and the
    // CREATE EXTENSION's, which starts at most a second (MIN_ROUND_GAP)
    // after the round before it. So the launcher must have slept, with no
    // housekeeping worker, for longer than that; then it sleeps a minute.
    let mut admin = connect("postgres");
    let mut idle_since = std::time::Instant::now();
    assert!(eventually(20, || {
        let busy: i64 = admin
            .query_one(
                "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'raquel worker' \
                 OR (backend_type = 'raquel launcher' AND wait_event IS DISTINCT FROM 'Extension')",
                &[],
            )
            .unwrap()
            .get(0);
        if busy > 0 {
            idle_since = std::time::Instant::now();
        }
        idle_since.elapsed() > Duration::from_millis(1500)
    }));
    let id: String = c
        .query_one("SELECT id::text FROM rq_enqueue('q', 'x', max_age => '100 ms')", &[])
        .unwrap()
        .get(0);
    sleep(Duration::from_secs(3));
    let slow = status(&mut c, &id);
    set_server(&[("raquel.worker_interval", "100ms")]);
    let fast = eventually(5, || status(&mut c, &id) == "expired");
    reset_server(&["raquel.worker_interval", "raquel.databases"]);
    assert_eq!(slow, "queued", "with a one-minute interval nothing ran for 3 s");
    assert!(fast, "with 100 ms, the job expired at once");
}

#[test]
fn prune_by_the_worker_deletes_only_old_finished_jobs() {
    let db = fresh_db("rq_it_worker_prune");
    let mut c = connect(&db);
    c.batch_execute(
        "SELECT rq_enqueue('done', 'old'); SELECT rq_complete(id, attempts) FROM rq_claim(ARRAY['done']); \
         UPDATE jobs SET finished_at = finished_at - 3600000; \
         SELECT rq_enqueue('done', 'recent'); SELECT rq_complete(id, attempts) FROM rq_claim(ARRAY['done']); \
         SELECT rq_enqueue('waiting', 'old but waiting', at => now() - interval '1 day')",
    )
    .unwrap();
    set_server(&[("raquel.retention", "10min")]);
    // a new retention applies at a database's next round: ask for one
    sleep(Duration::from_millis(300));
    c.batch_execute("SELECT rq_worker_wake()").unwrap();
    let pruned = eventually(15, || {
        c.query_one("SELECT count(*) FROM jobs WHERE payload = 'old'", &[]).unwrap().get::<_, i64>(0) == 0
    });
    reset_server(&["raquel.retention"]);
    assert!(pruned, "the finished job older than the retention was deleted");
    let left: String =
        c.query_one("SELECT string_agg(payload, ',' ORDER BY payload) FROM jobs", &[]).unwrap().get(0);
    assert_eq!(left, "old but waiting,recent");
}

#[test]
fn a_database_whose_extension_is_dropped_is_left_alone() {
    let log_path = std::env::var("RAQUEL_TEST_LOG").ok();
    let log_start = log_path.as_ref().map_or(0, |p| std::fs::metadata(p).map_or(0, |m| m.len() as usize));
    let db = fresh_db("rq_it_worker_drop");
    let mut c = connect(&db);
    c.batch_execute("DROP EXTENSION raquel").unwrap();
    drop(c);
    sleep(Duration::from_secs(3));
    // The database can be dropped at once: no worker stays connected to it.
    connect("postgres").batch_execute(&format!("DROP DATABASE {db}")).unwrap();
    if let Some(log) = log_path {
        let text = std::fs::read(log).unwrap();
        let text = String::from_utf8_lossy(&text[log_start.min(text.len())..]).into_owned();
        let noisy: Vec<&str> = text
            .lines()
            .filter(|l| l.contains(&db) && (l.contains("WARNING") || l.contains("ERROR")))
            .collect();
        assert!(noisy.is_empty(), "no warnings or errors about {db}: {noisy:?}");
    }
}

#[test]
fn a_narrowed_database_list_leaves_other_databases_alone() {
    let served = fresh_db("rq_it_worker_served");
    let ignored = fresh_db("rq_it_worker_ignored");
    set_server(&[("raquel.databases", &served)]);
    sleep(Duration::from_millis(1500)); // a round already under way finishes with the old list
    let mut a = connect(&served);
    let mut b = connect(&ignored);
    let in_served: String =
        a.query_one("SELECT id::text FROM rq_enqueue('q', 'x', max_age => '100 ms')", &[]).unwrap().get(0);
    let in_ignored: String =
        b.query_one("SELECT id::text FROM rq_enqueue('q', 'x', max_age => '100 ms')", &[]).unwrap().get(0);
    let served_expired = eventually(15, || status(&mut a, &in_served) == "expired");
    sleep(Duration::from_secs(2));
    let ignored_status = status(&mut b, &in_ignored);
    reset_server(&["raquel.databases"]);
    assert!(served_expired);
    assert_eq!(ignored_status, "queued");
}

#[test]
fn a_failing_duty_is_a_warning_and_the_worker_goes_on() {
    let log_path = std::env::var("RAQUEL_TEST_LOG").ok();
    let db = fresh_db("rq_it_worker_error");
    let mut c = connect(&db);
    let launcher = launcher_pid(&mut c).expect("a launcher runs");
    // This database refuses to let any job expire: the expire duty errors here.
    c.batch_execute(
        "CREATE FUNCTION refuse_expiry() RETURNS trigger LANGUAGE plpgsql AS $$ \
         BEGIN IF NEW.status = 'expired' THEN RAISE EXCEPTION 'expiry refused by the test' USING ERRCODE = 'check_violation'; END IF; \
         RETURN NEW; END $$; \
         CREATE TRIGGER refuse_expiry BEFORE UPDATE ON jobs FOR EACH ROW EXECUTE FUNCTION refuse_expiry()",
    )
    .unwrap();
    let stuck: String = c
        .query_one("SELECT id::text FROM rq_enqueue('q', 'x', max_age => '100 ms')", &[])
        .unwrap()
        .get(0);
    let abandoned: String = c.query_one("SELECT id::text FROM rq_enqueue('r', 'y')", &[]).unwrap().get(0);
    c.batch_execute("SELECT rq_claim(ARRAY['r'], lease => '1 second')").unwrap();

    // The rescue duty still runs after the expire duty failed, round after round.
    assert!(eventually(15, || status(&mut c, &abandoned) == "failed"));
    assert_eq!(status(&mut c, &stuck), "queued");
    assert_eq!(launcher_pid(&mut c), Some(launcher), "the launcher did not crash");
    if let Some(log) = log_path {
        let text = String::from_utf8_lossy(&std::fs::read(log).unwrap()).into_owned();
        assert!(
            text.lines().any(|l| l.contains(&format!(
                "WARNING:  23514: raquel: the expire duty failed in database \"{db}\": expiry refused by the test"
            ))),
            "the failure is logged as a WARNING naming the database, with the failure's SQLSTATE"
        );
    }
}

#[test]
fn an_extension_in_its_own_schema_works_without_it_on_the_search_path() {
    let db = fresh_db("rq_it_own_schema");
    let mut c = connect(&db);
    c.batch_execute("DROP EXTENSION raquel; CREATE SCHEMA queue; CREATE EXTENSION raquel SCHEMA queue")
        .unwrap();
    let path: String = c.query_one("SHOW search_path", &[]).unwrap().get(0);
    assert!(!path.contains("queue"), "{path}");
    let id: String = c
        .query_one("SELECT id::text FROM queue.rq_enqueue('q', 'x', max_age => '200 ms')", &[])
        .unwrap()
        .get(0);
    c.batch_execute(
        "SELECT queue.rq_enqueue('w', 'y'); \
         SELECT queue.rq_fail(id, attempts, 'boom') FROM queue.rq_claim(ARRAY['w']); \
         SELECT queue.rq_retry(id) FROM queue.jobs WHERE queue = 'w'; \
         SELECT queue.rq_complete_batch(array_agg(id), array_agg(attempts)) FROM queue.rq_claim(ARRAY['w'])",
    )
    .unwrap();
    // the background worker finds the schema by itself
    assert!(eventually(15, || {
        c.query_one("SELECT status FROM queue.jobs WHERE id = $1::text::uuid", &[&id]).unwrap().get::<_, String>(0)
            == "expired"
    }));
    let w: String = c.query_one("SELECT status FROM queue.jobs WHERE queue = 'w'", &[]).unwrap().get(0);
    assert_eq!(w, "success");
}

#[test]
fn a_session_that_claimed_before_the_extension_moved_schemas_claims_from_the_new_table() {
    // rq_claim and rq_complete keep their plans per backend (src/statements.rs);
    // plans made for the old functions must not outlive them.
    let db = fresh_db("rq_it_reinstall");
    let mut c = connect(&db);
    let round = |c: &mut postgres::Client, schema: &str| -> String {
        c.batch_execute(&format!("SELECT {schema}.rq_enqueue('q', '{schema}')")).unwrap();
        let row = c
            .query_one(&format!("SELECT id::text, payload, attempts FROM {schema}.rq_claim(ARRAY['q'])"), &[])
            .unwrap();
        let (id, attempt): (String, i32) = (row.get(0), row.get(2));
        let status: String = c
            .query_one(&format!("SELECT ({schema}.rq_complete($1::text::uuid, $2)).status"), &[&id, &attempt])
            .unwrap()
            .get(0);
        assert_eq!(status, "success");
        row.get(1)
    };
    assert_eq!(round(&mut c, "public"), "public");
    c.batch_execute("DROP EXTENSION raquel; CREATE SCHEMA queue; CREATE EXTENSION raquel SCHEMA queue").unwrap();
    assert_eq!(round(&mut c, "queue"), "queue");
    c.batch_execute("DROP EXTENSION raquel; CREATE EXTENSION raquel SCHEMA public").unwrap();
    assert_eq!(round(&mut c, "public"), "public");
    let in_queue: i64 = c.query_one("SELECT count(*) FROM pg_tables WHERE schemaname = 'queue'", &[]).unwrap().get(0);
    assert_eq!(in_queue, 0, "the second install's table went with it");
}

/// Lines of the server log written since byte `from`.
fn log_since(from: usize) -> String {
    let path = std::env::var("RAQUEL_TEST_LOG").expect("RAQUEL_TEST_LOG is not set: run the tests through bin/test");
    String::from_utf8_lossy(&std::fs::read(path).unwrap()[from..]).into_owned()
}

fn log_len() -> usize {
    std::env::var("RAQUEL_TEST_LOG").ok().and_then(|p| std::fs::metadata(p).ok()).map_or(0, |m| m.len() as usize)
}

#[test]
fn wake_ups_however_many_start_at_most_a_round_a_second() {
    // 0.1.0 started a round in every database for every rq_worker_wake():
    // called in a loop, it kept a core busy.
    let db = fresh_db("rq_it_worker_wake_flood");
    let mut c = connect(&db);
    // Each round here logs a WARNING (its expire duty fails), so the
    // WARNINGs count the rounds.
    c.batch_execute(
        "CREATE FUNCTION refuse_expiry() RETURNS trigger LANGUAGE plpgsql AS $$ \
         BEGIN RAISE EXCEPTION 'expiry refused by the test' USING ERRCODE = 'check_violation'; END $$; \
         CREATE TRIGGER refuse_expiry BEFORE UPDATE ON jobs FOR EACH ROW EXECUTE FUNCTION refuse_expiry(); \
         SELECT rq_enqueue('q', 'x', max_age => '1 ms')",
    )
    .unwrap();
    sleep(Duration::from_millis(300));
    let from = log_len();
    let started = std::time::Instant::now();
    let mut wakes = 0;
    while started.elapsed() < Duration::from_secs(3) {
        c.batch_execute("SELECT rq_worker_wake()").unwrap();
        wakes += 1;
    }
    sleep(Duration::from_millis(500));
    let warning = format!("raquel: the expire duty failed in database \"{db}\"");
    let rounds = log_since(from).lines().filter(|l| l.contains(&warning)).count();
    assert!(wakes > 100, "only {wakes} wake-ups in 3 s");
    assert!((1..=5).contains(&rounds), "{rounds} rounds for {wakes} wake-ups in 3.5 s");
}

#[test]
fn a_locked_table_in_one_database_does_not_hold_up_another() {
    // 0.1.0's duties waited for the lock, and every database after the
    // locked one waited with them.
    let locked = fresh_db("rq_it_worker_locked_table");
    let other = fresh_db("rq_it_worker_not_locked");
    let mut a = connect(&locked);
    a.batch_execute("SELECT rq_enqueue('q', 'x', max_age => '1 ms')").unwrap(); // a duty due there every round
    a.batch_execute("BEGIN; LOCK TABLE jobs IN ACCESS EXCLUSIVE MODE").unwrap();
    let mut b = connect(&other);
    let id: String = b.query_one("SELECT id::text FROM rq_enqueue('r', 'y')", &[]).unwrap().get(0);
    b.batch_execute("SELECT rq_claim(ARRAY['r'], lease => '1 second')").unwrap();
    let claimed = std::time::Instant::now();
    let rescued = eventually(10, || status(&mut b, &id) == "failed");
    let took = claimed.elapsed();
    a.batch_execute("ROLLBACK").unwrap();
    assert!(rescued, "the other database's job was not rescued while the table stayed locked");
    // the lease (1 s), the launcher's interval (1 s), one lock timeout (0.5 s)
    assert!(took < Duration::from_secs(4), "rescued {took:?} after the claim");
}

/// Transactions committed in `db` so far, read from another database (so
/// that reading them commits none there).
fn commits_in(db: &str) -> i64 {
    let mut admin = connect("postgres");
    admin.batch_execute("SELECT pg_stat_clear_snapshot()").unwrap();
    admin.query_one("SELECT xact_commit FROM pg_stat_database WHERE datname = $1", &[&db]).unwrap().get(0)
}

#[test]
fn an_idle_database_gets_no_rounds() {
    // 0.1.0 started a housekeeping worker in every database every second,
    // each committing a few transactions there: 30 idle databases kept a
    // quarter of a core busy.
    let db = fresh_db("rq_it_worker_idle");
    drop(connect(&db));
    sleep(Duration::from_secs(2)); // the round CREATE EXTENSION asked for
    let before = commits_in(&db);
    sleep(Duration::from_secs(5));
    let rounds_would_commit = commits_in(&db) - before;
    // (an autovacuum worker may commit one or two here; five rounds would be 20)
    assert!(rounds_would_commit < 8, "{rounds_would_commit} transactions in an idle database in 5 s");
}

/// A lease of one second, claimed now in `db`: the job's id.
fn a_lapsing_claim(c: &mut postgres::Client) -> String {
    let id: String = c.query_one("SELECT id::text FROM rq_enqueue('lapse', 'x')", &[]).unwrap().get(0);
    c.batch_execute("SELECT rq_claim(ARRAY['lapse'], worker => 'dead', lease => '1 second')").unwrap();
    id
}

#[test]
fn a_producer_holding_a_schedules_next_keys_holds_up_no_duty() {
    // 0.4.0 keyed each slot's job 'rq_schedule:<name>@<slot ms>': a producer
    // that held the next 60 such keys in an open transaction made the
    // schedule duty wait for its lock every round, and the round ended
    // there (a 1-second lease stayed unrescued over 20 s).
    let db = fresh_db("rq_it_worker_held_keys");
    let mut c = connect(&db);
    c.batch_execute(
        "DROP ROLE IF EXISTS rq_it_key_holder; CREATE ROLE rq_it_key_holder LOGIN;
         SELECT rq_grant_producer('rq_it_key_holder');
         SELECT rq_schedule('tick', '* * * * * *', 'ticks', 'from the schedule')",
    )
    .unwrap();
    let mut producer = connect_as(&db, "rq_it_key_holder");
    producer.batch_execute("BEGIN").unwrap();
    producer
        .batch_execute(
            "SELECT rq_enqueue('ticks', 'held', key => format('rq_schedule:tick@%s', (rq_now_ms() / 1000 + s) * 1000))
             FROM generate_series(0, 60) s",
        )
        .unwrap();
    let lapsing = a_lapsing_claim(&mut c);
    let status_of = |c: &mut postgres::Client| -> String {
        c.query_one("SELECT status FROM jobs WHERE id = $1::text::uuid", &[&lapsing]).unwrap().get(0)
    };
    let rescued = eventually(8, || status_of(&mut c) == "failed");
    let own = |c: &mut postgres::Client| -> i64 {
        c.query_one("SELECT count(*) FROM jobs WHERE queue = 'ticks' AND payload = 'from the schedule'", &[])
            .unwrap()
            .get(0)
    };
    let fired = eventually(8, || own(&mut c) >= 3);
    producer.batch_execute("ROLLBACK").unwrap();
    c.batch_execute("SELECT rq_pause_schedule('tick')").unwrap();
    assert!(rescued, "the lapsed lease was not rescued while a producer held the schedule's next keys");
    assert!(fired, "the schedule fired {} jobs of its own while a producer held its next keys", own(&mut c));
}

#[test]
fn a_duty_held_up_by_a_lock_leaves_the_others_to_run() {
    // 0.4.0 ended a database's round at the first duty that waited too long
    // for a lock: with the schedules table locked, no lease was rescued.
    let db = fresh_db("rq_it_worker_one_duty_locked");
    let mut c = connect(&db);
    c.batch_execute("SELECT rq_schedule('tick', '* * * * * *', 'ticks')").unwrap();
    let mut locker = connect(&db);
    locker.batch_execute("BEGIN; LOCK TABLE schedules IN ACCESS EXCLUSIVE MODE").unwrap();
    let from = log_len();
    let lapsing = a_lapsing_claim(&mut c);
    let rescued = eventually(8, || status(&mut c, &lapsing) == "failed");
    locker.batch_execute("ROLLBACK").unwrap();
    c.batch_execute("SELECT rq_pause_schedule('tick')").unwrap();
    assert!(rescued, "the rescue duty did not run while the schedule duty waited for its lock");
    let waited = format!("raquel: the schedule duty in database \"{db}\" waited too long for a lock");
    assert!(log_since(from).contains(&waited), "the schedule duty's wait is logged");
}

#[test]
fn a_schedule_that_cannot_enqueue_is_skipped_and_the_others_fire() {
    // 0.4.0 let one schedule whose job could not be enqueued (a payload over
    // raquel.max_payload_size, a slot key over the key limit) fail the duty
    // every round: a healthy per-second schedule beside it fired 0 times in
    // 6 s. rq_schedule refuses such schedules now; this one's payload is
    // made too big by hand, as a lowered raquel.max_payload_size would.
    let db = fresh_db("rq_it_worker_poison_schedule");
    let mut c = connect(&db);
    c.batch_execute(
        "SELECT rq_schedule('poison', '* * * * * *', 'poisoned');
         UPDATE schedules SET payload = repeat('x', 2 * 1024 * 1024) WHERE name = 'poison';
         SELECT rq_schedule('healthy', '* * * * * *', 'healthy')",
    )
    .unwrap();
    let from = log_len();
    sleep(Duration::from_secs(6));
    let healthy: i64 = c.query_one("SELECT count(*) FROM jobs WHERE queue = 'healthy'", &[]).unwrap().get(0);
    let poisoned: i64 = c.query_one("SELECT count(*) FROM jobs WHERE queue = 'poisoned'", &[]).unwrap().get(0);
    c.batch_execute("SELECT rq_pause_schedule(name) FROM schedules").unwrap();
    assert!(healthy >= 4, "the healthy schedule fired {healthy} times in 6 s beside a failing one");
    assert_eq!(poisoned, 0);
    let (error, next_run_ahead): (Option<String>, bool) = c
        .query_one("SELECT last_error, next_run_at > rq_now_ms() - 8000 FROM schedules WHERE name = 'poison'", &[])
        .map(|r| (r.get(0), r.get(1)))
        .unwrap();
    let error = error.expect("the failing schedule says why in last_error");
    assert!(error.contains("raquel.max_payload_size") && error.contains("54000"), "{error}");
    assert!(next_run_ahead, "the failing schedule goes on at its next slot rather than retrying every round");
    let warning = "raquel: schedule \"poison\" could not enqueue its job";
    assert!(log_since(from).contains(warning), "the failure is a WARNING in the log");
}
