//! A producer role that may only enqueue, and a worker role that may claim
//! and finish jobs but read no other table, each on its own connection.

use raquel_client_tests::{connect, fresh_db, server_dsn, sqlstate};
use postgres::{Client, NoTls};

fn connect_as(db: &str, role: &str) -> Client {
    Client::connect(&format!("{} dbname={db} user={role}", server_dsn().replace("user=postgres", "")), NoTls)
        .unwrap_or_else(|e| panic!("connecting as {role}: {e}"))
}

#[test]
fn producers_only_enqueue_and_workers_only_work_the_queue() {
    let db = fresh_db("rq_it_privileges");
    let mut admin = connect(&db);
    admin
        .batch_execute(
            "DROP ROLE IF EXISTS rq_it_producer; DROP ROLE IF EXISTS rq_it_worker; \
             CREATE ROLE rq_it_producer LOGIN; CREATE ROLE rq_it_worker LOGIN; \
             SELECT rq_grant_producer('rq_it_producer'); SELECT rq_grant_worker('rq_it_worker'); \
             CREATE TABLE secrets (s text); INSERT INTO secrets VALUES ('x')",
        )
        .unwrap();

    let mut producer = connect_as(&db, "rq_it_producer");
    let id: String = producer
        .query_one("SELECT id::text FROM rq_enqueue('q', 'from the producer')", &[])
        .unwrap()
        .get(0);
    producer.batch_execute("SELECT rq_enqueue('q', '{\"a\": 1}'::jsonb, key => 'k')").unwrap();
    producer.batch_execute("SELECT rq_enqueue_batch('q', ARRAY['b1', 'b2'])").unwrap();
    for forbidden in [
        "SELECT * FROM jobs",
        "INSERT INTO jobs (queue) VALUES ('q')",
        "SELECT * FROM rq_claim(ARRAY['q'])",
        "SELECT * FROM secrets",
    ] {
        assert_eq!(sqlstate(producer.batch_execute(forbidden)), "42501", "producer: {forbidden}");
    }

    let mut worker = connect_as(&db, "rq_it_worker");
    let claimed: Vec<String> = worker
        .query("SELECT id::text FROM rq_claim(ARRAY['q'], worker => 'w', batch => 10)", &[])
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(claimed.len(), 4);
    assert!(claimed.contains(&id));
    worker.batch_execute(&format!("SELECT rq_complete('{id}')")).unwrap();
    worker.batch_execute(&format!("SELECT rq_fail('{}', 'boom')", claimed[1])).unwrap();
    worker.batch_execute(&format!("SELECT rq_reject('{}')", claimed[2])).unwrap();
    for forbidden in [
        "SELECT * FROM secrets",
        "SELECT rq_enqueue('q', 'from the worker')",
        "DELETE FROM jobs",
        "SELECT rq_grant_worker('rq_it_worker')",
    ] {
        assert_eq!(sqlstate(worker.batch_execute(forbidden)), "42501", "worker: {forbidden}");
    }

    drop(producer);
    drop(worker);
    admin
        .batch_execute(
            "DROP OWNED BY rq_it_producer, rq_it_worker; \
             DROP ROLE rq_it_producer; DROP ROLE rq_it_worker",
        )
        .unwrap();
}
