//! Enqueueing: rq_enqueue and rq_enqueue_batch with typed options, on any
//! tokio-postgres client or transaction (`GenericClient`), so that a job
//! enqueued inside the caller's transaction exists if and only if it commits.

use crate::{secs, Error};
use serde_json::Value;
use std::time::{Duration, SystemTime};
use tokio_postgres::types::ToSql;
use tokio_postgres::{GenericClient, Row};
use uuid::Uuid;

/// A job's payload: text, or JSON (stored as its text by raquel).
#[derive(Debug, Clone, PartialEq)]
pub enum Payload {
    None,
    Text(String),
    Json(Value),
}

impl From<&str> for Payload {
    fn from(text: &str) -> Payload {
        Payload::Text(text.to_string())
    }
}
impl From<String> for Payload {
    fn from(text: String) -> Payload {
        Payload::Text(text)
    }
}
impl From<Value> for Payload {
    fn from(json: Value) -> Payload {
        Payload::Json(json)
    }
}
impl From<Option<String>> for Payload {
    fn from(text: Option<String>) -> Payload {
        text.map_or(Payload::None, Payload::Text)
    }
}

/// rq_enqueue's options; every one left `None` is the SQL's default.
/// Durations are sent as intervals, `at` as a timestamptz.
#[derive(Debug, Clone, Default)]
pub struct EnqueueOptions {
    /// Due at this instant (default now); `delay` is added to it.
    pub at: Option<SystemTime>,
    /// Due this long after `at` (or now).
    pub delay: Option<Duration>,
    /// Expired if not claimed within this long of its due time.
    pub max_age: Option<Duration>,
    /// Retries after a failure (None: for ever).
    pub max_retry_count: Option<i32>,
    pub min_retry_delay: Option<Duration>,
    pub max_retry_delay: Option<Duration>,
    pub backoff_base: Option<Duration>,
    /// Higher runs first (default 0).
    pub priority: Option<i32>,
    /// Deduplication key: while a job of the queue with this key is
    /// unfinished, enqueueing it again returns that job.
    pub key: Option<String>,
    /// With `key`: a job of the key that ended less than this long ago is
    /// returned too (rq_enqueue only; not for batches).
    pub key_period: Option<Duration>,
    /// The job's fair group in its queue.
    pub group_key: Option<String>,
    /// Jobs this one runs after (a workflow).
    pub after: Option<Vec<Uuid>>,
}

impl EnqueueOptions {
    pub fn new() -> EnqueueOptions {
        EnqueueOptions::default()
    }
    pub fn at(mut self, at: SystemTime) -> Self {
        self.at = Some(at);
        self
    }
    pub fn delay(mut self, delay: Duration) -> Self {
        self.delay = Some(delay);
        self
    }
    pub fn max_age(mut self, max_age: Duration) -> Self {
        self.max_age = Some(max_age);
        self
    }
    pub fn max_retries(mut self, count: i32) -> Self {
        self.max_retry_count = Some(count);
        self
    }
    pub fn retry_delays(mut self, min: Duration, max: Duration) -> Self {
        self.min_retry_delay = Some(min);
        self.max_retry_delay = Some(max);
        self
    }
    pub fn backoff_base(mut self, base: Duration) -> Self {
        self.backoff_base = Some(base);
        self
    }
    pub fn priority(mut self, priority: i32) -> Self {
        self.priority = Some(priority);
        self
    }
    pub fn key(mut self, key: impl Into<String>) -> Self {
        self.key = Some(key.into());
        self
    }
    pub fn key_period(mut self, period: Duration) -> Self {
        self.key_period = Some(period);
        self
    }
    pub fn group_key(mut self, group: impl Into<String>) -> Self {
        self.group_key = Some(group.into());
        self
    }
    pub fn after(mut self, jobs: Vec<Uuid>) -> Self {
        self.after = Some(jobs);
        self
    }
}

/// A job as rq_enqueue returned it.
#[derive(Debug, Clone)]
pub struct Enqueued {
    pub id: Uuid,
    pub queue: String,
    /// `queued`, or `blocked` for a job waiting for others (`after`); a
    /// deduplicated enqueue returns the existing job, whatever its status.
    pub status: String,
    pub priority: i32,
    pub payload: Option<String>,
}

const COLUMNS: &str = "id, queue, status, priority, payload";

fn row_to_job(row: &Row) -> Enqueued {
    Enqueued { id: row.get(0), queue: row.get(1), status: row.get(2), priority: row.get(3), payload: row.get(4) }
}

/// Enqueues one job with rq_enqueue: on a `Client` it commits at once; on a
/// `Transaction` it commits (or rolls back) with the caller's transaction.
pub async fn enqueue<C: GenericClient + Sync>(
    client: &C,
    queue: &str,
    payload: impl Into<Payload>,
    options: &EnqueueOptions,
) -> Result<Enqueued, Error> {
    let payload = payload.into();
    let (cast, text, json): (&str, Option<String>, Option<Value>) = match payload {
        Payload::None => ("text", None, None),
        Payload::Text(text) => ("text", Some(text), None),
        Payload::Json(json) => ("jsonb", None, Some(json)),
    };
    let sql = format!(
        "SELECT {COLUMNS} FROM rq_enqueue(queue => $1, payload => $2::{cast}, at => $3, \
         delay => make_interval(secs => $4), max_age => make_interval(secs => $5), max_retry_count => $6, \
         min_retry_delay => make_interval(secs => $7), max_retry_delay => make_interval(secs => $8), \
         backoff_base => make_interval(secs => $9), priority => coalesce($10, 0), key => $11, group_key => $12, \
         after => $13, key_period => make_interval(secs => $14))"
    );
    let o = options;
    let [delay, max_age, min_retry, max_retry, backoff, key_period] =
        [o.delay, o.max_age, o.min_retry_delay, o.max_retry_delay, o.backoff_base, o.key_period].map(|d| d.map(secs));
    let payload_param: &(dyn ToSql + Sync) = if json.is_some() { &json } else { &text };
    let params: [&(dyn ToSql + Sync); 14] = [
        &queue,
        payload_param,
        &o.at,
        &delay,
        &max_age,
        &o.max_retry_count,
        &min_retry,
        &max_retry,
        &backoff,
        &o.priority,
        &o.key,
        &o.group_key,
        &o.after,
        &key_period,
    ];
    let row = client.query_one(sql.as_str(), &params).await.map_err(|e| Error::db(format!("rq_enqueue into {queue}"), e))?;
    Ok(row_to_job(&row))
}

/// Enqueues one job per payload with rq_enqueue_batch, in one statement,
/// all with the same options (`keys`, one per payload, deduplicate each;
/// `key_period` is not a batch option). JSON payloads go as jsonb[] when
/// every payload is JSON, otherwise every payload goes as text. A key
/// repeated inside the batch makes one job: the rows returned are the
/// jobs, so fewer than the payloads then.
pub async fn enqueue_batch<C: GenericClient + Sync>(
    client: &C,
    queue: &str,
    payloads: Vec<Payload>,
    keys: Option<Vec<Option<String>>>,
    options: &EnqueueOptions,
) -> Result<Vec<Enqueued>, Error> {
    if options.key.is_some() || options.key_period.is_some() {
        return Err(Error::Config("enqueue_batch takes keys (one per payload), not key or key_period".into()));
    }
    let all_json = !payloads.is_empty() && payloads.iter().all(|p| matches!(p, Payload::Json(_)));
    let mut texts: Vec<Option<String>> = Vec::new();
    let mut jsons: Vec<Value> = Vec::new();
    for payload in payloads {
        match payload {
            Payload::Json(json) if all_json => jsons.push(json),
            Payload::Json(json) => texts.push(Some(json.to_string())),
            Payload::Text(text) => texts.push(Some(text)),
            Payload::None => texts.push(None),
        }
    }
    let cast = if all_json { "jsonb[]" } else { "text[]" };
    let sql = format!(
        "SELECT {COLUMNS} FROM rq_enqueue_batch(queue => $1, payloads => $2::{cast}, at => $3, \
         delay => make_interval(secs => $4), max_age => make_interval(secs => $5), max_retry_count => $6, \
         min_retry_delay => make_interval(secs => $7), max_retry_delay => make_interval(secs => $8), \
         backoff_base => make_interval(secs => $9), priority => coalesce($10, 0), keys => $11, group_keys => $12, \
         after => $13)"
    );
    let o = options;
    let [delay, max_age, min_retry, max_retry, backoff] =
        [o.delay, o.max_age, o.min_retry_delay, o.max_retry_delay, o.backoff_base].map(|d| d.map(secs));
    // one group key for every job of the batch, as rq_enqueue_batch takes one per job
    let count = if all_json { jsons.len() } else { texts.len() };
    let group_keys: Option<Vec<String>> = o.group_key.as_ref().map(|g| vec![g.clone(); count]);
    let payload_param: &(dyn ToSql + Sync) = if all_json { &jsons } else { &texts };
    let params: [&(dyn ToSql + Sync); 13] = [
        &queue,
        payload_param,
        &o.at,
        &delay,
        &max_age,
        &o.max_retry_count,
        &min_retry,
        &max_retry,
        &backoff,
        &o.priority,
        &keys,
        &group_keys,
        &o.after,
    ];
    let rows =
        client.query(sql.as_str(), &params).await.map_err(|e| Error::db(format!("rq_enqueue_batch into {queue}"), e))?;
    Ok(rows.iter().map(row_to_job).collect())
}

/// Emits an event with rq_emit: the jobs parked for it in `wait_event`
/// resume with its payload. Returns how many parked jobs it resumed (None
/// for a role that may not read jobs).
pub async fn emit<C: GenericClient + Sync>(
    client: &C,
    event: &str,
    payload: Option<Value>,
    keep: Option<Duration>,
) -> Result<Option<i64>, Error> {
    let keep = keep.map(secs);
    let row = client
        .query_one("SELECT rq_emit($1, $2, make_interval(secs => $3))", &[&event, &payload, &keep])
        .await
        .map_err(|e| Error::db(format!("rq_emit {event}"), e))?;
    Ok(row.get(0))
}
