//! The job a handler gets, and its durable context: step, sleep, wait_event
//! and await_job over rq_step, rq_sleep, rq_wait_event and rq_wait_job,
//! each passed the job's attempt (its fencing token) by the library.

use crate::enqueue::{EnqueueOptions, Enqueued, Payload};
use crate::{secs, Error, HandlerError};
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;
use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime};
use tokio_postgres::Client;
use uuid::Uuid;

/// A claimed job, as its handler sees it. Cheap to clone (shared inside).
#[derive(Clone)]
pub struct Job {
    pub(crate) inner: Arc<JobInner>,
}

pub(crate) struct JobInner {
    pub(crate) id: Uuid,
    pub(crate) attempt: i32,
    pub(crate) queue: String,
    pub(crate) payload: Option<String>,
    /// The worker's connection for everything but the claims: durable
    /// calls, failures, lease extensions (tokio-postgres pipelines them).
    pub(crate) side: Arc<Client>,
    /// The steps recorded by earlier attempts, read at the first step.
    steps: tokio::sync::Mutex<Option<HashMap<String, Option<Value>>>>,
    /// Set when raquel refused this attempt's lease extension: another
    /// attempt holds the job now, and this one's completion will be refused.
    pub(crate) lost: AtomicBool,
}

/// How an awaited job ended (rq_wait_job).
#[derive(Debug, Clone, PartialEq)]
pub struct JobEnd {
    /// `success`, `exhausted`, `cancelled`, `expired`; None for a job deleted
    /// before its end was seen, or when the wait timed out.
    pub status: Option<String>,
    pub result: Option<Value>,
    pub error: Option<String>,
    pub timed_out: bool,
}

impl std::fmt::Debug for Job {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Job")
            .field("id", &self.inner.id)
            .field("attempt", &self.inner.attempt)
            .field("queue", &self.inner.queue)
            .field("payload", &self.inner.payload)
            .finish()
    }
}

impl Job {
    pub(crate) fn new(id: Uuid, attempt: i32, queue: String, payload: Option<String>, side: Arc<Client>) -> Job {
        Job {
            inner: Arc::new(JobInner {
                id,
                attempt,
                queue,
                payload,
                side,
                steps: tokio::sync::Mutex::new(None),
                lost: AtomicBool::new(false),
            }),
        }
    }

    pub fn id(&self) -> Uuid {
        self.inner.id
    }
    /// The claim's attempt number (its fencing token); the library passes it
    /// to every call, the handler never needs to.
    pub fn attempt(&self) -> i32 {
        self.inner.attempt
    }
    pub fn queue(&self) -> &str {
        &self.inner.queue
    }
    /// The payload as raquel stores it (text; JSON payloads as their text).
    pub fn payload(&self) -> Option<&str> {
        self.inner.payload.as_deref()
    }
    /// The payload parsed as JSON into `T`.
    pub fn json<T: DeserializeOwned>(&self) -> Result<T, Error> {
        serde_json::from_str(self.inner.payload.as_deref().unwrap_or("null"))
            .map_err(|source| Error::Json { context: format!("job {}'s payload", self.inner.id), source })
    }
    /// True once raquel refused this attempt's lease extension: another
    /// attempt holds the job and this one's completion will be refused.
    pub fn is_lost(&self) -> bool {
        self.inner.lost.load(Ordering::SeqCst)
    }
    /// The worker's side connection, for the handler's own queries.
    pub fn client(&self) -> &Client {
        &self.inner.side
    }

    /// Enqueues a job on the worker's side connection (a child, say; record
    /// its id with `step` so that a retry awaits the same child).
    pub async fn enqueue(&self, queue: &str, payload: impl Into<Payload>, options: &EnqueueOptions) -> Result<Enqueued, Error> {
        crate::enqueue::enqueue(&*self.inner.side, queue, payload, options).await
    }

    async fn recorded(&self, name: &str) -> Result<Option<Option<Value>>, Error> {
        let mut steps = self.inner.steps.lock().await;
        if steps.is_none() {
            let rows = self
                .inner
                .side
                .query("SELECT name, result FROM job_steps WHERE job_id = $1", &[&self.inner.id])
                .await
                .map_err(|e| Error::db(format!("reading job {}'s steps", self.inner.id), e))?;
            *steps = Some(rows.iter().map(|row| (row.get(0), row.get(1))).collect());
        }
        Ok(steps.as_ref().and_then(|steps| steps.get(name).cloned()))
    }

    /// Runs `work` once across the job's attempts: if an earlier attempt
    /// recorded step `name`, its result comes back without running `work`;
    /// otherwise `work` runs and its result is recorded with rq_step. Effects
    /// outside the database are at least once (a crash between the work and
    /// the record repeats it): give them an idempotency key such as the
    /// job's id and the step's name.
    pub async fn step<T, F, Fut>(&self, name: &str, work: F) -> Result<T, Error>
    where
        T: Serialize + DeserializeOwned,
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<T, HandlerError>>,
    {
        let json_error = |source| Error::Json { context: format!("step {name:?}'s result"), source };
        if let Some(recorded) = self.recorded(name).await? {
            return serde_json::from_value(recorded.unwrap_or(Value::Null)).map_err(json_error);
        }
        let value = work().await.map_err(|source| Error::Step { name: name.to_string(), source })?;
        let json = serde_json::to_value(&value).map_err(json_error)?;
        let stored = if json.is_null() { None } else { Some(json) };
        match self
            .inner
            .side
            .execute("SELECT rq_step($1, $2, $3, $4)", &[&self.inner.id, &self.inner.attempt, &name, &stored])
            .await
        {
            Ok(_) => {
                if let Some(steps) = self.inner.steps.lock().await.as_mut() {
                    steps.insert(name.to_string(), stored);
                }
                Ok(value)
            }
            Err(e) => Err(Error::db(format!("rq_step {name:?} of job {}", self.inner.id), e)),
        }
    }

    /// Sleeps `duration` as step `name` (rq_sleep): the first time, the job
    /// goes back to the queue, due then, and this returns
    /// [`Error::Parked`], which the handler returns with `?` (the attempt
    /// ends, the worker's slot is free); the attempt after the sleep gets
    /// `Ok(())` and goes on. Uses up no retry.
    pub async fn sleep(&self, name: &str, duration: Duration) -> Result<(), Error> {
        self.sleep_call(name, None, Some(secs(duration))).await
    }

    /// As `sleep`, until an instant.
    pub async fn sleep_until(&self, name: &str, at: SystemTime) -> Result<(), Error> {
        self.sleep_call(name, Some(at), None).await
    }

    async fn sleep_call(&self, name: &str, at: Option<SystemTime>, delay: Option<f64>) -> Result<(), Error> {
        let row = self
            .inner
            .side
            .query_one(
                "SELECT rq_sleep($1, $2, $3, at => $4, delay => make_interval(secs => $5))",
                &[&self.inner.id, &self.inner.attempt, &name, &at, &delay],
            )
            .await
            .map_err(|e| Error::db(format!("rq_sleep {name:?} of job {}", self.inner.id), e))?;
        if row.get::<_, bool>(0) {
            Err(Error::Parked(self.inner.id))
        } else {
            Ok(())
        }
    }

    /// Waits for `event` as step `name` (rq_wait_event), for at most
    /// `timeout` (None: the server's raquel.max_event_wait). Parked first
    /// ([`Error::Parked`], return it with `?`); on the attempt after the
    /// emit: `Ok(Some(payload))` (JSON null for an emit without payload),
    /// or `Ok(None)` when the wait timed out. An event emitted before the
    /// wait began (and kept, or waiting for its reader) comes back at once.
    pub async fn wait_event(&self, name: &str, event: &str, timeout: Option<Duration>) -> Result<Option<Value>, Error> {
        let timeout = timeout.map(secs);
        let row = self
            .inner
            .side
            .query_one(
                "SELECT parked, payload, timed_out FROM rq_wait_event($1, $2, $3, $4, make_interval(secs => $5))",
                &[&self.inner.id, &self.inner.attempt, &name, &event, &timeout],
            )
            .await
            .map_err(|e| Error::db(format!("rq_wait_event {name:?} of job {}", self.inner.id), e))?;
        let (parked, payload, timed_out): (bool, Option<Value>, Option<bool>) = (row.get(0), row.get(1), row.get(2));
        if parked {
            Err(Error::Parked(self.inner.id))
        } else if timed_out == Some(true) {
            Ok(None)
        } else {
            Ok(Some(payload.unwrap_or(Value::Null)))
        }
    }

    /// Awaits another job's end (rq_wait_job) as the step `await:<id>`:
    /// parked first ([`Error::Parked`]), then its end on a later attempt.
    pub async fn await_job(&self, job: Uuid) -> Result<JobEnd, Error> {
        self.await_job_named(&format!("await:{job}"), job, None).await
    }

    /// As `await_job`, with the step's name and a timeout of your own.
    pub async fn await_job_named(&self, name: &str, job: Uuid, timeout: Option<Duration>) -> Result<JobEnd, Error> {
        let timeout = timeout.map(secs);
        let row = self
            .inner
            .side
            .query_one(
                "SELECT parked, status, result, error, timed_out FROM rq_wait_job($1, $2, $3, $4, make_interval(secs => $5))",
                &[&self.inner.id, &self.inner.attempt, &name, &job, &timeout],
            )
            .await
            .map_err(|e| Error::db(format!("rq_wait_job {name:?} of job {}", self.inner.id), e))?;
        if row.get::<_, bool>(0) {
            return Err(Error::Parked(self.inner.id));
        }
        Ok(JobEnd {
            status: row.get(1),
            result: row.get(2),
            error: row.get(3),
            timed_out: row.get::<_, Option<bool>>(4) == Some(true),
        })
    }
}
