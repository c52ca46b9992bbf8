//! Helpers for the client tests: a fresh database with the extension for each
//! test, and connections to it.

pub mod cluster;

use postgres::{Client, NoTls};

/// The server to test against, as libpq-style "key=value" words without dbname.
pub fn server_dsn() -> String {
    std::env::var("RAQUEL_TEST_DSN")
        .expect("RAQUEL_TEST_DSN is not set: run the tests through bin/test")
}

pub fn connect(db: &str) -> Client {
    Client::connect(&format!("{} dbname={db}", server_dsn()), NoTls)
        .unwrap_or_else(|e| panic!("connecting to {db}: {e}"))
}

/// A connection to `db` as `role` (a LOGIN role; the test server trusts it).
pub fn connect_as(db: &str, role: &str) -> Client {
    Client::connect(&format!("{} dbname={db} user={role}", server_dsn().replace("user=postgres", "")), NoTls)
        .unwrap_or_else(|e| panic!("connecting to {db} as {role}: {e}"))
}

/// Drops and recreates database `name` with the extension created in it.
/// With RAQUEL_TEST_CITUS_PORTS set (the coordinator being RAQUEL_TEST_DSN's
/// server), the database is a distributed one (fresh_citus_db): the Citus
/// stage of bin/test runs a subset of the tests that way.
pub fn fresh_db(name: &str) -> String {
    if let Some(ports) = citus_ports() {
        return fresh_citus_db(name, &ports, 8);
    }
    let mut admin = connect("postgres");
    // two calls: several statements in one call would form one transaction
    admin.batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)")).unwrap();
    admin.batch_execute(&format!("CREATE DATABASE {name}")).unwrap();
    connect(name).batch_execute("CREATE EXTENSION raquel").unwrap();
    name.to_string()
}

/// The Citus nodes bin/test's Citus stage started, from
/// RAQUEL_TEST_CITUS_PORTS ("coordinator,worker,…", all on 127.0.0.1).
pub fn citus_ports() -> Option<Vec<u16>> {
    let ports = std::env::var("RAQUEL_TEST_CITUS_PORTS").ok()?;
    Some(ports.split(',').map(|p| p.trim().parse().expect("a port number in RAQUEL_TEST_CITUS_PORTS")).collect())
}

/// A connection to database `db` of the Citus node on `port`.
pub fn connect_to_node(port: u16, db: &str) -> Client {
    Client::connect(&format!("host=127.0.0.1 port={port} user=postgres dbname={db}"), NoTls)
        .unwrap_or_else(|e| panic!("connecting to {db} on the Citus node on port {port}: {e}"))
}

/// Database `name` made again on every node of `ports` (the coordinator
/// first), the worker nodes joined to the coordinator in it, raquel created
/// and its jobs table distributed over `shards` shards.
pub fn fresh_citus_db(name: &str, ports: &[u16], shards: i32) -> String {
    for &port in ports {
        let mut admin = connect_to_node(port, "postgres");
        admin.batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)")).unwrap();
        admin.batch_execute(&format!("CREATE DATABASE {name}")).unwrap();
        connect_to_node(port, name).batch_execute("CREATE EXTENSION citus").unwrap();
    }
    let mut c = connect_to_node(ports[0], name);
    c.execute("SELECT citus_set_coordinator_host('127.0.0.1', $1)", &[&i32::from(ports[0])]).unwrap();
    for &port in &ports[1..] {
        c.execute("SELECT citus_add_node('127.0.0.1', $1)", &[&i32::from(port)]).unwrap();
    }
    c.batch_execute("CREATE EXTENSION raquel").unwrap();
    c.execute("SELECT rq_distribute($1)", &[&shards]).unwrap();
    name.to_string()
}

/// Every row of jobs as text, in id order: equal digests, equal tables.
pub fn jobs_digest(client: &mut Client) -> String {
    client
        .query_one("SELECT coalesce(md5(string_agg(j::text, '' ORDER BY id)), '') FROM jobs j", &[])
        .unwrap()
        .get(0)
}

/// Every index of the jobs table passes amcheck's heap-all-indexed check
/// (`bt_index_check(…, true)`): each row has its entry in each index whose
/// predicate it meets, and no entry is corrupt. Returns how many indexes it
/// checked. Every server the tests run has amcheck (Debian's 15 in its
/// contrib; bin/postgres-major builds it for 17 and 18): a server without it
/// fails the test rather than skip the check.
pub fn check_every_index(client: &mut Client) -> usize {
    client
        .batch_execute("CREATE EXTENSION IF NOT EXISTS amcheck")
        .unwrap_or_else(|e| panic!("amcheck, which the index checks need, is not installed on this server: {e}"));
    let indexes: Vec<String> = client
        .query("SELECT indexrelid::regclass::text FROM pg_index WHERE indrelid = 'jobs'::regclass", &[])
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    for index in &indexes {
        client
            .batch_execute(&format!("SELECT bt_index_check('{index}'::regclass, true)"))
            .unwrap_or_else(|e| panic!("amcheck of {index}: {e}"));
    }
    indexes.len()
}

/// Statements this session ran through SPI so far
/// (`raquel_internal.rq_kept_plans().runs`): a verb on the direct path
/// runs none.
pub fn statements_run(client: &mut Client) -> i64 {
    client.query_one("SELECT runs FROM raquel_internal.rq_kept_plans()", &[]).unwrap().get(0)
}

/// Runs `call` on `client`: whether it ran a statement through SPI (a verb
/// that went its direct path runs none), and what `call` returned.
pub fn ran_a_statement<T>(client: &mut Client, call: impl FnOnce(&mut Client) -> T) -> (bool, T) {
    let before = statements_run(client);
    let answer = call(client);
    (statements_run(client) > before, answer)
}

/// The SQLSTATE of a failed statement.
pub fn sqlstate(result: Result<impl Sized, postgres::Error>) -> String {
    match result {
        Ok(_) => "00000".to_string(),
        Err(e) => e.code().map(|c| c.code().to_string()).unwrap_or_else(|| format!("no SQLSTATE: {e}")),
    }
}

/// Polls `check` every 100 ms until it holds or `seconds` pass; whether it held.
pub fn eventually(seconds: u64, mut check: impl FnMut() -> bool) -> bool {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(seconds);
    loop {
        if check() {
            return true;
        }
        if std::time::Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

/// Waits until `n` sessions sleep in a waiting claim (an rq_claim called
/// with `wait =>`), at most 10 seconds.
pub fn wait_for_sleepers(db: &str, n: i64) {
    wait_for_sleeping(db, "%wait =>%", n, "waiting claims")
}

/// Waits until `n` sessions of `db` whose query is LIKE `query` sleep on
/// their latch in raquel (wait_event_type Extension), at most 10 seconds;
/// `what` names them in the failure.
pub fn wait_for_sleeping(db: &str, query: &str, n: i64, what: &str) {
    let mut c = connect(db);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let sleeping: i64 = c
            .query_one(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() \
                 AND wait_event_type = 'Extension' AND query LIKE $1",
                &[&query],
            )
            .unwrap()
            .get(0);
        if sleeping >= n {
            return;
        }
        assert!(std::time::Instant::now() < deadline, "{n} {what} did not start");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// Changes server settings with ALTER SYSTEM and reloads (SIGHUP).
pub fn set_server(settings: &[(&str, &str)]) {
    let mut admin = connect("postgres");
    for (name, value) in settings {
        admin.batch_execute(&format!("ALTER SYSTEM SET {name} = '{value}'")).unwrap();
    }
    admin.batch_execute("SELECT pg_reload_conf()").unwrap();
}

/// Undoes `set_server`.
pub fn reset_server(names: &[&str]) {
    let mut admin = connect("postgres");
    for name in names {
        admin.batch_execute(&format!("ALTER SYSTEM RESET {name}")).unwrap();
    }
    admin.batch_execute("SELECT pg_reload_conf()").unwrap();
}
