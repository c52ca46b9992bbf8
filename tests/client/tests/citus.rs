//! The distributed mode on Citus (sql/distributed.sql, src/distributed.rs),
//! against a real coordinator and two worker nodes that bin/test starts
//! (bin/common.sh start_citus) and names in RAQUEL_TEST_CITUS_PORTS
//! ("coordinator,worker1,worker2" on 127.0.0.1). Built only with the
//! `citus` feature, which bin/test's Citus stage turns on.
//!
//! Each test makes its own database on every node, joins the nodes in it
//! and distributes the jobs table there.

use postgres::Client;
use raquel_client_tests::{citus_ports, connect_to_node as connect_to, eventually, fresh_citus_db, sqlstate};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

const CLAIM: &str = include_str!("../../../sql/transition.claim_distributed.sql");
const SHARDS: i32 = 8;

fn ports() -> Vec<u16> {
    citus_ports().expect("RAQUEL_TEST_CITUS_PORTS is not set: run the Citus stage of bin/test")
}

/// The coordinator's connection to `db`.
fn coordinator(db: &str) -> Client {
    connect_to(ports()[0], db)
}

/// Database `name` on every node, distributed (fresh_citus_db).
fn fresh_cluster_db(name: &str) -> String {
    fresh_citus_db(name, &ports(), SHARDS)
}

#[test]
fn distribute_makes_shards_on_both_worker_nodes_and_keeps_the_jobs() {
    let name = "rq_citus_distribute";
    let ports = ports();
    for &port in &ports {
        let mut admin = connect_to(port, "postgres");
        admin.batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)")).unwrap();
        admin.batch_execute(&format!("CREATE DATABASE {name}")).unwrap();
        connect_to(port, name).batch_execute("CREATE EXTENSION citus").unwrap();
    }
    let mut c = coordinator(name);
    // Without the worker nodes' tables yet: jobs made on one server move.
    c.batch_execute("CREATE EXTENSION raquel").unwrap();
    c.batch_execute("SELECT rq_enqueue('q' || i % 5, i::text) FROM generate_series(1, 100) i").unwrap();
    assert_eq!(sqlstate(c.execute("SELECT rq_distribute(0)", &[])), "22023", "shard_count 0");
    c.execute("SELECT citus_set_coordinator_host('127.0.0.1', $1)", &[&i32::from(ports[0])]).unwrap();
    for &port in &ports[1..] {
        c.execute("SELECT citus_add_node('127.0.0.1', $1)", &[&i32::from(port)]).unwrap();
    }
    c.execute("SELECT rq_distribute(6)", &[]).unwrap();

    let (shards, nodes): (i64, i64) = {
        let row = c
            .query_one(
                "SELECT count(*), count(DISTINCT p.nodeport) FROM pg_dist_shard s
                 JOIN pg_dist_placement pl USING (shardid) JOIN pg_dist_node p USING (groupid)
                 WHERE s.logicalrelid = 'jobs'::regclass",
                &[],
            )
            .unwrap();
        (row.get(0), row.get(1))
    };
    assert_eq!(shards, 6);
    assert_eq!(nodes, 2, "the shards are on the two worker nodes");
    let kept: i64 = c.query_one("SELECT count(*) FROM jobs", &[]).unwrap().get(0);
    assert_eq!(kept, 100, "the jobs moved into the shards");
    let per_queue: i64 = c.query_one("SELECT rq_count('q3')", &[]).unwrap().get(0);
    assert_eq!(per_queue, 20);
    assert!(c.query_one("SELECT rq_distributed()", &[]).unwrap().get::<_, bool>(0));
    assert_eq!(sqlstate(c.execute("SELECT rq_distribute()", &[])), "55000", "twice");
    let distributed: bool = connect_to(ports[1], name).query_one("SELECT rq_distributed()", &[]).unwrap().get(0);
    assert!(distributed, "a worker node sees the table as distributed too");
}

#[test]
fn a_claim_on_one_queue_is_a_statement_of_one_shard() {
    let db = fresh_cluster_db("rq_citus_plan");
    let mut c = coordinator(&db);
    c.batch_execute("SELECT rq_enqueue('plan', 'x')").unwrap();
    let text = CLAIM.replace("@jobs@", "public.jobs").replace("@batch@", "10");
    c.batch_execute(&format!("PREPARE claim (text, text, bigint, bigint) AS {text}")).unwrap();
    let plan: Vec<String> = c
        .query("EXPLAIN (COSTS OFF) EXECUTE claim('plan', 'w', rq_now_ms(), 60000)", &[])
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    let plan = plan.join("\n");
    println!("{plan}");
    assert!(plan.contains("Task Count: 1"), "one shard:\n{plan}");
    assert!(plan.contains("LockRows"), "FOR UPDATE SKIP LOCKED runs in the shard:\n{plan}");
    // and the claim verb takes the job
    let got: i64 = c.query_one("SELECT count(*) FROM rq_claim(ARRAY['plan'])", &[]).unwrap().get(0);
    assert_eq!(got, 1);
}

#[test]
fn every_verb_works_on_a_distributed_table() {
    let db = fresh_cluster_db("rq_citus_verbs");
    let mut c = coordinator(&db);
    let one = |c: &mut Client, sql: &str| -> String { c.query_one(sql, &[]).unwrap().get(0) };
    // a claim of one job of `queue`: its id and attempt (the fencing token)
    let claim = |c: &mut Client, queue: &str| -> (String, i32) {
        let row = c.query_one(&format!("SELECT id::text, attempts FROM rq_claim(ARRAY['{queue}'])"), &[]).unwrap();
        (row.get(0), row.get(1))
    };

    // enqueue: one, jsonb, keyed (twice gives the same job), batch, batch with keys
    let first = one(&mut c, "SELECT (rq_enqueue('a', 'one')).id::text");
    one(&mut c, "SELECT (rq_enqueue('a', '{\"n\": 2}'::jsonb)).status");
    let keyed = one(&mut c, "SELECT (rq_enqueue('a', 'k', key => 'k1')).id::text");
    assert_eq!(keyed, one(&mut c, "SELECT (rq_enqueue('a', 'k', key => 'k1')).id::text"));
    let batch: i64 = c.query_one("SELECT count(*) FROM rq_enqueue_batch('b', ARRAY['1','2','3','4'])", &[]).unwrap().get(0);
    assert_eq!(batch, 4);
    let keyed_batch: i64 =
        c.query_one("SELECT count(*) FROM rq_enqueue_batch('b', ARRAY['x','y'], keys => ARRAY['k1','k2'])", &[]).unwrap().get(0);
    assert_eq!(keyed_batch, 2);
    one(&mut c, "SELECT (rq_enqueue('urgent', 'p', priority => 5)).status");

    // claims: several queues in priority order, any queue, one queue
    let several: Vec<String> =
        c.query("SELECT queue FROM rq_claim(ARRAY['a', 'urgent'], batch => 2)", &[]).unwrap().iter().map(|r| r.get(0)).collect();
    assert_eq!(several[0], "urgent", "the best job of the queues first: {several:?}");
    assert_eq!(several.len(), 2);
    let any: i64 = c.query_one("SELECT count(*) FROM rq_claim(batch => 3)", &[]).unwrap().get(0);
    assert_eq!(any, 3);
    let (id, attempt) = claim(&mut c, "b");

    // by id: extend, reschedule, reject, cancel, retry, fail, complete, complete_batch
    assert_eq!(one(&mut c, &format!("SELECT (rq_extend('{id}', {attempt}, '5 minutes')).status")), "claimed");
    assert_eq!(one(&mut c, &format!("SELECT (rq_reschedule('{id}', {attempt}, delay => '0 s')).status")), "queued");
    let (id, attempt) = claim(&mut c, "b");
    assert_eq!(one(&mut c, &format!("SELECT (rq_reject('{id}', {attempt})).status")), "queued");
    assert_eq!(one(&mut c, &format!("SELECT (rq_cancel('{id}')).status")), "cancelled");
    assert_eq!(one(&mut c, &format!("SELECT (rq_retry('{id}')).status")), "queued");
    let (id, attempt) = claim(&mut c, "b");
    assert_eq!(one(&mut c, &format!("SELECT (rq_fail('{id}', {attempt}, 'boom')).status")), "failed");
    let jobs: Vec<(String, i32)> = c
        .query("SELECT id::text, attempts FROM rq_claim(ARRAY['b'], batch => 2)", &[])
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    let completed: i64 = c
        .query_one(
            &format!(
                "SELECT count(*) FROM rq_complete_batch(ARRAY['{}','{}']::uuid[], ARRAY[{}, {}])",
                jobs[0].0, jobs[1].0, jobs[0].1, jobs[1].1
            ),
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(completed, 2);
    // rq_complete of a job another session claimed: its queue is asked of every shard
    let (claimed, attempt) = claim(&mut c, "b");
    let mut other = coordinator(&db);
    assert_eq!(one(&mut other, &format!("SELECT (rq_complete('{claimed}', {attempt})).status")), "success");
    assert_eq!(sqlstate(other.execute(&format!("SELECT rq_complete('{claimed}', {attempt})"), &[])), "55000", "completed twice");
    assert_eq!(sqlstate(other.execute("SELECT rq_complete(gen_random_uuid(), 1)", &[])), "P0002", "an unknown job");
    // the loop in one call
    let (next, attempt) = claim(&mut c, "b");
    let got: i64 = c
        .query_one(&format!("SELECT count(*) FROM rq_complete_and_claim('{next}', {attempt}, queues => ARRAY['a'])"), &[])
        .unwrap()
        .get(0);
    assert!(got <= 1);

    // looking: stats, count, queues
    let total: i64 = c.query_one("SELECT sum(total)::bigint FROM rq_stats()", &[]).unwrap().get(0);
    let counted: i64 = c.query_one("SELECT rq_count()", &[]).unwrap().get(0);
    let rows: i64 = c.query_one("SELECT count(*) FROM jobs", &[]).unwrap().get(0);
    assert_eq!((total, counted), (rows, rows));
    let queues: i64 = c.query_one("SELECT count(*) FROM rq_queues()", &[]).unwrap().get(0);
    assert_eq!(queues, 3);

    // the trigger enqueues with the row change, and not without it
    c.batch_execute(
        "CREATE TABLE orders (id int PRIMARY KEY);
         CREATE TRIGGER enqueue AFTER INSERT ON orders FOR EACH ROW EXECUTE FUNCTION rq_enqueue_trigger('orders')",
    )
    .unwrap();
    c.batch_execute("INSERT INTO orders VALUES (1)").unwrap();
    let mut tx = c.transaction().unwrap();
    tx.batch_execute("INSERT INTO orders VALUES (2)").unwrap();
    tx.rollback().unwrap();
    let enqueued: i64 = c.query_one("SELECT rq_count('orders')", &[]).unwrap().get(0);
    assert_eq!(enqueued, 1);

    // a key held for a period after its job ended
    let held = one(&mut c, "SELECT (rq_enqueue('held', 'h', key => 'hk', key_period => '1 hour')).id::text");
    c.batch_execute("SELECT rq_complete(id, attempts) FROM (SELECT id, attempts FROM rq_claim(ARRAY['held'])) j").unwrap();
    assert_eq!(held, one(&mut c, "SELECT (rq_enqueue('held', 'h', key => 'hk', key_period => '1 hour')).id::text"));

    // what the mode does not offer is refused, and changes nothing
    for refused in [
        "SELECT rq_pause('a')",
        "SELECT rq_set_limits('a', max_claimed => 1)",
        "SELECT rq_enqueue('a', 'g', group_key => 'g')",
        &format!("SELECT rq_enqueue('a', 'w', after => ARRAY['{first}'::uuid])"),
        "SELECT rq_enqueue_batch('a', ARRAY['x'], group_keys => ARRAY['g'])",
        // steps, sleeps and events (sql/steps.sql, sql/waits.sql)
        &format!("SELECT rq_step('{first}', 1, 's')"),
        &format!("SELECT rq_sleep('{first}', 1, 's', delay => '1 second')"),
        &format!("SELECT parked FROM rq_wait_event('{first}', 1, 's', 'e')"),
        "SELECT rq_emit('e')",
    ] {
        assert_eq!(sqlstate(c.execute(refused, &[])), "0A000", "{refused}");
    }
    let after: i64 = c.query_one("SELECT count(*) FROM jobs", &[]).unwrap().get(0);
    assert_eq!(after, rows + 1 + 1, "only the trigger's job and the held key's job were added");
}

#[test]
fn a_verb_by_id_locks_its_job_alone() {
    // An UPDATE over every shard holds a lock on each to the end of its
    // transaction (Citus's guard against distributed deadlocks): the verbs
    // by id name the job's queue so that theirs is an UPDATE of one shard.
    let db = fresh_cluster_db("rq_citus_by_id");
    let mut holder = coordinator(&db);
    holder.batch_execute("SELECT rq_enqueue('held', i::text) FROM generate_series(1, 3) i").unwrap();
    let mut tx = holder.transaction().unwrap();
    let held: Vec<(String, i32)> = tx
        .query("SELECT id::text, attempts FROM rq_claim(ARRAY['held'], batch => 3)", &[])
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    tx.batch_execute(&format!(
        "SELECT rq_extend('{}', {}); SELECT rq_fail('{}', {}, 'boom'); \
         SELECT count(*) FROM rq_complete_batch(ARRAY['{}']::uuid[], ARRAY[{}])",
        held[0].0, held[0].1, held[1].0, held[1].1, held[2].0, held[2].1
    ))
    .unwrap();
    // jobs of another queue, claimed by a session that then goes away
    let mut claimer = coordinator(&db);
    claimer.batch_execute("SELECT rq_enqueue('free', i::text) FROM generate_series(1, 4) i").unwrap();
    let ids: Vec<(String, i32)> = claimer
        .query("SELECT id::text, attempts FROM rq_claim(ARRAY['free'], batch => 4)", &[])
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    drop(claimer);
    // another session, which has no claims to remember (each verb asks the
    // shards), while that transaction is open: waiting for a lock past 2 s
    // is an error (55P03), not a slow pass
    let mut other = coordinator(&db);
    other.batch_execute("SET lock_timeout = '2s'").unwrap();
    let status = |c: &mut Client, sql: String| -> String { c.query_one(&sql, &[]).unwrap().get(0) };
    assert_eq!(status(&mut other, format!("SELECT (rq_extend('{}', {})).status", ids[0].0, ids[0].1)), "claimed");
    assert_eq!(status(&mut other, format!("SELECT (rq_reschedule('{}', {})).status", ids[0].0, ids[0].1)), "queued");
    assert_eq!(status(&mut other, format!("SELECT (rq_reject('{}', {})).status", ids[1].0, ids[1].1)), "queued");
    assert_eq!(status(&mut other, format!("SELECT (rq_fail('{}', {}, 'boom')).status", ids[2].0, ids[2].1)), "failed");
    assert_eq!(status(&mut other, format!("SELECT (rq_retry('{}')).status", ids[2].0)), "queued");
    assert_eq!(status(&mut other, format!("SELECT (rq_cancel('{}')).status", ids[2].0)), "cancelled");
    assert_eq!(
        status(
            &mut other,
            format!("SELECT string_agg(status, ',') FROM rq_complete_batch(ARRAY['{}']::uuid[], ARRAY[{}])", ids[3].0, ids[3].1)
        ),
        "success"
    );
    // an unknown id is still the verb's own error, and changes nothing
    let unknown = other.query_one("SELECT rq_fail('00000000-0000-7000-8000-000000000000', 1, 'x')", &[]);
    assert_eq!(sqlstate(unknown), "P0002");
    tx.commit().unwrap();
    let mut c = coordinator(&db);
    let held_statuses: String =
        c.query_one("SELECT string_agg(status, ',' ORDER BY status) FROM jobs WHERE queue = 'held'", &[]).unwrap().get(0);
    assert_eq!(held_statuses, "claimed,failed,success");
}

/// Six workers on the coordinator and one on each worker node claim from
/// one queue, several queues and any queue at once: each job is handed out
/// once, and every job ends.
#[test]
fn concurrent_workers_on_every_node_take_each_job_once() {
    let db = fresh_cluster_db("rq_citus_once");
    let queues = ["q0", "q1", "q2", "q3", "q4", "q5"];
    // 300 in CI; RAQUEL_CITUS_JOBS=5000 for a release (README)
    let per_queue: i32 = std::env::var("RAQUEL_CITUS_JOBS").ok().and_then(|n| n.parse().ok()).unwrap_or(300);
    let mut c = coordinator(&db);
    for q in queues {
        c.execute("SELECT count(rq_enqueue($1, i::text, priority => i % 3)) FROM generate_series(1, $2) i", &[&q, &per_queue])
            .unwrap();
    }
    let total = (queues.len() as i32 * per_queue) as usize;
    let seen = Arc::new(Mutex::new(HashMap::<String, usize>::new()));
    let ports = ports();
    let mut workers = Vec::new();
    for n in 0..8 {
        let (db, seen) = (db.clone(), Arc::clone(&seen));
        // two of the eight connect to the worker nodes
        let port = if n >= 6 { ports[n - 5] } else { ports[0] };
        workers.push(thread::spawn(move || {
            let mut c = connect_to(port, &db);
            let claim = match n % 3 {
                0 => "SELECT id::text, attempts FROM rq_claim(ARRAY['q0'], batch => 5)".to_string(),
                1 => "SELECT id::text, attempts FROM rq_claim(ARRAY['q1', 'q2', 'q3'], batch => 5)".to_string(),
                _ => "SELECT id::text, attempts FROM rq_claim(batch => 5)".to_string(),
            };
            let mut idle = 0;
            while idle < 3 {
                let jobs: Vec<(String, i32)> = c.query(&claim, &[]).unwrap().iter().map(|r| (r.get(0), r.get(1))).collect();
                if jobs.is_empty() {
                    idle += 1;
                    thread::sleep(Duration::from_millis(50));
                    continue;
                }
                idle = 0;
                for (id, attempt) in jobs {
                    *seen.lock().unwrap().entry(id.clone()).or_default() += 1;
                    c.execute("SELECT rq_complete($1::text::uuid, $2)", &[&id, &attempt]).unwrap();
                }
            }
        }));
    }
    for w in workers {
        w.join().expect("a worker failed");
    }
    let seen = seen.lock().unwrap();
    let twice: Vec<_> = seen.iter().filter(|(_, &n)| n > 1).collect();
    assert!(twice.is_empty(), "handed out more than once: {twice:?}");
    assert_eq!(seen.len(), total, "every job claimed");
    let done: i64 = c.query_one("SELECT rq_count(statuses => '{success}')", &[]).unwrap().get(0);
    assert_eq!(done as usize, total, "every job completed");
}

#[test]
fn a_waiting_claim_is_woken_by_jobs_committed_on_any_node() {
    let db = fresh_cluster_db("rq_citus_wait");
    let ports = ports();
    for (label, port) in [("the coordinator", ports[0]), ("a worker node", ports[1])] {
        let waiter = {
            let db = db.clone();
            thread::spawn(move || {
                let started = Instant::now();
                let got: i64 = coordinator(&db)
                    .query_one("SELECT count(*) FROM rq_claim(ARRAY['wake'], wait => '20 seconds')", &[])
                    .unwrap()
                    .get(0);
                (got, started.elapsed())
            })
        };
        thread::sleep(Duration::from_millis(500));
        connect_to(port, &db).batch_execute("SELECT rq_enqueue('wake', 'x')").unwrap();
        let (got, waited) = waiter.join().unwrap();
        assert_eq!(got, 1, "a job enqueued on {label}");
        assert!(waited < Duration::from_secs(20), "woken before the wait ran out, by a commit on {label}");
    }
}

#[test]
fn the_duties_handle_each_row_once_from_the_coordinator() {
    let db = fresh_cluster_db("rq_citus_duties");
    let mut c = coordinator(&db);
    // expired: 40 jobs past max_age; lapsed: 30 claims whose lease ended; old: 20 finished long ago
    c.batch_execute(
        "SELECT rq_enqueue('e' || i % 4, 'x', max_age => '1 ms', at => now() - interval '1 minute') FROM generate_series(1, 40) i;
         SELECT rq_enqueue('r' || i % 3, 'x') FROM generate_series(1, 30) i;
         SELECT count(*) FROM rq_claim(ARRAY['r0', 'r1', 'r2'], batch => 30, lease => '1 ms');
         SELECT rq_enqueue('p' || i % 2, 'x') FROM generate_series(1, 20) i;",
    )
    .unwrap();
    c.batch_execute("SELECT rq_complete(id, attempts) FROM (SELECT id, attempts FROM rq_claim(ARRAY['p0', 'p1'], batch => 20)) j").unwrap();
    c.batch_execute("UPDATE jobs SET finished_at = finished_at - 86400000::bigint * 30 WHERE queue IN ('p0', 'p1')").unwrap();
    thread::sleep(Duration::from_millis(50));
    // a worker node's background worker and calls leave the rows to the coordinator
    let mut on_worker = connect_to(ports()[1], &db);
    let none: i64 = on_worker.query_one("SELECT rq_expire() + rq_rescue() + rq_prune()", &[]).unwrap().get(0);
    assert_eq!(none, 0, "duties run on the coordinator only");
    // a batch bounds the rescue over all queues, not per queue
    let first: i64 = c.query_one("SELECT rq_rescue(5)", &[]).unwrap().get(0);
    assert!(first <= 5, "rq_rescue(5) rescued {first}");
    // two coordinator sessions at once: each row handled by one of them
    let runs: Vec<_> = (0..2)
        .map(|_| {
            let db = db.clone();
            thread::spawn(move || {
                let mut c = coordinator(&db);
                let row = c.query_one("SELECT rq_expire(), rq_rescue(), rq_prune(retention => '1 day')", &[]).unwrap();
                (row.get::<_, i64>(0), row.get::<_, i64>(1), row.get::<_, i64>(2))
            })
        })
        .collect();
    let (mut expired, mut rescued, mut pruned) = (0, first, 0);
    for run in runs {
        let (e, r, p) = run.join().unwrap();
        (expired, rescued, pruned) = (expired + e, rescued + r, pruned + p);
    }
    // The background worker may have taken rows first, and may still hold
    // them (the sessions skipped them) until its transaction commits: count
    // what the table says once it has.
    let settled = "SELECT count(*) FILTER (WHERE queue LIKE 'e%' AND status = 'expired'),
                          count(*) FILTER (WHERE queue LIKE 'r%' AND status = 'failed' AND attempts = 1),
                          count(*) FILTER (WHERE queue LIKE 'p%')
                   FROM jobs";
    let mut counts = (0, 0, 0);
    eventually(20, || {
        let row = c.query_one(settled, &[]).unwrap();
        counts = (row.get::<_, i64>(0), row.get::<_, i64>(1), row.get::<_, i64>(2));
        counts == (40, 30, 0)
    });
    assert_eq!(counts, (40, 30, 0), "expired, rescued and left of the pruned");
    assert!(expired <= 40 && rescued <= 30 && pruned <= 20, "no row counted twice: {expired} {rescued} {pruned}");
    let errors: Vec<String> = c
        .query("SELECT DISTINCT error FROM jobs WHERE queue LIKE 'r%'", &[])
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert!(errors.iter().all(|e| e.starts_with("lease expired")), "{errors:?}");
}

#[test]
fn the_background_worker_rescues_a_lapsed_claim_on_its_own() {
    let db = fresh_cluster_db("rq_citus_rescue");
    let mut c = coordinator(&db);
    c.batch_execute("SELECT rq_enqueue('lapse', 'x')").unwrap();
    c.batch_execute("SELECT count(*) FROM rq_claim(ARRAY['lapse'], lease => '200 ms')").unwrap();
    let rescued = eventually(20, || {
        let status: String = c.query_one("SELECT status FROM jobs WHERE queue = 'lapse'", &[]).unwrap().get(0);
        status == "failed"
    });
    assert!(rescued, "the coordinator's background worker failed the claim whose lease ran out");
}
