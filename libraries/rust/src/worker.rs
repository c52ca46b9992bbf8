//! The worker runtime: one claim loop on a connection of its own, handlers
//! on tokio tasks up to the concurrency, completions batched across
//! handlers, lease extension and graceful shutdown, all over raquel's verbs
//! on two connections (the claim connection and a side connection that
//! tokio-postgres pipelines for everything else).
//!
//! Why two connections: a waiting claim holds its connection until a job
//! comes or the wait ends, and a completion sent in the same statement would
//! not commit before the wait ends (rq_complete_batch_and_claim is one
//! transaction). So the claim loop sends the completions in hand with a claim
//! that does not wait, and a completion that arrives while a claim waits is
//! sent by the flusher on the side connection once it has waited
//! `completion_delay`: no completion waits longer than that.

use crate::job::Job;
use crate::{Error, HandlerError};
use futures::FutureExt;
use serde::Serialize;
use serde_json::Value;
use std::collections::HashMap;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};
use tokio_postgres::Client;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send + 'static>>;
type HandlerFn = Arc<dyn Fn(Job) -> BoxFuture<Result<Option<Value>, HandlerError>> + Send + Sync>;

/// The tracing hook: called around each job with what it is and the job's
/// run (the handler and the recording of its end) as a future; it must
/// await that future and return its outcome. Open a span, time it, count it.
pub type Around = Arc<dyn Fn(JobInfo, BoxFuture<Outcome>) -> BoxFuture<Outcome> + Send + Sync>;

/// What the tracing hook is told of a job.
#[derive(Debug, Clone)]
pub struct JobInfo {
    pub id: Uuid,
    pub attempt: i32,
    pub queue: String,
}

/// How a job's run ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// The handler returned Ok: its completion is sent (batched).
    Completed,
    /// The handler returned an error or panicked: recorded with rq_fail.
    Failed(String),
    /// The handler slept or waited (the job is queued again, due later).
    Parked,
    /// The shutdown deadline passed first: handed back with rq_reject.
    HandedBack,
}

/// What a worker did, returned when it stops.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stats {
    pub claimed: u64,
    pub completed: u64,
    pub failed: u64,
    pub parked: u64,
    pub handed_back: u64,
    /// Completions, failures or hand-backs raquel refused because the
    /// attempt no longer held the job (fencing).
    pub refused: u64,
}

#[derive(Default)]
struct Counters {
    claimed: AtomicU64,
    completed: AtomicU64,
    failed: AtomicU64,
    parked: AtomicU64,
    handed_back: AtomicU64,
    refused: AtomicU64,
}

/// A job that succeeded, waiting for its completion to be sent.
struct Done {
    id: Uuid,
    attempt: i32,
    result: Option<Value>,
    since: Instant,
}

/// A raquel worker: handlers by queue and the settings they run with.
///
/// ```no_run
/// # async fn doc() -> Result<(), raquel_pg::Error> {
/// raquel_pg::Worker::new("host=/tmp/raquel-dev port=54320 user=postgres dbname=raquel")
///     .handle("emails", |job| async move {
///         println!("sending {:?}", job.payload());
///         Ok(())
///     })
///     .concurrency(10)
///     .run() // until SIGTERM or Ctrl-C
///     .await?;
/// # Ok(()) }
/// ```
pub struct Worker {
    dsn: String,
    handlers: HashMap<String, HandlerFn>,
    concurrency: usize,
    prefetch: usize,
    lease: Duration,
    claim_wait: Duration,
    completion_delay: Duration,
    shutdown_timeout: Duration,
    extend_every: Option<Duration>,
    name: String,
    around: Option<Around>,
}

impl Worker {
    /// A worker for the database at `dsn` (libpq key=value or URL). Defaults:
    /// concurrency 10, lease 60 s (extended every lease/3 while a handler
    /// runs), claims wait 5 s before they loop, completions wait at most
    /// 20 ms to be batched, 30 s for the jobs in hand at shutdown.
    pub fn new(dsn: impl Into<String>) -> Worker {
        Worker {
            dsn: dsn.into(),
            handlers: HashMap::new(),
            concurrency: 10,
            prefetch: 0,
            lease: Duration::from_secs(60),
            claim_wait: Duration::from_secs(5),
            completion_delay: Duration::from_millis(20),
            shutdown_timeout: Duration::from_secs(30),
            extend_every: None,
            name: format!("raquel-pg-{}", std::process::id()),
            around: None,
        }
    }

    /// The handler of `queue`'s jobs. It returns the job's result (any
    /// serde value; `()` for none), stored with the completion; an error
    /// fails the attempt (retried after the backoff); [`Error::Parked`]
    /// from `sleep`, `wait_event` or `await_job` ends it without either.
    pub fn handle<F, Fut, T>(mut self, queue: impl Into<String>, handler: F) -> Worker
    where
        F: Fn(Job) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<T, HandlerError>> + Send + 'static,
        T: Serialize + 'static,
    {
        let handler = Arc::new(handler);
        let erased: HandlerFn = Arc::new(move |job: Job| -> BoxFuture<Result<Option<Value>, HandlerError>> {
            let run = handler(job);
            Box::pin(async move {
                let value = run.await?;
                let json = serde_json::to_value(&value)
                    .map_err(|source| Error::Json { context: "the handler's result".into(), source })?;
                Ok(if json.is_null() { None } else { Some(json) })
            })
        });
        self.handlers.insert(queue.into(), erased);
        self
    }

    /// How many jobs run at once (claimed at most that many at a time).
    pub fn concurrency(mut self, jobs: usize) -> Worker {
        self.concurrency = jobs;
        self
    }
    /// A local queue: up to this many jobs claimed beyond the free slots,
    /// waiting in this process for a slot (their leases extended as the
    /// running jobs' are). The loop then claims once that many have ended,
    /// so that one round trip brings a batch while the jobs in hand run.
    /// Default 0: a job is claimed only when a slot is free for it. At
    /// shutdown the jobs still waiting are handed back at once.
    pub fn prefetch(mut self, jobs: usize) -> Worker {
        self.prefetch = jobs;
        self
    }
    /// The lease of each claim; extended while its handler runs.
    pub fn lease(mut self, lease: Duration) -> Worker {
        self.lease = lease;
        self
    }
    /// How often a running job's lease is extended (default lease/3).
    pub fn extend_every(mut self, every: Duration) -> Worker {
        self.extend_every = Some(every);
        self
    }
    /// How long a claim that finds nothing waits (in the server, woken by
    /// an enqueue's commit) before the loop calls again. Not a poll
    /// interval: a job committed during the wait is claimed at once.
    pub fn claim_wait(mut self, wait: Duration) -> Worker {
        self.claim_wait = wait;
        self
    }
    /// The longest a finished job's completion waits to be batched with
    /// others before it is sent.
    pub fn completion_delay(mut self, delay: Duration) -> Worker {
        self.completion_delay = delay;
        self
    }
    /// At shutdown, how long the jobs in hand may take to finish; those
    /// still running then are handed back (rq_reject) for another worker.
    pub fn shutdown_timeout(mut self, timeout: Duration) -> Worker {
        self.shutdown_timeout = timeout;
        self
    }
    /// The worker's name in `claimed_by` (default `raquel-pg-<pid>`).
    pub fn name(mut self, name: impl Into<String>) -> Worker {
        self.name = name.into();
        self
    }
    /// The tracing hook, called around each job (see [`Around`]).
    pub fn around<F, Fut>(mut self, hook: F) -> Worker
    where
        F: Fn(JobInfo, BoxFuture<Outcome>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Outcome> + Send + 'static,
    {
        self.around =
            Some(Arc::new(move |info: JobInfo, run: BoxFuture<Outcome>| -> BoxFuture<Outcome> { Box::pin(hook(info, run)) }));
        self
    }

    /// Runs until SIGTERM or SIGINT, then shuts down gracefully: claims
    /// stop, the jobs in hand get `shutdown_timeout` to finish, the rest are
    /// handed back, the completions are sent.
    pub async fn run(self) -> Result<Stats, Error> {
        // Listening from the start, so that a SIGTERM that comes while the
        // worker connects is not the default action (the process's end).
        let term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate());
        self.run_until(termination(term)).await
    }

    /// Runs until `shutdown` resolves, then shuts down as `run` does.
    pub async fn run_until(self, shutdown: impl Future<Output = ()> + Send) -> Result<Stats, Error> {
        if self.handlers.is_empty() {
            return Err(Error::Config("the worker has no handler: call .handle(queue, handler) first".into()));
        }
        if self.concurrency == 0 || self.concurrency + self.prefetch > 100_000 {
            return Err(Error::Config(format!(
                "concurrency {} (with prefetch {}) is not between 1 and 100000",
                self.concurrency, self.prefetch
            )));
        }
        if self.lease < Duration::from_millis(1) {
            return Err(Error::Config("the lease must be at least a millisecond".into()));
        }
        let claim_client = crate::connect(&self.dsn).await?;
        let side = Arc::new(crate::connect(&self.dsn).await?);
        let worker = Arc::new(self);
        let shared = Arc::new(Shared {
            pending: Mutex::new(Vec::new()),
            pending_added: Notify::new(),
            in_flight: Mutex::new(HashMap::new()),
            counters: Counters::default(),
            side,
            hard_stop: CancellationToken::new(),
            slots: Arc::new(Semaphore::new(worker.concurrency)),
            capacity: Arc::new(Semaphore::new(worker.concurrency + worker.prefetch)),
            stopping: CancellationToken::new(),
        });
        log::info!(
            "raquel-pg: worker {} on queues {:?}, concurrency {}",
            worker.name,
            worker.handlers.keys().collect::<Vec<_>>(),
            worker.concurrency
        );

        let stop_claiming = shared.stopping.clone();
        let background = CancellationToken::new();
        let flusher = tokio::spawn(flush_loop(worker.clone(), shared.clone(), background.clone()));
        let extender = tokio::spawn(extend_loop(worker.clone(), shared.clone(), background.clone()));
        let mut claimer =
            tokio::spawn(claim_loop(worker.clone(), shared.clone(), claim_client, stop_claiming.clone()));

        let mut outcome: Result<(), Error> = Ok(());
        tokio::select! {
            _ = shutdown => log::info!("raquel-pg: worker {} stopping: no more claims", worker.name),
            ended = &mut claimer => {
                outcome = match ended {
                    Ok(result) => result,
                    Err(join) => Err(Error::Config(format!("the claim loop panicked: {join}"))),
                };
                log::error!("raquel-pg: worker {} claim loop ended, stopping", worker.name);
            }
        }
        stop_claiming.cancel();
        if !claimer.is_finished() {
            match claimer.await {
                Ok(Err(error)) => log::warn!("raquel-pg: claim loop: {error}"),
                Err(join) => log::warn!("raquel-pg: claim loop panicked: {join}"),
                Ok(Ok(())) => {}
            }
        }

        // The jobs in hand get shutdown_timeout (those waiting for a slot
        // are handed back at once); all capacity free means all done.
        let all = (worker.concurrency + worker.prefetch) as u32;
        let drained = tokio::time::timeout(worker.shutdown_timeout, shared.capacity.acquire_many(all)).await;
        if drained.is_err() {
            let left = shared.in_flight.lock().unwrap().len();
            log::warn!("raquel-pg: shutdown deadline passed with {left} jobs running: handing them back");
            shared.hard_stop.cancel();
            // Each running job's task sends its rq_reject and frees its slot.
            let _ = shared.capacity.acquire_many(all).await;
        }
        background.cancel();
        let _ = flusher.await;
        extender.abort();
        // What the flusher had not sent yet.
        flush(&shared, take_all(&shared)).await;
        let c = &shared.counters;
        let stats = Stats {
            claimed: c.claimed.load(Ordering::SeqCst),
            completed: c.completed.load(Ordering::SeqCst),
            failed: c.failed.load(Ordering::SeqCst),
            parked: c.parked.load(Ordering::SeqCst),
            handed_back: c.handed_back.load(Ordering::SeqCst),
            refused: c.refused.load(Ordering::SeqCst),
        };
        log::info!("raquel-pg: worker {} stopped: {stats:?}", worker.name);
        outcome.map(|()| stats)
    }
}

/// SIGTERM or SIGINT (Ctrl-C).
async fn termination(term: std::io::Result<tokio::signal::unix::Signal>) {
    match term {
        Ok(mut term) => {
            tokio::select! {
                _ = term.recv() => {}
                _ = tokio::signal::ctrl_c() => {}
            }
        }
        Err(error) => {
            log::warn!("raquel-pg: cannot listen for SIGTERM ({error}); stopping on Ctrl-C only");
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}

struct Shared {
    pending: Mutex<Vec<Done>>,
    pending_added: Notify,
    in_flight: Mutex<HashMap<Uuid, (Job, Instant)>>,
    counters: Counters,
    side: Arc<Client>,
    hard_stop: CancellationToken,
    /// Handlers running at once: `concurrency`.
    slots: Arc<Semaphore>,
    /// Jobs claimed and not ended: `concurrency + prefetch`.
    capacity: Arc<Semaphore>,
    /// Set at shutdown: no more claims, no more handlers started.
    stopping: CancellationToken,
}

fn take_all(shared: &Shared) -> Vec<Done> {
    std::mem::take(&mut *shared.pending.lock().unwrap())
}

const CLAIM: &str = "SELECT id, attempts, queue, payload FROM rq_complete_batch_and_claim(ids => $1, attempts => $2, \
                     queues => $3, worker => $4, batch => $5, lease => make_interval(secs => $6), \
                     wait => make_interval(secs => $7), results => $8)";

/// Claims while there is room: each call sends the completions in hand and
/// claims as many jobs as there is room for, in one statement. With a
/// prefetch, it waits until at least `prefetch` jobs have ended, so that
/// each round trip brings a batch.
async fn claim_loop(worker: Arc<Worker>, shared: Arc<Shared>, client: Client, stop: CancellationToken) -> Result<(), Error> {
    let statement = client.prepare(CLAIM).await.map_err(|e| Error::db("preparing the claim", e))?;
    let queues: Vec<String> = worker.handlers.keys().cloned().collect();
    let lease = worker.lease.as_secs_f64();
    let wait = worker.claim_wait.as_secs_f64();
    let room = worker.prefetch.clamp(1, worker.concurrency + worker.prefetch) as u32;
    loop {
        let first = tokio::select! {
            permit = shared.capacity.clone().acquire_many_owned(room) => permit.expect("the capacity is never closed"),
            _ = stop.cancelled() => return Ok(()),
        };
        if stop.is_cancelled() {
            return Ok(());
        }
        // Without the side connection no failure or extension could be
        // recorded: stop claiming rather than take jobs that would lapse.
        if shared.side.is_closed() {
            return Err(Error::Closed("side"));
        }
        let mut permits: Vec<OwnedSemaphorePermit> = Vec::new();
        let mut first = first;
        while first.num_permits() > 1 {
            permits.push(first.split(1).expect("a permit of more than one splits"));
        }
        permits.push(first);
        while let Ok(permit) = shared.capacity.clone().try_acquire_owned() {
            permits.push(permit);
        }
        let done = take_all(&shared);
        // A claim that carries completions does not wait: they would not
        // commit before the wait ends (see the module's comment).
        let this_wait = if done.is_empty() { wait } else { 0.0 };
        let ids: Option<Vec<Uuid>> = (!done.is_empty()).then(|| done.iter().map(|d| d.id).collect());
        let attempts: Option<Vec<i32>> = (!done.is_empty()).then(|| done.iter().map(|d| d.attempt).collect());
        let results: Option<Vec<Option<Value>>> =
            done.iter().any(|d| d.result.is_some()).then(|| done.iter().map(|d| d.result.clone()).collect());
        let batch = permits.len() as i32;
        let params: [&(dyn tokio_postgres::types::ToSql + Sync); 8] =
            [&ids, &attempts, &queues, &worker.name, &batch, &lease, &this_wait, &results];
        let call = client.query(&statement, &params);
        tokio::pin!(call);
        let answer = tokio::select! {
            answer = &mut call => answer,
            _ = stop.cancelled() => {
                // Stop the waiting claim now: cancelled, it rolls back and
                // claims nothing (a claim that had already returned keeps its
                // jobs, handled below as any other).
                if let Err(error) = client.cancel_token().cancel_query(tokio_postgres::NoTls).await {
                    log::warn!("raquel-pg: cancelling the waiting claim: {error}");
                }
                call.await
            }
        };
        match answer {
            Ok(rows) => {
                shared.counters.completed.fetch_add(done.len() as u64, Ordering::SeqCst);
                shared.counters.claimed.fetch_add(rows.len() as u64, Ordering::SeqCst);
                for row in rows {
                    let permit = permits.pop().expect("no more jobs than there is room for are claimed");
                    let queue: String = row.get(2);
                    let job = Job::new(row.get(0), row.get(1), queue.clone(), row.get(3), shared.side.clone());
                    match worker.handlers.get(&queue) {
                        Some(handler) => {
                            let task = run_job(worker.clone(), shared.clone(), handler.clone(), job, permit);
                            tokio::spawn(task);
                        }
                        None => log::error!("raquel-pg: claimed job {} of queue {queue}, which has no handler", job.id()),
                    }
                }
            }
            Err(error) => {
                drop(permits);
                let cancelled = error.code() == Some(&tokio_postgres::error::SqlState::QUERY_CANCELED);
                if cancelled {
                    // rolled back with the claim: sent at shutdown instead
                    shared.pending.lock().unwrap().extend(done);
                    return Ok(());
                }
                if client.is_closed() {
                    shared.pending.lock().unwrap().extend(done);
                    log::error!("raquel-pg: the claim connection closed: {error}");
                    return Err(Error::Closed("claim"));
                }
                // One refused completion (a stale token) refuses the batch and
                // the claim: complete them one by one, then claim again.
                if !done.is_empty() {
                    complete_each(&shared, done).await;
                } else {
                    log::error!("raquel-pg: claim failed: {error}; again in a second");
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
            }
        }
    }
}

/// One job's run: a slot, the handler (under the hook), then its end
/// recorded. `room` is its place among the jobs claimed.
async fn run_job(worker: Arc<Worker>, shared: Arc<Shared>, handler: HandlerFn, job: Job, room: OwnedSemaphorePermit) {
    shared.in_flight.lock().unwrap().insert(job.id(), (job.clone(), Instant::now()));
    // A prefetched job waits here for a slot (the semaphore is first come,
    // first served); at shutdown one still waiting is handed back unstarted.
    let slot = tokio::select! {
        biased;
        _ = shared.stopping.cancelled() => None,
        slot = shared.slots.clone().acquire_owned() => Some(slot.expect("the slots are never closed")),
    };
    let Some(slot) = slot else {
        record_end(&shared, &job, None).await;
        shared.in_flight.lock().unwrap().remove(&job.id());
        drop(room);
        return;
    };
    let info = JobInfo { id: job.id(), attempt: job.attempt(), queue: job.queue().to_string() };
    let body: BoxFuture<Outcome> = {
        let (shared, job) = (shared.clone(), job.clone());
        Box::pin(async move {
            let run = AssertUnwindSafe(handler(job.clone())).catch_unwind();
            let ended = tokio::select! {
                ended = run => Some(ended),
                _ = shared.hard_stop.cancelled() => None,
            };
            record_end(&shared, &job, ended).await
        })
    };
    let outcome = match &worker.around {
        Some(hook) => hook(info, body).await,
        None => body.await,
    };
    log::debug!("raquel-pg: job {} attempt {}: {outcome:?}", job.id(), job.attempt());
    shared.in_flight.lock().unwrap().remove(&job.id());
    drop(slot);
    drop(room);
}

type Ended = Option<Result<Result<Option<Value>, HandlerError>, Box<dyn std::any::Any + Send>>>;

async fn record_end(shared: &Shared, job: &Job, ended: Ended) -> Outcome {
    let c = &shared.counters;
    let (message, trace) = match ended {
        None => {
            // the shutdown deadline: handed back at once, no retry used up
            let handed = shared.side.query_one("SELECT 1 FROM rq_reject($1, $2)", &[&job.id(), &job.attempt()]).await;
            match handed {
                Ok(_) => c.handed_back.fetch_add(1, Ordering::SeqCst),
                Err(error) => {
                    log::warn!("raquel-pg: handing back job {}: {error}", job.id());
                    c.refused.fetch_add(1, Ordering::SeqCst)
                }
            };
            return Outcome::HandedBack;
        }
        Some(Ok(Ok(result))) => {
            shared.pending.lock().unwrap().push(Done { id: job.id(), attempt: job.attempt(), result, since: Instant::now() });
            shared.pending_added.notify_one();
            return Outcome::Completed;
        }
        Some(Ok(Err(error))) => {
            if let Some(Error::Parked(_)) = error.downcast_ref::<Error>() {
                c.parked.fetch_add(1, Ordering::SeqCst);
                return Outcome::Parked;
            }
            (error.to_string(), trace_of(&*error))
        }
        Some(Err(panic)) => {
            let message = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a panic without a message".into());
            (format!("the handler panicked: {message}"), format!("panic in the handler of queue {}: {message}", job.queue()))
        }
    };
    log::warn!("raquel-pg: job {} attempt {} failed: {message}", job.id(), job.attempt());
    let failed = shared
        .side
        .query_one("SELECT 1 FROM rq_fail($1, $2, $3, $4)", &[&job.id(), &job.attempt(), &message, &trace])
        .await;
    match failed {
        Ok(_) => c.failed.fetch_add(1, Ordering::SeqCst),
        Err(error) => {
            log::warn!("raquel-pg: recording job {}'s failure: {error}", job.id());
            c.refused.fetch_add(1, Ordering::SeqCst)
        }
    };
    Outcome::Failed(message)
}

/// The trace recorded with a failure: the error's Debug form (which holds a
/// backtrace for error types that capture one, such as anyhow's with
/// RUST_BACKTRACE=1) and its chain of causes.
fn trace_of(error: &(dyn std::error::Error + 'static)) -> String {
    let mut trace = format!("{error:?}");
    let mut cause = error.source();
    while let Some(inner) = cause {
        trace.push_str(&format!("\ncaused by: {inner}"));
        cause = inner.source();
    }
    trace
}

/// Sends the completions the claim loop has not taken once the oldest has
/// waited `completion_delay`.
async fn flush_loop(worker: Arc<Worker>, shared: Arc<Shared>, stop: CancellationToken) {
    loop {
        tokio::select! {
            _ = shared.pending_added.notified() => {}
            _ = stop.cancelled() => return,
        }
        let oldest = shared.pending.lock().unwrap().first().map(|d| d.since);
        let Some(oldest) = oldest else { continue };
        tokio::select! {
            _ = tokio::time::sleep_until((oldest + worker.completion_delay).into()) => {}
            _ = stop.cancelled() => return,
        }
        let done = take_all(&shared);
        flush(&shared, done).await;
        // more may have come while this batch went
        if !shared.pending.lock().unwrap().is_empty() {
            shared.pending_added.notify_one();
        }
    }
}

async fn flush(shared: &Shared, done: Vec<Done>) {
    if done.is_empty() {
        return;
    }
    let ids: Vec<Uuid> = done.iter().map(|d| d.id).collect();
    let attempts: Vec<i32> = done.iter().map(|d| d.attempt).collect();
    let results: Option<Vec<Option<Value>>> =
        done.iter().any(|d| d.result.is_some()).then(|| done.iter().map(|d| d.result.clone()).collect());
    match shared.side.execute("SELECT count(*) FROM rq_complete_batch($1, $2, $3)", &[&ids, &attempts, &results]).await {
        Ok(_) => {
            shared.counters.completed.fetch_add(done.len() as u64, Ordering::SeqCst);
        }
        // all or nothing: one refused, the others go one by one
        Err(_) => complete_each(shared, done).await,
    }
}

async fn complete_each(shared: &Shared, done: Vec<Done>) {
    for d in done {
        match shared.side.query_one("SELECT 1 FROM rq_complete($1, $2, $3)", &[&d.id, &d.attempt, &d.result]).await {
            Ok(_) => {
                shared.counters.completed.fetch_add(1, Ordering::SeqCst);
            }
            Err(error) => {
                log::warn!("raquel-pg: completion of job {} attempt {} refused: {error}", d.id, d.attempt);
                shared.counters.refused.fetch_add(1, Ordering::SeqCst);
            }
        }
    }
}

/// Extends the lease of every job running longer than a third of it.
async fn extend_loop(worker: Arc<Worker>, shared: Arc<Shared>, stop: CancellationToken) {
    let every = worker.extend_every.unwrap_or(worker.lease / 3).max(Duration::from_millis(10));
    let lease = worker.lease.as_secs_f64();
    loop {
        tokio::select! {
            _ = tokio::time::sleep(every) => {}
            _ = stop.cancelled() => return,
        }
        let due: Vec<Job> = shared
            .in_flight
            .lock()
            .unwrap()
            .values()
            .filter(|(job, started)| started.elapsed() >= every && !job.is_lost())
            .map(|(job, _)| job.clone())
            .collect();
        // pipelined on the side connection, each its own statement, so that
        // one refusal does not undo the others
        let side = &shared.side;
        let calls = due.iter().map(|job| async move {
            side.query_one(
                "SELECT 1 FROM rq_extend($1, $2, make_interval(secs => $3))",
                &[&job.inner.id, &job.inner.attempt, &lease],
            )
            .await
        });
        let answers = futures::future::join_all(calls).await;
        for (job, answer) in due.iter().zip(answers) {
            if let Err(error) = answer {
                // parked jobs leave in_flight as their handler returns;
                // anything else refused means the attempt lost the job
                if error.code() == Some(&tokio_postgres::error::SqlState::OBJECT_NOT_IN_PREREQUISITE_STATE) {
                    job.inner.lost.store(true, std::sync::atomic::Ordering::SeqCst);
                    log::warn!("raquel-pg: job {} attempt {} lost its lease: {error}", job.id(), job.attempt());
                } else {
                    log::warn!("raquel-pg: extending job {}'s lease: {error}", job.id());
                }
            }
        }
    }
}
