//! Failover to a synchronous standby under load. A primary (port 25414) and a
//! streaming standby made with pg_basebackup, with synchronous replication,
//! both preloading raquel. While producers enqueue and worker processes work
//! the queue, the primary is stopped with `-m immediate` and the standby
//! promoted. Every enqueue whose COMMIT the producer saw is on the promoted
//! server; its background worker starts without a restart and rescues a
//! lease and expires a job that the old primary left; the workers reconnect
//! to it (target_session_attrs=read-write) and drain the queue. A
//! per-second schedule fires throughout: no slot fires twice, none is
//! skipped, and the promoted server goes on firing it.
//!
//! `RAQUEL_FAULT_MODE=long` fails over twice (the second time to a standby
//! made from the first promoted server, under load) with more jobs and
//! workers. `RAQUEL_FAULT_KEEP=1` keeps the servers' directories under /tmp.

mod fault_load;

use fault_load::{crashes_in_log, reckon, summary, wait_for_drain, Events, Mode, Producers, Workers, DONE_INSIDE};
use postgres::Client;
use raquel_client_tests::cluster::{Cluster, LibraryWatch};
use raquel_client_tests::eventually;
use std::thread::sleep;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// The first primary, then each standby in turn.
const PORTS: [u16; 3] = [25414, 25415, 25416];
const DB: &str = "rq_failover";

/// The lease of the claim, and the max_age of the job, that the old primary
/// leaves behind for the new one: longer than stopping it takes, so the old
/// primary cannot have rescued or expired them.
const LEFT_BEHIND_SECONDS: f64 = 3.0;

struct Plan {
    failovers: usize,
    producers: usize,
    workers: usize,
    batches: usize,
    batch_size: usize,
    /// One batch in this many is a single job that makes a worker late on
    /// purpose, to present a stale token (src/bin/fault_worker.rs).
    stale_every: usize,
    /// Over how long the producers spread the enqueues; the failovers are
    /// spread over the same time.
    seconds: f64,
    drain_limit: Duration,
}

impl Plan {
    fn for_mode(mode: Mode) -> Plan {
        match mode {
            Mode::Short => Plan {
                failovers: 1,
                producers: 2,
                workers: 6,
                batches: 150,
                batch_size: 10,
                stale_every: 50,
                seconds: 12.0,
                drain_limit: Duration::from_secs(60),
            },
            Mode::Long => Plan {
                failovers: 2,
                producers: 3,
                workers: 8,
                batches: 1000,
                batch_size: 10,
                stale_every: 60,
                seconds: 90.0,
                drain_limit: Duration::from_secs(180),
            },
        }
    }
}

/// What one failover showed. Times are seconds after the promotion ended,
/// and for the jobs left behind also after they became due (the lease ran
/// out, the max_age passed): how late the promoted server's background
/// worker acted on them.
struct Failover {
    /// Unix seconds at which the promotion ended.
    promoted_at: f64,
    committed_before_stop: usize,
    found_after: usize,
    promote_took: Duration,
    launcher_after: f64,
    rescued_after: f64,
    rescued_late: f64,
    expired_after: f64,
    expired_late: f64,
}

fn unix_seconds() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs_f64()
}

/// Every port that ever runs a server of this test: a client finds the one
/// that takes writes, skipping stopped servers and standbys.
fn any_primary_dsn(servers: usize) -> String {
    let ports = &PORTS[..servers];
    format!(
        "host={} port={} user=postgres dbname={DB} target_session_attrs=read-write connect_timeout=3",
        vec!["127.0.0.1"; ports.len()].join(","),
        ports.iter().map(u16::to_string).collect::<Vec<_>>().join(",")
    )
}

/// A standby of `primary` on `port`, streaming, and made the synchronous one:
/// from then on a COMMIT on the primary returns once the standby has the
/// commit record on disk.
fn synchronous_standby(primary: &Cluster, port: u16) -> Cluster {
    // After a promotion this server must not wait for a standby of its own
    // that does not exist yet; the backup copied the primary's setting.
    let standby = Cluster::standby_of(primary, "failover", port, &[("synchronous_standby_names", "")]);
    standby.start();
    let mut admin = primary.connect("postgres").unwrap();
    let replication_state = |admin: &mut Client, state: &str| -> bool {
        admin
            .query_one(
                "SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming' AND sync_state = $1",
                &[&state],
            )
            .unwrap()
            .get::<_, i64>(0)
            > 0
    };
    assert!(eventually(60, || replication_state(&mut admin, "async")), "the standby on {port} streams");
    // two calls: ALTER SYSTEM cannot run in the implicit transaction of several statements
    admin.batch_execute("ALTER SYSTEM SET synchronous_standby_names = '*'").unwrap();
    admin.batch_execute("SELECT pg_reload_conf()").unwrap();
    assert!(eventually(30, || replication_state(&mut admin, "sync")), "the standby on {port} is synchronous");
    standby
}

/// On the primary about to fail: a job claimed by a worker that vanishes,
/// and a job that no worker takes and that expires soon; returns their ids
/// and the instant (Unix seconds; the table keeps Unix milliseconds) after
/// which each becomes due for the background worker.
fn leave_behind(primary: &Cluster, round: usize) -> ((String, f64), (String, f64)) {
    let mut c = primary.connect(DB).unwrap();
    c.batch_execute(&format!(
        "SELECT rq_enqueue('canary', 'round {round}', min_retry_delay => '0', backoff_base => '0')"
    ))
    .unwrap();
    let claim = c
        .query_one(
            "SELECT id::text, lease_expires_at / 1000.0::float8 \
             FROM rq_claim(ARRAY['canary'], worker => 'vanished', lease => make_interval(secs => $1))",
            &[&LEFT_BEHIND_SECONDS],
        )
        .unwrap();
    let aging = c
        .query_one(
            "SELECT id::text, scheduled_at / 1000.0::float8 + $1 \
             FROM rq_enqueue('unworked', 'round ' || $2::text, max_age => make_interval(secs => $1))",
            &[&LEFT_BEHIND_SECONDS, &(round as i32).to_string()],
        )
        .unwrap();
    ((claim.get(0), claim.get(1)), (aging.get(0), aging.get(1)))
}

fn status(c: &mut Client, id: &str) -> Option<(String, Option<String>)> {
    c.query_opt("SELECT status, error FROM jobs WHERE id = $1::text::uuid", &[&id])
        .ok()
        .flatten()
        .map(|row| (row.get(0), row.get(1)))
}

/// Stops `old` hard, promotes `new`, and measures what the promoted server
/// does with what the old one left behind.
fn fail_over(old: &Cluster, new: &Cluster, round: usize, producers: &Producers) -> Failover {
    let ((claimed, lease_ends), (aging, expires)) = leave_behind(old, round);
    let committed_before_stop = producers.confirmed_so_far();
    old.stop_immediate();
    let stopped_at = unix_seconds();
    assert!(
        stopped_at < lease_ends && stopped_at < expires,
        "the old primary stopped before the lease ran out or the job expired, so only the new one can act on them"
    );
    // as long as a failure detector might take to decide
    sleep(Duration::from_millis(300));
    let promote_started = Instant::now();
    new.promote();
    let promote_took = promote_started.elapsed();
    let promoted = unix_seconds();

    let mut c = new.checked_connection(DB);
    let found_after: i64 = c
        .query_one(
            "SELECT count(*) FROM jobs WHERE id = ANY($1::text[]::uuid[])",
            &[&producers.confirmed_ids(committed_before_stop)],
        )
        .unwrap()
        .get(0);

    // Unix seconds at which each was first seen.
    let (mut launcher_seen, mut rescued_seen, mut expired_seen) = (None, None, None);
    let watched = eventually(30, || {
        let now = unix_seconds();
        if launcher_seen.is_none()
            && c.query_one("SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'raquel launcher'", &[])
                .unwrap()
                .get::<_, i64>(0)
                > 0
        {
            launcher_seen = Some(now);
        }
        if rescued_seen.is_none()
            && status(&mut c, &claimed)
                .is_some_and(|(s, e)| s == "failed" && e.is_some_and(|e| e.starts_with("lease expired")))
        {
            rescued_seen = Some(now);
        }
        if expired_seen.is_none() && status(&mut c, &aging).is_some_and(|(s, _)| s == "expired") {
            expired_seen = Some(now);
        }
        launcher_seen.is_some() && rescued_seen.is_some() && expired_seen.is_some()
    });
    assert!(
        watched,
        "on the promoted server (round {round}): launcher seen {launcher_seen:?}, claim left behind {:?} \
         rescued {rescued_seen:?}, job left behind {:?} expired {expired_seen:?} (promoted at {promoted})",
        status(&mut c, &claimed),
        status(&mut c, &aging)
    );
    // The rescued job goes on: a worker of the new primary takes and completes it.
    let row = c
        .query_one(
            "SELECT id::text, attempts FROM rq_claim(ARRAY['canary'], worker => 'heir', wait => '10 seconds')",
            &[],
        )
        .unwrap();
    assert_eq!((row.get::<_, String>(0), row.get::<_, i32>(1)), (claimed.clone(), 2));
    c.query_one("SELECT rq_complete($1::text::uuid, attempt => 2)", &[&claimed]).unwrap();

    let (rescued, expired) = (rescued_seen.unwrap(), expired_seen.unwrap());
    Failover {
        promoted_at: promoted,
        committed_before_stop,
        found_after: found_after as usize,
        promote_took,
        launcher_after: launcher_seen.unwrap() - promoted,
        rescued_after: rescued - promoted,
        rescued_late: rescued - lease_ends,
        expired_after: expired - promoted,
        expired_late: expired - expires,
    }
}

#[test]
fn a_promoted_synchronous_standby_has_every_committed_job_and_serves_the_queue() {
    let mode = Mode::from_env();
    let plan = Plan::for_mode(mode);
    let jobs_planned = plan.batches * plan.batch_size;
    println!(
        "failover: mode {}: {jobs_planned} jobs, {} producers, {} workers, {} failovers",
        mode.name(),
        plan.producers,
        plan.workers,
        plan.failovers
    );
    let began = Instant::now();
    let _library = LibraryWatch::new();

    let primary = Cluster::create("failover", PORTS[0], &[("raquel.worker_interval", "200ms")]);
    primary.start();
    primary.connect("postgres").unwrap().batch_execute(&format!("CREATE DATABASE {DB}")).unwrap();
    primary
        .connect(DB)
        .unwrap()
        .batch_execute(&format!("CREATE EXTENSION raquel; {DONE_INSIDE}; SELECT rq_schedule('tick', '* * * * * *', 'ticks')"))
        .unwrap();
    let standby = synchronous_standby(&primary, PORTS[1]);
    // Every server stays here until the end, so that each is stopped and
    // removed however the test ends.
    let mut servers = vec![primary, standby];

    let dsn = any_primary_dsn(plan.failovers + 1);
    let load_limit = Duration::from_secs_f64(plan.seconds * 2.0 + 60.0);
    let worker_seconds = (load_limit + plan.drain_limit).as_secs() + 30;
    let events_dir = servers[0].dir().join("events");
    let mut workers = Workers::start(plan.workers, &dsn, &events_dir, worker_seconds);
    let load_started = Instant::now();
    let producers = Producers::start(
        &dsn,
        plan.producers,
        plan.batches,
        plan.batch_size,
        plan.stale_every,
        plan.seconds,
        load_started + load_limit,
        0,
    );

    let mut failovers = Vec::new();
    for round in 0..plan.failovers {
        let at = Duration::from_secs_f64(plan.seconds * (round + 1) as f64 / (plan.failovers + 1) as f64);
        if let Some(wait) = (load_started + at).checked_duration_since(Instant::now()) {
            sleep(wait);
        }
        println!(
            "  {:6.1} s  failing over from port {} to {}",
            load_started.elapsed().as_secs_f64(),
            PORTS[round],
            PORTS[round + 1]
        );
        let failover = fail_over(&servers[round], &servers[round + 1], round, &producers);
        if round + 1 < plan.failovers {
            // the next failover needs a synchronous standby of the new primary
            let next = synchronous_standby(&servers[round + 1], PORTS[round + 2]);
            servers.push(next);
        }
        failovers.push(failover);
    }

    let produced = producers.join();
    let enqueued_in = load_started.elapsed();
    let drained_in = wait_for_drain(&dsn, plan.drain_limit);
    workers.stop();
    let events = Events::read(&events_dir);
    let last = &servers[plan.failovers];
    let mut client = last.checked_connection(DB);
    let reckoning = reckon(&mut client, &produced.confirmed, &events);

    println!(
        "  enqueued: {} jobs confirmed in {:.1} s, {} batches retried after a rollback, {} after a lost COMMIT, {} given up",
        produced.confirmed.len(),
        enqueued_in.as_secs_f64(),
        produced.retried,
        produced.unknown_commits,
        produced.given_up
    );
    for (round, f) in failovers.iter().enumerate() {
        println!(
            "  failover {round}: {} jobs committed before the stop, {} found after; promote took {:.2} s; after it, \
             the launcher ran in {:.2} s, the lease left behind was rescued in {:.2} s ({:.2} s after it ran out) \
             and the job left behind expired in {:.2} s ({:.2} s after its max_age)",
            f.committed_before_stop,
            f.found_after,
            f.promote_took.as_secs_f64(),
            f.launcher_after,
            f.rescued_after,
            f.rescued_late,
            f.expired_after,
            f.expired_late
        );
    }
    println!(
        "  workers: {} worker processes, {} connections, {} lost; {} fenced ({} stale tokens presented, {} accepted); \
         {} duplicate inside commits",
        workers.processes_started(),
        events.connects,
        events.connections_lost,
        events.fenced,
        events.stale.len(),
        events.stale_accepted().len(),
        events.duplicates.len()
    );
    println!(
        "  jobs: {} in the table, {} attempts, {} rescued; outside work repeated {} times; {reckoning:?}",
        reckoning.jobs,
        reckoning.attempts,
        reckoning.rescued,
        events.outside_repeats()
    );
    let drain_text = drained_in.map_or("not drained".to_string(), |d| format!("{:.1} s", d.as_secs_f64()));
    let rounds: Vec<String> = failovers
        .iter()
        .map(|f| {
            format!(
                "{}/{} committed jobs found, promoted in {:.1} s, launcher up {:.2} s later, lease rescued {:.2} s \
                 after it ran out",
                f.found_after,
                f.committed_before_stop,
                f.promote_took.as_secs_f64(),
                f.launcher_after,
                f.rescued_late
            )
        })
        .collect();
    summary(&format!(
        "failover ({} mode): {} jobs; {}; outside work repeated {}x, inside duplicates {}; drained {} after the last \
         enqueue; {:.0} s in all",
        mode.name(),
        reckoning.jobs,
        rounds.join("; "),
        events.outside_repeats(),
        events.duplicates.len(),
        drain_text,
        began.elapsed().as_secs_f64()
    ));

    for (round, f) in failovers.iter().enumerate() {
        assert_eq!(f.found_after, f.committed_before_stop, "failover {round}: committed enqueues lost");
    }
    // The schedule across the failovers: each slot once, none skipped, and
    // fired by the last promoted server too.
    let slots: Vec<i64> = client
        .query("SELECT scheduled_at FROM jobs WHERE queue = 'ticks' ORDER BY scheduled_at", &[])
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    let twice: Vec<_> = slots.windows(2).filter(|w| w[0] == w[1]).map(|w| w[0]).collect();
    let skipped: Vec<_> = slots.windows(2).filter(|w| w[1] - w[0] > 1000).map(|w| (w[0], w[1])).collect();
    let last_promotion_ms = (failovers.last().map_or(0.0, |f| f.promoted_at) * 1000.0) as i64;
    let after_last = slots.iter().filter(|&&s| s > last_promotion_ms + 1000).count();
    println!("  schedule: {} slots fired, {after_last} of them after the last promotion", slots.len());
    assert!(twice.is_empty(), "slots fired twice across the failovers: {twice:?}");
    assert!(skipped.is_empty(), "slots skipped across the failovers: {skipped:?}");
    assert!(after_last >= 3, "the promoted server fired {after_last} slots of the schedule");
    assert_eq!(produced.given_up, 0, "every batch was enqueued in time");
    assert!(drained_in.is_some(), "the queue drained within {:?}: {:?}", plan.drain_limit, reckoning.not_success);
    reckoning.assert_exactly_once_inside_and_at_least_once_outside(&events, produced.confirmed.len());
    for server in &servers {
        let crashes = crashes_in_log(&server.log());
        assert!(crashes.is_empty(), "processes of the server on {} crashed: {crashes:?}", server.port());
    }
}
