//! The queue under faults, on a server of this test's own (port 25410): while
//! producers enqueue and worker processes work the queue, workers are
//! SIGKILLed and restarted, workers are paused (SIGSTOP) past their lease so
//! that their job goes to another worker, backends are terminated, one backend is
//! SIGKILLed (the postmaster then restarts every process, as after a crash)
//! and the server is stopped with `-m immediate` and started again. The
//! workers reconnect and carry on, the background worker rescues the leases
//! that dead workers left, and in the end every job is `success`, its inside
//! work committed exactly once and its outside work done at least once.
//! Queue `q` has `max_claimed` (`MAX_CLAIMED`, below the workers), kept in
//! shared memory (src/claim_slots.rs) and read again from the table after
//! each crash, and its jobs are spread over `GROUPS` fair groups with
//! `group_max_claimed` (`GROUP_MAX_CLAIMED`), claimed by one-queue claims
//! (src/fair.rs) and by claims of `q` and `stale` (rq_claim_fair) side by
//! side: sampled every 10 ms, its claimed jobs never pass either limit.
//!
//! `RAQUEL_FAULT_MODE=long` runs more of everything (see `Plan`);
//! `RAQUEL_FAULT_SEED` repeats a run's choices; `RAQUEL_FAULT_KEEP=1` keeps
//! the server's directory (log, worker events) under /tmp.

mod fault_load;

use fault_load::{
    crashes_in_log, enqueue_one_stale, log_count, reckon, summary, wait_for_drain, Events, Mode, Producers, Rng,
    Workers, DONE_INSIDE,
};
use raquel_client_tests::cluster::{kill_9, Cluster, LibraryWatch};
use raquel_client_tests::{check_every_index, eventually};
use std::thread::sleep;
use std::time::{Duration, Instant};

const PORT: u16 = 25410;
/// Queue `q`'s max_claimed: below the workers, so that the limit holds
/// claims back through the faults.
const MAX_CLAIMED: i64 = 4;
/// Queue `q`'s fair groups, and its group_max_claimed: the groups' limits
/// together (6) are above max_claimed, and each binds where the workers
/// (more than 2) want the next job of a group.
const GROUPS: usize = 3;
const GROUP_MAX_CLAIMED: i64 = 2;
const DB: &str = "rq_faults";
/// Longer than the workers' 2-second lease plus a round of the background
/// worker, so that a paused worker's job is rescued and goes to another.
const WORKER_PAUSE: Duration = Duration::from_millis(3500);

struct Plan {
    producers: usize,
    workers: usize,
    batches: usize,
    batch_size: usize,
    /// One batch in this many is a single job that makes a worker late on
    /// purpose, to present a stale token (src/bin/fault_worker.rs).
    stale_every: usize,
    /// Over how long the producers spread the enqueues; the faults are
    /// spread over the same time.
    seconds: f64,
    worker_kills: usize,
    worker_pauses: usize,
    terminations: usize,
    backend_kills: usize,
    immediate_stops: usize,
    drain_limit: Duration,
}

impl Plan {
    fn for_mode(mode: Mode) -> Plan {
        match mode {
            Mode::Short => Plan {
                producers: 2,
                workers: 6,
                batches: 200,
                batch_size: 10,
                // ten late workers: a kill or a crash can end a late
                // worker's wait, and the test asserts some got to its token
                stale_every: 20,
                seconds: 15.0,
                worker_kills: 8,
                worker_pauses: 3,
                terminations: 8,
                backend_kills: 1,
                immediate_stops: 1,
                drain_limit: Duration::from_secs(60),
            },
            Mode::Long => Plan {
                producers: 3,
                workers: 8,
                batches: 1500,
                batch_size: 10,
                stale_every: 60,
                seconds: 120.0,
                worker_kills: 40,
                worker_pauses: 12,
                terminations: 40,
                backend_kills: 3,
                immediate_stops: 3,
                drain_limit: Duration::from_secs(180),
            },
        }
    }
}

#[derive(Clone, Copy, Debug)]
enum Fault {
    /// SIGKILL a worker process (its backend then sees the client gone).
    KillWorker,
    /// SIGSTOP a lease-style worker for longer than its lease, then SIGCONT.
    PauseWorker,
    /// pg_terminate_backend on a worker's or producer's backend.
    TerminateBackend,
    /// SIGKILL a backend: the postmaster kills every process and
    /// reinitializes, as after any backend crash.
    KillBackend,
    /// `pg_ctl stop -m immediate`, then start: crash recovery from the WAL.
    StopImmediate,
}

#[derive(Default)]
struct Injected {
    worker_kills: usize,
    worker_pauses: usize,
    terminations: usize,
    backend_kills: usize,
    immediate_stops: usize,
    /// From each backend SIGKILL until the server answered again.
    crash_restarts: Vec<Duration>,
    /// From each immediate stop until the server answered again.
    downtimes: Vec<Duration>,
}

/// A random backend of the load (a worker's or a producer's, but not a
/// paused worker's), waiting a little while the server restarts or the
/// load reconnects; None if there is none.
fn victim_backend(cluster: &Cluster, workers: &Workers, rng: &mut Rng) -> Option<i32> {
    let mut victim = None;
    eventually(10, || {
        let Ok(mut admin) = cluster.connect("postgres") else { return false };
        let pids: Vec<i32> = admin
            .query(
                "SELECT pid FROM pg_stat_activity WHERE application_name LIKE 'fault-%' \
                 AND application_name <> ALL($1) ORDER BY pid",
                &[&workers.spared_sessions()],
            )
            .map_or_else(|_| Vec::new(), |rows| rows.iter().map(|row| row.get(0)).collect());
        victim = (!pids.is_empty()).then(|| pids[rng.below(pids.len())]);
        victim.is_some()
    });
    victim
}

/// Injects one fault; what it hit, for the test's output.
fn inject(fault: Fault, cluster: &Cluster, workers: &mut Workers, rng: &mut Rng, injected: &mut Injected) -> String {
    match fault {
        Fault::KillWorker => {
            injected.worker_kills += 1;
            workers.kill_one(rng)
        }
        Fault::PauseWorker => {
            let Some((paused, mid_job)) = workers.pause_one(rng, WORKER_PAUSE) else { return "none: every lease worker is paused".into() };
            injected.worker_pauses += 1;
            format!("{paused}{}", if mid_job { ", mid-job" } else { ", between jobs" })
        }
        Fault::TerminateBackend => {
            let Some(pid) = victim_backend(cluster, workers, rng) else { return "no backend".into() };
            let terminated = cluster
                .connect("postgres")
                .and_then(|mut admin| admin.query_one("SELECT pg_terminate_backend($1)", &[&pid]))
                .is_ok_and(|row| row.get::<_, bool>(0));
            injected.terminations += usize::from(terminated);
            format!("backend {pid}")
        }
        Fault::KillBackend => {
            let reinitialized = || log_count(&cluster.log(), "all server processes terminated; reinitializing");
            let before = reinitialized();
            let mut killed = None;
            // a backend may end between being listed and being killed: take another
            eventually(10, || {
                killed = victim_backend(cluster, workers, rng).filter(|&pid| kill_9(pid));
                killed.is_some()
            });
            let Some(pid) = killed else { return "no backend".into() };
            let killed_at = Instant::now();
            injected.backend_kills += 1;
            // Wait for the postmaster to have noticed, or a connection made
            // before the restart could pass for the server being back.
            assert!(
                eventually(30, || reinitialized() > before),
                "the postmaster reinitialized after backend {pid} was SIGKILLed"
            );
            cluster.wait_until_up(DB, Duration::from_secs(60)).expect("the server came back after the crash");
            injected.crash_restarts.push(killed_at.elapsed());
            format!("backend {pid}")
        }
        Fault::StopImmediate => {
            let stopped_at = Instant::now();
            cluster.stop_immediate();
            injected.immediate_stops += 1;
            // long enough that every client finds the server gone
            sleep(Duration::from_millis(500));
            cluster.start();
            injected.downtimes.push(stopped_at.elapsed());
            "the server".into()
        }
    }
}

fn seconds(d: &[Duration]) -> String {
    d.iter().map(|d| format!("{:.1}", d.as_secs_f64())).collect::<Vec<_>>().join("/")
}

#[test]
fn every_job_is_done_once_inside_and_at_least_once_outside_through_kills_and_crashes() {
    let mode = Mode::from_env();
    let plan = Plan::for_mode(mode);
    let (mut rng, seed) = Rng::from_env();
    let jobs_planned = plan.batches * plan.batch_size;
    println!(
        "faults: mode {} (RAQUEL_FAULT_SEED={seed}): {jobs_planned} jobs, {} producers, {} workers",
        mode.name(),
        plan.producers,
        plan.workers
    );
    let began = Instant::now();
    let _library = LibraryWatch::new();

    let cluster = Cluster::create("faults", PORT, &[("raquel.worker_interval", "200ms")]);
    cluster.start();
    cluster.connect("postgres").unwrap().batch_execute(&format!("CREATE DATABASE {DB}")).unwrap();
    cluster
        .connect(DB)
        .unwrap()
        .batch_execute(&format!(
            "CREATE EXTENSION raquel; {DONE_INSIDE}; \
             SELECT rq_set_limits('q', max_claimed => {MAX_CLAIMED}, group_max_claimed => {GROUP_MAX_CLAIMED})"
        ))
        .unwrap();
    let sampler = ClaimedSampler::start(cluster.dsn(DB));

    let load_limit = Duration::from_secs_f64(plan.seconds * 2.0 + 60.0);
    let worker_seconds = (load_limit + plan.drain_limit).as_secs() + 30;
    let events_dir = cluster.dir().join("events");
    let mut workers = Workers::start(plan.workers, &cluster.dsn(DB), &events_dir, worker_seconds);
    let load_started = Instant::now();
    let producers = Producers::start(
        &cluster.dsn(DB),
        plan.producers,
        plan.batches,
        plan.batch_size,
        plan.stale_every,
        plan.seconds,
        load_started + load_limit,
        GROUPS,
    );

    let mut faults: Vec<Fault> = [
        (Fault::KillWorker, plan.worker_kills),
        (Fault::PauseWorker, plan.worker_pauses),
        (Fault::TerminateBackend, plan.terminations),
        (Fault::KillBackend, plan.backend_kills),
        (Fault::StopImmediate, plan.immediate_stops),
    ]
    .into_iter()
    .flat_map(|(fault, n)| std::iter::repeat_n(fault, n))
    .collect();
    rng.shuffle(&mut faults);
    let spacing = Duration::from_secs_f64(plan.seconds / (faults.len() + 1) as f64);
    let mut injected = Injected::default();
    for (i, &fault) in faults.iter().enumerate() {
        if let Some(wait) = (load_started + spacing * (i as u32 + 1)).checked_duration_since(Instant::now()) {
            sleep(wait);
        }
        let at = load_started.elapsed().as_secs_f64();
        workers.resume_paused();
        let hit = inject(fault, &cluster, &mut workers, &mut rng, &mut injected);
        println!("  {at:6.1} s  {fault:?}: {hit}");
    }

    workers.end_pauses();
    let mut produced = producers.join();
    let enqueued_in = load_started.elapsed();
    let drained_in = wait_for_drain(&cluster.dsn(DB), plan.drain_limit);
    enqueue_one_stale(&cluster.dsn(DB), &mut produced, Instant::now() + Duration::from_secs(20));
    let late_job_done = wait_for_drain(&cluster.dsn(DB), plan.drain_limit).is_some();
    workers.stop();
    let (samples, most_claimed, most_in_a_group) = sampler.stop();
    let events = Events::read(&events_dir);
    let mut client = cluster.checked_connection(DB);
    let reckoning = reckon(&mut client, &produced.confirmed, &events);
    let log = cluster.log();

    println!("  enqueued: {} jobs confirmed in {:.1} s, {} batches retried after a rollback, {} after a lost COMMIT, {} given up",
        produced.confirmed.len(), enqueued_in.as_secs_f64(), produced.retried, produced.unknown_commits, produced.given_up);
    println!(
        "  faults: {} worker SIGKILLs ({} worker processes in all), {} worker pauses, {} backends terminated, \
         {} backend SIGKILLs (answering again after {} s), {} immediate stops (down {} s)",
        injected.worker_kills,
        workers.processes_started(),
        injected.worker_pauses,
        injected.terminations,
        injected.backend_kills,
        seconds(&injected.crash_restarts),
        injected.immediate_stops,
        seconds(&injected.downtimes)
    );
    println!(
        "  workers: {} connections, {} lost; {} completions seen; {} fenced ({} stale tokens presented, {} accepted), \
         {} conflicts; {} duplicate inside commits",
        events.connects,
        events.connections_lost,
        events.completions_seen,
        events.fenced,
        events.stale.len(),
        events.stale_accepted().len(),
        events.conflicts,
        events.duplicates.len()
    );
    println!(
        "  jobs: {} in the table, {} attempts, {} rescued by the background worker; outside work repeated {} times; {reckoning:?}",
        reckoning.jobs,
        reckoning.attempts,
        reckoning.rescued,
        events.outside_repeats()
    );
    let drain_text = drained_in.map_or("not drained".to_string(), |d| format!("{:.1} s", d.as_secs_f64()));
    summary(&format!(
        "faults ({} mode, seed {seed}): {} jobs; kills: {} worker SIGKILL, {} worker SIGSTOP, {} pg_terminate_backend, \
         {} backend SIGKILL, {} stop -m immediate; outside work repeated {}x, inside duplicates {}, {} fenced ({} knowingly stale); {} rescued; \
         drained {} after the last enqueue; max_claimed {MAX_CLAIMED}: at most {most_claimed} claimed in {samples} samples, \
         group_max_claimed {GROUP_MAX_CLAIMED}: at most {most_in_a_group} in a group; {:.0} s in all",
        mode.name(),
        reckoning.jobs,
        injected.worker_kills,
        injected.worker_pauses,
        injected.terminations,
        injected.backend_kills,
        injected.immediate_stops,
        events.outside_repeats(),
        events.duplicates.len(),
        events.fenced,
        events.stale.len(),
        reckoning.rescued,
        drain_text,
        began.elapsed().as_secs_f64()
    ));

    assert!(samples > 100, "the claimed jobs were sampled ({samples} samples)");
    assert!(most_claimed <= MAX_CLAIMED, "{most_claimed} of q's jobs claimed at once, max_claimed {MAX_CLAIMED}");
    assert!(
        most_in_a_group <= GROUP_MAX_CLAIMED,
        "{most_in_a_group} jobs of one of q's groups claimed at once, group_max_claimed {GROUP_MAX_CLAIMED}"
    );
    assert_eq!(produced.given_up, 0, "every batch was enqueued in time");
    assert!(drained_in.is_some(), "the queue drained within {:?}: {:?}", plan.drain_limit, reckoning.not_success);
    assert!(late_job_done, "the late worker's job after the faults was done: {:?}", reckoning.not_success);
    reckoning.assert_exactly_once_inside_and_at_least_once_outside(&events, produced.confirmed.len());
    // The faults happened, as the server saw them.
    assert_eq!(injected.worker_kills, plan.worker_kills);
    assert!(injected.terminations > 0, "some backend was terminated");
    assert_eq!(injected.backend_kills, plan.backend_kills);
    assert!(log_count(&log, "was terminated by signal 9") >= plan.backend_kills, "the log shows each backend SIGKILL");
    assert_eq!(log_count(&log, "received immediate shutdown request"), plan.immediate_stops);
    assert!(events.connects > plan.workers, "workers reconnected");
    assert!(!events.stale.is_empty(), "some worker presented a stale token while another held its job");
    // Through the kills and crashes, every index of jobs stayed whole.
    check_every_index(&mut cluster.connect(DB).unwrap());
    let crashes = crashes_in_log(&log);
    assert!(crashes.is_empty(), "server processes crashed by themselves: {crashes:?}");
}

/// Samples, every 10 ms on a connection of its own (made again after a
/// crash or a stop), how many of queue q's jobs are claimed, in all and in
/// its group with the most.
struct ClaimedSampler {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    handle: std::thread::JoinHandle<(usize, i64, i64)>,
}

const CLAIMED: &str = "SELECT coalesce(sum(n), 0)::bigint, coalesce(max(n), 0)::bigint FROM \
                       (SELECT count(*) n FROM jobs WHERE queue = 'q' AND status = 'claimed' GROUP BY group_key) g";

impl ClaimedSampler {
    fn start(dsn: String) -> ClaimedSampler {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let stopped = stop.clone();
        let handle = std::thread::spawn(move || {
            let (mut samples, mut most, mut most_in_a_group) = (0, 0, 0);
            let mut client = None;
            while !stopped.load(std::sync::atomic::Ordering::Relaxed) {
                if client.is_none() {
                    client = postgres::Client::connect(&dsn, postgres::NoTls).ok();
                }
                if let Some(c) = client.as_mut() {
                    match c.query_one(CLAIMED, &[]) {
                        Ok(row) => {
                            samples += 1;
                            most = most.max(row.get::<_, i64>(0));
                            most_in_a_group = most_in_a_group.max(row.get::<_, i64>(1));
                        }
                        Err(_) => client = None,
                    }
                }
                sleep(Duration::from_millis(10));
            }
            (samples, most, most_in_a_group)
        });
        ClaimedSampler { stop, handle }
    }

    /// The samples taken, and the most claimed at once, in all and in a group.
    fn stop(self) -> (usize, i64, i64) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        self.handle.join().expect("the sampler panicked")
    }
}
