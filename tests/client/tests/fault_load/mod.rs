//! The load both fault tests put on their servers: producers enqueueing from
//! threads of the test, workers as processes of their own
//! (src/bin/fault_worker.rs) that can be SIGKILLed and restarted, and the
//! reckoning at the end: what the events of the workers and the tables say.

#![allow(dead_code)] // each test uses its own part of this module

use postgres::{Client, NoTls};
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::{sleep, JoinHandle};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// `RAQUEL_FAULT_MODE`: `short` (the default, for every test run) or `long`
/// (for releases: more jobs, workers and faults, several minutes).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Mode {
    Short,
    Long,
}

impl Mode {
    pub fn from_env() -> Mode {
        match std::env::var("RAQUEL_FAULT_MODE").as_deref() {
            Err(_) | Ok("") | Ok("short") => Mode::Short,
            Ok("long") => Mode::Long,
            Ok(other) => panic!("RAQUEL_FAULT_MODE is short or long, not {other:?}"),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Mode::Short => "short",
            Mode::Long => "long",
        }
    }
}

/// A small deterministic generator, so that a run's choices of victims and
/// order of faults can be repeated with `RAQUEL_FAULT_SEED`.
pub struct Rng(u64);

impl Rng {
    pub fn from_env() -> (Rng, u64) {
        let seed = std::env::var("RAQUEL_FAULT_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos() as u64);
        (Rng(seed | 1), seed)
    }

    pub fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n as u64) as usize
    }

    pub fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            items.swap(i, self.below(i + 1));
        }
    }
}

/// The table the workers' inside work writes: one row per job, ever.
pub const DONE_INSIDE: &str =
    "CREATE TABLE done_inside (job_id uuid PRIMARY KEY, attempt int NOT NULL, worker text NOT NULL, \
     done_at timestamptz NOT NULL DEFAULT clock_timestamp())";

/// Words added to a DSN so that every session of the load names itself
/// (`fault-producer`, or `fault-` and the worker's name: the fault injectors
/// pick their victims by it) and no statement can hang a test forever on a
/// wedged server.
pub fn session_words(application_name: &str) -> String {
    format!("application_name={application_name} options='-c statement_timeout=20s'")
}

/// The worker processes, one per slot; a killed one is replaced by a new
/// process in the same slot. Dropping this kills every one still running.
pub struct Workers {
    dsn: String,
    events_dir: PathBuf,
    stop_file: PathBuf,
    max_seconds: u64,
    slots: Vec<Child>,
    /// The name of the process in each slot (also its events file's name).
    names: Vec<String>,
    /// When each slot's worker, if stopped with SIGSTOP, is to go on.
    paused_until: Vec<Option<Instant>>,
    /// Until when each slot's worker is spared from SIGKILL: while paused
    /// and for a moment after, so that it gets to present its stale token.
    spared_until: Vec<Instant>,
    started: usize,
}

impl Workers {
    /// Starts `count` workers, alternating the `tx` and `lease` styles.
    /// Their events go to files in `events_dir`, one per process.
    pub fn start(count: usize, dsn: &str, events_dir: &Path, max_seconds: u64) -> Workers {
        std::fs::create_dir_all(events_dir).unwrap();
        let mut workers = Workers {
            dsn: dsn.to_string(),
            events_dir: events_dir.to_path_buf(),
            stop_file: events_dir.join("stop"),
            max_seconds,
            slots: Vec::new(),
            names: vec![String::new(); count],
            paused_until: vec![None; count],
            spared_until: vec![Instant::now(); count],
            started: 0,
        };
        for slot in 0..count {
            let child = workers.spawn(slot);
            workers.slots.push(child);
        }
        workers
    }

    fn spawn(&mut self, slot: usize) -> Child {
        self.started += 1;
        let style = if slot % 2 == 0 { "tx" } else { "lease" };
        let name = format!("w{slot}.{}", self.started);
        self.names[slot] = name.clone();
        Command::new(env!("CARGO_BIN_EXE_fault-worker"))
            .arg(format!("{} {}", self.dsn, session_words(&format!("fault-{name}"))))
            .arg(&name)
            .arg(style)
            .arg(self.events_dir.join(format!("{name}.events")))
            .arg(&self.stop_file)
            .arg(self.max_seconds.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .spawn()
            .expect("starting a fault-worker")
    }

    /// SIGKILLs the worker in a random slot, mid-whatever it was doing, and
    /// starts a new one there; returns the name of the one killed. A paused
    /// worker is spared while another can be chosen.
    pub fn kill_one(&mut self, rng: &mut Rng) -> String {
        let now = Instant::now();
        let unspared: Vec<usize> = (0..self.slots.len()).filter(|&slot| self.spared_until[slot] <= now).collect();
        let slot = if unspared.is_empty() { rng.below(self.slots.len()) } else { unspared[rng.below(unspared.len())] };
        let _ = self.slots[slot].kill(); // SIGKILL, which a stopped process gets too
        let _ = self.slots[slot].wait();
        self.paused_until[slot] = None;
        let killed = self.names[slot].clone();
        self.slots[slot] = self.spawn(slot);
        killed
    }

    /// Stops a `lease`-style worker with SIGSTOP for `pause`, longer than
    /// its lease, while it holds a job: its connection stays open while its
    /// job is rescued and handed to another worker, and when it goes on, its
    /// completion must be fenced off. It tries for a second to catch a
    /// worker mid-job (its last event is `outside`), and otherwise pauses
    /// one wherever it is. Returns its name and whether it was caught
    /// mid-job, or None when every such worker is paused already.
    pub fn pause_one(&mut self, rng: &mut Rng, pause: Duration) -> Option<(String, bool)> {
        let lease_slots: Vec<usize> =
            (1..self.slots.len()).step_by(2).filter(|&slot| self.paused_until[slot].is_none()).collect();
        if lease_slots.is_empty() {
            return None;
        }
        let mid_job = |workers: &Workers, slot: usize| {
            let events = std::fs::read_to_string(workers.events_dir.join(format!("{}.events", workers.names[slot])));
            events.is_ok_and(|text| text.lines().last().is_some_and(|line| line.starts_with("outside ")))
        };
        let tries_until = Instant::now() + Duration::from_secs(1);
        let (slot, caught) = loop {
            let slot = lease_slots[rng.below(lease_slots.len())];
            if Instant::now() >= tries_until {
                signal(&self.slots[slot], libc::SIGSTOP);
                break (slot, mid_job(self, slot));
            }
            if mid_job(self, slot) {
                signal(&self.slots[slot], libc::SIGSTOP);
                if mid_job(self, slot) {
                    break (slot, true);
                }
                signal(&self.slots[slot], libc::SIGCONT); // it finished the job meanwhile
            }
            sleep(Duration::from_millis(2));
        };
        self.paused_until[slot] = Some(Instant::now() + pause);
        self.spared_until[slot] = Instant::now() + pause + Duration::from_secs(1);
        Some((self.names[slot].clone(), caught))
    }

    /// Lets paused workers whose pause is over go on.
    pub fn resume_paused(&mut self) {
        for (slot, until) in self.paused_until.iter_mut().enumerate() {
            if until.is_some_and(|t| t <= Instant::now()) {
                signal(&self.slots[slot], libc::SIGCONT);
                *until = None;
            }
        }
    }

    /// Waits until every pause is over, and lets those workers go on.
    pub fn end_pauses(&mut self) {
        if let Some(last) = self.paused_until.iter().flatten().max() {
            if let Some(wait) = last.checked_duration_since(Instant::now()) {
                sleep(wait);
            }
        }
        self.resume_paused();
    }

    /// The application_name of every worker spared from faults right now.
    pub fn spared_sessions(&self) -> Vec<String> {
        let now = Instant::now();
        (0..self.slots.len())
            .filter(|&slot| self.spared_until[slot] > now)
            .map(|slot| format!("fault-{}", self.names[slot]))
            .collect()
    }

    pub fn processes_started(&self) -> usize {
        self.started
    }

    /// Asks every worker to stop after its current job, and kills those that
    /// do not within a few seconds.
    pub fn stop(&mut self) {
        self.end_pauses();
        std::fs::write(&self.stop_file, b"").unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        for child in &mut self.slots {
            while Instant::now() < deadline && matches!(child.try_wait(), Ok(None)) {
                sleep(Duration::from_millis(20));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// A signal to a worker process of ours; it is not reaped before it is
/// killed, so its pid cannot have gone to another process.
fn signal(child: &Child, signal: libc::c_int) {
    // SAFETY: kill has no memory-safety preconditions.
    unsafe { libc::kill(child.id() as libc::pid_t, signal) };
}

impl Drop for Workers {
    fn drop(&mut self) {
        for child in &mut self.slots {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// What the producers did.
#[derive(Default)]
pub struct Produced {
    /// Ids of jobs whose enqueue the producer saw COMMIT succeed.
    pub confirmed: Vec<String>,
    /// Batches whose COMMIT was sent but whose answer was lost: enqueued
    /// again, so they may exist twice.
    pub unknown_commits: usize,
    /// Batches that failed before COMMIT (rolled back) and were retried.
    pub retried: usize,
    /// Batches never confirmed before the producers' deadline.
    pub given_up: usize,
}

/// Producer threads: together they enqueue `batches` batches of
/// `batch_size` jobs into queue `q`, at an even pace over `seconds`, each in a
/// transaction of its own, reconnecting and retrying a batch until its
/// COMMIT is seen to succeed; with `groups`, queue `q`'s jobs are spread
/// over that many fair groups (`g0`, `g1`, …). Every `stale_every`-th batch
/// is instead one job in queue `stale` (see src/bin/fault_worker.rs).
pub struct Producers {
    threads: Vec<JoinHandle<()>>,
    produced: Arc<Mutex<Produced>>,
    batches_done: Arc<AtomicUsize>,
}

/// Jobs retry forever (no `exhausted`), quickly: a job whose worker died
/// comes back within a second or so instead of after the 12 hours the
/// default backoff reaches. Queue `stale`'s jobs come first (priority 1):
/// the retry of a job whose late worker waits for it to be taken over must
/// not wait behind a backlog of queue `q` (a slow machine drained the
/// short mode 11 s after the last enqueue, longer than the late worker
/// waits: the 2026-11-27 CI run saw no stale token presented).
const ENQUEUE: &str = "SELECT id::text FROM rq_enqueue_batch($2, $1::text[], max_retry_count => NULL, \
                       backoff_base => '100 ms', min_retry_delay => '100 ms', max_retry_delay => '1 second', \
                       priority => CASE WHEN $2::text = 'stale' THEN 1 ELSE 0 END, group_keys => $3::text[])";

impl Producers {
    pub fn start(
        dsn: &str,
        threads: usize,
        batches: usize,
        batch_size: usize,
        stale_every: usize,
        seconds: f64,
        deadline: Instant,
        groups: usize,
    ) -> Producers {
        let dsn = format!("{dsn} {}", session_words("fault-producer"));
        let produced = Arc::new(Mutex::new(Produced::default()));
        let batches_done = Arc::new(AtomicUsize::new(0));
        let start = Instant::now();
        let pace = Duration::from_secs_f64(seconds / batches as f64);
        let threads = (0..threads)
            .map(|producer| {
                let (dsn, produced, batches_done) = (dsn.clone(), produced.clone(), batches_done.clone());
                // this producer's batches: every `threads`-th, so the pace holds overall
                let mine: Vec<usize> = (producer..batches).step_by(threads).collect();
                std::thread::spawn(move || {
                    let mut client: Option<Client> = None;
                    for batch in mine {
                        let due = start + pace * batch as u32;
                        if let Some(wait) = due.checked_duration_since(Instant::now()) {
                            sleep(wait);
                        }
                        let stale = batch % stale_every == stale_every / 2;
                        let (queue, size) = if stale { ("stale", 1) } else { ("q", batch_size) };
                        let payloads: Vec<String> = (0..size).map(|i| format!("b{batch}-{i}")).collect();
                        let group_keys: Option<Vec<String>> =
                            (groups > 0 && !stale).then(|| (0..size).map(|i| format!("g{}", (batch + i) % groups)).collect());
                        let ids =
                            enqueue_until_confirmed(&dsn, &mut client, queue, &payloads, group_keys.as_deref(), &produced, deadline);
                        let mut produced = produced.lock().unwrap();
                        match ids {
                            Some(ids) => produced.confirmed.extend(ids),
                            None => produced.given_up += 1,
                        }
                        batches_done.fetch_add(1, Ordering::SeqCst);
                    }
                })
            })
            .collect();
        Producers { threads, produced, batches_done }
    }

    /// How many jobs have been confirmed so far: the first that many ids of
    /// the final `confirmed` were committed before this call returned.
    pub fn confirmed_so_far(&self) -> usize {
        self.produced.lock().unwrap().confirmed.len()
    }

    pub fn confirmed_ids(&self, first: usize) -> Vec<String> {
        self.produced.lock().unwrap().confirmed[..first].to_vec()
    }

    pub fn batches_done(&self) -> usize {
        self.batches_done.load(Ordering::SeqCst)
    }

    pub fn join(self) -> Produced {
        for thread in self.threads {
            thread.join().expect("a producer panicked");
        }
        std::mem::take(&mut *self.produced.lock().unwrap())
    }
}

/// One more job of queue `stale`, once the faults are over: a late worker
/// and the worker that takes its job over, with nothing in their way, so
/// that every run presents at least one stale token (during the faults,
/// the late worker, mid-job for seconds, is the likeliest to be killed).
/// Its id joins `produced.confirmed`.
pub fn enqueue_one_stale(dsn: &str, produced: &mut Produced, deadline: Instant) {
    // once no worker is late (src/bin/fault_worker.rs LATE_LOCK): a worker
    // still late on a job of the load would keep this one from being late
    let late = "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND classid = 7310 AND objid = 1";
    while Instant::now() < deadline {
        let free = Client::connect(dsn, NoTls)
            .ok()
            .and_then(|mut c| c.query_one(late, &[]).ok())
            .is_some_and(|r| r.get::<_, i64>(0) == 0);
        if free {
            break;
        }
        sleep(Duration::from_millis(100));
    }
    let shared = Mutex::new(std::mem::take(produced));
    let ids = enqueue_until_confirmed(dsn, &mut None, "stale", &["late".to_string()], None, &shared, deadline);
    *produced = shared.into_inner().unwrap();
    match ids {
        Some(ids) => produced.confirmed.extend(ids),
        None => produced.given_up += 1,
    }
}

fn enqueue_until_confirmed(
    dsn: &str,
    client: &mut Option<Client>,
    queue: &str,
    payloads: &[String],
    group_keys: Option<&[String]>,
    produced: &Mutex<Produced>,
    deadline: Instant,
) -> Option<Vec<String>> {
    while Instant::now() < deadline {
        if client.as_ref().is_none_or(|c| c.is_closed()) {
            match Client::connect(dsn, NoTls) {
                Ok(c) => *client = Some(c),
                Err(_) => {
                    sleep(Duration::from_millis(100));
                    continue;
                }
            }
        }
        let c = client.as_mut().unwrap();
        let mut committing = false;
        let attempt = (|| {
            let mut tx = c.transaction()?;
            let ids: Vec<String> = tx.query(ENQUEUE, &[&payloads, &queue, &group_keys])?.iter().map(|row| row.get(0)).collect();
            committing = true;
            tx.commit()?;
            Ok::<_, postgres::Error>(ids)
        })();
        match attempt {
            Ok(ids) => return Some(ids),
            Err(_) => {
                let mut produced = produced.lock().unwrap();
                if committing {
                    produced.unknown_commits += 1;
                } else {
                    produced.retried += 1;
                }
                *client = None;
            }
        }
    }
    None
}

/// What the workers' event files say.
#[derive(Default, Debug)]
pub struct Events {
    /// Outside work per job id: how many times it was done.
    pub outside: HashMap<String, usize>,
    pub completions_seen: usize,
    /// Inside work that a commit refused as a second row for its job.
    pub duplicates: Vec<String>,
    /// Completions refused because another attempt had taken the job over.
    pub fenced: usize,
    /// Completions with a token the worker knew to be stale (queue `stale`).
    pub stale: HashSet<(String, String)>,
    /// Completions that committed, by job and attempt.
    pub done: HashSet<(String, String)>,
    /// Completions refused with 40001 because the job changed under them.
    pub conflicts: usize,
    pub connects: usize,
    pub connections_lost: usize,
    /// Errors of any other kind, which no fault here should cause.
    pub unexpected: Vec<String>,
}

impl Events {
    pub fn read(dir: &Path) -> Events {
        let mut events = Events::default();
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_none_or(|e| e != "events") {
                continue;
            }
            for line in std::fs::read_to_string(&path).unwrap().lines() {
                let mut words = line.splitn(3, ' ');
                match (words.next(), words.next()) {
                    (Some("connected"), _) => events.connects += 1,
                    (Some("outside"), Some(id)) => *events.outside.entry(id.to_string()).or_default() += 1,
                    (Some("done"), Some(id)) => {
                        events.completions_seen += 1;
                        events.done.insert((id.to_string(), attempt_of(line)));
                    }
                    (Some("stale"), Some(id)) => {
                        events.stale.insert((id.to_string(), attempt_of(line)));
                    }
                    (Some("duplicate"), _) => events.duplicates.push(line.to_string()),
                    (Some("fenced"), _) => events.fenced += 1,
                    (Some("conflict"), _) => events.conflicts += 1,
                    (Some("lost"), _) => events.connections_lost += 1,
                    _ => events.unexpected.push(format!("{}: {line}", path.display())),
                }
            }
        }
        events
    }

    /// Stale tokens that a completion accepted: the fence failed.
    pub fn stale_accepted(&self) -> Vec<&(String, String)> {
        self.stale.intersection(&self.done).collect()
    }

    /// Outside work done more than once: the price of at-least-once.
    pub fn outside_repeats(&self) -> usize {
        self.outside.values().map(|n| n - 1).sum()
    }
}

/// The third word of an event line: the attempt.
fn attempt_of(line: &str) -> String {
    line.split(' ').nth(2).unwrap_or_default().to_string()
}

/// What the database says once the queue has drained.
#[derive(Debug)]
pub struct Reckoning {
    pub jobs: i64,
    pub not_success: Vec<String>,
    pub claimed: i64,
    pub inside_rows: i64,
    /// Jobs with no row of inside work, or whose row is not from the
    /// attempt that completed the job.
    pub inside_mismatched: Vec<String>,
    pub inside_without_job: i64,
    pub attempts: i64,
    pub rescued: i64,
    /// Confirmed enqueues whose job is not in the table.
    pub confirmed_missing: Vec<String>,
    /// Jobs whose outside work was never done.
    pub outside_missing: Vec<String>,
}

pub fn reckon(client: &mut Client, confirmed: &[String], events: &Events) -> Reckoning {
    let one = |client: &mut Client, sql: &str| -> i64 { client.query_one(sql, &[]).unwrap().get(0) };
    let list = |client: &mut Client, sql: &str| -> Vec<String> {
        client.query(sql, &[]).unwrap().iter().map(|row| row.get(0)).collect()
    };
    let jobs = one(client, "SELECT count(*) FROM jobs WHERE queue IN ('q', 'stale')");
    let not_success = list(
        client,
        "SELECT id::text || ' ' || status FROM jobs WHERE queue IN ('q', 'stale') AND status <> 'success' LIMIT 20",
    );
    let claimed = one(client, "SELECT count(*) FROM jobs WHERE status = 'claimed'");
    let inside_rows = one(client, "SELECT count(*) FROM done_inside");
    let inside_mismatched = list(
        client,
        "SELECT j.id::text || ' attempts ' || j.attempts || ' inside ' || coalesce(d.attempt::text, 'none') \
         FROM jobs j LEFT JOIN done_inside d ON d.job_id = j.id \
         WHERE j.queue IN ('q', 'stale') AND d.attempt IS DISTINCT FROM j.attempts LIMIT 20",
    );
    let inside_without_job =
        one(client, "SELECT count(*) FROM done_inside d WHERE NOT EXISTS (SELECT FROM jobs j WHERE j.id = d.job_id)");
    let attempts = one(client, "SELECT coalesce(sum(attempts), 0)::bigint FROM jobs WHERE queue IN ('q', 'stale')");
    // A rescue leaves its reason in `error`; a later success keeps it.
    let rescued =
        one(client, "SELECT count(*) FROM jobs WHERE queue IN ('q', 'stale') AND error LIKE 'lease expired%'");
    let present: HashSet<String> = client
        .query("SELECT id::text FROM jobs WHERE id = ANY($1::text[]::uuid[])", &[&confirmed])
        .unwrap()
        .iter()
        .map(|row| row.get(0))
        .collect();
    let confirmed_missing = confirmed.iter().filter(|id| !present.contains(*id)).take(20).cloned().collect();
    let outside_missing = list(client, "SELECT id::text FROM jobs WHERE queue IN ('q', 'stale')")
        .into_iter()
        .filter(|id| !events.outside.contains_key(id))
        .take(20)
        .collect();
    Reckoning {
        jobs,
        not_success,
        claimed,
        inside_rows,
        inside_mismatched,
        inside_without_job,
        attempts,
        rescued,
        confirmed_missing,
        outside_missing,
    }
}

impl Reckoning {
    /// The guarantees both tests prove, each with what broke it.
    pub fn assert_exactly_once_inside_and_at_least_once_outside(&self, events: &Events, confirmed: usize) {
        assert!(self.confirmed_missing.is_empty(), "committed enqueues lost: {:?}", self.confirmed_missing);
        assert!(self.jobs >= confirmed as i64, "{} jobs, {confirmed} confirmed", self.jobs);
        assert!(self.not_success.is_empty(), "jobs not done: {:?}", self.not_success);
        assert_eq!(self.claimed, 0, "jobs left claimed");
        assert!(events.duplicates.is_empty(), "inside work committed twice for a job: {:?}", events.duplicates);
        assert!(events.stale_accepted().is_empty(), "stale tokens accepted: {:?}", events.stale_accepted());
        assert_eq!(self.inside_rows, self.jobs, "one row of inside work per job");
        assert_eq!(self.inside_without_job, 0, "inside work for jobs that do not exist");
        assert!(
            self.inside_mismatched.is_empty(),
            "inside work missing or not from the completing attempt: {:?}",
            self.inside_mismatched
        );
        assert!(self.outside_missing.is_empty(), "jobs done without their outside work: {:?}", self.outside_missing);
        assert!(events.unexpected.is_empty(), "workers met unexpected errors: {:?}", events.unexpected);
    }
}

/// Polls until every job of queue `q` is `success`, up to `limit`; how long
/// it took, or None. Connects afresh when the connection is lost.
pub fn wait_for_drain(dsn: &str, limit: Duration) -> Option<Duration> {
    let start = Instant::now();
    let mut client: Option<Client> = None;
    while start.elapsed() < limit {
        if client.as_ref().is_none_or(|c| c.is_closed()) {
            client = Client::connect(dsn, NoTls).ok();
        }
        if let Some(c) = client.as_mut() {
            match c.query_one("SELECT count(*) FROM jobs WHERE queue IN ('q', 'stale') AND status <> 'success'", &[]) {
                Ok(row) if row.get::<_, i64>(0) == 0 => return Some(start.elapsed()),
                Ok(_) => {}
                Err(_) => client = None,
            }
        }
        sleep(Duration::from_millis(100));
    }
    None
}

/// Lines of the server log that contain `needle`.
pub fn log_count(log: &str, needle: &str) -> usize {
    log.lines().filter(|line| line.contains(needle)).count()
}

/// Signs in the server log that a server process crashed by itself (not by
/// a test's SIGKILL): a bug, in raquel or elsewhere.
pub fn crashes_in_log(log: &str) -> Vec<String> {
    log.lines()
        .filter(|l| {
            // 9 is the tests' SIGKILL, 3 the postmaster's SIGQUIT to every
            // process after it
            let signalled = l.contains("terminated by signal") && !l.contains("signal 9") && !l.contains("signal 3");
            signalled || l.contains("PANIC:")
        })
        .map(str::to_string)
        .collect()
}

/// Prints a line that shows even when the test harness captures the
/// output (it captures print! and eprint!, not the stderr handle itself), so
/// that every run reports its figures.
pub fn summary(line: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "{line}");
}
