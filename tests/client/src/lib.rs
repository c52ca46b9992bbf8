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

/// Drops and recreates database `name` with the extension created in it.
/// With RAQUEL_TEST_CITUS_PORTS ("coordinator,worker,…" on 127.0.0.1, the
/// coordinator being RAQUEL_TEST_DSN's server), the database is made on
/// every node, the nodes joined in it and the jobs table distributed: the
/// Citus stage of bin/test runs a subset of the tests that way.
pub fn fresh_db(name: &str) -> String {
    let citus: Option<Vec<u16>> = std::env::var("RAQUEL_TEST_CITUS_PORTS")
        .ok()
        .map(|ports| ports.split(',').map(|p| p.trim().parse().expect("a port number")).collect());
    if let Some(ports) = &citus {
        for &port in &ports[1..] {
            let node = |db: &str| {
                Client::connect(&format!("host=127.0.0.1 port={port} user=postgres dbname={db}"), NoTls)
                    .unwrap_or_else(|e| panic!("connecting to the worker node on port {port}: {e}"))
            };
            let mut admin = node("postgres");
            admin.batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)")).unwrap();
            admin.batch_execute(&format!("CREATE DATABASE {name}")).unwrap();
            node(name).batch_execute("CREATE EXTENSION citus").unwrap();
        }
    }
    let mut admin = connect("postgres");
    // two calls: several statements in one call would form one transaction
    admin.batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)")).unwrap();
    admin.batch_execute(&format!("CREATE DATABASE {name}")).unwrap();
    let mut c = connect(name);
    if let Some(ports) = &citus {
        c.batch_execute("CREATE EXTENSION citus").unwrap();
        c.execute("SELECT citus_set_coordinator_host('127.0.0.1', $1)", &[&i32::from(ports[0])]).unwrap();
        for &port in &ports[1..] {
            c.execute("SELECT citus_add_node('127.0.0.1', $1)", &[&i32::from(port)]).unwrap();
        }
    }
    c.batch_execute("CREATE EXTENSION raquel").unwrap();
    if citus.is_some() {
        c.batch_execute("SELECT rq_distribute(8)").unwrap();
    }
    name.to_string()
}

/// Every row of jobs as text, in id order: equal digests, equal tables.
pub fn jobs_digest(client: &mut Client) -> String {
    client
        .query_one("SELECT coalesce(md5(string_agg(j::text, '' ORDER BY id)), '') FROM jobs j", &[])
        .unwrap()
        .get(0)
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
    let mut c = connect(db);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let sleeping: i64 = c
            .query_one(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() \
                 AND wait_event_type = 'Extension' AND query LIKE '%wait =>%'",
                &[],
            )
            .unwrap()
            .get(0);
        if sleeping >= n {
            return;
        }
        assert!(std::time::Instant::now() < deadline, "{n} waiting claims did not start");
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
