//! Flow control inside rq_claim (issue 11), across real sessions claiming at
//! once: a paused queue is passed over by every kind of claim until it
//! resumes, and its resume wakes a waiting claim; max_claimed caps a queue's
//! claimed jobs and a freed slot wakes a waiting claim; a rate limit bounds
//! claims over time; groups take turns, so a small group is not starved by a
//! big one, and group_max_claimed = 1 runs each group's jobs one at a time,
//! in enqueue order, whether one queue or several are claimed from; rq_set_limits refuses bad arguments and changes nothing.
//!
//! Times here only tell a wake-up from a timeout and bound a rate; speed is
//! the benchmark's business.

use postgres::Client;
use raquel_client_tests::{connect, connect_as, eventually, fresh_db, sqlstate, wait_for_sleepers, wait_for_sleeping};
use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

/// How many of queue 'q''s jobs are claimed now.
const CLAIMED_Q: &str = "SELECT count(*) FROM jobs WHERE queue = 'q' AND status = 'claimed'";

fn enqueue(c: &mut Client, queue: &str, n: i64) {
    let made: i64 = c
        .query_one("SELECT count(rq_enqueue($1, i::text)) FROM generate_series(1, $2::bigint) i", &[&queue, &n])
        .unwrap()
        .get(0);
    assert_eq!(made, n);
}

fn count(c: &mut Client, condition: &str) -> i64 {
    c.query_one(&format!("SELECT count(*) FROM jobs WHERE {condition}"), &[]).unwrap().get(0)
}

/// The queue of each job a claim on `queues` (an SQL expression) returns.
fn claim_queues(c: &mut Client, queues: &str, batch: i32) -> Vec<String> {
    c.query(&format!("SELECT queue FROM rq_claim({queues}, batch => $1)"), &[&batch])
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect()
}

/// Runs a one-bigint `query` over and over on its own connection until
/// stopped, and gives back every value it saw.
struct Sampler {
    stop: Arc<AtomicBool>,
    handle: JoinHandle<BTreeSet<i64>>,
}

impl Sampler {
    fn start(db: &str, query: &'static str) -> Sampler {
        let stop = Arc::new(AtomicBool::new(false));
        let (db, stopped) = (db.to_string(), stop.clone());
        let handle = thread::spawn(move || {
            let mut c = connect(&db);
            let mut seen = BTreeSet::new();
            while !stopped.load(Ordering::Relaxed) {
                seen.insert(c.query_one(query, &[]).unwrap().get::<_, i64>(0));
            }
            seen
        });
        Sampler { stop, handle }
    }

    fn stop(self) -> BTreeSet<i64> {
        self.stop.store(true, Ordering::Relaxed);
        self.handle.join().expect("sampler panicked")
    }
}

/// One claim a worker made: the ticket it took right after the claim
/// returned, and the jobs it got as (id, group_key, payload).
struct Claim {
    ticket: u64,
    jobs: Vec<(String, Option<String>, String)>,
}

/// Runs `workers` threads on `queue` until it has no queued job left: each
/// claims up to `batch` jobs (autocommit), holds them for `hold(ticket)`,
/// completes them. Returns every claim that got jobs.
fn drain(db: &str, queue: &'static str, workers: usize, batch: i32, hold: fn(u64) -> Duration) -> Vec<Claim> {
    drain_claiming(db, queue, workers, batch, hold, |_| "ARRAY[$1::text]")
}

/// `drain`, worker n claiming from `queues(n)` (an SQL array of the
/// queue $1 and maybe others).
fn drain_claiming(
    db: &str,
    queue: &'static str,
    workers: usize,
    batch: i32,
    hold: fn(u64) -> Duration,
    queues: fn(usize) -> &'static str,
) -> Vec<Claim> {
    let tickets = Arc::new(AtomicU64::new(0));
    let handles: Vec<_> = (0..workers)
        .map(|n| {
            let (db, tickets) = (db.to_string(), tickets.clone());
            thread::spawn(move || {
                let mut c = connect(&db);
                let worker = format!("w{n}");
                let mut mine = Vec::new();
                loop {
                    let rows = c
                        .query(
                            &format!(
                                "SELECT id::text, group_key, payload, attempts \
                                 FROM rq_claim({}, worker => $2, batch => $3)",
                                queues(n)
                            ),
                            &[&queue, &worker, &batch],
                        )
                        .unwrap();
                    let ticket = tickets.fetch_add(1, Ordering::SeqCst);
                    if rows.is_empty() {
                        // nothing left, or the limit is reached: only the first ends the work
                        if count(&mut c, &format!("queue = '{queue}' AND status = 'queued'")) == 0 {
                            break;
                        }
                        thread::sleep(Duration::from_millis(1));
                        continue;
                    }
                    let jobs: Vec<(String, Option<String>, String)> =
                        rows.iter().map(|r| (r.get(0), r.get(1), r.get(2))).collect();
                    thread::sleep(hold(ticket));
                    let ids: Vec<&str> = jobs.iter().map(|j| j.0.as_str()).collect();
                    let attempts: Vec<i32> = rows.iter().map(|r| r.get(3)).collect();
                    let completed: i64 = c
                        .query_one("SELECT count(*) FROM rq_complete_batch($1::text[]::uuid[], $2)", &[&ids, &attempts])
                        .unwrap()
                        .get(0);
                    assert_eq!(completed as usize, ids.len());
                    mine.push(Claim { ticket, jobs });
                }
                mine
            })
        })
        .collect();
    handles.into_iter().flat_map(|h| h.join().expect("worker panicked")).collect()
}

fn assert_each_job_once(claims: &[Claim], expected: usize) {
    let ids: Vec<&String> = claims.iter().flat_map(|c| c.jobs.iter().map(|j| &j.0)).collect();
    let distinct: HashSet<&String> = ids.iter().copied().collect();
    assert_eq!(ids.len(), expected, "claims across all workers");
    assert_eq!(distinct.len(), expected, "no job handed out twice");
}

/// Starts a waiting claim on queue 'q' (wait 20 s) on its own connection; a
/// job it gets it completes at once. Yields the job's id and when it came.
fn waiting_claim(db: &str) -> JoinHandle<(Option<String>, Instant)> {
    let db = db.to_string();
    thread::spawn(move || {
        let mut c = connect(&db);
        let row = c.query_opt("SELECT id::text, attempts FROM rq_claim(ARRAY['q'], wait => '20 seconds')", &[]).unwrap();
        let got = Instant::now();
        let job: Option<(String, i32)> = row.map(|r| (r.get(0), r.get(1)));
        if let Some((id, attempt)) = &job {
            c.batch_execute(&format!("SELECT rq_complete('{id}', {attempt})")).unwrap();
        }
        (job.map(|(id, _)| id), got)
    })
}

#[test]
fn a_paused_queue_is_not_claimed_until_it_resumes() {
    let db = fresh_db("flow_pause");
    let mut c = connect(&db);
    // paused before it has any job, and twice: no error, still paused
    for _ in 0..2 {
        assert!(c.query_one("SELECT paused FROM rq_pause('q')", &[]).unwrap().get::<_, bool>(0));
    }
    // enqueueing still works; q's jobs are the older ones, so only the pause
    // makes a claim pass them by
    enqueue(&mut c, "q", 3);
    enqueue(&mut c, "other", 2);
    assert_eq!(count(&mut c, "queue = 'q' AND status = 'queued'"), 3);

    assert_eq!(claim_queues(&mut c, "ARRAY['q']", 10), Vec::<String>::new(), "the paused queue alone");
    assert_eq!(claim_queues(&mut c, "ARRAY['q', 'other']", 1), ["other"], "several queues");
    assert_eq!(claim_queues(&mut c, "NULL", 1), ["other"], "any queue");
    assert_eq!(claim_queues(&mut c, "ARRAY['q', 'other']", 10), Vec::<String>::new());
    assert_eq!(claim_queues(&mut c, "NULL", 10), Vec::<String>::new());
    assert_eq!(count(&mut c, "queue = 'q' AND status = 'queued'"), 3, "the paused queue's jobs wait");

    for _ in 0..2 {
        assert!(!c.query_one("SELECT paused FROM rq_resume('q')", &[]).unwrap().get::<_, bool>(0));
    }
    assert_eq!(claim_queues(&mut c, "ARRAY['q']", 10), ["q", "q", "q"], "resumed: its jobs are claimed");
}

#[test]
fn resuming_wakes_a_claim_waiting_on_the_paused_queue() {
    let db = fresh_db("flow_resume_wakes");
    let mut c = connect(&db);
    c.batch_execute("SELECT rq_pause('q')").unwrap();
    let id: String = c.query_one("SELECT id::text FROM rq_enqueue('q', 'x')", &[]).unwrap().get(0);
    let started = Instant::now();
    let waiter = waiting_claim(&db);
    wait_for_sleepers(&db, 1);
    // the job is ready but its queue is paused: the claim keeps waiting
    thread::sleep(Duration::from_millis(500));
    assert!(!waiter.is_finished(), "a waiting claim took a paused queue's job");
    c.batch_execute("SELECT rq_resume('q')").unwrap();
    let (got, at) = waiter.join().unwrap();
    assert_eq!(got, Some(id));
    let took = at.duration_since(started);
    assert!(took < Duration::from_secs(5), "woken by the resume, not at the end of its wait ({took:?})");
}

#[test]
fn max_claimed_holds_across_eight_sessions() {
    let db = fresh_db("flow_max_claimed");
    let mut c = connect(&db);
    c.batch_execute("SELECT rq_set_limits('q', max_claimed => 3)").unwrap();
    enqueue(&mut c, "q", 400);
    let sampler = Sampler::start(&db, CLAIMED_Q);
    let claims = drain(&db, "q", 8, 1, |_| Duration::from_millis(2));
    let seen = sampler.stop();
    assert!(seen.iter().all(|&n| n <= 3), "at most 3 claimed at once, saw {seen:?}");
    assert!(seen.contains(&3), "eight workers reached the limit, saw {seen:?}");
    assert_each_job_once(&claims, 400);
    assert_eq!(count(&mut c, "queue = 'q' AND status = 'success' AND attempts = 1"), 400);
}

#[test]
fn max_claimed_cuts_batch_claims_short() {
    let db = fresh_db("flow_max_claimed_batch");
    let mut c = connect(&db);
    c.batch_execute("SELECT rq_set_limits('q', max_claimed => 3)").unwrap();
    enqueue(&mut c, "q", 200);
    let sampler = Sampler::start(&db, CLAIMED_Q);
    let claims = drain(&db, "q", 8, 5, |_| Duration::from_millis(2));
    let seen = sampler.stop();
    let sizes: BTreeSet<usize> = claims.iter().map(|c| c.jobs.len()).collect();
    assert!(sizes.iter().all(|&n| n <= 3), "a batch of 5 takes at most the 3 slots, got sizes {sizes:?}");
    assert!(seen.iter().all(|&n| n <= 3), "at most 3 claimed at once, saw {seen:?}");
    assert_each_job_once(&claims, 200);
    assert_eq!(count(&mut c, "queue = 'q' AND status = 'success' AND attempts = 1"), 200);
}

#[test]
fn a_rate_limit_bounds_claims_over_ten_seconds() {
    let db = fresh_db("flow_rate");
    let mut c = connect(&db);
    c.batch_execute("SELECT rq_set_limits('r', rate => 50, per => '1 second')").unwrap();
    enqueue(&mut c, "r", 2000);
    // the bucket's clock is the server's: the window is measured on it
    let server_now = |c: &mut Client| -> i64 { c.query_one("SELECT rq_now_ms()", &[]).unwrap().get(0) };
    let server_started = server_now(&mut c);
    let started = Instant::now();
    let workers: Vec<_> = (0..4)
        .map(|n| {
            let db = db.clone();
            thread::spawn(move || {
                let mut c = connect(&db);
                let batch: i32 = if n % 2 == 0 { 1 } else { 10 };
                while started.elapsed() < Duration::from_secs(10) {
                    let (ids, attempts): (Vec<String>, Vec<i32>) = c
                        .query("SELECT id::text, attempts FROM rq_claim(ARRAY['r'], batch => $1)", &[&batch])
                        .unwrap()
                        .iter()
                        .map(|r| (r.get::<_, String>(0), r.get::<_, i32>(1)))
                        .unzip();
                    if !ids.is_empty() {
                        c.query_one("SELECT count(*) FROM rq_complete_batch($1::text[]::uuid[], $2)", &[&ids, &attempts]).unwrap();
                    }
                }
            })
        })
        .collect();
    for w in workers {
        w.join().expect("worker panicked");
    }
    // Every claim happened within `window`: a full bucket plus the refill
    // over the window, 550 for exactly 10 s (a claim that ends a few ms late
    // may earn one more token, hence the measured window, on the server's
    // clock, which the bucket's refill follows).
    let window = Duration::from_millis((server_now(&mut c) - server_started).max(0) as u64);
    let bound = 50 + (50.0 * window.as_secs_f64()) as i64;
    let taken = count(&mut c, "queue = 'r' AND status <> 'queued'");
    assert!(taken <= bound, "{taken} claimed in {window:?}, at most {bound} allowed");
    assert!(taken >= 400, "only {taken} claimed in {window:?}: the rate was not reached");
}

#[test]
fn a_small_group_is_not_starved_by_a_large_backlog_of_another() {
    let db = fresh_db("flow_fair");
    let mut c = connect(&db);
    // A plain INSERT takes its turns too. The point is that B's turns do not
    // depend on how many A has queued: 100,000 in CI (a claim that read A's
    // jobs in order would already miss every B), RAQUEL_FLOW_JOBS=1000000
    // for a release (docs/src/contributing.md).
    let a_jobs: i64 = std::env::var("RAQUEL_FLOW_JOBS").ok().and_then(|n| n.parse().ok()).unwrap_or(100_000);
    c.execute(
        "INSERT INTO jobs (queue, payload, group_key) \
         SELECT 'fair', i::text, 'A' FROM generate_series(1, $1::bigint) i",
        &[&a_jobs],
    )
    .unwrap();
    c.batch_execute("SELECT rq_enqueue('fair', 'b' || i, group_key => 'B') FROM generate_series(1, 10) i")
        .unwrap();
    let groups: Vec<String> = (0..20)
        .map(|_| c.query_one("SELECT group_key FROM rq_claim(ARRAY['fair'])", &[]).unwrap().get(0))
        .collect();
    assert_eq!(groups.iter().filter(|g| *g == "B").count(), 10, "B's jobs take turns with A's: {groups:?}");
}

#[test]
fn ungrouped_jobs_go_before_grouped_ones_of_the_same_priority() {
    let db = fresh_db("flow_ungrouped");
    let mut c = connect(&db);
    c.batch_execute("SELECT rq_enqueue_batch('mix', ARRAY['a1', 'a2'], group_keys => ARRAY['A', 'A'])").unwrap();
    c.batch_execute("SELECT rq_enqueue('mix', 'plain')").unwrap();
    let first: String = c.query_one("SELECT payload FROM rq_claim(ARRAY['mix'])", &[]).unwrap().get(0);
    assert_eq!(first, "plain", "the younger ungrouped job goes first");
}

#[test]
fn group_max_claimed_one_runs_each_groups_jobs_one_at_a_time_in_order() {
    let db = fresh_db("flow_group_serial");
    let mut c = connect(&db);
    c.batch_execute("SELECT rq_set_limits('g', group_max_claimed => 1)").unwrap();
    // Interleaved across groups, through each way in: rq_enqueue,
    // rq_enqueue_batch's group_keys, and a plain INSERT.
    for seq in 0..30 {
        c.batch_execute(&format!(
            "SELECT rq_enqueue('g', 'g0:{seq}', group_key => 'g0'); \
             SELECT rq_enqueue('g', 'g1:{seq}', group_key => 'g1'); \
             SELECT rq_enqueue_batch('g', ARRAY['g2:{seq}', 'g3:{seq}'], group_keys => ARRAY['g2', 'g3']); \
             INSERT INTO jobs (queue, payload, group_key) VALUES ('g', 'g4:{seq}', 'g4')"
        ))
        .unwrap();
    }
    let sampler = Sampler::start(
        &db,
        "SELECT coalesce(max(n), 0) FROM (SELECT count(*) n FROM jobs \
         WHERE queue = 'g' AND status = 'claimed' GROUP BY group_key) s",
    );
    let claims = drain(&db, "g", 6, 1, |ticket| Duration::from_millis(1 + ticket % 3));
    let seen = sampler.stop();
    assert!(seen.iter().all(|&n| n <= 1), "at most one claimed job per group, saw {seen:?}");
    assert_each_job_once(&claims, 150);

    // A group's next job is claimed only after its last one completed, so
    // the tickets order each group's claims.
    let mut runs: HashMap<String, Vec<(u64, u32)>> = HashMap::new();
    for claim in &claims {
        for (_, group, payload) in &claim.jobs {
            let (g, seq) = payload.split_once(':').unwrap();
            assert_eq!(group.as_deref(), Some(g), "{payload}'s group");
            runs.entry(g.to_string()).or_default().push((claim.ticket, seq.parse().unwrap()));
        }
    }
    assert_eq!(runs.len(), 5);
    for (group, mut run) in runs {
        run.sort();
        let order: Vec<u32> = run.iter().map(|r| r.1).collect();
        assert_eq!(order, (0..30).collect::<Vec<u32>>(), "group {group} ran in enqueue order");
    }
}

/// A claim of the grouped queue alone takes its groups' jobs in Rust
/// (src/fair.rs: directly, or with raquel.direct_writes off by its
/// statements), a claim of it and other queues in PL/pgSQL
/// (rq_claim_fair): side by side, batches and all, they keep every group
/// at its limit, and hand out each job once.
#[test]
fn group_max_claimed_holds_between_claims_of_one_queue_and_of_several() {
    for direct in ["on", "off"] {
        claims_of_one_queue_and_of_several_keep_group_max_claimed(direct);
    }
}

fn claims_of_one_queue_and_of_several_keep_group_max_claimed(direct: &str) {
    let db = fresh_db(&format!("flow_group_mixed_{direct}"));
    let mut c = connect(&db);
    c.batch_execute(&format!("ALTER DATABASE {db} SET raquel.direct_writes = {direct}")).unwrap();
    c.batch_execute(
        "SELECT rq_set_limits('m', group_max_claimed => 2); \
         SELECT rq_enqueue_batch('m', array_agg(i::text), group_keys => array_agg('g' || i % 7)) \
         FROM generate_series(1, 210) i",
    )
    .unwrap();
    let sampler = Sampler::start(
        &db,
        "SELECT coalesce(max(n), 0) FROM (SELECT count(*) n FROM jobs \
         WHERE queue = 'm' AND status = 'claimed' GROUP BY group_key) s",
    );
    let claims = drain_claiming(&db, "m", 6, 3, |ticket| Duration::from_millis(1 + ticket % 3), |n| {
        if n % 2 == 0 { "ARRAY[$1::text]" } else { "ARRAY[$1::text, 'elsewhere']" }
    });
    let seen = sampler.stop();
    assert!(seen.iter().all(|&n| n <= 2), "direct_writes {direct}: at most two claimed jobs per group, saw {seen:?}");
    assert!(seen.contains(&2), "direct_writes {direct}: the limit was reached: {seen:?}");
    assert_each_job_once(&claims, 210);
    assert!(claims.iter().any(|c| c.jobs.len() > 1), "some claim took a batch");
}

/// A claim under group_max_claimed locks only the groups of due jobs it
/// considers: a group whose next job is scheduled for later stays free for
/// the claims that come when it is due.
#[test]
fn a_claim_under_group_max_claimed_locks_no_group_of_a_job_not_due() {
    let db = fresh_db("flow_group_not_due");
    let mut c = connect(&db);
    c.batch_execute(
        "SELECT rq_set_limits('nd', group_max_claimed => 1); \
         SELECT rq_enqueue('nd', 'later', group_key => 'A', delay => '1 hour', priority => 5); \
         SELECT rq_enqueue('nd', 'now', group_key => 'B')",
    )
    .unwrap();
    for direct in ["on", "off"] {
        c.batch_execute(&format!("SET raquel.direct_writes = {direct}; BEGIN")).unwrap();
        let got: Vec<String> =
            c.query("SELECT payload FROM rq_claim(ARRAY['nd'])", &[]).unwrap().iter().map(|r| r.get(0)).collect();
        let locks: i64 = c
            .query_one("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid()", &[])
            .unwrap()
            .get(0);
        c.batch_execute("ROLLBACK").unwrap();
        assert_eq!(got, ["now"], "direct_writes {direct}");
        assert_eq!(locks, 1, "direct_writes {direct}: only the due job's group is locked");
    }
}

/// A claim under group_max_claimed that passes over a large group at its
/// limit reads at most 1,000 of the queue's grouped jobs a walk (its index
/// entries, as pg_stat_user_indexes counts them), directly or by its
/// statements, rather than every job of the group.
#[test]
fn a_claim_passing_a_large_group_at_its_limit_reads_a_bounded_walk() {
    let db = fresh_db("flow_group_walk");
    let mut c = connect(&db);
    c.batch_execute(
        "SELECT rq_set_limits('big', group_max_claimed => 1); \
         INSERT INTO jobs (queue, payload, group_key) SELECT 'big', i::text, 'A' FROM generate_series(1, 5000) i",
    )
    .unwrap();
    assert_eq!(claim_queues(&mut c, "ARRAY['big']", 1).len(), 1, "the group's first job");
    let entries_read = |c: &mut Client| -> i64 {
        c.batch_execute("SELECT pg_stat_force_next_flush()").unwrap();
        c.batch_execute("SELECT 1").unwrap();
        c.batch_execute("SELECT pg_stat_clear_snapshot()").unwrap();
        c.query_one("SELECT idx_tup_read FROM pg_stat_user_indexes WHERE indexrelname = 'jobs_ready_fair_idx'", &[])
            .unwrap()
            .get(0)
    };
    for direct in ["on", "off"] {
        c.batch_execute(&format!("SET raquel.direct_writes = {direct}")).unwrap();
        let before = entries_read(&mut c);
        assert_eq!(claim_queues(&mut c, "ARRAY['big']", 1).len(), 0, "direct_writes {direct}: the group is at its limit");
        let read = entries_read(&mut c) - before;
        assert!(read <= 1100, "direct_writes {direct}: the claim read {read} entries of the fair index");
    }
}

/// A waiting claim whose groups are all at their limit sleeps without
/// their locks: a claim of another session may take a group's next job the
/// moment its claimed one ends.
#[test]
fn a_waiting_claim_sleeps_without_its_groups_locks() {
    let db = fresh_db("flow_group_wait");
    let mut c = connect(&db);
    c.batch_execute(
        "SELECT rq_set_limits('w', group_max_claimed => 1); \
         SELECT rq_enqueue_batch('w', ARRAY['a1', 'a2', 'b1', 'b2'], group_keys => ARRAY['A', 'A', 'B', 'B'])",
    )
    .unwrap();
    let held: Vec<(String, i32)> = c
        .query("SELECT id::text, attempts FROM rq_claim(ARRAY['w'], batch => 4)", &[])
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    assert_eq!(held.len(), 2, "one job of each group");
    let waiter = {
        let db = db.clone();
        thread::spawn(move || {
            let mut w = connect(&db);
            w.query("SELECT id FROM rq_claim(ARRAY['w'], worker => 'waiter', wait => '3 seconds')", &[]).unwrap().len()
        })
    };
    wait_for_sleepers(&db, 1);
    // This database's advisory locks but this session's: the claim's, and
    // a housekeeping visit's for a moment (seen once on 16, where the whole
    // server's were counted). A claim that slept holding its group's lock
    // would hold it for the whole of its 3 s wait.
    let no_group_lock = eventually(2, || {
        let locks: i64 = c
            .query_one(
                "SELECT count(*) FROM pg_locks l WHERE l.locktype = 'advisory' AND l.pid <> pg_backend_pid()
                   AND l.database = (SELECT d.oid FROM pg_database d WHERE d.datname = current_database())",
                &[],
            )
            .unwrap()
            .get(0);
        locks == 0
    });
    assert!(no_group_lock, "the sleeping claim holds no group's lock");
    c.execute("SELECT rq_complete($1::text::uuid, $2)", &[&held[0].0, &held[0].1]).unwrap();
    assert_eq!(waiter.join().unwrap(), 1, "the waiting claim took the freed group's next job");
}

#[test]
fn a_freed_slot_wakes_the_waiting_claims_one_after_another() {
    let db = fresh_db("flow_slot_wakes");
    let mut c = connect(&db);
    c.batch_execute("SELECT rq_set_limits('q', max_claimed => 1)").unwrap();
    c.batch_execute("SELECT rq_enqueue('q', 'held')").unwrap();
    let row = c.query_one("SELECT id::text, attempts FROM rq_claim(ARRAY['q'])", &[]).unwrap();
    let (held, held_attempt): (String, i32) = (row.get(0), row.get(1));
    let sampler = Sampler::start(&db, CLAIMED_Q);
    let waiters: Vec<_> = (0..3).map(|_| waiting_claim(&db)).collect();
    wait_for_sleepers(&db, 3);
    // Jobs come, but the only slot is held: the waiters take nothing and
    // sleep on. Then each freed slot must reach a waiter: the held job's
    // completion the first, each waiter's own completion the next.
    c.batch_execute("SELECT rq_enqueue_batch('q', ARRAY['a', 'b', 'c'])").unwrap();
    thread::sleep(Duration::from_millis(300));
    assert!(waiters.iter().all(|w| !w.is_finished()), "a waiting claim went past max_claimed");
    wait_for_sleepers(&db, 3);
    let freed = Instant::now();
    c.batch_execute(&format!("SELECT rq_complete('{held}', {held_attempt})")).unwrap();
    let results: Vec<_> = waiters.into_iter().map(|w| w.join().unwrap()).collect();
    let seen = sampler.stop();

    let ids: HashSet<&String> = results.iter().filter_map(|(id, _)| id.as_ref()).collect();
    assert_eq!(ids.len(), 3, "each waiter got a job of its own: {results:?}");
    assert!(!ids.contains(&held));
    for (_, at) in &results {
        let took = at.duration_since(freed);
        assert!(took < Duration::from_secs(10), "a waiter was not woken by a freed slot ({took:?})");
    }
    assert!(seen.iter().all(|&n| n <= 1), "one claimed at a time, saw {seen:?}");
    assert_eq!(count(&mut c, "status = 'success' AND attempts = 1"), 4, "nothing claimed twice");
}

#[test]
fn a_batch_under_max_claimed_takes_the_highest_priorities() {
    let db = fresh_db("flow_priorities");
    let mut c = connect(&db);
    c.batch_execute("SELECT rq_set_limits('q', max_claimed => 2)").unwrap();
    // the low priority's jobs are older: only their priority puts them last
    c.batch_execute("SELECT rq_enqueue_batch('q', ARRAY['l1', 'l2', 'l3'], priority => 0)").unwrap();
    c.batch_execute("SELECT rq_enqueue_batch('q', ARRAY['h1', 'h2', 'h3'], priority => 5)").unwrap();
    let priorities: Vec<i32> = c
        .query("SELECT priority FROM rq_claim(ARRAY['q'], batch => 10)", &[])
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(priorities, [5, 5]);
}

#[test]
fn bad_limits_are_refused_and_change_nothing() {
    let db = fresh_db("flow_bad_limits");
    let mut c = connect(&db);
    let row = c
        .query_one(
            "SELECT max_claimed, rate, group_max_claimed, paused FROM rq_set_limits('q', \
             max_claimed => 5, rate => 10, per => '2 seconds', group_max_claimed => 2)",
            &[],
        )
        .unwrap();
    let limits: (Option<i32>, Option<i32>, Option<i32>, bool) = (row.get(0), row.get(1), row.get(2), row.get(3));
    assert_eq!(limits, (Some(5), Some(10), Some(2), false));
    c.batch_execute("SELECT rq_pause('p')").unwrap();

    let table = |c: &mut Client| -> Vec<String> {
        c.query("SELECT queue_limits::text FROM queue_limits ORDER BY queue", &[])
            .unwrap()
            .iter()
            .map(|r| r.get(0))
            .collect()
    };
    let before = table(&mut c);
    for args in [
        "'q', max_claimed => 0",
        "'q', max_claimed => -1",
        "'q', rate => 0",
        "'q', rate => 10, per => '0'",
        "'q', rate => 10, per => '-1 second'",
        "'q', group_max_claimed => 0",
        "NULL::text, max_claimed => 3",
        "'', max_claimed => 3",
        "'p', max_claimed => 0",
        "'new', rate => -5",
    ] {
        assert_eq!(sqlstate(c.batch_execute(&format!("SELECT rq_set_limits({args})"))), "22023", "rq_set_limits({args})");
        assert_eq!(table(&mut c), before, "rq_set_limits({args}) changed queue_limits");
    }

    // NULL removes a limit; setting limits does not resume a paused queue
    let row = c.query_one("SELECT max_claimed, rate, group_max_claimed FROM rq_set_limits('q', rate => 7)", &[]).unwrap();
    let limits: (Option<i32>, Option<i32>, Option<i32>) = (row.get(0), row.get(1), row.get(2));
    assert_eq!(limits, (None, Some(7), None));
    assert!(c.query_one("SELECT paused FROM rq_set_limits('p', max_claimed => 2)", &[]).unwrap().get::<_, bool>(0));
}

#[test]
fn claims_on_several_limited_queues_never_deadlock() {
    // Each claim takes the queues' turns in a random order; their row locks
    // are taken in name order, so sessions claiming both queues, each
    // holding its locks until it completes the job, never wait in a circle
    // (a deadlock would be error 40P01). Queue d (a name longer than a
    // slot's) and e keep their limits in their rows, which are locked up
    // front.
    let db = fresh_db("flow_no_deadlock");
    let mut c = connect(&db);
    c.batch_execute(
        "SELECT rq_set_limits('a', max_claimed => 100); SELECT rq_set_limits('b', rate => 1000000);
         SELECT rq_set_limits('c', max_claimed => 100, group_max_claimed => 2);
         SELECT rq_set_limits(repeat('d', 70), max_claimed => 100);
         SELECT rq_set_limits(repeat('e', 70), rate => 1000000)",
    )
    .unwrap();
    enqueue(&mut c, &"d".repeat(70), 100);
    enqueue(&mut c, &"e".repeat(70), 100);
    enqueue(&mut c, "a", 600);
    enqueue(&mut c, "b", 600);
    c.batch_execute("SELECT rq_enqueue_batch('c', array_agg(i::text), group_keys => array_agg('g' || i % 5)) FROM generate_series(1, 600) i")
        .unwrap();
    let workers: Vec<_> = (0..4)
        .map(|n| {
            let db = db.clone();
            thread::spawn(move || {
                let mut c = connect(&db);
                let queues = [
                    "ARRAY['a', 'b', 'c', repeat('d', 70)]",
                    "ARRAY[repeat('e', 70), repeat('d', 70), 'c', 'b', 'a']",
                    "NULL",
                    "ARRAY['b', repeat('e', 70), 'a']",
                ][n];
                let mut done = 0;
                loop {
                    let mut t = c.transaction().unwrap();
                    let jobs: Vec<(String, i32)> = t
                        .query(&format!("SELECT id::text, attempts FROM rq_claim({queues}, 'w{n}', 1)"), &[])
                        .unwrap_or_else(|e| panic!("worker {n}: {e}"))
                        .iter()
                        .map(|r| (r.get(0), r.get(1)))
                        .collect();
                    if jobs.is_empty() {
                        t.commit().unwrap();
                        break done;
                    }
                    for (id, attempt) in &jobs {
                        // the work, holding the claim's locks
                        t.execute(&format!("SELECT pg_sleep(0.0005), rq_complete('{id}', {attempt})"), &[])
                            .unwrap_or_else(|e| panic!("worker {n}: {e}"));
                    }
                    t.commit().unwrap();
                    done += jobs.len();
                }
            })
        })
        .collect();
    let handled: usize = workers.into_iter().map(|w| w.join().expect("a worker failed")).sum();
    assert_eq!(handled, 2000, "every job handled once");
    assert_eq!(count(&mut c, "status = 'success' AND attempts = 1"), 2000);
}

/// A queue whose limits cannot be kept in shared memory (here a name longer
/// than a slot's) keeps their state in its queue_limits row, which each
/// claim locks, reads and writes (src/claim/flow_claim.rs): its max_claimed
/// and rate hold for claims of it alone and of several queues, it counts as
/// such in rq_claim_slot_counts, and a claim of it waits for a session
/// that holds its row.
#[test]
fn limits_kept_in_a_queues_row_hold_for_claims_of_one_queue_and_of_several() {
    let db = fresh_db("flow_kept_in_row");
    let mut c = connect(&db);
    let (limited, rated) = ("l".repeat(70), "r".repeat(70));
    c.execute("SELECT rq_set_limits($1, max_claimed => 2)", &[&limited]).unwrap();
    c.execute("SELECT rq_set_limits($1, rate => 3, per => '1 hour')", &[&rated]).unwrap();
    enqueue(&mut c, &limited, 6);
    enqueue(&mut c, &rated, 6);
    enqueue(&mut c, "plain", 6);
    let from_rows = |c: &mut Client| -> i64 {
        c.query_one("SELECT claims_from_rows FROM raquel_internal.rq_claim_slot_counts()", &[]).unwrap().get(0)
    };
    let before = from_rows(&mut c);
    let claim = |c: &mut Client, queues: &[&str]| -> Vec<(String, String, i32)> {
        let queues: Vec<String> = queues.iter().map(|q| q.to_string()).collect();
        c.query("SELECT id::text, queue, attempts FROM rq_claim($1::text[], 'w', 10)", &[&queues])
            .unwrap()
            .iter()
            .map(|r| (r.get(0), r.get(1), r.get(2)))
            .collect()
    };
    let of = |jobs: &[(String, String, i32)], queue: &str| jobs.iter().filter(|j| j.1 == queue).count();
    let first = claim(&mut c, &[&limited]);
    assert_eq!(of(&first, &limited), 2, "max_claimed 2");
    assert!(from_rows(&mut c) > before, "the claim kept its count in the row");
    let listed: i64 = c
        .query_one("SELECT cardinality(claimed)::bigint FROM queue_limits WHERE queue = $1", &[&limited])
        .unwrap()
        .get(0);
    assert_eq!(listed, 2, "the row lists the jobs claimed under max_claimed");
    let second = claim(&mut c, &[&limited, "plain", &rated]);
    assert_eq!((of(&second, &limited), of(&second, "plain"), of(&second, &rated)), (0, 6, 3), "full; the rate's 3 tokens");
    c.execute("SELECT rq_complete($1::text::uuid, $2)", &[&first[0].0, &first[0].2]).unwrap();
    let third = claim(&mut c, &[&rated, &limited]);
    assert_eq!((of(&third, &limited), of(&third, &rated)), (1, 0), "the completed job's place; no token left");
    assert_eq!(count(&mut c, &format!("queue = '{limited}' AND status = 'claimed'")), 2);

    // a claim of the queue, of it alone or among others, takes its row's lock
    let mut holder = connect(&db);
    holder.execute("BEGIN", &[]).unwrap();
    holder.execute("SELECT FROM queue_limits WHERE queue = $1 FOR UPDATE", &[&limited]).unwrap();
    c.batch_execute("SET lock_timeout = '200ms'").unwrap();
    for queues in [vec![limited.clone()], vec!["plain".to_string(), limited.clone()]] {
        let claimed = c.query("SELECT id FROM rq_claim($1::text[], 'w', 10)", &[&queues]);
        assert_eq!(sqlstate(claimed), "55P03", "{queues:?} waited for the row's lock");
    }
    holder.execute("ROLLBACK", &[]).unwrap();
}

/// The first claim of a queue with max_claimed makes its slot by reading
/// the claimed jobs from the table with a snapshot taken then, in
/// REPEATABLE READ too, and counts in it: a claim in READ COMMITTED while
/// that first claim is open finds the queue full and waits for it, rather
/// than counting apart from it and passing the limit.
#[test]
fn a_first_claim_in_repeatable_read_counts_where_the_others_do() {
    let db = fresh_db("flow_first_claim_rr");
    let mut c = connect(&db);
    c.batch_execute("SELECT rq_set_limits('q', max_claimed => 2)").unwrap();
    enqueue(&mut c, "q", 6);
    // claimed by hand before any claim of raquel's: the slot reads it
    c.batch_execute(
        "UPDATE jobs SET status = 'claimed', attempts = 1, claimed_at = rq_now_ms(), lease_expires_at = rq_now_ms() + 60000
         WHERE id = (SELECT id FROM jobs WHERE queue = 'q' ORDER BY id LIMIT 1)",
    )
    .unwrap();
    let mut first = connect(&db);
    first.batch_execute("BEGIN ISOLATION LEVEL REPEATABLE READ").unwrap();
    let got = first.query("SELECT id FROM rq_claim(ARRAY['q'], 'rr', 10)", &[]).unwrap().len();
    assert_eq!(got, 1, "one place left beside the job claimed by hand");
    let db2 = db.clone();
    let other = thread::spawn(move || {
        let mut c = connect(&db2);
        c.query("SELECT id FROM rq_claim(ARRAY['q'], 'rc', 10)", &[]).unwrap().len()
    });
    thread::sleep(Duration::from_millis(300));
    assert_eq!(c.query_one(CLAIMED_Q, &[]).unwrap().get::<_, i64>(0), 1, "the other claim waits");
    first.batch_execute("COMMIT").unwrap();
    assert_eq!(other.join().unwrap(), 0, "the queue is full");
    assert_eq!(c.query_one(CLAIMED_Q, &[]).unwrap().get::<_, i64>(0), 2);
}

/// A rate's tokens are in shared memory (src/rate_buckets.rs): a claim of a
/// queue with only a rate locks no row of queue_limits, so a session holding
/// that row does not hold it up; a claim that rolls back has used its tokens
/// (the safe side of the limit); two databases with a queue of the same name
/// each have their own bucket.
#[test]
fn a_rates_tokens_lock_no_row_and_are_each_databases_own() {
    let dbs = [fresh_db("rq_it_rate_a"), fresh_db("rq_it_rate_b")];
    for db in &dbs {
        let mut c = connect(db);
        c.batch_execute("SELECT rq_set_limits('r', rate => 3, per => '1 hour')").unwrap();
        enqueue(&mut c, "r", 10);
    }
    let mut a = connect(&dbs[0]);
    let mut holder = connect(&dbs[0]);
    holder.batch_execute("BEGIN; SELECT * FROM queue_limits WHERE queue = 'r' FOR UPDATE").unwrap();
    a.batch_execute("SET lock_timeout = '5s'; BEGIN; SELECT * FROM rq_claim(ARRAY['r']); ROLLBACK").unwrap();
    assert_eq!(claim_queues(&mut a, "ARRAY['r']", 10).len(), 2, "3 tokens, one used by the claim rolled back");
    assert_eq!(claim_queues(&mut a, "ARRAY['r']", 10).len(), 0, "the bucket is empty");
    holder.batch_execute("ROLLBACK").unwrap();
    let mut b = connect(&dbs[1]);
    assert_eq!(claim_queues(&mut b, "ARRAY['r']", 10).len(), 3, "the other database's queue has its own bucket");
    // (server-wide counts: other tests' claims may add to them)
    let shared: i64 = a.query_one("SELECT claims_shared FROM raquel_internal.rq_rate_bucket_counts()", &[]).unwrap().get(0);
    assert!(shared >= 4, "{shared} claims took tokens from a bucket");
}

/// A claim waiting for a place of a full queue whose holder waits for a
/// row the claim's transaction locked: after deadlock_timeout in the
/// queue's line, the claim waits on the holder's transaction, where the
/// deadlock detector finds the circle and ends one of the two (40P01);
/// the other goes on.
#[test]
fn a_claim_waiting_for_a_place_in_a_deadlock_is_found_by_the_detector() {
    let db = fresh_db("flow_place_deadlock");
    let mut c = connect(&db);
    c.batch_execute(
        "SELECT rq_set_limits('d', max_claimed => 1); \
         CREATE TABLE side (n integer PRIMARY KEY); INSERT INTO side VALUES (1)",
    )
    .unwrap();
    enqueue(&mut c, "d", 3);
    let mut holder = connect(&db);
    // (a claim that waited on for ever would end here, and fail the test)
    holder.batch_execute("SET statement_timeout = '15s'; BEGIN; SELECT * FROM rq_claim(ARRAY['d'])").unwrap();
    let waiter = {
        let db = db.clone();
        thread::spawn(move || {
            let mut w = connect(&db);
            w.batch_execute("SET statement_timeout = '15s'; BEGIN; UPDATE side SET n = n WHERE n = 1").unwrap();
            let got = w.query("SELECT id FROM rq_claim(ARRAY['d'])", &[]).map(|rows| rows.len());
            let _ = w.batch_execute("ROLLBACK");
            got
        })
    };
    wait_for_sleeping(&db, "%rq_claim(ARRAY['d'])%", 1, "the claim waiting for a place");
    let started = Instant::now();
    let held = holder.batch_execute("UPDATE side SET n = n WHERE n = 1");
    let waited = waiter.join().unwrap();
    let codes = [sqlstate(held), sqlstate(waited)];
    assert!(
        codes.contains(&"40P01".to_string()) && codes.contains(&"00000".to_string()),
        "one of the two ended by the deadlock detector: {codes:?}"
    );
    assert!(started.elapsed() < Duration::from_secs(20), "found in {:?}", started.elapsed());
    let _ = holder.batch_execute("ROLLBACK");
}

/// The places claimed under max_claimed are in shared memory
/// (src/claim_slots.rs): a claim of such a queue locks no row of
/// queue_limits, so a session holding that row does not hold it up; a claim
/// that rolls back, and a job finished by a plain UPDATE (as the Python
/// library finishes one), free their places; jobs claimed by a plain UPDATE
/// take places within a second (the list is read again from the table); two
/// databases with a queue of the same name each have their own places.
#[test]
fn max_claimed_places_lock_no_row_and_follow_the_table() {
    let dbs = [fresh_db("rq_it_places_a"), fresh_db("rq_it_places_b")];
    for db in &dbs {
        let mut c = connect(db);
        c.batch_execute("SELECT rq_set_limits('q', max_claimed => 2)").unwrap();
        enqueue(&mut c, "q", 10);
    }
    let claim = |c: &mut Client| -> Vec<String> {
        c.query("SELECT id::text FROM rq_claim(ARRAY['q'], batch => 10)", &[]).unwrap().iter().map(|r| r.get(0)).collect()
    };
    let mut a = connect(&dbs[0]);
    let mut holder = connect(&dbs[0]);
    holder.batch_execute("BEGIN; SELECT * FROM queue_limits WHERE queue = 'q' FOR UPDATE").unwrap();
    a.batch_execute("SET lock_timeout = '5s'; BEGIN; SELECT * FROM rq_claim(ARRAY['q'], batch => 2); ROLLBACK").unwrap();
    let first = claim(&mut a);
    assert_eq!(first.len(), 2, "the places of the claim rolled back are free");
    assert_eq!(claim(&mut a).len(), 0, "the queue is full");
    holder.batch_execute("ROLLBACK").unwrap();
    let mut b = connect(&dbs[1]);
    assert_eq!(claim(&mut b).len(), 2, "the other database's queue has its own places");
    a.execute("UPDATE jobs SET status = 'success', finished_at = rq_now_ms() WHERE id = $1::text::uuid", &[&first[0]])
        .unwrap();
    let second = claim(&mut a);
    assert_eq!(second.len(), 1, "the job finished by a plain UPDATE freed its place");
    a.execute("SELECT rq_complete(id, attempts) FROM jobs WHERE id = ANY ($1::text[]::uuid[])", &[&vec![first[1].clone(), second[0].clone()]])
        .unwrap();
    a.batch_execute(
        "UPDATE jobs SET status = 'claimed', attempts = attempts + 1, claimed_at = rq_now_ms(), \
         lease_expires_at = rq_now_ms() + 60000 \
         WHERE id IN (SELECT id FROM jobs WHERE queue = 'q' AND status = 'queued' LIMIT 2)",
    )
    .unwrap();
    thread::sleep(Duration::from_millis(1100));
    assert_eq!(claim(&mut a).len(), 0, "the two claimed by a plain UPDATE hold the places");
    assert_eq!(count(&mut a, "queue = 'q' AND status = 'claimed'"), 2);
    let shared: i64 = a.query_one("SELECT claims_shared FROM raquel_internal.rq_claim_slot_counts()", &[]).unwrap().get(0);
    assert!(shared >= 5, "{shared} claims reserved places in a slot");
}

/// A job ended through raquel's verbs gives its place back when its
/// transaction commits (src/claim_slots.rs job_ended); an end rolled back,
/// to a savepoint or with its transaction, gives nothing back: the job is
/// still claimed, and the queue stays full.
#[test]
fn an_end_rolled_back_keeps_its_place() {
    let db = fresh_db("rq_it_places_end");
    let mut c = connect(&db);
    c.batch_execute("SELECT rq_set_limits('q', max_claimed => 1)").unwrap();
    enqueue(&mut c, "q", 5);
    let claim = |c: &mut Client| -> Vec<(String, i32)> {
        c.query("SELECT id::text, attempts FROM rq_claim(ARRAY['q'], batch => 5)", &[])
            .unwrap()
            .iter()
            .map(|r| (r.get(0), r.get(1)))
            .collect()
    };
    let first = claim(&mut c);
    assert_eq!(first.len(), 1);
    let complete = format!("SELECT rq_complete('{}', {})", first[0].0, first[0].1);
    c.batch_execute(&format!("BEGIN; SAVEPOINT s; {complete}; ROLLBACK TO s; COMMIT")).unwrap();
    assert_eq!(claim(&mut c).len(), 0, "the end rolled back to a savepoint gave its place back");
    c.batch_execute(&format!("BEGIN; {complete}; ROLLBACK")).unwrap();
    assert_eq!(claim(&mut c).len(), 0, "the end rolled back gave its place back");
    c.batch_execute(&format!("BEGIN; SAVEPOINT s; {complete}; RELEASE s; COMMIT")).unwrap();
    let second = claim(&mut c);
    assert_eq!(second.len(), 1, "the end committed gave its place back");
    assert_eq!(count(&mut c, "queue = 'q' AND status = 'claimed'"), 1);
}

#[test]
fn no_role_that_may_claim_passes_a_pause_or_refills_a_rate() {
    // 0.4.0 let any role that may claim call rq_claim_ready, the plain claim
    // inside rq_claim (documented as not for workers): it took 3 jobs from a
    // paused queue (0.6.0's flow claim is Rust, with no such function). And
    // a worker, which could update the state columns of queue_limits, could
    // refill a rate's bucket.
    let db = fresh_db("rq_it_flow_bypass");
    let mut admin = connect(&db);
    admin
        .batch_execute(
            "DROP ROLE IF EXISTS rq_it_flow_worker; CREATE ROLE rq_it_flow_worker LOGIN;
             SELECT rq_grant_worker('rq_it_flow_worker');
             SELECT rq_pause('paused'); SELECT rq_set_limits('rated', rate => 1, per => '1 hour');",
        )
        .unwrap();
    enqueue(&mut admin, "paused", 3);
    enqueue(&mut admin, "rated", 3);
    enqueue(&mut admin, "grouped", 0);
    admin.batch_execute("SELECT rq_pause('grouped'); SELECT rq_enqueue('grouped', 'g', group_key => 'a')").unwrap();
    let mut worker = connect_as(&db, "rq_it_flow_worker");
    for bypass in [
        "UPDATE queue_limits SET tokens = 1000000, tokens_at = rq_now_ms() WHERE queue = 'rated'",
        "SELECT raquel_internal.rq_flow_took('rated', '{}', 1000000, rq_now_ms())",
        "SELECT * FROM raquel_internal.rq_flow_lock(ARRAY['rated'])",
    ] {
        assert_eq!(sqlstate(worker.batch_execute(bypass)), "42501", "{bypass}");
    }
    // through rq_claim: nothing from the paused queues, one job of the rate
    assert_eq!(claim_queues(&mut worker, "ARRAY['paused', 'grouped']", 10).len(), 0);
    assert_eq!(claim_queues(&mut worker, "ARRAY['rated']", 10), ["rated"]);
    assert_eq!(claim_queues(&mut worker, "ARRAY['rated']", 10).len(), 0, "the bucket stays empty");
    assert_eq!(count(&mut admin, "status = 'claimed'"), 1);
}
