//! What the tests share: a database of their own on the server named by
//! RAQUEL_TEST_DSN (libraries/rust/test sets it), connections to it, and a
//! wait for a condition with a deadline.
#![allow(dead_code)] // each test file uses its own part of this

use std::collections::HashSet;
use std::sync::Mutex;
use std::time::{Duration, Instant};
use tokio_postgres::Client;

static CREATED: Mutex<Option<HashSet<String>>> = Mutex::new(None);

pub fn server_dsn() -> String {
    std::env::var("RAQUEL_TEST_DSN").expect("RAQUEL_TEST_DSN names the test server (libraries/rust/test sets it)")
}

/// The DSN of database `rq_lib_rs_<name>`, created afresh with raquel (once
/// per test binary), and a `handled` table the process tests write to.
pub fn database(name: &str) -> String {
    let database = format!("rq_lib_rs_{name}");
    let dsn = format!("{} dbname={database}", server_dsn());
    let mut created = CREATED.lock().unwrap();
    let created = created.get_or_insert_with(HashSet::new);
    if created.insert(database.clone()) {
        let (server, target) = (format!("{} dbname=postgres", server_dsn()), dsn.clone());
        // a runtime of its own, so that the setup does not depend on which
        // test's runtime comes first
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            runtime.block_on(async {
                let admin = raquel_pg::connect(&server).await.unwrap();
                admin.batch_execute(&format!("DROP DATABASE IF EXISTS {database} WITH (FORCE)")).await.unwrap();
                admin.batch_execute(&format!("CREATE DATABASE {database}")).await.unwrap();
                let client = raquel_pg::connect(&target).await.unwrap();
                client
                    .batch_execute("CREATE EXTENSION raquel; CREATE TABLE handled (job_id uuid, attempt int, pid int)")
                    .await
                    .unwrap();
            })
        })
        .join()
        .expect("creating the test database");
    }
    dsn
}

pub async fn connect(dsn: &str) -> Client {
    raquel_pg::connect(dsn).await.expect("connecting to the test database")
}

/// Polls `check` every 20 ms until it is true; panics with `what` after `limit`.
pub async fn wait_until<F, Fut>(limit: Duration, what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let started = Instant::now();
    while !check().await {
        assert!(started.elapsed() < limit, "{what}: not within {limit:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

pub async fn status(client: &Client, id: uuid::Uuid) -> String {
    client.query_one("SELECT status FROM jobs WHERE id = $1", &[&id]).await.unwrap().get(0)
}
