//! The direct path (src/direct.rs) writes rows as PostgreSQL's own apply
//! does, WAL and logical decoding included: a publication of `jobs` and
//! `job_steps` on one server, subscribed by a second (real servers, each
//! its own cluster), receives every change the hot verbs make, direct or
//! planned. The publisher runs each verb of a job's life (enqueue one and a
//! batch, claim, complete, fail with a retry and with none left, take and
//! complete, take in a queue without history, which deletes, a step, a
//! cancel, a keyed enqueue on the planned path); then both servers' tables
//! must be equal row for row.

use raquel_client_tests::cluster::Cluster;
use raquel_client_tests::{eventually, ran_a_statement};

const PORTS: [u16; 2] = [25420, 25421];
const DB: &str = "rq_publication";

/// Every row of `table` as text, in its key's order.
fn digest(c: &mut postgres::Client, table: &str, order: &str) -> String {
    c.query_one(&format!("SELECT count(*)::text || ' ' || coalesce(md5(string_agg(t::text, '' ORDER BY {order})), '') FROM {table} t"), &[])
        .unwrap()
        .get(0)
}

#[test]
fn a_subscriber_receives_every_change_of_the_direct_path() {
    let publisher = Cluster::create("publisher", PORTS[0], &[("wal_level", "logical")]);
    // (the subscriber only holds the table: no background worker of its own
    // to expire, rescue or prune the rows it receives)
    let subscriber = Cluster::create("subscriber", PORTS[1], &[("shared_preload_libraries", "")]);
    publisher.start();
    subscriber.start();
    for server in [&publisher, &subscriber] {
        let mut admin = server.checked_connection("postgres");
        admin.batch_execute(&format!("CREATE DATABASE {DB}")).unwrap();
        let mut c = server.checked_connection(DB);
        c.batch_execute("CREATE EXTENSION raquel").unwrap();
    }
    let mut p = publisher.checked_connection(DB);
    let mut s = subscriber.checked_connection(DB);
    p.batch_execute("CREATE PUBLICATION raquel_jobs FOR TABLE jobs, job_steps").unwrap();
    s.batch_execute(&format!(
        "CREATE SUBSCRIPTION raquel_jobs CONNECTION '{}' PUBLICATION raquel_jobs WITH (copy_data = false)",
        publisher.dsn(DB)
    ))
    .unwrap();
    // the subscription's slot is in use before the writes begin
    assert!(
        eventually(30, || {
            p.query_one("SELECT count(*) FROM pg_stat_replication", &[]).unwrap().get::<_, i64>(0) == 1
        }),
        "the subscriber did not connect; its log ends:\n{}",
        subscriber.log_tail(20)
    );

    let (ran, ()) = ran_a_statement(&mut p, |p| {
        p.batch_execute(
            "SELECT rq_enqueue('pub', 'one');
             SELECT rq_enqueue('pub', '{\"n\": 2}'::jsonb, priority => 5);
             SELECT rq_enqueue_batch('pub', ARRAY['b1', 'b2', 'b3', 'b4', 'b5', 'b6']);",
        )
        .unwrap()
    });
    assert!(!ran, "the enqueues ran a statement: the direct path was not taken");
    // (a session's first claim may run a statement of its own, once)
    p.batch_execute("SELECT rq_complete(id, attempts, '{\"ok\": true}') FROM rq_claim(ARRAY['pub'])").unwrap();
    let (ran, ()) = ran_a_statement(&mut p, |p| {
        p.batch_execute(
            "SELECT rq_complete(id, attempts, '{\"ok\": true}') FROM rq_claim(ARRAY['pub']);
             SELECT rq_step(id, attempts, 'charge', '{\"paid\": 1}') FROM rq_claim(ARRAY['pub']);
             SELECT rq_fail(id, attempts, 'try again', NULL) FROM rq_claim(ARRAY['pub']);",
        )
        .unwrap()
    });
    assert!(!ran, "a claim, complete, step or fail ran a statement: the direct path was not taken");
    p.batch_execute(
        "SELECT rq_enqueue('pub-once', 'last', max_retry_count => 0);
         SELECT rq_fail(id, attempts, 'no retry left', 'a trace') FROM rq_claim(ARRAY['pub-once']);
         SELECT rq_complete_batch(array_agg(id), array_agg(attempts::integer), NULL) FROM rq_claim(ARRAY['pub']);
         SELECT rq_enqueue('pub-take', 'taken');
         BEGIN; SELECT * FROM rq_take(ARRAY['pub-take'], complete => true); COMMIT;
         SELECT rq_set_history('pub-gone', false);
         SELECT rq_enqueue_batch('pub-gone', ARRAY['g1', 'g2']);
         BEGIN; SELECT * FROM rq_take(ARRAY['pub-gone'], complete => true, batch => 2); COMMIT;
         SELECT rq_enqueue('pub', 'keyed', key => 'k1');
         SELECT rq_cancel(id) FROM rq_enqueue('pub', 'cancelled');",
    )
    .unwrap();
    let statuses: Vec<(String, i64)> = p
        .query("SELECT status::text, count(*) FROM jobs GROUP BY 1 ORDER BY 1", &[])
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    // every kind of row write happened: inserts, updates to each end, deletes
    for status in ["success", "failed", "exhausted", "claimed", "queued", "cancelled"] {
        assert!(statuses.iter().any(|(s, _)| s == status), "no {status} job on the publisher: {statuses:?}");
    }
    let gone: i64 = p.query_one("SELECT count(*) FROM jobs WHERE queue = 'pub-gone'", &[]).unwrap().get(0);
    assert_eq!(gone, 0, "the queue without history kept its jobs");

    let tables = [("jobs", "t.id"), ("job_steps", "t.job_id, t.name")];
    let mut last = Vec::new();
    let caught_up = eventually(60, || {
        last = tables
            .iter()
            .map(|(table, order)| (digest(&mut p, table, order), digest(&mut s, table, order)))
            .collect();
        last.iter().all(|(a, b)| a == b)
    });
    assert!(
        caught_up,
        "the subscriber's tables differ from the publisher's (count and digest, publisher then subscriber): {last:?}\n\
         publisher's log ends:\n{}\nsubscriber's log ends:\n{}",
        publisher.log_tail(20),
        subscriber.log_tail(20)
    );
    let steps: i64 = s.query_one("SELECT count(*) FROM job_steps", &[]).unwrap().get(0);
    assert_eq!(steps, 1, "the step did not reach the subscriber");
    s.batch_execute("DROP SUBSCRIPTION raquel_jobs").unwrap();
}
