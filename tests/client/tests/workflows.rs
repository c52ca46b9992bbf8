//! Workflows (sql/workflows.sql): a job enqueued `after` others is blocked,
//! invisible to claims, until all of them succeed, and is queued in the
//! transaction of the last one's completion; a parent that ends otherwise
//! cancels its blocked descendants. Fan-out, fan-in, a chain, the cascade,
//! a parent's end racing its children's enqueues, and a parent ended behind
//! raquel's back; what `after` may name and may not do to the jobs it names.

use postgres::Client;
use raquel_client_tests::{connect, connect_as, eventually, fresh_db, sqlstate};
use std::thread;
use std::time::Instant;

fn one(c: &mut Client, sql: &str) -> String {
    c.query_one(sql, &[]).unwrap().get(0)
}

fn status(c: &mut Client, id: &str) -> String {
    one(c, &format!("SELECT status FROM jobs WHERE id = '{id}'"))
}

fn count(c: &mut Client, condition: &str) -> i64 {
    c.query_one(&format!("SELECT count(*) FROM jobs WHERE {condition}"), &[]).unwrap().get(0)
}

/// Claims the one job of `queue` and completes it; its id.
fn claim_and_complete(c: &mut Client, queue: &str) -> String {
    one(c, &format!("SELECT (rq_complete(id, attempts)).id::text FROM rq_claim(ARRAY['{queue}'])"))
}

#[test]
fn a_child_waits_for_its_parent_and_is_queued_by_its_completion() {
    let db = fresh_db("wf_basic");
    let mut c = connect(&db);
    let parent = one(&mut c, "SELECT id::text FROM rq_enqueue('parents', 'p')");
    let child = one(&mut c, &format!("SELECT id::text FROM rq_enqueue('children', 'c', after => ARRAY['{parent}']::uuid[])"));
    assert_eq!(status(&mut c, &child), "blocked");
    // invisible to every claim: one queue, any queue
    assert!(c.query("SELECT id FROM rq_claim(ARRAY['children'])", &[]).unwrap().is_empty());
    // (any queue: rolled back, since it takes the parent)
    let mut t = c.transaction().unwrap();
    let any: Vec<String> = t.query("SELECT queue FROM rq_claim(NULL, 'w', 10)", &[]).unwrap().iter().map(|r| r.get(0)).collect();
    assert_eq!(any, ["parents"]);
    t.rollback().unwrap();
    let stats: i64 = c.query_one("SELECT blocked FROM rq_stats() WHERE queue = 'children'", &[]).unwrap().get(0);
    assert_eq!(stats, 1, "rq_stats counts the blocked job");

    // the completion queues it in the same transaction: rolled back, blocked again
    let mut t = c.transaction().unwrap();
    t.batch_execute("SELECT rq_complete(id, attempts) FROM rq_claim(ARRAY['parents'])").unwrap();
    let inside: String = t.query_one(&format!("SELECT status FROM jobs WHERE id = '{child}'"), &[]).unwrap().get(0);
    assert_eq!(inside, "queued");
    t.rollback().unwrap();
    assert_eq!(status(&mut c, &child), "blocked");
    // (the claim was rolled back with it)
    assert_eq!(claim_and_complete(&mut c, "parents"), parent);
    assert_eq!(status(&mut c, &child), "queued");
    assert_eq!(claim_and_complete(&mut c, "children"), child);
}

#[test]
fn parents_that_succeeded_already_do_not_block_and_ended_ones_cancel() {
    let db = fresh_db("wf_edges");
    let mut c = connect(&db);
    c.batch_execute("SELECT rq_enqueue('done', 'd')").unwrap();
    let done = claim_and_complete(&mut c, "done");
    let child = one(&mut c, &format!("SELECT id::text FROM rq_enqueue('q', 'c', after => ARRAY['{done}']::uuid[])"));
    assert_eq!(status(&mut c, &child), "queued");

    let dead = one(&mut c, "SELECT id::text FROM rq_enqueue('dead', 'd', max_retry_count => 0)");
    c.batch_execute("SELECT rq_fail(id, attempts, 'boom') FROM rq_claim(ARRAY['dead'])").unwrap();
    assert_eq!(status(&mut c, &dead), "exhausted");
    let row = c
        .query_one(&format!("SELECT status, error FROM rq_enqueue('q', 'c2', after => ARRAY['{done}', '{dead}']::uuid[])"), &[])
        .unwrap();
    assert_eq!(row.get::<_, String>(0), "cancelled");
    assert!(row.get::<_, String>(1).contains(&dead), "the error names the parent: {}", row.get::<_, String>(1));

    // unknown and NULL parents are refused, and nothing is enqueued
    let before = count(&mut c, "true");
    let unknown = "00000000-0000-7000-8000-000000000000";
    assert_eq!(sqlstate(c.query_one(&format!("SELECT id FROM rq_enqueue('q', 'x', after => ARRAY['{unknown}']::uuid[])"), &[])), "22023");
    assert_eq!(sqlstate(c.query_one("SELECT id FROM rq_enqueue('q', 'x', after => ARRAY[NULL]::uuid[])", &[])), "22023");
    assert_eq!(
        sqlstate(c.query("SELECT id FROM rq_enqueue_batch('q', ARRAY['a'], after => ARRAY['{unknown}']::uuid[])".replace("{unknown}", unknown).as_str(), &[])),
        "22023"
    );
    assert_eq!(count(&mut c, "true"), before);
}

#[test]
fn fan_out_fan_in_and_a_chain() {
    let db = fresh_db("wf_shapes");
    let mut c = connect(&db);
    // fan-out: 1000 children of one parent, in one batch
    let parent = one(&mut c, "SELECT id::text FROM rq_enqueue('root', 'p')");
    let made: i64 = c
        .query_one(
            &format!(
                "SELECT count(*) FROM rq_enqueue_batch('fan', (SELECT array_agg(i::text) FROM generate_series(1, 1000) i), \
                 after => ARRAY['{parent}']::uuid[])"
            ),
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(made, 1000);
    assert_eq!(count(&mut c, "queue = 'fan' AND status = 'blocked'"), 1000);
    let started = Instant::now();
    claim_and_complete(&mut c, "root");
    eprintln!("completing a parent of 1000 blocked children took {:?}", started.elapsed());
    assert_eq!(count(&mut c, "queue = 'fan' AND status = 'queued'"), 1000);

    // fan-in: one child of 1000 parents
    let parents: Vec<String> = c
        .query("SELECT id::text FROM rq_enqueue_batch('many', (SELECT array_agg(i::text) FROM generate_series(1, 1000) i))", &[])
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    let child = one(&mut c, "SELECT id::text FROM rq_enqueue('in', 'c', after => (SELECT array_agg(id) FROM jobs WHERE queue = 'many'))");
    assert_eq!(status(&mut c, &child), "blocked");
    c.batch_execute("SELECT rq_complete(id, attempts) FROM rq_claim(ARRAY['many'], 'w', 999)").unwrap();
    assert_eq!(status(&mut c, &child), "blocked", "one parent left");
    claim_and_complete(&mut c, "many");
    assert_eq!(status(&mut c, &child), "queued");
    assert_eq!(parents.len(), 1000);

    // a chain of 100: each job after the one before
    let mut previous = one(&mut c, "SELECT id::text FROM rq_enqueue('chain', '0')");
    for i in 1..100 {
        previous = one(&mut c, &format!("SELECT id::text FROM rq_enqueue('chain', '{i}', after => ARRAY['{previous}']::uuid[])"));
    }
    let mut order = Vec::new();
    loop {
        let claimed: Vec<String> = c
            .query("SELECT payload FROM rq_claim(ARRAY['chain'], 'w', 10)", &[])
            .unwrap()
            .iter()
            .map(|r| r.get(0))
            .collect();
        if claimed.is_empty() {
            break;
        }
        assert_eq!(claimed.len(), 1, "only the next link of the chain is ready");
        order.push(claimed[0].parse::<i32>().unwrap());
        c.batch_execute("SELECT rq_complete(id, attempts) FROM jobs WHERE queue = 'chain' AND status = 'claimed'").unwrap();
    }
    assert_eq!(order, (0..100).collect::<Vec<_>>());
}

#[test]
fn a_parent_that_fails_for_good_cancels_its_descendants() {
    let db = fresh_db("wf_cascade");
    let mut c = connect(&db);
    for (end, verb) in [
        ("exhausted", "SELECT rq_fail(id, attempts, 'no') FROM rq_claim(ARRAY['{q}'])"),
        ("cancelled", "SELECT rq_cancel(id) FROM jobs WHERE queue = '{q}'"),
        ("expired", "SELECT pg_sleep(0.05), rq_expire()"),
    ] {
        let q = format!("root_{end}");
        let max_age = if end == "expired" { ", max_age => '10 milliseconds'" } else { "" };
        // One transaction: the background worker's expire duty cannot end
        // the root (10 ms old) before its descendants are enqueued; if it
        // did, the child would be cancelled at its enqueue and the
        // grandchild's error would name the child (seen once in CI).
        c.batch_execute("BEGIN").unwrap();
        let root = one(&mut c, &format!("SELECT id::text FROM rq_enqueue('{q}', 'r', max_retry_count => 0{max_age})"));
        let other = one(&mut c, &format!("SELECT id::text FROM rq_enqueue('other_{end}', 'o')"));
        let child = one(&mut c, &format!("SELECT id::text FROM rq_enqueue('kids', 'c', after => ARRAY['{root}', '{other}']::uuid[])"));
        let grandchild = one(&mut c, &format!("SELECT id::text FROM rq_enqueue('kids', 'g', after => ARRAY['{child}']::uuid[])"));
        c.batch_execute("COMMIT").unwrap();
        c.batch_execute(&verb.replace("{q}", &q)).unwrap();
        assert_eq!(status(&mut c, &root), end);
        for id in [&child, &grandchild] {
            let row = c.query_one(&format!("SELECT status, error FROM jobs WHERE id = '{id}'"), &[]).unwrap();
            assert_eq!(row.get::<_, String>(0), "cancelled", "a descendant of a parent {end}");
            let error: String = row.get(1);
            assert!(error.contains(&root) && error.contains(end), "the error names the parent: {error}");
        }
        // the other parent's success later changes nothing
        claim_and_complete(&mut c, &format!("other_{end}"));
        assert_eq!(status(&mut c, &child), "cancelled");
    }
    let edges: i64 = c.query_one("SELECT count(*) FROM job_dependencies", &[]).unwrap().get(0);
    assert_eq!(edges, 0, "no edge outlives its parent");
}

#[test]
fn children_enqueued_while_their_parent_completes_are_never_left_blocked() {
    // Four sessions enqueue children of a parent while a fifth claims and
    // completes it: each child either saw the success (queued at once), or
    // was released by it, or (its edge committed after the completion
    // looked) by the background worker's settle duty, which each such
    // enqueue asks for at commit; none stays blocked.
    let db = fresh_db("wf_race");
    let mut c = connect(&db);
    for round in 0..20 {
        let parent = one(&mut c, &format!("SELECT id::text FROM rq_enqueue('p{round}', 'p')"));
        let producers: Vec<_> = (0..4)
            .map(|_| {
                let (db, parent) = (db.clone(), parent.clone());
                thread::spawn(move || {
                    let mut c = connect(&db);
                    for _ in 0..10 {
                        c.batch_execute(&format!("SELECT rq_enqueue('race', 'c', after => ARRAY['{parent}']::uuid[])")).unwrap();
                    }
                })
            })
            .collect();
        claim_and_complete(&mut c, &format!("p{round}"));
        producers.into_iter().for_each(|p| p.join().unwrap());
    }
    assert_eq!(count(&mut c, "queue = 'race'"), 800);
    let left = count(&mut c, "queue = 'race' AND status = 'blocked'");
    assert!(eventually(10, || count(&mut c, "queue = 'race' AND status = 'blocked'") == 0), "children left blocked");
    eprintln!("{left} of 800 children were released by the settle duty");
    assert_eq!(count(&mut c, "queue = 'race' AND status <> 'queued'"), 0);
}

#[test]
fn an_open_enqueue_after_a_job_holds_up_nothing_done_to_that_job() {
    // 0.4.0 locked the parents of a job being enqueued (FOR NO KEY UPDATE)
    // until the enqueue's transaction ended: rq_complete and rq_cancel of
    // those jobs waited (55P03 after 2 s), and claims passed them over.
    let db = fresh_db("wf_no_parent_locks");
    let mut c = connect(&db);
    let claimed = one(&mut c, "SELECT id::text FROM rq_enqueue('p', 'claimed')");
    let attempt = one(&mut c, "SELECT attempts::text FROM rq_claim(ARRAY['p'])");
    let to_cancel = one(&mut c, "SELECT id::text FROM rq_enqueue('p', 'to cancel')");
    let to_claim = one(&mut c, "SELECT id::text FROM rq_enqueue('q', 'to claim')");
    let mut producer = connect(&db);
    producer.batch_execute("BEGIN").unwrap();
    producer
        .batch_execute(&format!(
            "SELECT rq_enqueue('c', 'child', after => ARRAY['{claimed}', '{to_cancel}', '{to_claim}']::uuid[])"
        ))
        .unwrap();
    c.batch_execute("SET lock_timeout = '2s'").unwrap();
    c.batch_execute(&format!("SELECT rq_complete('{claimed}', {attempt})")).unwrap();
    c.batch_execute(&format!("SELECT rq_cancel('{to_cancel}')")).unwrap();
    assert_eq!(one(&mut c, "SELECT id::text FROM rq_claim(ARRAY['q'])"), to_claim, "a claim takes the parent");
    producer.batch_execute("COMMIT").unwrap();
    // the child saw none of that (its snapshot was older); the settle duty
    // then sees a parent cancelled, and cancels it
    let child = one(&mut c, "SELECT id::text FROM jobs WHERE queue = 'c'");
    assert!(eventually(10, || status(&mut c, &child) == "cancelled"), "the settle duty ends the child");
    let parents_untouched = count(&mut c, "queue IN ('p', 'q') AND attempts <= 1");
    assert_eq!(parents_untouched, 3);
}

#[test]
fn a_producer_names_in_after_only_the_jobs_its_session_enqueued() {
    // 0.4.0 told a producer, which may not read jobs, whether an id it named
    // in `after` existed (22023) and how it had ended ("…ended exhausted"),
    // and wrote has_children on that job.
    let db = fresh_db("wf_producer_after");
    let mut admin = connect(&db);
    admin
        .batch_execute(
            "DROP ROLE IF EXISTS rq_it_wf_producer; CREATE ROLE rq_it_wf_producer LOGIN;
             SELECT rq_grant_producer('rq_it_wf_producer')",
        )
        .unwrap();
    let exhausted = one(&mut admin, "SELECT id::text FROM rq_enqueue('o', 'other', max_retry_count => 0)");
    admin.batch_execute(&format!("SELECT rq_fail(id, attempts, 'boom') FROM rq_claim(ARRAY['o'])")).unwrap();
    assert_eq!(status(&mut admin, &exhausted), "exhausted");
    let queued = one(&mut admin, "SELECT id::text FROM rq_enqueue('o', 'other')");
    let before = one(&mut admin, "SELECT md5(string_agg(j::text, '' ORDER BY id)) FROM jobs j");
    let mut producer = connect_as(&db, "rq_it_wf_producer");
    let mut refusals = Vec::new();
    for other in [exhausted.as_str(), queued.as_str(), "00000000-0000-7000-8000-0000000000ff"] {
        let error = producer
            .batch_execute(&format!("SELECT rq_enqueue('c', 'x', after => ARRAY['{other}']::uuid[])"))
            .unwrap_err();
        let db_error = error.as_db_error().expect("a database error");
        assert_eq!(db_error.code().code(), "42501", "{other}");
        refusals.push(db_error.message().to_string());
    }
    assert!(refusals.iter().all(|m| *m == refusals[0]), "the refusal is the same for every id: {refusals:?}");
    assert!(!refusals[0].contains(&exhausted) && !refusals[0].contains("exhausted"), "{}", refusals[0]);
    assert_eq!(one(&mut admin, "SELECT md5(string_agg(j::text, '' ORDER BY id)) FROM jobs j"), before, "nothing written");
    // its own jobs it may name, in its session
    let parent: String = producer.query_one("SELECT id::text FROM rq_enqueue('p', 'mine')", &[]).unwrap().get(0);
    let child: String = producer
        .query_one(&format!("SELECT status FROM rq_enqueue('c', 'x', after => ARRAY['{parent}']::uuid[])"), &[])
        .unwrap()
        .get(0);
    assert_eq!(child, "blocked");
    // and a role that may read jobs, any job
    admin.batch_execute(&format!("SELECT rq_enqueue('c', 'y', after => ARRAY['{queued}']::uuid[])")).unwrap();
}

#[test]
fn a_parent_ended_behind_raquels_back_is_settled_by_the_duty() {
    // The Python library completes a job with its own UPDATE; the background
    // worker's duty (called here by hand) releases the jobs waiting for it.
    let db = fresh_db("wf_settle");
    let mut c = connect(&db);
    let parent = one(&mut c, "SELECT id::text FROM rq_enqueue('p', 'p')");
    let child = one(&mut c, &format!("SELECT id::text FROM rq_enqueue('c', 'c', after => ARRAY['{parent}']::uuid[])"));
    c.batch_execute(&format!("UPDATE jobs SET status = 'success', finished_at = rq_now_ms() WHERE id = '{parent}'")).unwrap();
    assert_eq!(status(&mut c, &child), "blocked");
    let settled: i64 = c.query_one("SELECT rq_settle_workflows()", &[]).unwrap().get(0);
    assert_eq!(settled, 1);
    assert_eq!(status(&mut c, &child), "queued");
    let again: i64 = c.query_one("SELECT rq_settle_workflows()", &[]).unwrap().get(0);
    assert_eq!(again, 0, "nothing left to settle");
}

#[test]
fn a_child_reads_its_parents_results_and_they_go_with_it() {
    let db = fresh_db("wf_parents");
    let mut c = connect(&db);
    // one parent done before the child is enqueued, one after; a worker of
    // its own session reads them, in another session
    let early = one(&mut c, "SELECT id::text FROM rq_enqueue('parents', 'early')");
    let row = c.query_one("SELECT id::text, attempts FROM rq_claim(ARRAY['parents'])", &[]).unwrap();
    c.execute("SELECT rq_complete($1::text::uuid, $2, '{\"rows\": 3}')", &[&row.get::<_, String>(0), &row.get::<_, i32>(1)])
        .unwrap();
    let late = one(&mut c, "SELECT id::text FROM rq_enqueue('parents', 'late')");
    let child = one(
        &mut c,
        &format!("SELECT id::text FROM rq_enqueue('children', 'c', after => ARRAY['{early}', '{late}', '{late}']::uuid[])"),
    );
    let row = c.query_one("SELECT id::text, attempts FROM rq_claim(ARRAY['parents'])", &[]).unwrap();
    assert_eq!(row.get::<_, String>(0), late);
    c.execute("SELECT rq_complete($1::text::uuid, $2, '\"total\"')", &[&late, &row.get::<_, i32>(1)]).unwrap();
    let mut worker = connect(&db);
    let row = worker.query_one("SELECT id::text, attempts FROM rq_claim(ARRAY['children'])", &[]).unwrap();
    let (claimed, attempt): (String, i32) = (row.get(0), row.get(1));
    assert_eq!(claimed, child);
    let parents: Vec<(String, String, String)> = worker
        .query("SELECT id::text, status, result::text FROM rq_parents($1::text::uuid) ORDER BY payload", &[&child])
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2)))
        .collect();
    assert_eq!(
        parents,
        vec![(early.clone(), "success".into(), r#"{"rows": 3}"#.into()), (late.clone(), "success".into(), r#""total""#.into())],
        "each parent once, with its result"
    );
    // a job without parents has none; an unknown one is refused
    assert_eq!(worker.query("SELECT id FROM rq_parents($1::text::uuid)", &[&early]).unwrap().len(), 0);
    let unknown = worker.query("SELECT id FROM rq_parents('00000000-0000-7000-8000-000000000000')", &[]);
    assert_eq!(sqlstate(unknown), "P0002");
    // the child's parents go with it: pruned, and deleted by a queue without history
    worker.execute("SELECT rq_complete($1::text::uuid, $2)", &[&child, &attempt]).unwrap();
    c.execute("UPDATE jobs SET finished_at = finished_at - 86400000::bigint * 30 WHERE id = $1::text::uuid", &[&child]).unwrap();
    c.execute("SELECT rq_prune(retention => '1 day')", &[]).unwrap();
    assert_eq!(c.query_one("SELECT count(*) FROM job_parents", &[]).unwrap().get::<_, i64>(0), 0);
    c.execute("SELECT rq_set_history('gone', false)", &[]).unwrap();
    let gone = one(&mut c, &format!("SELECT id::text FROM rq_enqueue('gone', 'g', after => ARRAY['{early}']::uuid[])"));
    c.execute("SELECT rq_complete(id, attempts) FROM rq_claim(ARRAY['gone'])", &[]).unwrap();
    assert_eq!(count(&mut c, &format!("id = '{gone}'")), 0, "deleted as it succeeded");
    assert_eq!(c.query_one("SELECT count(*) FROM job_parents", &[]).unwrap().get::<_, i64>(0), 0);
}
