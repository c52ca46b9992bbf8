//! ALTER EXTENSION raquel UPDATE from each released version (0.1.0 and
//! 0.2.0: sql/raquel--<version>.sql, the released install scripts) to this
//! version, on a database with jobs in every status and a worker session
//! that holds a claim across the update.

use raquel_client_tests::{connect, eventually};

const CATALOG: &str = include_str!("../sql/extension_catalog.sql");

fn catalog(client: &mut postgres::Client) -> Vec<String> {
    client.query(CATALOG, &[]).unwrap().iter().map(|row| row.get(0)).collect()
}

/// Every job, every column an older version has, as JSON text, in id order.
fn jobs(client: &mut postgres::Client) -> Vec<(String, String)> {
    client
        .query("SELECT id::text, (to_jsonb(j) - 'group_key' - 'turn' - 'blocked_by' - 'has_children' - 'key_period' - 'result' - 'past_attempts')::text FROM jobs j ORDER BY id", &[])
        .unwrap()
        .iter()
        .map(|row| (row.get(0), row.get(1)))
        .collect()
}

fn new_database(name: &str) -> postgres::Client {
    let mut admin = connect("postgres");
    admin.batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)")).unwrap();
    admin.batch_execute(&format!("CREATE DATABASE {name}")).unwrap();
    connect(name)
}

fn one(client: &mut postgres::Client, sql: &str) -> String {
    client.query_one(sql, &[]).unwrap().get(0)
}

fn server_log() -> String {
    let path = std::env::var("RAQUEL_TEST_LOG").expect("RAQUEL_TEST_LOG is not set: run the tests through bin/test");
    std::fs::read_to_string(path).unwrap()
}

/// The version a plain CREATE EXTENSION installs: this build's.
fn current_version(client: &mut postgres::Client) -> String {
    one(client, "SELECT default_version FROM pg_available_extensions WHERE name = 'raquel'")
}

#[test]
fn the_update_paths_from_released_versions_are_known() {
    let mut c = connect("postgres");
    let version = current_version(&mut c);
    assert_ne!(version, "0.1.0");
    let paths: Vec<String> = c
        .query(
            "SELECT source || ' -> ' || target || ': ' || path FROM pg_extension_update_paths('raquel') \
             WHERE path IS NOT NULL ORDER BY 1",
            &[],
        )
        .unwrap()
        .iter()
        .map(|row| row.get(0))
        .collect();
    assert!(paths.iter().any(|p| p.starts_with(&format!("0.1.0 -> {version}: 0.1.0--"))), "{paths:?}");
    assert!(paths.iter().any(|p| p.starts_with(&format!("0.2.0 -> {version}: 0.2.0--"))), "{paths:?}");
    assert!(paths.iter().any(|p| p.starts_with(&format!("0.3.0 -> {version}: 0.3.0--"))), "{paths:?}");
    assert!(paths.iter().any(|p| p.starts_with(&format!("0.4.0 -> {version}: 0.4.0--"))), "{paths:?}");
    assert!(paths.contains(&format!("0.5.0 -> {version}: 0.5.0--{version}")), "{paths:?}");
}

#[test]
fn an_install_of_0_1_0_updates_in_place_to_what_a_fresh_install_is() {
    updates_in_place_to_what_a_fresh_install_is("0.1.0");
}

#[test]
fn an_install_of_0_2_0_updates_in_place_to_what_a_fresh_install_is() {
    updates_in_place_to_what_a_fresh_install_is("0.2.0");
}

#[test]
fn an_install_of_0_3_0_updates_in_place_to_what_a_fresh_install_is() {
    updates_in_place_to_what_a_fresh_install_is("0.3.0");
}

#[test]
fn an_install_of_0_4_0_updates_in_place_to_what_a_fresh_install_is() {
    updates_in_place_to_what_a_fresh_install_is("0.4.0");
}

#[test]
fn an_install_of_0_5_0_updates_in_place_to_what_a_fresh_install_is() {
    updates_in_place_to_what_a_fresh_install_is("0.5.0");
}

#[test]
fn a_producer_granted_at_0_5_0_still_enqueues_from_a_trigger_and_with_jsonb_after_the_update() {
    // 0.6.0's trigger and jsonb overloads call the twins of rq_enqueue and
    // rq_enqueue_batch in raquel_internal: the update grants them to every
    // role that had the public ones.
    let mut c = new_database("rq_upgrade_producer");
    c.batch_execute(
        "DROP ROLE IF EXISTS rq_upgrade_producer; CREATE ROLE rq_upgrade_producer;
         CREATE EXTENSION raquel VERSION '0.5.0';
         SELECT rq_grant_producer('rq_upgrade_producer');
         CREATE TABLE signups (id integer);
         CREATE TRIGGER signups_enqueue AFTER INSERT ON signups FOR EACH ROW EXECUTE FUNCTION rq_enqueue_trigger('signups');
         GRANT INSERT ON signups TO rq_upgrade_producer;
         ALTER EXTENSION raquel UPDATE;
         SET ROLE rq_upgrade_producer;
         INSERT INTO signups VALUES (1);
         SELECT rq_enqueue_batch('q', ARRAY['{}']::jsonb[]);
         RESET ROLE;",
    )
    .unwrap();
    assert_eq!(one(&mut c, "SELECT count(*)::text FROM jobs"), "2");
    drop(c);
    let mut admin = connect("postgres");
    admin.batch_execute("DROP DATABASE rq_upgrade_producer WITH (FORCE)").unwrap();
    admin.batch_execute("DROP ROLE rq_upgrade_producer").unwrap();
}

#[test]
fn steps_recorded_at_0_5_0_keep_their_kinds_after_the_update() {
    // 0.6.0 records each step's kind (job_steps.kind): the update reads a
    // 0.5.0 step's kind from what it recorded, so that a job asleep or
    // parked across the update goes on, and a name reused as another kind
    // is refused.
    let mut c = new_database("rq_upgrade_kinds");
    c.batch_execute("CREATE EXTENSION raquel VERSION '0.5.0'; SELECT rq_enqueue('sleeper', 'p'); SELECT rq_enqueue('waiter', 'p');")
        .unwrap();
    let claim = |c: &mut postgres::Client, queue: &str| -> (String, i32) {
        let row = c.query_one("SELECT id::text, attempts FROM rq_claim(ARRAY[$1])", &[&queue]).unwrap();
        (row.get(0), row.get(1))
    };
    let (sleeper, a) = claim(&mut c, "sleeper");
    c.batch_execute(&format!(
        "SELECT rq_step('{sleeper}', 'charge', '1', attempt => {a});
         SELECT rq_sleep('{sleeper}', 'nap', delay => '1 hour', attempt => {a});"
    ))
    .unwrap();
    let (waiter, w) = claim(&mut c, "waiter");
    c.batch_execute(&format!("SELECT rq_wait_event('{waiter}', 'pay', 'paid:1', attempt => {w})")).unwrap();
    c.batch_execute("ALTER EXTENSION raquel UPDATE").unwrap();
    assert_eq!(one(&mut c, "SELECT string_agg(name || ':' || kind, ' ' ORDER BY name) FROM job_steps"), "charge:step nap:sleep");
    // the parked job resumes, its step recorded as a wait's
    assert_eq!(one(&mut c, "SELECT rq_emit('paid:1', '\"yes\"')::text"), "1");
    let (again, w) = claim(&mut c, "waiter");
    assert_eq!(again, waiter);
    assert_eq!(one(&mut c, &format!("SELECT payload::text FROM rq_wait_event('{waiter}', {w}, 'pay', 'paid:1')")), r#""yes""#);
    // the sleeper, its hour made over, passes its sleep, and its name is a sleep's
    c.batch_execute(&format!(
        "UPDATE job_steps SET result = jsonb_set(result, '{{until_ms}}', to_jsonb(rq_now_ms() - 1)) WHERE name = 'nap';
         UPDATE jobs SET scheduled_at = rq_now_ms() WHERE id = '{sleeper}';"
    ))
    .unwrap();
    let (again, a) = claim(&mut c, "sleeper");
    assert_eq!(again, sleeper);
    assert_eq!(one(&mut c, &format!("SELECT rq_sleep('{sleeper}', {a}, 'nap', delay => '1 hour')::text")), "false");
    let refused = c.batch_execute(&format!("SELECT rq_step('{sleeper}', {a}, 'nap', '1')")).unwrap_err();
    assert_eq!(refused.code().map(|c| c.code()), Some("55000"), "{refused:?}");
    drop(c);
    connect("postgres").batch_execute("DROP DATABASE rq_upgrade_kinds WITH (FORCE)").unwrap();
}

#[test]
fn an_install_of_0_1_0_hijacked_at_creation_updates() {
    // 0.1.0's rq_jobs view converted with operators the install resolved on
    // the search_path: in schema public, a role with CREATE there could plant
    // a better-matching `*(bigint, interval)` before CREATE EXTENSION, and
    // the view bound it for good. The update to 0.2.0 then failed (42P16,
    // the view's column changing type), which left the database on 0.1.0.
    let mut fresh = new_database("rq_upgrade_fresh_public");
    fresh.batch_execute("CREATE EXTENSION raquel SCHEMA public").unwrap();
    let db = "rq_upgrade_hijacked";
    let mut c = new_database(db);
    c.batch_execute(
        "DROP ROLE IF EXISTS rq_upgrade_planter; CREATE ROLE rq_upgrade_planter;
         DROP ROLE IF EXISTS rq_upgrade_reader; CREATE ROLE rq_upgrade_reader;
         GRANT CREATE ON SCHEMA public TO rq_upgrade_planter;
         SET ROLE rq_upgrade_planter;
         CREATE FUNCTION public.ms_times(bigint, interval) RETURNS text LANGUAGE sql AS $$ SELECT 'planted' $$;
         CREATE OPERATOR public.* (LEFTARG = bigint, RIGHTARG = interval, FUNCTION = public.ms_times);
         RESET ROLE;
         CREATE EXTENSION raquel VERSION '0.1.0' SCHEMA public;
         GRANT SELECT ON rq_jobs TO rq_upgrade_reader;",
    )
    .unwrap();
    let hijacked = one(
        &mut c,
        "SELECT format_type(atttypid, atttypmod) FROM pg_attribute WHERE attrelid = 'rq_jobs'::regclass AND attname = 'max_age'",
    );
    assert_eq!(hijacked, "text", "the planted operator was bound by 0.1.0's view");
    c.batch_execute("SELECT rq_enqueue('q', 'x', max_age => '1 hour')").unwrap();

    c.batch_execute("ALTER EXTENSION raquel UPDATE").unwrap();

    assert_eq!(one(&mut c, "SELECT max_age::text FROM rq_jobs"), "01:00:00", "the view converts with raquel's own functions");
    let may_read: bool =
        c.query_one("SELECT has_table_privilege('rq_upgrade_reader', 'rq_jobs', 'SELECT')", &[]).unwrap().get(0);
    assert!(may_read, "the view's grants are kept");
    fresh.batch_execute("GRANT SELECT ON rq_jobs TO rq_upgrade_reader").unwrap();
    let (updated, fresh_catalog) = (catalog(&mut c), catalog(&mut fresh));
    let differs: Vec<_> = updated
        .iter()
        .filter(|l| !fresh_catalog.contains(l))
        .chain(fresh_catalog.iter().filter(|l| !updated.contains(l)))
        .collect();
    assert!(differs.is_empty(), "the updated install differs from a fresh one: {differs:#?}");
    drop((c, fresh));
    let mut admin = connect("postgres");
    admin.batch_execute(&format!("DROP DATABASE {db} WITH (FORCE)")).unwrap();
    admin.batch_execute("DROP DATABASE rq_upgrade_fresh_public WITH (FORCE)").unwrap();
    admin.batch_execute("DROP ROLE rq_upgrade_planter; DROP ROLE rq_upgrade_reader").unwrap();
}

fn updates_in_place_to_what_a_fresh_install_is(from: &str) {
    let mut fresh = new_database("rq_upgrade_fresh");
    fresh.batch_execute("CREATE EXTENSION raquel").unwrap();

    let db = "rq_upgrade_old";
    let mut c = new_database(db);
    let version = current_version(&mut c);
    c.batch_execute(&format!("CREATE EXTENSION raquel VERSION '{from}'")).unwrap();
    assert_eq!(one(&mut c, "SELECT extversion FROM pg_extension WHERE extname = 'raquel'"), from);

    // The background worker leaves an install of another version alone and
    // says what to do; the job past its max_age shows that it did nothing.
    let advice = format!(
        "the extension in database \"{db}\" is version {from}, the library is {version}; \
         run ALTER EXTENSION raquel UPDATE there"
    );
    let log_before = server_log().len();
    let to_expire = one(&mut c, "SELECT id::text FROM rq_enqueue('expire', 'old', max_age => '1 ms')");
    c.batch_execute("SELECT rq_worker_wake()").unwrap();
    assert!(eventually(15, || server_log()[log_before..].contains(&advice)), "the worker's advice is logged");

    // The old version's functions run on this library: 0.1.0's waiting
    // claim's loop (rq_claim_waiting and the symbols it calls,
    // src/compat_0_1.rs), and the claim and enqueue statements on a table
    // without the columns of later versions.
    let waiting = if from == "0.1.0" {
        "SELECT * FROM rq_claim_waiting(ARRAY['none'], 'w', 1, '1 minute', 50)"
    } else {
        "SELECT * FROM rq_claim(ARRAY['none'], 'w', 1, '1 minute', '50 milliseconds')"
    };
    assert!(c.query(waiting, &[]).unwrap().is_empty());
    // A claim on any queue, on a table without 0.6.0's index of every
    // queue's ready jobs, walks queue by queue (src/claim.rs): it finds the
    // job a plain INSERT made ready, and gives it back at the rollback.
    c.batch_execute("BEGIN; INSERT INTO jobs (queue, payload) VALUES ('any', 'for any queue')").unwrap();
    let any = one(&mut c, "SELECT payload FROM rq_claim(NULL::text[])");
    c.batch_execute("ROLLBACK").unwrap();
    assert_eq!(any, "for any queue");

    // Jobs in every status, made by the 0.1.0 functions.
    c.batch_execute(
        "SELECT rq_enqueue('q', 'queued');
         SELECT rq_enqueue('q', '{\"json\": true}'::jsonb, priority => 5, key => 'k1');
         SELECT rq_enqueue('later', 'scheduled', delay => '1 hour', max_retry_count => 3,
                           min_retry_delay => '2 seconds', max_retry_delay => '1 minute', backoff_base => '3 seconds');
         SELECT rq_enqueue_batch('batch', ARRAY['b1', 'b2'], keys => ARRAY['x', NULL]);
         SELECT rq_enqueue('s', 'to succeed'); SELECT rq_complete(id) FROM rq_claim(ARRAY['s']);
         SELECT rq_enqueue('f', 'to fail'); SELECT rq_fail(id, 'boom', 'trace') FROM rq_claim(ARRAY['f']);
         SELECT rq_enqueue('x', 'to exhaust', max_retry_count => 0); SELECT rq_fail(id, 'no more') FROM rq_claim(ARRAY['x']);
         SELECT rq_cancel(id) FROM rq_enqueue('c', 'to cancel');
         SELECT rq_enqueue('e', 'to expire by hand', max_age => '1 ms'); SELECT pg_sleep(0.01); SELECT rq_expire();
         INSERT INTO jobs (queue, payload, status, claimed_by, claimed_at, attempts)
             VALUES ('library', 'claimed by the Python library', 'claimed', 'py', rq_now_ms(), 1);",
    )
    .unwrap();
    // A worker that claimed at 0.1.0 and stays connected through the update.
    let held = one(&mut c, "SELECT id::text FROM rq_enqueue('held', 'held across the update')");
    let mut worker = connect(db);
    let attempt: i32 = worker
        .query_one("SELECT attempts FROM rq_claim(ARRAY['held'], worker => 'w1', lease => '1 hour')", &[])
        .unwrap()
        .get(0);
    let statuses: Vec<String> =
        c.query("SELECT DISTINCT status FROM jobs ORDER BY 1", &[]).unwrap().iter().map(|r| r.get(0)).collect();
    assert_eq!(statuses, ["cancelled", "claimed", "exhausted", "expired", "failed", "queued", "success"]);
    let before = jobs(&mut c);

    connect(db).batch_execute("ALTER EXTENSION raquel UPDATE").unwrap();

    // (a) The updated install is a fresh install, object for object.
    let (updated, fresh_catalog) = (catalog(&mut c), catalog(&mut fresh));
    let only_updated: Vec<_> = updated.iter().filter(|l| !fresh_catalog.contains(l)).collect();
    let only_fresh: Vec<_> = fresh_catalog.iter().filter(|l| !updated.contains(l)).collect();
    assert!(
        only_updated.is_empty() && only_fresh.is_empty(),
        "the updated install differs from a fresh one:\nonly after the update: {only_updated:#?}\nonly in a fresh install: {only_fresh:#?}"
    );
    assert!(updated.len() > 50, "the catalog query sees the extension's objects: {updated:#?}");

    // (b) Every job and every column survived. The one past its max_age is
    // left out: the worker may already be expiring it (below).
    let after = jobs(&mut c);
    let without = |rows: Vec<(String, String)>| rows.into_iter().filter(|(id, _)| *id != to_expire).collect::<Vec<_>>();
    assert_eq!(without(before), without(after));

    // (c) The worker completes the job it claimed before the update, and
    // claims again, in the same session.
    let done: String = worker
        .query_one("SELECT (rq_complete($1::text::uuid, $2)).status", &[&held, &attempt])
        .unwrap()
        .get(0);
    assert_eq!(done, "success");
    let next: String = worker
        .query_one("SELECT payload FROM rq_claim(ARRAY['q'], worker => 'w1') ORDER BY payload", &[])
        .unwrap()
        .get(0);
    assert_eq!(next, "{\"json\": true}", "the higher priority first");

    // (e) What this version adds works on the updated install: a limit, a
    // grouped job, a job that runs after another.
    c.batch_execute(
        "SELECT rq_set_limits('limited', max_claimed => 1);
         SELECT rq_enqueue('limited', 'one'); SELECT rq_enqueue('limited', 'two', group_key => 'g');",
    )
    .unwrap();
    let claimed = c.query("SELECT * FROM rq_claim(ARRAY['limited'], 'w', 10)", &[]).unwrap();
    assert_eq!(claimed.len(), 1, "max_claimed holds on the updated install");
    // and a workflow: a job that runs after the one still queued
    let parent = one(&mut c, "SELECT id::text FROM jobs WHERE queue = 'limited' AND status = 'queued'");
    let child = one(&mut c, &format!("SELECT status FROM rq_enqueue('after', 'c', after => ARRAY['{parent}']::uuid[])"));
    assert_eq!(child, "blocked");

    // (d) The background worker serves the updated database without a restart.
    assert!(
        eventually(15, || one(&mut c, &format!("SELECT status FROM jobs WHERE id = '{to_expire}'")) == "expired"),
        "the worker expires the job once the install is updated"
    );
}

#[test]
fn a_worker_granted_at_0_4_0_no_longer_writes_the_limits_state_after_the_update() {
    // 0.4.0's rq_grant_worker gave UPDATE (claimed, tokens, tokens_at) on
    // queue_limits: a worker could set its own queue's count of claims and
    // tokens and pass every limit. 0.5.0's flow claim writes that state as
    // the owner (rq_flow_took); the update takes the right back from every
    // role that held it, PUBLIC included, and gives what a 0.5.0 worker needs.
    let db = "rq_upgrade_worker_role";
    let mut c = new_database(db);
    c.batch_execute(
        "DROP ROLE IF EXISTS rq_upgrade_worker; CREATE ROLE rq_upgrade_worker;
         CREATE EXTENSION raquel VERSION '0.4.0';
         SELECT rq_grant_worker('rq_upgrade_worker');
         GRANT UPDATE (tokens) ON queue_limits TO PUBLIC;
         SELECT rq_set_limits('limited', max_claimed => 1, rate => 100);
         SELECT rq_enqueue('limited', 'one'); SELECT rq_enqueue('limited', 'two');",
    )
    .unwrap();
    let may_write = |c: &mut postgres::Client, role: &str| -> bool {
        c.query_one(
            "SELECT bool_or(has_column_privilege($1, 'queue_limits', col, 'UPDATE'))
             FROM unnest(ARRAY['claimed', 'tokens', 'tokens_at']) col",
            &[&role],
        )
        .unwrap()
        .get(0)
    };
    assert!(may_write(&mut c, "rq_upgrade_worker"), "0.4.0 granted the limits state to its workers");

    c.batch_execute("ALTER EXTENSION raquel UPDATE").unwrap();

    assert!(!may_write(&mut c, "rq_upgrade_worker"), "the update revokes the worker's UPDATE on the limits state");
    let public_may: bool = c
        .query_one(
            "SELECT EXISTS (SELECT FROM pg_attribute a, aclexplode(a.attacl) e
             WHERE a.attrelid = 'queue_limits'::regclass AND e.grantee = 0 AND e.privilege_type = 'UPDATE')",
            &[],
        )
        .unwrap()
        .get(0);
    assert!(!public_may, "and PUBLIC's");
    // the worker still claims in the limited queue, and the limit holds
    c.batch_execute("SET ROLE rq_upgrade_worker").unwrap();
    let claimed = c.query("SELECT id FROM rq_claim(ARRAY['limited'], 'w', 10)", &[]).unwrap();
    assert_eq!(claimed.len(), 1, "max_claimed holds for the worker after the update");
    // and records steps (0.5.0's job_steps, granted to 0.4.0's workers by the update)
    let step = c.query_one("SELECT (rq_step(j.id, j.attempts, 'after the update', '1')).name FROM jobs j WHERE j.status = 'claimed'", &[]);
    assert!(step.is_ok(), "a 0.4.0 worker records a step after the update: {step:?}");
    let written = c.batch_execute("UPDATE queue_limits SET claimed = claimed, tokens = 1000");
    assert_eq!(raquel_client_tests::sqlstate(written), "42501", "the worker cannot reset its limits");
    c.batch_execute("RESET ROLE").unwrap();
    drop(c);
    let mut admin = connect("postgres");
    admin.batch_execute(&format!("DROP DATABASE {db} WITH (FORCE)")).unwrap();
    admin.batch_execute("DROP ROLE rq_upgrade_worker").unwrap();
}

/// The functions users call, which the extension's schema holds (each
/// overload once): README's "SQL reference". The rest are helpers, in
/// raquel_internal.
const PUBLIC_FUNCTIONS: &[&str] = &[
    "rq_await", "rq_backoff", "rq_cancel", "rq_channel", "rq_claim", "rq_complete", "rq_complete_and_claim",
    "rq_complete_batch", "rq_complete_batch_and_claim", "rq_count", "rq_distribute", "rq_distributed", "rq_emit",
    "rq_enqueue", "rq_enqueue", "rq_enqueue_batch", "rq_enqueue_batch", "rq_enqueue_trigger", "rq_expire",
    "rq_extend", "rq_fail", "rq_fail_and_claim", "rq_fire_schedules", "rq_grant_emitter", "rq_grant_producer", "rq_grant_worker",
    "rq_help", "rq_history", "rq_metrics", "rq_metrics_lost", "rq_ms_to_interval", "rq_ms_to_timestamptz", "rq_now_ms", "rq_parents", "rq_pause",
    "rq_pause_schedule", "rq_prometheus", "rq_prune", "rq_queues", "rq_reject", "rq_reschedule", "rq_rescue",
    "rq_resume", "rq_resume_schedule", "rq_retry", "rq_schedule", "rq_schedule", "rq_set_history",
    "rq_set_limits", "rq_settle_workflows", "rq_sleep", "rq_stats", "rq_step", "rq_take", "rq_unschedule", "rq_uuid7",
    "rq_wait_event", "rq_wait_job", "rq_warnings", "rq_worker_wake",
];

/// The names of the extension's functions in `schema`, sorted bytewise (an
/// overload once each), as PUBLIC_FUNCTIONS is.
fn functions_in(client: &mut postgres::Client, schema: &str) -> Vec<String> {
    let mut names = client
        .query(
            "SELECT p.proname::text FROM pg_proc p
             JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e'
             JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'raquel'
             WHERE p.pronamespace = $1::text::regnamespace ORDER BY 1",
            &[&schema],
        )
        .unwrap()
        .iter()
        .map(|row| row.get::<_, String>(0))
        .collect::<Vec<_>>();
    names.sort();
    names
}

/// The public objects of the extension that have no comment: functions of
/// its schema, its views and tables, and raquel_internal.
fn uncommented(client: &mut postgres::Client) -> Vec<String> {
    client
        .query(
            "SELECT pg_describe_object(d.classid, d.objid, 0) FROM pg_depend d
             JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'raquel'
             WHERE d.deptype = 'e'
               AND ((d.classid = 'pg_proc'::regclass
                     AND (SELECT p.pronamespace FROM pg_proc p WHERE p.oid = d.objid) = e.extnamespace)
                    OR (d.classid = 'pg_class'::regclass
                        AND (SELECT c.relkind FROM pg_class c WHERE c.oid = d.objid) IN ('r', 'v'))
                    OR d.classid = 'pg_namespace'::regclass)
               AND obj_description(d.objid, (SELECT c.relname FROM pg_class c WHERE c.oid = d.classid)) IS NULL
             UNION ALL
             -- and every column of its tables and views (sql/column_comments.sql)
             SELECT pg_describe_object('pg_class'::regclass, a.attrelid, a.attnum) FROM pg_attribute a
             JOIN pg_depend d ON d.classid = 'pg_class'::regclass AND d.objid = a.attrelid AND d.deptype = 'e'
             JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'raquel'
             WHERE (SELECT c.relkind FROM pg_class c WHERE c.oid = a.attrelid) IN ('r', 'v')
               AND a.attnum > 0 AND NOT a.attisdropped AND col_description(a.attrelid, a.attnum) IS NULL
             ORDER BY 1",
            &[],
        )
        .unwrap()
        .iter()
        .map(|row| row.get(0))
        .collect()
}

#[test]
fn an_update_of_0_4_0_with_jobs_in_flight_leaves_only_the_public_functions_in_the_extension_schema() {
    // A fresh install first: the same split, every public object commented.
    let mut fresh = new_database("rq_upgrade_fresh_split");
    fresh.batch_execute("CREATE EXTENSION raquel").unwrap();
    assert_eq!(functions_in(&mut fresh, "public"), PUBLIC_FUNCTIONS, "a fresh install's schema: the public functions");
    let internal = functions_in(&mut fresh, "raquel_internal");
    assert!(internal.len() > 50, "the helpers are in raquel_internal: {internal:?}");
    assert_eq!(uncommented(&mut fresh), Vec::<String>::new(), "every public object of a fresh install has a comment");

    let db = "rq_upgrade_split";
    let mut c = new_database(db);
    c.batch_execute("CREATE EXTENSION raquel VERSION '0.4.0'").unwrap();
    let before = functions_in(&mut c, "public");
    assert!(before.len() > 90, "0.4.0 has its helpers in its schema: {} functions", before.len());
    // Jobs in flight across the update: queued, a limited queue's, a grouped
    // one, a parent claimed by a worker session with a child waiting for it,
    // one claimed by another worker, one failed waiting for its retry.
    c.batch_execute(
        "SELECT rq_enqueue('q', 'queued');
         SELECT rq_set_limits('limited', max_claimed => 1);
         SELECT rq_enqueue('limited', 'limited');
         SELECT rq_enqueue('grouped', 'grouped', group_key => 'g');
         SELECT rq_enqueue('f', 'to fail', max_retry_count => 3, min_retry_delay => '0', backoff_base => '0');
         SELECT rq_fail(id, 'boom') FROM rq_claim(ARRAY['f']);",
    )
    .unwrap();
    let parent = one(&mut c, "SELECT id::text FROM rq_enqueue('parent', 'parent')");
    let child = one(&mut c, &format!("SELECT id::text FROM rq_enqueue('child', 'child', after => ARRAY['{parent}']::uuid[])"));
    assert_eq!(one(&mut c, &format!("SELECT status FROM jobs WHERE id = '{child}'")), "blocked");
    let mut worker = connect(db);
    let parent_attempt: i32 = worker
        .query_one("SELECT attempts FROM rq_claim(ARRAY['parent'], worker => 'w1', lease => '1 hour')", &[])
        .unwrap()
        .get(0);
    let held = one(&mut c, "SELECT id::text FROM rq_enqueue('held', 'held', min_retry_delay => '0', backoff_base => '0')");
    let held_attempt: i32 = worker
        .query_one("SELECT attempts FROM rq_claim(ARRAY['held'], worker => 'w1', lease => '1 hour')", &[])
        .unwrap()
        .get(0);

    // Before the update, 0.4.0's C verbs run on this library and call the
    // helpers in 0.4.0's schema (src/statements.rs helper_of): a claim of a
    // limited queue (rq_claim_flow), a complete that releases a child
    // (rq_job_ended), an enqueue after a parent (rq_hold_for_parents). A
    // schema raquel_internal that is not the extension's is never called.
    c.batch_execute(
        "CREATE SCHEMA raquel_internal;
         CREATE FUNCTION raquel_internal.rq_claim_flow(text[], text, integer, bigint) RETURNS SETOF jobs
         LANGUAGE sql AS $$ SELECT * FROM jobs WHERE false $$;
         SELECT rq_set_limits('limited0', max_claimed => 1);
         SELECT rq_enqueue('limited0', 'limited before');",
    )
    .unwrap();
    let early = one(&mut c, "SELECT id::text FROM rq_enqueue('early', 'early parent')");
    let early_child =
        one(&mut c, &format!("SELECT id::text FROM rq_enqueue('early-child', 'c', after => ARRAY['{early}']::uuid[])"));
    let rows = worker.query("SELECT id::text, attempts FROM rq_claim(ARRAY['limited0', 'early'], 'w0', 10)", &[]).unwrap();
    assert_eq!(rows.len(), 2, "0.4.0's limited claim on this library, before the update");
    for row in &rows {
        worker.execute("SELECT rq_complete($1::text::uuid, $2)", &[&row.get::<_, String>(0), &row.get::<_, i32>(1)]).unwrap();
    }
    assert_eq!(one(&mut c, &format!("SELECT status FROM jobs WHERE id = '{early_child}'")), "queued");
    // a queue whose limit is kept in its row (a name longer than a slot's):
    // the flow claim locks and writes the row as 0.4.0 did, with no helper
    let wide = "w".repeat(70);
    c.execute("SELECT rq_set_limits($1, max_claimed => 1)", &[&wide]).unwrap();
    c.execute("SELECT rq_enqueue($1, 'a'), rq_enqueue($1, 'b')", &[&wide]).unwrap();
    let rows = worker.query("SELECT id FROM rq_claim(ARRAY[$1, 'none'], 'w0', 10)", &[&wide]).unwrap();
    assert_eq!(rows.len(), 1, "0.4.0's limit kept in a row, before the update");
    let listed = one(&mut c, &format!("SELECT cardinality(claimed)::text FROM queue_limits WHERE queue = '{wide}'"));
    assert_eq!(listed, "1", "the row lists the job claimed");
    assert_eq!(worker.query("SELECT id FROM rq_claim(ARRAY[$1], 'w0', 10)", &[&wide]).unwrap().len(), 0, "full");
    c.execute("DELETE FROM jobs WHERE queue = $1", &[&wide]).unwrap();
    c.batch_execute("DROP SCHEMA raquel_internal CASCADE").unwrap();

    connect(db).batch_execute("ALTER EXTENSION raquel UPDATE").unwrap();

    // The extension's schema lists what users call; the rest moved.
    assert_eq!(functions_in(&mut c, "public"), PUBLIC_FUNCTIONS, "the updated schema: the public functions");
    assert_eq!(functions_in(&mut c, "raquel_internal"), internal, "the helpers, as in a fresh install");
    let moved: Vec<&String> = before.iter().filter(|f| !PUBLIC_FUNCTIONS.contains(&f.as_str())).collect();
    for f in &moved {
        assert!(
            // (0.6.0 folds rq_claim_ended into rq_ended, src/ended.rs, its
            // flow claim is Rust, src/claim/flow_claim.rs, and so are the
            // verbs that called rq_due_ms, rq_lease_ms and the shard queues)
            internal.contains(f)
                || [
                    "rq_check_schedule", "rq_cron_slots", "rq_job_ready_again", "rq_claim_ended", "rq_claim_flow", "rq_claim_ready",
                    "rq_claim_fair", "rq_due_ms", "rq_lease_ms", "rq_shard_queue", "rq_shard_queues",
                ]
                .contains(&f.as_str()),
            "0.4.0's {f} is neither public nor in raquel_internal"
        );
    }
    assert_eq!(uncommented(&mut c), Vec::<String>::new(), "every public object of an updated install has a comment");

    // The jobs in flight go on, in the worker's session of before the update,
    // with 0.5.0's steps and results.
    worker.execute("SELECT rq_step($1::text::uuid, $2, 'first', '1')", &[&parent, &parent_attempt]).unwrap();
    let done = worker
        .query_one("SELECT status, result::text FROM rq_complete($1::text::uuid, $2, '\"done\"')", &[&parent, &parent_attempt])
        .unwrap();
    assert_eq!((done.get::<_, String>(0), done.get::<_, String>(1)), ("success".to_string(), r#""done""#.to_string()));
    assert_eq!(one(&mut c, &format!("SELECT status || ' ' || result::text FROM rq_await('{parent}')")), r#"success "done""#);
    assert_eq!(one(&mut c, &format!("SELECT status FROM jobs WHERE id = '{child}'")), "queued", "the child is released");
    let failed: String = worker
        .query_one("SELECT (rq_fail($1::text::uuid, $2, 'again', NULL)).status", &[&held, &held_attempt])
        .unwrap()
        .get(0);
    assert_eq!(failed, "failed");
    let mut claimed: Vec<String> = Vec::new();
    for queue in ["q", "limited", "grouped", "f", "child", "held", "early-child"] {
        let rows = worker
            .query("SELECT payload FROM rq_claim(ARRAY[$1], worker => 'w1', batch => 10)", &[&queue])
            .unwrap();
        assert_eq!(rows.len(), 1, "queue {queue}: its job in flight is claimed after the update");
        claimed.push(rows[0].get(0));
    }
    assert_eq!(claimed, ["queued", "limited", "grouped", "to fail", "child", "held", "c"]);
    let completed: i64 = worker
        .query_one(
            "SELECT count(*) FROM jobs j, LATERAL rq_complete(j.id, j.attempts) WHERE j.status = 'claimed'",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(completed, 7);
    assert_eq!(one(&mut c, "SELECT string_agg(DISTINCT status, ',') FROM jobs"), "success");

    // The worker of 0.4.0 parks a job for an event (0.5.0's job_waits and
    // emitted_events, granted to it by the update) and an emit resumes it.
    c.execute("SELECT rq_enqueue('parked', 'p')", &[]).unwrap();
    let row = worker.query_one("SELECT id::text, attempts FROM rq_claim(ARRAY['parked'], worker => 'w1')", &[]).unwrap();
    let (job, attempt): (String, i32) = (row.get(0), row.get(1));
    let parked: bool = worker
        .query_one("SELECT parked FROM rq_wait_event($1::text::uuid, $2, 'w', 'go')", &[&job, &attempt])
        .unwrap()
        .get(0);
    assert!(parked);
    assert_eq!(one(&mut c, "SELECT rq_emit('go', '1')::text"), "1");
    let row = worker.query_one("SELECT id::text, attempts FROM rq_claim(ARRAY['parked'], worker => 'w1')", &[]).unwrap();
    assert_eq!(row.get::<_, String>(0), job, "resumed by the emit");
    let sleeping: bool = worker
        .query_one("SELECT rq_sleep($1::text::uuid, $2, 'nap', delay => '1 hour')", &[&job, &row.get::<_, i32>(1)])
        .unwrap()
        .get(0);
    assert!(sleeping);

    drop((c, fresh, worker));
    let mut admin = connect("postgres");
    admin.batch_execute(&format!("DROP DATABASE {db} WITH (FORCE)")).unwrap();
    admin.batch_execute("DROP DATABASE rq_upgrade_fresh_split WITH (FORCE)").unwrap();
}
