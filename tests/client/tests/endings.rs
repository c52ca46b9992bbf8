//! Every path that ends a job wakes its awaiters at its commit
//! (src/ended.rs: what follows a job's end is in one place). For each path,
//! a session awaits the job (rq_await, 60 seconds), another ends it in a
//! transaction: the awaiter has not returned before the commit, and
//! returns within 2 seconds after it with the job as it ended. An awaiter
//! that is not woken looks again only 5 seconds after it began
//! (src/results.rs LOOK_AGAIN_MS), so a path that forgets to wake it
//! fails here (before 0.6.0 rq_take(complete => true) did, and rq_expire on
//! Citus). The Citus stage of bin/test runs this file on a distributed
//! table too, with the paths Citus has.

use raquel_client_tests::{citus_ports, connect, fresh_db, reset_server, set_server, wait_for_sleeping};
use std::thread;
use std::time::{Duration, Instant};

/// How a case makes its job: the statement returns (id, attempt) of a job
/// made ready or claimed for the case.
struct Case {
    name: &'static str,
    /// statements run first (none return anything)
    setup: &'static str,
    /// returns the job's id as text and its attempt (0 when not claimed)
    job: &'static str,
    /// ends it; `{id}` and `{attempt}` are filled in
    end: &'static str,
    /// the job's status as the awaiter sees it (None: the job was deleted)
    status: Option<&'static str>,
    /// Citus has the path too (rq_take, queues without history and
    /// workflows are refused there)
    distributed: bool,
}

const CASES: &[Case] = &[
    Case {
        name: "rq_complete",
        setup: "SELECT rq_enqueue('complete', 'p')",
        job: "SELECT id::text, attempts FROM rq_claim(ARRAY['complete'])",
        end: "SELECT rq_complete('{id}', {attempt})",
        status: Some("success"),
        distributed: true,
    },
    Case {
        name: "rq_complete_batch",
        setup: "SELECT rq_enqueue('batch', 'p')",
        job: "SELECT id::text, attempts FROM rq_claim(ARRAY['batch'])",
        end: "SELECT count(*) FROM rq_complete_batch(ARRAY['{id}']::uuid[], ARRAY[{attempt}])",
        status: Some("success"),
        distributed: true,
    },
    Case {
        name: "rq_complete_and_claim",
        setup: "SELECT rq_enqueue('and_claim', 'p')",
        job: "SELECT id::text, attempts FROM rq_claim(ARRAY['and_claim'])",
        end: "SELECT count(*) FROM rq_complete_and_claim('{id}', {attempt}, ARRAY['and_claim'])",
        status: Some("success"),
        distributed: true,
    },
    Case {
        name: "rq_fail with no retry left",
        setup: "SELECT rq_enqueue('fail', 'p', max_retry_count => 0)",
        job: "SELECT id::text, attempts FROM rq_claim(ARRAY['fail'])",
        end: "SELECT rq_fail('{id}', {attempt}, 'boom')",
        status: Some("exhausted"),
        distributed: true,
    },
    Case {
        name: "rq_take, then rq_complete",
        setup: "SELECT rq_enqueue('take', 'p')",
        job: "SELECT id::text, 0 FROM jobs WHERE queue = 'take'",
        end: "SELECT rq_complete(t.id, t.attempts) FROM rq_take(ARRAY['take']) t",
        status: Some("success"),
        distributed: false,
    },
    Case {
        name: "rq_take(complete => true)",
        setup: "SELECT rq_enqueue('take_complete', 'p')",
        job: "SELECT id::text, 0 FROM jobs WHERE queue = 'take_complete'",
        end: "SELECT count(*) FROM rq_take(ARRAY['take_complete'], complete => true)",
        status: Some("success"),
        distributed: false,
    },
    Case {
        name: "rq_take(complete => true) in a queue without history",
        setup: "SELECT rq_set_history('take_deleting', false); SELECT rq_enqueue('take_deleting', 'p')",
        job: "SELECT id::text, 0 FROM jobs WHERE queue = 'take_deleting'",
        end: "SELECT count(*) FROM rq_take(ARRAY['take_deleting'], complete => true)",
        status: None,
        distributed: false,
    },
    Case {
        name: "rq_complete in a queue without history",
        setup: "SELECT rq_set_history('deleting', false); SELECT rq_enqueue('deleting', 'p')",
        job: "SELECT id::text, attempts FROM rq_claim(ARRAY['deleting'])",
        end: "SELECT rq_complete('{id}', {attempt})",
        status: None,
        distributed: false,
    },
    Case {
        name: "rq_cancel of a queued job",
        setup: "SELECT rq_enqueue('cancel_queued', 'p')",
        job: "SELECT id::text, 0 FROM jobs WHERE queue = 'cancel_queued'",
        end: "SELECT rq_cancel('{id}')",
        status: Some("cancelled"),
        distributed: true,
    },
    Case {
        name: "rq_cancel of a claimed job",
        setup: "SELECT rq_enqueue('cancel_claimed', 'p')",
        job: "SELECT id::text, attempts FROM rq_claim(ARRAY['cancel_claimed'])",
        end: "SELECT rq_cancel('{id}')",
        status: Some("cancelled"),
        distributed: true,
    },
    Case {
        name: "rq_expire",
        setup: "SELECT rq_enqueue('expire', 'p', at => now() - interval '1 hour', max_age => '1 minute')",
        job: "SELECT id::text, 0 FROM jobs WHERE queue = 'expire'",
        end: "SELECT rq_expire()",
        status: Some("expired"),
        distributed: true,
    },
    Case {
        name: "rq_rescue of a lapsed lease with no retry left",
        setup: "SELECT rq_enqueue('rescue', 'p', max_retry_count => 0)",
        job: "SELECT id::text, attempts FROM rq_claim(ARRAY['rescue'], lease => '1 millisecond')",
        end: "SELECT rq_rescue()",
        status: Some("exhausted"),
        distributed: true,
    },
    Case {
        name: "a workflow's child, cancelled when its parent fails for good",
        setup: "SELECT rq_enqueue('parent', 'p', max_retry_count => 0); \
                SELECT rq_enqueue('child', 'c', after => ARRAY(SELECT id FROM jobs WHERE queue = 'parent'))",
        job: "SELECT id::text, 0 FROM jobs WHERE queue = 'child'",
        end: "SELECT rq_fail(c.id, c.attempts, 'the parent failed') FROM rq_claim(ARRAY['parent']) c",
        status: Some("cancelled"),
        distributed: false,
    },
];

#[test]
fn every_path_that_ends_a_job_wakes_its_awaiters_at_its_commit() {
    let db = fresh_db("raquel_endings");
    // the duties are this test's to run (rq_expire, rq_rescue): the
    // background worker would race it for the same jobs
    set_server(&[("raquel.worker_enabled", "off")]);
    let mut c = connect(&db);
    let mut failures = Vec::new();
    let distributed = citus_ports().is_some();
    for case in CASES.iter().filter(|case| case.distributed || !distributed) {
        c.batch_execute(case.setup).unwrap();
        let row = c.query_one(case.job, &[]).unwrap();
        let (id, attempt): (String, i32) = (row.get(0), row.get(1));
        let awaiter = {
            let (db, id) = (db.clone(), id.clone());
            thread::spawn(move || {
                let mut w = connect(&db);
                let row = w.query_one("SELECT status FROM rq_await($1::text::uuid, '60 seconds')", &[&id]).unwrap();
                row.get::<_, Option<String>>(0)
            })
        };
        wait_for_sleeping(&db, "%rq_await%", 1, "awaiters");
        // (a lapsed lease: its lease of 1 ms has run out by now)
        let mut tx = c.transaction().unwrap();
        tx.batch_execute(&case.end.replace("{id}", &id).replace("{attempt}", &attempt.to_string())).unwrap();
        let before_commit = awaiter.is_finished();
        let committed = Instant::now();
        tx.commit().unwrap();
        let status = awaiter.join().unwrap();
        let woken_after = committed.elapsed();
        if before_commit || woken_after >= Duration::from_secs(2) || status.as_deref() != case.status {
            failures.push(format!(
                "{}: the awaiter returned {status:?} {woken_after:?} after the commit (expected {:?} within 2 s{})",
                case.name,
                case.status,
                if before_commit { "; it returned before the commit" } else { "" }
            ));
        }
    }
    reset_server(&["raquel.worker_enabled"]);
    assert!(failures.is_empty(), "paths that did not wake their awaiters at their commit:\n{}", failures.join("\n"));
}
