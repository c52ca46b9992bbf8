//! The direct path (src/direct.rs): rq_enqueue and rq_enqueue_batch write
//! plain jobs into the jobs table without a statement while the table is as
//! raquel made it, and run their statements otherwise. What a session ran through SPI is in
//! `raquel_internal.rq_kept_plans().runs`: a direct enqueue runs nothing.

use postgres::Client;
use raquel_client_tests::{check_every_index, connect, fresh_db, ran_a_statement, sqlstate};
use std::thread;

/// A user's AFTER INSERT trigger on jobs that notes each new job's id in
/// `seen` (schema-qualified: it runs under rq_enqueue's pinned search_path).
const NOTE_JOBS: &str = "CREATE TABLE seen (id uuid); \
    CREATE FUNCTION note_job() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN INSERT INTO public.seen VALUES (NEW.id); RETURN NEW; END $$; \
    CREATE TRIGGER note_job AFTER INSERT ON jobs FOR EACH ROW EXECUTE FUNCTION note_job()";

/// Enqueues one job and says whether it ran a statement to do it.
fn enqueue_ran_a_statement(c: &mut Client, call: &str) -> bool {
    ran_a_statement(c, |c| c.batch_execute(call).unwrap()).0
}

/// Every index of jobs passes amcheck, and there are `n` of them.
fn assert_indexes_check(c: &mut Client, n: usize) {
    assert_eq!(check_every_index(c), n, "indexes checked");
}

#[test]
fn a_direct_enqueue_writes_the_row_its_statement_writes() {
    let db = fresh_db("rq_it_direct_row");
    let mut c = connect(&db);
    let calls = [
        "SELECT rq_enqueue('q', 'text payload')",
        "SELECT rq_enqueue('q', '{\"a\": [1, 2]}'::jsonb, priority => 7, max_age => '1 hour', max_retry_count => 3, \
         min_retry_delay => '2 seconds', max_retry_delay => '1 minute', backoff_base => '3 seconds')",
        "SELECT rq_enqueue('q', NULL, delay => '1 day')",
    ];
    // the columns that do not depend on when or by which path
    let row = "SELECT queue, payload, status, max_age, max_retry_count, min_retry_delay, max_retry_delay, backoff_base, \
               scheduled_at - enqueued_at > 86000000, attempts, error, error_trace, claimed_by, claimed_at, finished_at, \
               priority, lease_expires_at, requeues, key, group_key, turn, blocked_by, key_period, result \
               FROM jobs ORDER BY enqueued_at DESC, id DESC LIMIT 1";
    for call in calls {
        c.batch_execute("SET raquel.direct_writes = on").unwrap();
        assert!(!enqueue_ran_a_statement(&mut c, call), "{call} is written directly");
        let direct = format!("{:?}", c.query_one(row, &[]).unwrap());
        c.batch_execute("SET raquel.direct_writes = off").unwrap();
        assert!(enqueue_ran_a_statement(&mut c, call), "{call} runs its statement with direct_writes off");
        let planned = format!("{:?}", c.query_one(row, &[]).unwrap());
        assert_eq!(direct, planned, "{call}");
    }
    // the row rq_enqueue returns is the row in the table
    c.batch_execute("RESET raquel.direct_writes").unwrap();
    let returned = c.query_one("SELECT e::text, e.id::text FROM rq_enqueue('q', 'x') e", &[]).unwrap();
    let (returned, id): (String, String) = (returned.get(0), returned.get(1));
    let stored: String = c.query_one("SELECT j::text FROM jobs j WHERE id = $1::text::uuid", &[&id]).unwrap().get(0);
    let same = returned == stored;
    assert!(same, "the returned row is the stored row");
    // a job with a key, a group or parents runs its statement
    assert!(enqueue_ran_a_statement(&mut c, "SELECT rq_enqueue('q', 'x', key => 'k')"));
    assert!(enqueue_ran_a_statement(&mut c, "SELECT rq_enqueue('q', 'x', group_key => 'g')"));
    // rolled back, a direct enqueue leaves nothing
    c.batch_execute("BEGIN; SELECT rq_enqueue('gone', 'x'); ROLLBACK").unwrap();
    let gone: i64 = c.query_one("SELECT count(*) FROM jobs WHERE queue = 'gone'", &[]).unwrap().get(0);
    assert_eq!(gone, 0);
    assert_indexes_check(&mut c, 9); // raquel's nine, with the primary key
}

#[test]
fn a_user_trigger_row_security_or_check_sends_enqueue_to_its_statement() {
    let db = fresh_db("rq_it_direct_fallback");
    let mut c = connect(&db);
    let enqueue = "SELECT rq_enqueue('q', 'x')";
    assert!(!enqueue_ran_a_statement(&mut c, enqueue), "direct at first");

    // a user's trigger: the statement runs, and the trigger fires
    c.batch_execute(NOTE_JOBS).unwrap();
    assert!(enqueue_ran_a_statement(&mut c, enqueue), "a user trigger: the statement");
    let seen: i64 = c.query_one("SELECT count(*) FROM seen JOIN jobs USING (id)", &[]).unwrap().get(0);
    assert_eq!(seen, 1, "the user's trigger fired");
    assert!(enqueue_ran_a_statement(&mut c, "SELECT rq_enqueue_batch('q', ARRAY['a', 'b', 'c'])"), "a batch: the statement");
    let seen: i64 = c.query_one("SELECT count(*) FROM seen JOIN jobs USING (id)", &[]).unwrap().get(0);
    assert_eq!(seen, 4, "the user's trigger fired for each job of the batch");
    assert!(complete_ran_a_statement(&mut c, "q", ""), "a user trigger: the complete's statement");
    c.batch_execute("DROP TRIGGER note_job ON jobs").unwrap();
    assert!(!enqueue_ran_a_statement(&mut c, enqueue), "direct again once it is dropped");
    assert!(!enqueue_ran_a_statement(&mut c, "SELECT rq_enqueue_batch('q', ARRAY['a', 'b', 'c'])"), "a batch too");

    // raquel's own trigger disabled: the statement, which then runs without it
    c.batch_execute("ALTER TABLE jobs DISABLE TRIGGER jobs_enqueued").unwrap();
    assert!(enqueue_ran_a_statement(&mut c, enqueue), "a disabled trigger: the statement");
    c.batch_execute("ALTER TABLE jobs ENABLE TRIGGER jobs_enqueued").unwrap();

    // row security
    c.batch_execute("ALTER TABLE jobs ENABLE ROW LEVEL SECURITY").unwrap();
    assert!(enqueue_ran_a_statement(&mut c, enqueue), "row security: the statement");
    c.batch_execute("ALTER TABLE jobs DISABLE ROW LEVEL SECURITY").unwrap();
    assert!(!enqueue_ran_a_statement(&mut c, enqueue));

    // a user's CHECK constraint holds
    c.batch_execute("ALTER TABLE jobs ADD CONSTRAINT not_bad CHECK (queue <> 'bad')").unwrap();
    assert_eq!(sqlstate(c.query("SELECT rq_enqueue('bad', 'x')", &[])), "23514");
    assert_eq!(sqlstate(c.query("SELECT rq_enqueue_batch('bad', ARRAY['x'])", &[])), "23514");
    assert!(enqueue_ran_a_statement(&mut c, enqueue), "a CHECK: the statement");
    c.batch_execute("ALTER TABLE jobs DROP CONSTRAINT not_bad").unwrap();

    // session_replication_role = replica: the statement (whose triggers do not fire)
    c.batch_execute("SET session_replication_role = replica").unwrap();
    assert!(enqueue_ran_a_statement(&mut c, enqueue));
    c.batch_execute("RESET session_replication_role").unwrap();
    assert!(!enqueue_ran_a_statement(&mut c, enqueue));
    assert_indexes_check(&mut c, 9);
}

/// What another session changes on the table reaches a session that has
/// written directly before: a new index gets its rows, a new trigger fires.
#[test]
fn another_sessions_index_or_trigger_holds_for_the_next_direct_write() {
    let db = fresh_db("rq_it_direct_other");
    let mut writer = connect(&db);
    let mut admin = connect(&db);
    assert!(!enqueue_ran_a_statement(&mut writer, "SELECT rq_enqueue('q', 'x')"));
    admin
        .batch_execute(
            "CREATE INDEX jobs_by_payload ON jobs (payload) WHERE priority > 5; \
             CREATE INDEX jobs_by_lower_queue ON jobs (lower(queue))",
        )
        .unwrap();
    // B-tree indexes of a user keep the path direct, and get their entries
    for p in 0..10 {
        assert!(!enqueue_ran_a_statement(&mut writer, &format!("SELECT rq_enqueue('Q{p}', 'p{p}', priority => {p})")));
    }
    assert_indexes_check(&mut admin, 11);
    admin.batch_execute("SET enable_seqscan = off").unwrap();
    let found: i64 = admin.query_one("SELECT count(*) FROM jobs WHERE priority > 5 AND payload >= 'p'", &[]).unwrap().get(0);
    assert_eq!(found, 4, "the partial index has the rows of its predicate");
    // a user's hash index: the statement
    admin.batch_execute("CREATE INDEX jobs_by_hash ON jobs USING hash (queue)").unwrap();
    assert!(enqueue_ran_a_statement(&mut writer, "SELECT rq_enqueue('q', 'x')"), "a hash index: the statement");
    admin.batch_execute("DROP INDEX jobs_by_hash").unwrap();
    admin
        .batch_execute(NOTE_JOBS)
        .unwrap();
    writer.batch_execute("SELECT rq_enqueue('q', 'after the trigger')").unwrap();
    let seen: i64 = admin
        .query_one("SELECT count(*) FROM seen JOIN jobs USING (id) WHERE payload = 'after the trigger'", &[])
        .unwrap()
        .get(0);
    assert_eq!(seen, 1, "the trigger made in another session fired");
}

/// Eight sessions enqueue directly (four one job at a time, four in
/// batches) while four claim and complete: every job is there once, done
/// once, and every index checks.
#[test]
fn eight_sessions_enqueue_directly_and_every_job_is_done_once() {
    let db = fresh_db("rq_it_direct_many");
    connect(&db).batch_execute("CREATE INDEX jobs_by_payload ON jobs (payload)").unwrap();
    let producers: Vec<_> = (0..8)
        .map(|p| {
            let db = db.clone();
            thread::spawn(move || {
                let mut c = connect(&db);
                if p % 2 == 0 {
                    for i in 0..250 {
                        c.batch_execute(&format!("SELECT rq_enqueue('q', 'p{p}-{i}', priority => {})", i % 3)).unwrap();
                    }
                } else {
                    // the other half in batches of 50 (rq_enqueue_batch's direct path)
                    for b in 0..5 {
                        c.batch_execute(&format!(
                            "SELECT rq_enqueue_batch('q', ARRAY(SELECT 'p{p}-' || i FROM generate_series({}, {}) i), priority => {})",
                            b * 50,
                            b * 50 + 49,
                            b % 3
                        ))
                        .unwrap();
                    }
                }
            })
        })
        .collect();
    let workers: Vec<_> = (0..4)
        .map(|_| {
            let db = db.clone();
            thread::spawn(move || {
                let mut c = connect(&db);
                let mut done = Vec::new();
                let mut idle = 0;
                while idle < 20 {
                    let rows = c.query("SELECT id::text, attempts FROM rq_claim(ARRAY['q'], batch => 10)", &[]).unwrap();
                    if rows.is_empty() {
                        idle += 1;
                        thread::sleep(std::time::Duration::from_millis(50));
                        continue;
                    }
                    idle = 0;
                    for r in rows {
                        let (id, attempt): (String, i32) = (r.get(0), r.get(1));
                        c.execute("SELECT rq_complete($1::text::uuid, $2)", &[&id, &attempt]).unwrap();
                        done.push(id);
                    }
                }
                done
            })
        })
        .collect();
    for p in producers {
        p.join().unwrap();
    }
    let mut done: Vec<String> = workers.into_iter().flat_map(|w| w.join().unwrap()).collect();
    let mut c = connect(&db);
    // what the workers left (they stop after a second without a job)
    for r in c.query("SELECT id::text, attempts FROM rq_claim(ARRAY['q'], batch => 2000)", &[]).unwrap() {
        let (id, attempt): (String, i32) = (r.get(0), r.get(1));
        c.execute("SELECT rq_complete($1::text::uuid, $2)", &[&id, &attempt]).unwrap();
        done.push(id);
    }
    let all = done.len();
    done.sort();
    done.dedup();
    assert_eq!(done.len(), all, "no job done twice");
    assert_eq!(all, 2000, "every job done");
    let rows: i64 = c.query_one("SELECT count(DISTINCT payload) FROM jobs WHERE status = 'success'", &[]).unwrap().get(0);
    assert_eq!(rows, 2000);
    assert_indexes_check(&mut c, 10);
}

/// An error after the row is written (a payload over
/// raquel.max_payload_size is refused by what follows the insert) rolls
/// the row back and leaves the session able to go on.
#[test]
fn an_error_after_the_direct_write_leaves_nothing_behind() {
    let db = fresh_db("rq_it_direct_error");
    let mut c = connect(&db);
    c.batch_execute("SET raquel.max_payload_size = 10").unwrap();
    assert_eq!(sqlstate(c.query("SELECT rq_enqueue('q', repeat('x', 100))", &[])), "54000");
    // a batch whose third payload is too large: none of it is kept
    assert_eq!(sqlstate(c.query("SELECT rq_enqueue_batch('q', ARRAY['a', 'b', repeat('x', 100), 'd'])", &[])), "54000");
    let mut tx = c.transaction().unwrap();
    tx.batch_execute("SELECT rq_enqueue('q', 'kept')").unwrap();
    assert_eq!(sqlstate(tx.query("SELECT rq_enqueue('q', repeat('y', 100))", &[])), "54000");
    tx.rollback().unwrap();
    assert!(!enqueue_ran_a_statement(&mut c, "SELECT rq_enqueue('q', 'after')"), "direct still");
    let payloads: Vec<String> = c.query("SELECT payload FROM jobs", &[]).unwrap().iter().map(|r| r.get(0)).collect();
    assert_eq!(payloads, vec!["after".to_string()]);
    assert_indexes_check(&mut c, 9);
}

/// rq_enqueue_batch's plain jobs are written directly, row for row as its
/// planned path writes them, and returned in the order of the payloads;
/// jobs with keys, groups or parents run the planned path.
#[test]
fn a_direct_batch_writes_the_rows_its_planned_path_writes() {
    let db = fresh_db("rq_it_direct_batch");
    let mut c = connect(&db);
    let calls = [
        "SELECT count(*) FROM rq_enqueue_batch('q', ARRAY['one', NULL, 'three'])",
        "SELECT count(*) FROM rq_enqueue_batch('q', ARRAY['{\"a\": [1, 2]}', '7']::jsonb[], priority => 7, max_age => '1 hour', \
         max_retry_count => 3, min_retry_delay => '2 seconds', max_retry_delay => '1 minute', backoff_base => '3 seconds')",
        "SELECT count(*) FROM rq_enqueue_batch('q', ARRAY(SELECT 'p' || i FROM generate_series(1, 300) i), delay => '1 day')",
    ];
    // the columns that do not depend on when or by which path, of the last batch
    let rows = "SELECT string_agg(concat_ws(',', queue, payload, status, max_age, max_retry_count, min_retry_delay, \
                max_retry_delay, backoff_base, scheduled_at - enqueued_at > 86000000, attempts, error, error_trace, claimed_by, \
                claimed_at, finished_at, priority, lease_expires_at, requeues, key, group_key, turn, blocked_by, key_period, result), \
                '|' ORDER BY id) FROM jobs WHERE enqueued_at = (SELECT max(enqueued_at) FROM jobs)";
    for call in calls {
        c.batch_execute("TRUNCATE jobs; SET raquel.direct_writes = on").unwrap();
        assert!(!enqueue_ran_a_statement(&mut c, call), "{call} is written directly");
        let direct: String = c.query_one(rows, &[]).unwrap().get(0);
        c.batch_execute("TRUNCATE jobs; SET raquel.direct_writes = off").unwrap();
        assert!(enqueue_ran_a_statement(&mut c, call), "{call} runs its statement with direct_writes off");
        let planned: String = c.query_one(rows, &[]).unwrap().get(0);
        assert_eq!(direct, planned, "{call}");
    }
    c.batch_execute("RESET raquel.direct_writes; TRUNCATE jobs").unwrap();
    // the set returned is the rows stored, in the payloads' order
    let returned: Vec<String> = c
        .query("SELECT b::text FROM rq_enqueue_batch('r', ARRAY(SELECT 'r' || i FROM generate_series(1, 100) i)) b", &[])
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    let stored: Vec<String> =
        c.query("SELECT j::text FROM jobs j WHERE queue = 'r' ORDER BY id", &[]).unwrap().iter().map(|r| r.get(0)).collect();
    assert_eq!(returned.len(), 100);
    let same = returned == stored;
    assert!(same, "the returned rows are the stored rows, in order");
    let payloads: Vec<String> =
        c.query("SELECT payload FROM jobs WHERE queue = 'r' ORDER BY id", &[]).unwrap().iter().map(|r| r.get(0)).collect();
    assert_eq!(payloads, (1..=100).map(|i| format!("r{i}")).collect::<Vec<_>>(), "ids in the payloads' order");
    // an empty batch writes and returns nothing
    let none: i64 = c.query_one("SELECT count(*) FROM rq_enqueue_batch('q', '{}'::text[])", &[]).unwrap().get(0);
    assert_eq!(none, 0);
    // keys, groups and parents: the planned path
    assert!(enqueue_ran_a_statement(&mut c, "SELECT rq_enqueue_batch('q', ARRAY['x'], keys => ARRAY['k'])"));
    assert!(enqueue_ran_a_statement(&mut c, "SELECT rq_enqueue_batch('q', ARRAY['x'], group_keys => ARRAY['g'])"));
    // bad options are refused before anything is written, on either path
    let before: i64 = c.query_one("SELECT count(*) FROM jobs", &[]).unwrap().get(0);
    for direct in ["on", "off"] {
        c.batch_execute(&format!("SET raquel.direct_writes = {direct}")).unwrap();
        assert_eq!(sqlstate(c.query("SELECT rq_enqueue_batch('q', ARRAY['x'], delay => '-1 s')", &[])), "22023");
        assert_eq!(sqlstate(c.query("SELECT rq_enqueue_batch('q', ARRAY[['x'], ['y']])", &[])), "22023");
        assert_eq!(sqlstate(c.query("SELECT rq_enqueue_batch(NULL, ARRAY['x'])", &[])), "22023");
    }
    let after: i64 = c.query_one("SELECT count(*) FROM jobs", &[]).unwrap().get(0);
    assert_eq!(after, before, "nothing written by a refused batch");
    // rolled back, a direct batch leaves nothing
    c.batch_execute("RESET raquel.direct_writes; BEGIN; SELECT rq_enqueue_batch('gone', ARRAY['x', 'y']); ROLLBACK").unwrap();
    let gone: i64 = c.query_one("SELECT count(*) FROM jobs WHERE queue = 'gone'", &[]).unwrap().get(0);
    assert_eq!(gone, 0);
    assert_indexes_check(&mut c, 9);
}

/// A producer that may only enqueue (rq_grant_producer) enqueues a batch
/// directly: the function runs as the extension's owner, as its planned
/// path does.
#[test]
fn a_producer_enqueues_a_batch_directly() {
    let db = fresh_db("rq_it_direct_producer");
    let mut c = connect(&db);
    c.batch_execute(
        "DROP ROLE IF EXISTS rq_it_direct_producer; CREATE ROLE rq_it_direct_producer; \
         SELECT rq_grant_producer('rq_it_direct_producer')",
    )
    .unwrap();
    c.batch_execute("SET ROLE rq_it_direct_producer").unwrap();
    assert!(!enqueue_ran_a_statement(&mut c, "SELECT rq_enqueue_batch('q', ARRAY['a', 'b'])"), "direct for a producer");
    assert_eq!(sqlstate(c.query("SELECT count(*) FROM jobs", &[])), "42501", "a producer may not read the table");
    c.batch_execute("RESET ROLE").unwrap();
    let n: i64 = c.query_one("SELECT count(*) FROM jobs WHERE queue = 'q'", &[]).unwrap().get(0);
    assert_eq!(n, 2);
}

/// Completes the job of `queue` claimed just now, and says whether it ran
/// a statement to do it.
fn complete_ran_a_statement(c: &mut Client, queue: &str, result: &str) -> bool {
    let row = c.query_one(&format!("SELECT id::text, attempts FROM rq_claim(ARRAY['{queue}'])"), &[]).unwrap();
    let (id, attempt): (String, i32) = (row.get(0), row.get(1));
    ran_a_statement(c, |c| c.execute(&format!("SELECT rq_complete($1::text::uuid, $2{result})"), &[&id, &attempt]).unwrap()).0
}

/// rq_complete of a claimed job writes it directly, the row its statement
/// writes; a stale attempt, a job not claimed and a queue without history
/// go to the statement, which says why or deletes the job.
#[test]
fn a_direct_complete_writes_the_row_its_statement_writes() {
    let db = fresh_db("rq_it_direct_complete");
    let mut c = connect(&db);
    // the columns that do not depend on when or by which path
    let row = "SELECT queue, payload, status, attempts, error, claimed_by, finished_at >= claimed_at, priority, \
               lease_expires_at, requeues, result FROM jobs WHERE status = 'success' ORDER BY finished_at DESC, id DESC LIMIT 1";
    for result in ["", ", '{\"done\": [1, 2]}'::jsonb"] {
        c.batch_execute("SELECT rq_enqueue('c', 'one'); SET raquel.direct_writes = on").unwrap();
        assert!(!complete_ran_a_statement(&mut c, "c", result), "a complete{result} is written directly");
        let direct = format!("{:?}", c.query_one(row, &[]).unwrap());
        c.batch_execute("SELECT rq_enqueue('c', 'one'); SET raquel.direct_writes = off").unwrap();
        assert!(complete_ran_a_statement(&mut c, "c", result), "the statement with direct_writes off");
        let planned = format!("{:?}", c.query_one(row, &[]).unwrap());
        assert_eq!(direct, planned, "complete{result}");
    }
    c.batch_execute("RESET raquel.direct_writes").unwrap();
    // the row returned is the row stored
    c.batch_execute("SELECT rq_enqueue('r', 'x')").unwrap();
    let claimed = c.query_one("SELECT id::text, attempts FROM rq_claim(ARRAY['r'])", &[]).unwrap();
    let (id, attempt): (String, i32) = (claimed.get(0), claimed.get(1));
    let returned: String =
        c.query_one("SELECT j::text FROM rq_complete($1::text::uuid, $2) j", &[&id, &attempt]).unwrap().get(0);
    let stored: String = c.query_one("SELECT j::text FROM jobs j WHERE id = $1::text::uuid", &[&id]).unwrap().get(0);
    let same = returned == stored;
    assert!(same, "the returned row is the stored row");
    // completed twice, or with a stale attempt: the statement says why (55000)
    assert_eq!(sqlstate(c.query("SELECT rq_complete($1::text::uuid, $2)", &[&id, &attempt])), "55000");
    c.batch_execute("SELECT rq_enqueue('s', 'x')").unwrap();
    let claimed = c.query_one("SELECT id::text, attempts FROM rq_claim(ARRAY['s'])", &[]).unwrap();
    let (id, attempt): (String, i32) = (claimed.get(0), claimed.get(1));
    assert_eq!(sqlstate(c.query("SELECT rq_complete($1::text::uuid, $2)", &[&id, &(attempt + 1)])), "55000");
    let status: String = c.query_one("SELECT status FROM jobs WHERE id = $1::text::uuid", &[&id]).unwrap().get(0);
    assert_eq!(status, "claimed", "a refused complete changes nothing");
    // a queue without history: the statement, which deletes the job
    c.batch_execute("SELECT rq_set_history('h', false); SELECT rq_enqueue('h', 'x')").unwrap();
    assert!(complete_ran_a_statement(&mut c, "h", ""), "a queue without history: the statement");
    let left: i64 = c.query_one("SELECT count(*) FROM jobs WHERE queue = 'h'", &[]).unwrap().get(0);
    assert_eq!(left, 0);
    c.batch_execute("SELECT rq_enqueue('c', 'again')").unwrap();
    assert!(!complete_ran_a_statement(&mut c, "c", ""), "a queue that keeps its history beside one that does not: direct");
    // a parent's complete queues its child
    let parent: String = c.query_one("SELECT id::text FROM rq_enqueue('p', 'parent')", &[]).unwrap().get(0);
    c.execute("SELECT rq_enqueue('k', 'child', after => ARRAY[$1::text::uuid])", &[&parent]).unwrap();
    // (what the parent's end sets off runs its statement: rq_job_ended)
    complete_ran_a_statement(&mut c, "p", "");
    let child: String = c.query_one("SELECT status FROM jobs WHERE queue = 'k'", &[]).unwrap().get(0);
    assert_eq!(child, "queued", "the child waits no more");
    // rolled back, a direct complete leaves the job claimed
    c.batch_execute("SELECT rq_enqueue('b', 'x')").unwrap();
    let claimed = c.query_one("SELECT id::text, attempts FROM rq_claim(ARRAY['b'])", &[]).unwrap();
    let (id, attempt): (String, i32) = (claimed.get(0), claimed.get(1));
    c.batch_execute("BEGIN").unwrap();
    c.execute("SELECT rq_complete($1::text::uuid, $2)", &[&id, &attempt]).unwrap();
    c.batch_execute("ROLLBACK").unwrap();
    let status: String = c.query_one("SELECT status FROM jobs WHERE id = $1::text::uuid", &[&id]).unwrap().get(0);
    assert_eq!(status, "claimed");
    assert_indexes_check(&mut c, 9);
}

/// A complete that meets a rescue holding the row waits for it, and then
/// finds the job handed back: it is refused (fenced), as the statement
/// would; a complete that goes first holds the rescue off, and the job
/// stays done. (Leases of 300 ms, and the rows held from before they lapse:
/// the background worker's own rescue duty, which skips a locked row, must
/// not hand the job back first; it did once in CI with a 1 ms lease.)
#[test]
fn a_direct_complete_and_a_rescue_race_in_both_orders() {
    let db = fresh_db("rq_it_direct_race");
    let mut worker = connect(&db);
    let mut duty = connect(&db);
    let lapse = || thread::sleep(std::time::Duration::from_millis(400));
    // the rescue first: it holds the job's row from before its lease lapses
    worker.batch_execute("SELECT rq_enqueue('q', 'x')").unwrap();
    let claimed = worker.query_one("SELECT id::text, attempts FROM rq_claim(ARRAY['q'], lease => '300 milliseconds')", &[]).unwrap();
    let (id, attempt): (String, i32) = (claimed.get(0), claimed.get(1));
    duty.batch_execute("BEGIN").unwrap();
    duty.execute("SELECT FROM jobs WHERE id = $1::text::uuid FOR UPDATE", &[&id]).unwrap();
    lapse();
    let rescued: i64 = duty.query_one("SELECT rq_rescue()", &[]).unwrap().get(0);
    assert_eq!(rescued, 1, "the rescue hands the lapsed job back");
    let completing = {
        let (db, id) = (db.clone(), id.clone());
        thread::spawn(move || {
            let mut c = connect(&db);
            sqlstate(c.query("SELECT rq_complete($1::text::uuid, $2)", &[&id, &attempt]))
        })
    };
    thread::sleep(std::time::Duration::from_millis(300));
    assert!(!completing.is_finished(), "the complete waits for the rescue's row lock");
    duty.batch_execute("COMMIT").unwrap();
    assert_eq!(completing.join().unwrap(), "55000", "the job was handed back: the old attempt is refused");
    let status: String = duty.query_one("SELECT status FROM jobs WHERE id = $1::text::uuid", &[&id]).unwrap().get(0);
    assert_ne!(status, "success");

    // the complete first: the rescue passes its locked row by, and after the commit the job is done
    worker.batch_execute("SELECT rq_enqueue('r', 'y')").unwrap();
    let claimed = worker.query_one("SELECT id::text, attempts FROM rq_claim(ARRAY['r'], lease => '300 milliseconds')", &[]).unwrap();
    let (id, attempt): (String, i32) = (claimed.get(0), claimed.get(1));
    worker.batch_execute("BEGIN").unwrap();
    worker.execute("SELECT rq_complete($1::text::uuid, $2)", &[&id, &attempt]).unwrap();
    lapse();
    let rescued: i64 = duty.query_one("SELECT rq_rescue()", &[]).unwrap().get(0);
    assert_eq!(rescued, 0, "the rescue passes the row the complete holds by");
    worker.batch_execute("COMMIT").unwrap();
    duty.batch_execute("SELECT rq_rescue()").unwrap();
    let status: String = duty.query_one("SELECT status FROM jobs WHERE id = $1::text::uuid", &[&id]).unwrap().get(0);
    assert_eq!(status, "success");
    assert_indexes_check(&mut duty, 9);
}

/// Runs `claim` and says whether it ran a statement, with its rows' payloads.
fn claim_ran_a_statement(c: &mut Client, claim: &str) -> (bool, Vec<Option<String>>) {
    ran_a_statement(c, |c| c.query(claim, &[]).unwrap().iter().map(|r| r.get(0)).collect())
}

/// The jobs of one queue that a claim must tell apart: three priorities,
/// jobs due later, a job past its age, and a job of another queue. (A
/// grouped job would make the queue's claims flow claims: src/flow.rs.)
fn claim_setup(c: &mut Client, queue: &str) {
    c.batch_execute(&format!(
        "SELECT rq_enqueue('{queue}', 'p0-' || i, priority => 0) FROM generate_series(1, 3) i; \
         SELECT rq_enqueue('{queue}', 'p2-' || i, priority => 2) FROM generate_series(1, 3) i; \
         SELECT rq_enqueue('{queue}', 'p1-' || i, priority => 1) FROM generate_series(1, 3) i; \
         SELECT rq_enqueue('{queue}', 'later', delay => '1 hour', priority => 5); \
         SELECT rq_enqueue('{queue}', 'too old', max_age => '1 ms', priority => 9); \
         SELECT rq_enqueue('{queue}-other', 'other', priority => 9); \
         SELECT pg_sleep(0.01)"
    ))
    .unwrap();
}

/// rq_claim of one queue writes its claims directly, claiming what its
/// statement claims in the same order (priorities, due jobs only, none
/// past its age), and each row as the statement writes it.
#[test]
fn a_direct_claim_claims_what_its_statement_claims() {
    let db = fresh_db("rq_it_direct_claim");
    let mut c = connect(&db);
    let mut claimed = Vec::new();
    for direct in ["on", "off"] {
        let queue = format!("claim-{direct}");
        claim_setup(&mut c, &queue);
        c.batch_execute(&format!("SET raquel.direct_writes = {direct}")).unwrap();
        let claim = |batch: i32| format!("SELECT payload FROM rq_claim(ARRAY['{queue}'], 'w', batch => {batch})");
        // the first claim of a queue finds its lanes with a statement
        let mut payloads = claim_ran_a_statement(&mut c, &claim(1)).1;
        for batch in [2, 100, 5] {
            let (ran, more) = claim_ran_a_statement(&mut c, &claim(batch));
            assert_eq!(ran, direct == "off", "a claim of {batch} with direct_writes {direct} ran a statement: {ran}");
            payloads.extend(more);
        }
        claimed.push(payloads);
    }
    c.batch_execute("RESET raquel.direct_writes").unwrap();
    let expected: Vec<Option<String>> =
        ["p2-1", "p2-2", "p2-3", "p1-1", "p1-2", "p1-3", "p0-1", "p0-2", "p0-3"].iter().map(|p| Some(p.to_string())).collect();
    assert_eq!(claimed[0], expected, "the direct claim's jobs, in claim order");
    assert_eq!(claimed[1], expected, "the statement's");
    // each claimed row as the statement writes it (the job past its age is
    // the expire duty's, whenever it comes)
    let rows = |c: &mut Client, queue: &str| -> Vec<String> {
        c.query(
            "SELECT format('%s %s %s %s %s %s %s', payload, status, attempts, claimed_by, lease_expires_at - claimed_at, \
             finished_at, error) FROM jobs WHERE queue = $1 AND payload <> 'too old' ORDER BY payload",
            &[&queue],
        )
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect()
    };
    assert_eq!(rows(&mut c, "claim-on"), rows(&mut c, "claim-off"));
    // the row returned is the row stored
    c.batch_execute("SELECT rq_enqueue('r', 'x')").unwrap();
    let returned: String = c.query_one("SELECT j::text FROM rq_claim(ARRAY['r']) j", &[]).unwrap().get(0);
    let stored: String = c.query_one("SELECT j::text FROM jobs j WHERE queue = 'r'", &[]).unwrap().get(0);
    assert_eq!(returned, stored);
    // a claim in a transaction rolled back leaves the job ready, and its
    // cursor lets the next claim find it
    c.batch_execute("BEGIN; SELECT rq_claim(ARRAY['claim-on']); ROLLBACK").unwrap();
    c.batch_execute("SELECT rq_enqueue('claim-on', 'again')").unwrap();
    c.batch_execute("BEGIN").unwrap();
    let first: Option<String> = c.query_one("SELECT payload FROM rq_claim(ARRAY['claim-on'])", &[]).unwrap().get(0);
    c.batch_execute("ROLLBACK").unwrap();
    let again: Option<String> = c.query_one("SELECT payload FROM rq_claim(ARRAY['claim-on'])", &[]).unwrap().get(0);
    assert_eq!((first.as_deref(), again.as_deref()), (Some("again"), Some("again")), "rolled back, the job is claimed again");
    // a claim in the transaction that made a job of its queue ready walks
    // without the cursors (src/cursors.rs ready_here): it finds the
    // priorities, one probe each
    c.batch_execute("SELECT rq_enqueue('walk', 'w' || i, priority => i % 3) FROM generate_series(1, 6) i").unwrap();
    c.batch_execute("BEGIN; SELECT rq_enqueue('walk', 'new', priority => 1)").unwrap();
    let (ran, payloads) = claim_ran_a_statement(&mut c, "SELECT payload FROM rq_claim(ARRAY['walk'], batch => 10)");
    c.batch_execute("COMMIT").unwrap();
    assert!(!ran, "a claim without cursors: direct");
    let expected: Vec<Option<String>> = ["w2", "w5", "w1", "w4", "new", "w3", "w6"].iter().map(|p| Some(p.to_string())).collect();
    assert_eq!(payloads, expected);
    // a worker's loop in one call: the complete and the claim both direct
    c.batch_execute("SELECT rq_enqueue('loop', 'a'); SELECT rq_enqueue('loop', 'b')").unwrap();
    let row = c.query_one("SELECT id::text, attempts FROM rq_claim(ARRAY['loop'])", &[]).unwrap();
    let (id, attempt): (String, i32) = (row.get(0), row.get(1));
    let (ran, next): (bool, Option<String>) = ran_a_statement(&mut c, |c| {
        c.query_one("SELECT payload FROM rq_complete_and_claim($1::text::uuid, $2, ARRAY['loop'])", &[&id, &attempt])
            .unwrap()
            .get(0)
    });
    assert_eq!(next.as_deref(), Some("b"));
    assert!(!ran, "rq_complete_and_claim ran no statement");
    assert_indexes_check(&mut c, 9);
}

/// A claim of one grouped queue writes its fair claim directly (src/fair.rs,
/// src/direct.rs claim_fair), claiming what sql/claim.fair.sql claims in the
/// same order (its ungrouped jobs first, then by priority and turn, so the
/// groups take turns; due jobs only, none past its age), each row as the
/// statement writes it.
#[test]
fn a_direct_fair_claim_claims_what_its_statement_claims() {
    let db = fresh_db("rq_it_direct_fair");
    let mut c = connect(&db);
    let mut claimed = Vec::new();
    for direct in ["on", "off"] {
        let queue = format!("fair-{direct}");
        c.batch_execute(&format!(
            "SELECT rq_enqueue('{queue}', g || i, group_key => g) FROM generate_series(1, 3) i, unnest(ARRAY['a', 'b']) g; \
             SELECT rq_enqueue('{queue}', 'c-high', group_key => 'c', priority => 1); \
             SELECT rq_enqueue('{queue}', 'plain'); \
             SELECT rq_enqueue('{queue}', 'later', group_key => 'a', delay => '1 hour', priority => 5); \
             SELECT rq_enqueue('{queue}', 'too old', group_key => 'b', max_age => '1 ms', priority => 9); \
             SELECT pg_sleep(0.01)"
        ))
        .unwrap();
        c.batch_execute(&format!("SET raquel.direct_writes = {direct}")).unwrap();
        let mut payloads = Vec::new();
        for batch in [1, 2, 1, 100] {
            let claim = format!("SELECT payload FROM rq_claim(ARRAY['{queue}'], 'w', batch => {batch})");
            let (ran, more) = claim_ran_a_statement(&mut c, &claim);
            if batch > 1 {
                assert_eq!(ran, direct == "off", "a fair claim of {batch} with direct_writes {direct} ran a statement: {ran}");
            }
            payloads.extend(more);
        }
        claimed.push(payloads);
    }
    c.batch_execute("RESET raquel.direct_writes").unwrap();
    let expected: Vec<Option<String>> =
        ["plain", "c-high", "a1", "b1", "a2", "b2", "a3", "b3"].iter().map(|p| Some(p.to_string())).collect();
    assert_eq!(claimed[0], expected, "the direct fair claim's jobs, in the fair order");
    assert_eq!(claimed[1], expected, "the statement's");
    let rows = |c: &mut Client, queue: &str| -> Vec<String> {
        c.query(
            "SELECT format('%s %s %s %s %s %s %s %s', payload, status, attempts, claimed_by, lease_expires_at - claimed_at, \
             finished_at, error, turn) FROM jobs WHERE queue = $1 AND payload <> 'too old' ORDER BY payload",
            &[&queue],
        )
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect()
    };
    assert_eq!(rows(&mut c, "fair-on"), rows(&mut c, "fair-off"));
    // the row returned is the row stored
    c.batch_execute("SELECT rq_enqueue('fr', 'x', group_key => 'g')").unwrap();
    let returned: String = c.query_one("SELECT j::text FROM rq_claim(ARRAY['fr']) j", &[]).unwrap().get(0);
    let stored: String = c.query_one("SELECT j::text FROM jobs j WHERE queue = 'fr'", &[]).unwrap().get(0);
    assert_eq!(returned, stored);
    assert_indexes_check(&mut c, 9);
}

/// A claim in REPEATABLE READ or SERIALIZABLE, a user's trigger, row
/// security, or a ready index not as raquel made it: the claim's statement.
#[test]
fn a_claim_runs_its_statement_where_it_may_not_be_direct() {
    let db = fresh_db("rq_it_direct_claim_fallback");
    let mut c = connect(&db);
    c.batch_execute("SELECT rq_enqueue('q', 'j' || i) FROM generate_series(1, 20) i").unwrap();
    let claim = "SELECT payload FROM rq_claim(ARRAY['q'])";
    claim_ran_a_statement(&mut c, claim);
    assert!(!claim_ran_a_statement(&mut c, claim).0, "direct at first");
    for level in ["REPEATABLE READ", "SERIALIZABLE"] {
        c.batch_execute(&format!("BEGIN ISOLATION LEVEL {level}")).unwrap();
        let (ran, payloads) = claim_ran_a_statement(&mut c, claim);
        c.batch_execute("COMMIT").unwrap();
        assert!(ran, "{level}: the statement");
        assert_eq!(payloads.len(), 1);
    }
    // a READ ONLY transaction: the statement, which refuses (25006)
    for verb in [claim, "SELECT rq_take(ARRAY['q'])", "SELECT rq_enqueue('q', 'x')"] {
        c.batch_execute("BEGIN READ ONLY").unwrap();
        assert_eq!(sqlstate(c.query(verb, &[])), "25006", "{verb} in a READ ONLY transaction");
        c.batch_execute("ROLLBACK").unwrap();
    }
    c.batch_execute(NOTE_JOBS).unwrap();
    assert!(claim_ran_a_statement(&mut c, claim).0, "a user trigger: the statement");
    c.batch_execute("DROP TRIGGER note_job ON jobs; ALTER TABLE jobs ENABLE ROW LEVEL SECURITY").unwrap();
    assert!(claim_ran_a_statement(&mut c, claim).0, "row security: the statement");
    c.batch_execute("ALTER TABLE jobs DISABLE ROW LEVEL SECURITY").unwrap();
    assert!(!claim_ran_a_statement(&mut c, claim).0, "direct again");
    // the ready index with another predicate: the statement, which still claims
    c.batch_execute(
        "DROP INDEX jobs_ready_by_queue_idx; \
         CREATE INDEX jobs_ready_by_queue_idx ON jobs (queue, priority DESC, scheduled_at, id) WHERE status = 'queued'",
    )
    .unwrap();
    let (ran, payloads) = claim_ran_a_statement(&mut c, claim);
    assert!(ran, "another ready index: the statement");
    assert_eq!(payloads.len(), 1);
    c.batch_execute(
        "DROP INDEX jobs_ready_by_queue_idx; \
         CREATE INDEX jobs_ready_by_queue_idx ON jobs (queue, priority DESC, scheduled_at, id) \
         WHERE status IN ('queued', 'failed') AND group_key IS NULL",
    )
    .unwrap();
    assert!(!claim_ran_a_statement(&mut c, claim).0, "the index as raquel makes it: direct");
    let left: i64 = c.query_one("SELECT count(*) FROM jobs WHERE status = 'queued'", &[]).unwrap().get(0);
    assert_eq!(left, 20 - 9, "each claim took one job");
}

/// A direct claim passes a row another session's claim holds and claims
/// the next; rolled back, that claim's job is claimed next (its rollback
/// moves the lane's cursor back: src/cursors.rs).
#[test]
fn a_direct_claim_skips_a_held_row() {
    let db = fresh_db("rq_it_direct_claim_held");
    let mut holder = connect(&db);
    let mut c = connect(&db);
    let claim = "SELECT payload FROM rq_claim(ARRAY['q'])";
    // (the queue's lanes found while it is empty)
    assert!(c.query(claim, &[]).unwrap().is_empty());
    c.batch_execute("SELECT rq_enqueue('q', 'first'); SELECT rq_enqueue('q', 'second'); SELECT rq_enqueue('q', 'third')").unwrap();
    holder.batch_execute("BEGIN").unwrap();
    assert_eq!(holder.query_one(claim, &[]).unwrap().get::<_, Option<String>>(0).as_deref(), Some("first"));
    let (ran, payloads) = claim_ran_a_statement(&mut c, claim);
    holder.batch_execute("ROLLBACK").unwrap();
    assert!(!ran, "direct");
    assert_eq!(payloads, vec![Some("second".to_string())], "the held row is passed over");
    assert_eq!(c.query_one(claim, &[]).unwrap().get::<_, Option<String>>(0).as_deref(), Some("first"));
    assert_eq!(c.query_one(claim, &[]).unwrap().get::<_, Option<String>>(0).as_deref(), Some("third"));
    assert!(c.query(claim, &[]).unwrap().is_empty());
}

/// An error between a direct claim's row lock and its write (a job whose
/// attempts cannot grow) leaves the job as it was, releases the lock, and
/// the session goes on.
#[test]
fn an_error_between_the_lock_and_the_write_leaves_the_job_as_it_was() {
    let db = fresh_db("rq_it_direct_claim_error");
    let mut c = connect(&db);
    let mut other = connect(&db);
    c.batch_execute("SELECT rq_enqueue('q', 'worn'); UPDATE jobs SET attempts = 2147483647").unwrap();
    assert_eq!(sqlstate(c.query("SELECT rq_claim(ARRAY['q'])", &[])), "22003");
    // (a server reports an error before its abort lets go of the locks:
    // the session's next statement runs after it; seen once on 18)
    c.batch_execute("SELECT 1").unwrap();
    let status: String = other.query_one("SELECT status FROM jobs FOR UPDATE NOWAIT", &[]).unwrap().get(0);
    assert_eq!(status, "queued", "unchanged and not held");
    c.batch_execute("UPDATE jobs SET attempts = 0").unwrap();
    let claimed: Option<String> = c.query_one("SELECT payload FROM rq_claim(ARRAY['q'])", &[]).unwrap().get(0);
    assert_eq!(claimed.as_deref(), Some("worn"));
    assert_indexes_check(&mut c, 9);
}

/// rq_take of one queue takes directly, with and without `complete`: the
/// same jobs as its statement, each row as the statement returns it; in a
/// queue without history a completed job is deleted, unless its end sets
/// something off (a key period, a waiting child), and then it is kept.
#[test]
fn a_direct_take_takes_what_its_statement_takes() {
    let db = fresh_db("rq_it_direct_take");
    let mut c = connect(&db);
    // what a row returned holds that does not depend on when it ran
    let taken = |c: &mut Client, sql: &str| -> (bool, Vec<String>) {
        ran_a_statement(c, |c| {
            c.query(
                &format!(
                    "SELECT format('%s %s %s %s %s %s', payload, status, attempts, claimed_by, lease_expires_at, \
                     finished_at >= claimed_at) FROM ({sql}) t"
                ),
                &[],
            )
            .unwrap()
            .iter()
            .map(|r| r.get(0))
            .collect()
        })
    };
    let mut seen = Vec::new();
    for direct in ["on", "off"] {
        let queue = format!("take-{direct}");
        claim_setup(&mut c, &queue);
        c.batch_execute(&format!("SET raquel.direct_writes = {direct}")).unwrap();
        // (the first take of a queue finds its lanes with a statement)
        c.batch_execute(&format!("BEGIN; SELECT rq_take(ARRAY['{queue}'], 'w'); ROLLBACK")).unwrap();
        c.batch_execute("BEGIN").unwrap();
        let (ran, rows) = taken(&mut c, &format!("SELECT * FROM rq_take(ARRAY['{queue}'], 'w', batch => 2)"));
        assert_eq!(ran, direct == "off", "a take with direct_writes {direct} ran a statement: {ran}");
        c.batch_execute("COMMIT").unwrap();
        seen.push(rows);
        let (ran, rows) = taken(&mut c, &format!("SELECT * FROM rq_take(ARRAY['{queue}'], 'w', batch => 3, complete => true)"));
        assert_eq!(ran, direct == "off", "a completing take with direct_writes {direct} ran a statement: {ran}");
        seen.push(rows);
    }
    c.batch_execute("RESET raquel.direct_writes").unwrap();
    assert_eq!(seen[0], seen[2], "taken, direct and planned");
    assert_eq!(seen[1], seen[3], "taken and completed, direct and planned");
    assert_eq!(seen[0], vec!["p2-1 claimed 1 w  ", "p2-2 claimed 1 w  "], "a take commits nothing of its own");
    assert_eq!(seen[1], vec!["p2-1 success 1 w  t", "p2-2 success 1 w  t", "p2-3 success 1 w  t"]);
    // a queue without history: deleted, and returned as it ended; a job
    // with a key period, or a child waiting for it, is kept (its end sets
    // something off), and the child is queued
    c.batch_execute(
        "SELECT rq_set_history('h', false); SELECT rq_enqueue('h', 'plain'); \
         SELECT rq_enqueue('h', 'keyed', key => 'k', key_period => '1 hour')",
    )
    .unwrap();
    let parent: String = c.query_one("SELECT id::text FROM rq_enqueue('h', 'parent')", &[]).unwrap().get(0);
    c.execute("SELECT rq_enqueue('kids', 'child', after => ARRAY[$1::text::uuid])", &[&parent]).unwrap();
    c.batch_execute("BEGIN; SELECT rq_take(ARRAY['h'], complete => true); ROLLBACK").unwrap();
    let (ran, rows) = taken(&mut c, "SELECT * FROM rq_take(ARRAY['h'], 'w', complete => true)");
    assert!(!ran, "a completing take in a queue without history: direct");
    assert_eq!(rows, vec!["plain success 1 w  t"]);
    // (what the others' ends set off runs its statement: rq_job_ended)
    let (_, rows) = taken(&mut c, "SELECT * FROM rq_take(ARRAY['h'], 'w', batch => 10, complete => true)");
    assert_eq!(rows, vec!["keyed success 1 w  t", "parent success 1 w  t"]);
    let left: Vec<String> =
        c.query("SELECT payload FROM jobs WHERE queue = 'h' ORDER BY payload", &[]).unwrap().iter().map(|r| r.get(0)).collect();
    assert_eq!(left, vec!["keyed", "parent"], "the plain job is deleted; the two whose end sets something off are kept");
    let child: String = c.query_one("SELECT status FROM jobs WHERE queue = 'kids'", &[]).unwrap().get(0);
    assert_eq!(child, "queued", "the child waits no more");
    // a deleted job's payload stored out of line comes back whole
    c.batch_execute(
        "SELECT rq_set_history('big', false); \
         SELECT rq_enqueue('big', (SELECT string_agg(md5(i::text), '') FROM generate_series(1, 3000) i))",
    )
    .unwrap();
    c.batch_execute("BEGIN; SELECT rq_take(ARRAY['big'], complete => true); ROLLBACK").unwrap();
    let length: i32 =
        c.query_one("SELECT length(payload) FROM rq_take(ARRAY['big'], complete => true)", &[]).unwrap().get(0);
    assert_eq!(length, 96_000);
    let left: i64 = c.query_one("SELECT count(*) FROM jobs WHERE queue = 'big'", &[]).unwrap().get(0);
    assert_eq!(left, 0, "deleted");
    assert_indexes_check(&mut c, 9);
}

/// Fails the job of `queue` it claims with `error` and says whether it ran
/// a statement to do it.
fn fail_ran_a_statement(c: &mut Client, queue: &str, error: &str) -> bool {
    let row = c.query_one("SELECT id::text, attempts FROM rq_claim(ARRAY[$1])", &[&queue]).unwrap();
    let (id, attempt): (String, i32) = (row.get(0), row.get(1));
    ran_a_statement(c, |c| c.execute("SELECT rq_fail($1::text::uuid, $2, $3, 'trace of ' || $3)", &[&id, &attempt, &error]).unwrap()).0
}

/// rq_fail of a claimed job writes it directly, the row its statement
/// writes, whether it is retried after its backoff or exhausted; a retried
/// job is claimed again when due; an exhausted parent cancels the job
/// waiting for it; a stale attempt goes to the statement, which says why.
#[test]
fn a_direct_fail_writes_the_row_its_statement_writes() {
    let db = fresh_db("rq_it_direct_fail");
    let mut c = connect(&db);
    // the columns that do not depend on when or by which path, and whether
    // a retry is due its first backoff after the claim (the larger of the
    // base and the minimum: an hour or two, so that the minute the calls
    // may take is small beside a wrong delay)
    let row = "SELECT queue, payload, status, attempts, error, error_trace, claimed_by, finished_at IS NULL, \
               CASE WHEN status = 'failed' THEN scheduled_at - claimed_at - greatest(backoff_base, min_retry_delay) BETWEEN 0 AND 60000 END, \
               lease_expires_at, requeues FROM jobs WHERE queue = $1 ORDER BY claimed_at DESC, id DESC LIMIT 1";
    let enqueue = [
        "SELECT rq_enqueue('f', 'retried', backoff_base => '1 hour')",
        "SELECT rq_enqueue('f', 'retried, bounded', backoff_base => '1 second', min_retry_delay => '2 hours', max_retry_count => 3)",
        "SELECT rq_enqueue('f', 'exhausted', max_retry_count => 0)",
    ];
    for job in enqueue {
        c.batch_execute(&format!("{job}; SET raquel.direct_writes = on")).unwrap();
        assert!(!fail_ran_a_statement(&mut c, "f", "boom"), "a fail is written directly: {job}");
        let direct = format!("{:?}", c.query_one(row, &[&"f"]).unwrap());
        c.batch_execute(&format!("{job}; SET raquel.direct_writes = off")).unwrap();
        assert!(fail_ran_a_statement(&mut c, "f", "boom"), "the statement with direct_writes off");
        let planned = format!("{:?}", c.query_one(row, &[&"f"]).unwrap());
        c.batch_execute("RESET raquel.direct_writes; DELETE FROM jobs WHERE queue = 'f'").unwrap();
        assert_eq!(direct, planned, "{job}");
    }
    // retried at once (no backoff): claimed again, as its second attempt
    c.batch_execute("SELECT rq_enqueue('again', 'x', backoff_base => '0', min_retry_delay => '0')").unwrap();
    assert!(!fail_ran_a_statement(&mut c, "again", "once"));
    let second: i32 = c.query_one("SELECT attempts FROM rq_claim(ARRAY['again'])", &[]).unwrap().get(0);
    assert_eq!(second, 2, "the retried job is claimed again");
    // an exhausted parent cancels its child
    let parent: String = c.query_one("SELECT id::text FROM rq_enqueue('p', 'parent', max_retry_count => 0)", &[]).unwrap().get(0);
    c.execute("SELECT rq_enqueue('k', 'child', after => ARRAY[$1::text::uuid])", &[&parent]).unwrap();
    // (what the parent's end sets off runs its statement, rq_job_ended: so
    // the count of statements cannot tell the path here)
    fail_ran_a_statement(&mut c, "p", "for good");
    let child: String = c.query_one("SELECT status FROM jobs WHERE queue = 'k'", &[]).unwrap().get(0);
    assert_eq!(child, "cancelled", "the child of an exhausted parent");
    // a stale attempt: the statement says why (55000), and nothing changes
    let (id, attempt) = claimed(&mut c, "s");
    assert_eq!(sqlstate(c.query("SELECT rq_fail($1::text::uuid, $2, 'late')", &[&id, &(attempt + 1)])), "55000");
    let status: String = c.query_one("SELECT status FROM jobs WHERE id = $1::text::uuid", &[&id]).unwrap().get(0);
    assert_eq!(status, "claimed", "a refused fail changes nothing");
    // rolled back, a direct fail leaves the job claimed
    c.batch_execute("BEGIN").unwrap();
    let (ran, _) = ran_a_statement(&mut c, |c| c.execute("SELECT rq_fail($1::text::uuid, $2, 'undone')", &[&id, &attempt]).unwrap());
    assert!(!ran, "failed directly");
    c.batch_execute("ROLLBACK").unwrap();
    let (status, error): (String, Option<String>) =
        c.query_one("SELECT status, error FROM jobs WHERE id = $1::text::uuid", &[&id]).map(|r| (r.get(0), r.get(1))).unwrap();
    assert_eq!((status.as_str(), error), ("claimed", None));
    assert_indexes_check(&mut c, 9);
}

/// Records step `name` of job `id` (claimed as `attempt`) with `result`
/// and says whether it ran a statement to do it.
fn step_ran_a_statement(c: &mut Client, id: &str, attempt: i32, name: &str, result: &str) -> bool {
    ran_a_statement(c, |c| c.execute(&format!("SELECT rq_step($1::text::uuid, $2, $3, {result})"), &[&id, &attempt, &name]).unwrap()).0
}

/// Enqueues a job of `queue` and claims it: its id and attempt.
fn claimed(c: &mut Client, queue: &str) -> (String, i32) {
    c.execute("SELECT rq_enqueue($1, 'x')", &[&queue]).unwrap();
    let row = c.query_one("SELECT id::text, attempts FROM rq_claim(ARRAY[$1])", &[&queue]).unwrap();
    (row.get(0), row.get(1))
}

/// rq_step of a claimed job records its row directly, the row its
/// statement records; a step recorded twice, a stale attempt and a job not
/// claimed go to the statement, which says why; a user's trigger on
/// job_steps sends the step to the statement, and fires.
#[test]
fn a_direct_step_records_the_row_its_statement_records() {
    let db = fresh_db("rq_it_direct_step");
    let mut c = connect(&db);
    let (id, attempt) = claimed(&mut c, "s");
    let step = "SELECT job_id::text, name, result::text, attempt, recorded_at > 0 FROM job_steps WHERE name = $1";
    assert!(!step_ran_a_statement(&mut c, &id, attempt, "direct", "'{\"a\": [1, 2]}'"), "a step is recorded directly");
    c.batch_execute("SET raquel.direct_writes = off").unwrap();
    assert!(step_ran_a_statement(&mut c, &id, attempt, "planned", "'{\"a\": [1, 2]}'"), "the statement with direct_writes off");
    c.batch_execute("RESET raquel.direct_writes").unwrap();
    let rows: Vec<String> =
        ["direct", "planned"].iter().map(|n| format!("{:?}", c.query_one(step, &[n]).unwrap()).replace(n, "NAME")).collect();
    assert_eq!(rows[0], rows[1], "the direct row is the statement's");
    // the row returned is the row stored; a NULL result is stored as NULL
    let returned: String =
        c.query_one("SELECT s::text FROM rq_step($1::text::uuid, $2, 'third') s", &[&id, &attempt]).unwrap().get(0);
    let stored: String = c.query_one("SELECT s::text FROM job_steps s WHERE name = 'third'", &[]).unwrap().get(0);
    assert_eq!(returned, stored, "the returned row is the stored row");
    let null: bool = c.query_one("SELECT result IS NULL FROM job_steps WHERE name = 'third'", &[]).unwrap().get(0);
    assert!(null);
    // recorded twice: the statement says so, and by which attempt (23505)
    let twice = c.execute("SELECT rq_step($1::text::uuid, $2, 'direct', '1')", &[&id, &attempt]).unwrap_err();
    assert_eq!(twice.code().map(|s| s.code()), Some("23505"));
    let message = twice.as_db_error().map(|e| e.message().to_string()).unwrap_or_default();
    assert!(message.contains("already recorded"), "{message}");
    // a stale attempt, a job not claimed: 55000, nothing recorded
    assert_eq!(sqlstate(c.query("SELECT rq_step($1::text::uuid, $2, 'late', NULL)", &[&id, &(attempt + 1)])), "55000");
    let queued: String = c.query_one("SELECT id::text FROM rq_enqueue('t', 'x')", &[]).unwrap().get(0);
    assert_eq!(sqlstate(c.query("SELECT rq_step($1::text::uuid, 0, 'early', NULL)", &[&queued])), "55000");
    let steps: i64 = c.query_one("SELECT count(*) FROM job_steps", &[]).unwrap().get(0);
    assert_eq!(steps, 3, "the refused steps recorded nothing");
    // rolled back, a direct step is gone; in the claim's own transaction, direct
    c.batch_execute("BEGIN").unwrap();
    assert!(!step_ran_a_statement(&mut c, &id, attempt, "undone", "NULL"));
    c.batch_execute("ROLLBACK").unwrap();
    let undone: i64 = c.query_one("SELECT count(*) FROM job_steps WHERE name = 'undone'", &[]).unwrap().get(0);
    assert_eq!(undone, 0);
    c.batch_execute("SELECT rq_enqueue('u', 'x')").unwrap();
    c.batch_execute("BEGIN").unwrap();
    let row = c.query_one("SELECT id::text, attempts FROM rq_claim(ARRAY['u'])", &[]).unwrap();
    let (own, own_attempt): (String, i32) = (row.get(0), row.get(1));
    assert!(!step_ran_a_statement(&mut c, &own, own_attempt, "in the claim's transaction", "'1'"));
    c.execute("SELECT rq_complete($1::text::uuid, $2)", &[&own, &own_attempt]).unwrap();
    c.batch_execute("COMMIT").unwrap();
    // a user's trigger on job_steps: the statement, and the trigger fires
    c.batch_execute(
        "CREATE TABLE seen_steps (name text); \
         CREATE FUNCTION note_step() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN INSERT INTO public.seen_steps VALUES (NEW.name); RETURN NEW; END $$; \
         CREATE TRIGGER note_step AFTER INSERT ON job_steps FOR EACH ROW EXECUTE FUNCTION note_step()",
    )
    .unwrap();
    assert!(step_ran_a_statement(&mut c, &id, attempt, "watched", "NULL"), "a user's trigger: the statement");
    let seen: i64 = c.query_one("SELECT count(*) FROM seen_steps WHERE name = 'watched'", &[]).unwrap().get(0);
    assert_eq!(seen, 1, "the trigger fired");
    c.batch_execute("DROP TRIGGER note_step ON job_steps").unwrap();
    assert!(!step_ran_a_statement(&mut c, &id, attempt, "unwatched", "NULL"), "the trigger dropped: direct again");
    // a NOT NULL of the user's on result: the statement, which holds it (23502)
    c.batch_execute("UPDATE job_steps SET result = 'null' WHERE result IS NULL; ALTER TABLE job_steps ALTER result SET NOT NULL").unwrap();
    assert_eq!(sqlstate(c.query("SELECT rq_step($1::text::uuid, $2, 'no result', NULL)", &[&id, &attempt])), "23502");
    assert!(step_ran_a_statement(&mut c, &id, attempt, "a result", "'1'"), "a NOT NULL raquel did not make: the statement");
    c.batch_execute("ALTER TABLE job_steps ALTER result DROP NOT NULL").unwrap();
    assert!(!step_ran_a_statement(&mut c, &id, attempt, "unbound", "NULL"), "the NOT NULL dropped: direct again");
    check_every_index(&mut c);
    c.batch_execute("SELECT bt_index_check('job_steps_pkey'::regclass, true)").unwrap();
}

/// A step that meets a rescue holding the job's row waits for it, and
/// then finds the job handed back: refused (fenced), nothing recorded; a
/// step that goes first holds the job's row against the rescue until it
/// commits, so that no step is recorded for an attempt that lost its
/// claim before the record committed. (Leases of 300 ms, held from before
/// they lapse, as in the complete's race above.)
#[test]
fn a_direct_step_and_a_rescue_race_in_both_orders() {
    let db = fresh_db("rq_it_direct_step_race");
    let mut worker = connect(&db);
    let mut duty = connect(&db);
    let lapse = || thread::sleep(std::time::Duration::from_millis(400));
    let claim = |c: &mut Client, queue: &str| {
        c.execute("SELECT rq_enqueue($1, 'x')", &[&queue]).unwrap();
        let row = c.query_one("SELECT id::text, attempts FROM rq_claim(ARRAY[$1], lease => '300 milliseconds')", &[&queue]).unwrap();
        (row.get::<_, String>(0), row.get::<_, i32>(1))
    };
    // the rescue first
    let (id, attempt) = claim(&mut worker, "q");
    duty.batch_execute("BEGIN").unwrap();
    duty.execute("SELECT FROM jobs WHERE id = $1::text::uuid FOR UPDATE", &[&id]).unwrap();
    lapse();
    let rescued: i64 = duty.query_one("SELECT rq_rescue()", &[]).unwrap().get(0);
    assert_eq!(rescued, 1, "the rescue hands the lapsed job back");
    let stepping = {
        let (db, id) = (db.clone(), id.clone());
        thread::spawn(move || {
            let mut c = connect(&db);
            sqlstate(c.query("SELECT rq_step($1::text::uuid, $2, 'late', NULL)", &[&id, &attempt]))
        })
    };
    thread::sleep(std::time::Duration::from_millis(300));
    assert!(!stepping.is_finished(), "the step waits for the rescue's row lock");
    duty.batch_execute("COMMIT").unwrap();
    assert_eq!(stepping.join().unwrap(), "55000", "the job was handed back: the old attempt is refused");
    let steps: i64 = duty.query_one("SELECT count(*) FROM job_steps", &[]).unwrap().get(0);
    assert_eq!(steps, 0);

    // the step first: the rescue passes the row it holds by until it commits
    let (id, attempt) = claim(&mut worker, "r");
    worker.batch_execute("BEGIN").unwrap();
    let (ran, _) = ran_a_statement(&mut worker, |w| w.execute("SELECT rq_step($1::text::uuid, $2, 'first', NULL)", &[&id, &attempt]).unwrap());
    assert!(!ran, "recorded directly");
    lapse();
    let rescued: i64 = duty.query_one("SELECT rq_rescue()", &[]).unwrap().get(0);
    assert_eq!(rescued, 0, "the rescue passes the row the step holds by");
    worker.batch_execute("COMMIT").unwrap();
    // (by this rescue or the background worker's, whichever comes first)
    duty.batch_execute("SELECT rq_rescue()").unwrap();
    let status: String = duty.query_one("SELECT status FROM jobs WHERE id = $1::text::uuid", &[&id]).unwrap().get(0);
    assert_ne!(status, "claimed", "then the lapsed job is handed back");
    let steps: i64 = duty.query_one("SELECT count(*) FROM job_steps WHERE job_id = $1::text::uuid", &[&id]).unwrap().get(0);
    assert_eq!(steps, 1, "the step recorded before the rescue stays, for the next attempt to read");
}

/// Whether `sql` still holds an `@placeholder@` (a run of lower-case
/// letters and underscores between at signs; `@>` is an operator).
fn placeholder_left(sql: &str) -> Option<&str> {
    let mut rest = sql;
    while let Some(at) = rest.find('@') {
        let after = &rest[at + 1..];
        let word = after.find(|ch: char| !(ch.is_ascii_lowercase() || ch == '_')).unwrap_or(after.len());
        if word > 0 && after[word..].starts_with('@') {
            return Some(&rest[at..at + word + 2]);
        }
        rest = after;
    }
    None
}

/// Every statement the verbs keep a plan of stands alone: read whole from
/// `raquel_internal.rq_kept_statements()`, with no placeholder left, it
/// prepares and EXPLAINs on another connection. A user's trigger on jobs
/// sends the verbs to their statements.
#[test]
fn every_kept_statement_prepares_and_explains_on_its_own() {
    assert_eq!(placeholder_left("SELECT 1 WHERE payload @> '{}' -- a@b"), None);
    assert_eq!(placeholder_left("UPDATE @jobs@ j"), Some("@jobs@"));
    let db = fresh_db("rq_it_kept_statements");
    let mut c = connect(&db);
    c.batch_execute(NOTE_JOBS).unwrap();
    c.batch_execute(
        "SELECT rq_enqueue('q', g::text) FROM generate_series(1, 30) g; \
         SELECT rq_enqueue_batch('r', ARRAY['a', 'b', 'c']); \
         SELECT rq_enqueue('q', 'keyed', key => 'k'); \
         SELECT rq_complete(id, attempts) FROM rq_claim(ARRAY['q'], 'w'); \
         SELECT rq_fail(id, attempts, 'e') FROM rq_claim(ARRAY['q'], 'w', batch => 3); \
         SELECT rq_complete_batch(array_agg(id), array_agg(attempts)) FROM rq_claim(NULL, 'w', batch => 2); \
         SELECT count(*) FROM rq_claim(ARRAY['q', 'r'], 'w', batch => 2); \
         SELECT count(*) FROM rq_take(ARRAY['q'], 'w'); \
         SELECT count(*) FROM rq_take(ARRAY['q'], 'w', batch => 2, complete => true); \
         SELECT rq_step(id, attempts, 'one') FROM rq_claim(ARRAY['q'], 'w');",
    )
    .unwrap();
    let kept: Vec<(String, String, Vec<String>, String)> = c
        .query("SELECT function, statement, argument_types, sql FROM raquel_internal.rq_kept_statements()", &[])
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2), r.get(3)))
        .collect();
    let names: std::collections::BTreeSet<&str> = kept.iter().map(|k| k.1.as_str()).collect();
    for name in ["claim", "end", "complete_batch", "enqueue"] {
        assert!(names.contains(name), "no kept statement {name} among {names:?}");
    }
    let mut other = connect(&db);
    for (n, (function, statement, types, sql)) in kept.iter().enumerate() {
        assert_eq!(placeholder_left(sql), None, "{statement} of {function}:\n{sql}");
        assert!(!sql.trim_start().starts_with("--"), "{statement} of {function} starts with its file's header:\n{sql}");
        let (args, nulls) = if types.is_empty() {
            (String::new(), String::new())
        } else {
            (format!("({})", types.join(", ")), format!("({})", vec!["NULL"; types.len()].join(", ")))
        };
        other
            .batch_execute(&format!("PREPARE kept_{n}{args} AS {sql}"))
            .unwrap_or_else(|e| panic!("{statement} of {function} does not prepare: {e:?}\n{sql}"));
        let plan = other
            .query(&format!("EXPLAIN EXECUTE kept_{n}{nulls}"), &[])
            .unwrap_or_else(|e| panic!("{statement} of {function} does not EXPLAIN: {e:?}\n{sql}"));
        assert!(!plan.is_empty(), "{statement}: an empty plan");
    }
}
