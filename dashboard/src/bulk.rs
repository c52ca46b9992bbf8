//! Bulk actions: retry, cancel or delete every job a filter of the jobs list
//! matches (src/find.rs), and delete on a job's page.
//!
//! Each action touches only the jobs it applies to, as raquel's functions
//! allow: retry the failed, exhausted, expired and cancelled ones (rq_retry),
//! cancel the queued, claimed, failed and blocked ones (rq_cancel), delete the
//! ended ones (success, cancelled, expired, exhausted: what rq_prune deletes).
//!
//! An operation runs in a task of this process, in batches of BATCH jobs,
//! each batch its own transaction: the filter is applied again to every
//! batch, walking the primary key backwards (keyset on id) within the id
//! range snapshotted when the operation started (so jobs enqueued meanwhile
//! are left alone, and a job that stopped matching, or that its action no
//! longer applies to, is skipped, not forced). Its progress is kept in memory
//! under a random id, which the progress page reads; at most MAX_RUNNING
//! operations run at once, and the last KEPT are remembered.

use crate::db::{Conn, Db, Failure};
use crate::App;
use crate::find::{self, define_try_jsonb, timeout_explained, Filter, FindError, Sql};
use serde::Serialize;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use tokio::sync::Semaphore;

/// Jobs a batch takes (one transaction).
pub const BATCH: i64 = 500;
/// Operations running at once, at most.
pub const MAX_RUNNING: usize = 2;
/// Operations remembered (the oldest finished go first).
pub const KEPT: usize = 50;
/// Errors of single jobs an operation keeps to show.
const ERRORS_KEPT: usize = 10;

pub const ACTIONS: [&str; 3] = ["retry", "cancel", "delete"];

/// The statuses an action applies to (raquel's functions' own rules).
pub fn applies_to(action: &str) -> &'static [&'static str] {
    match action {
        "retry" => &["failed", "exhausted", "expired", "cancelled"],
        "cancel" => &["queued", "claimed", "failed", "blocked"],
        "delete" => &["success", "cancelled", "expired", "exhausted"],
        _ => &[],
    }
}

/// One bulk operation's progress.
pub struct Operation {
    pub id: String,
    pub action: String,
    pub filter: String,
    pub back: String,
    pub total: i64,
    pub done: AtomicI64,
    pub failed: AtomicI64,
    pub batches: AtomicI64,
    pub finished: AtomicBool,
    /// why it stopped early, if it did; and single jobs' errors
    pub stopped: Mutex<Option<String>>,
    pub errors: Mutex<Vec<String>>,
}

#[derive(Serialize)]
pub struct Progress {
    pub id: String,
    pub action: String,
    pub filter: String,
    pub back: String,
    pub total: i64,
    pub done: i64,
    pub failed: i64,
    pub skipped: i64,
    pub batches: i64,
    pub finished: bool,
    pub stopped: Option<String>,
    pub errors: Vec<String>,
}

impl Operation {
    pub fn progress(&self) -> Progress {
        let (done, failed, finished) =
            (self.done.load(Ordering::SeqCst), self.failed.load(Ordering::SeqCst), self.finished.load(Ordering::SeqCst));
        let stopped = self.stopped.lock().unwrap().clone();
        Progress {
            id: self.id.clone(),
            action: self.action.clone(),
            filter: self.filter.clone(),
            back: self.back.clone(),
            total: self.total,
            done,
            failed,
            // counted at the start, no longer matching (or no longer one the
            // action applies to) when their batch came
            skipped: if finished && stopped.is_none() { (self.total - done - failed).max(0) } else { 0 },
            batches: self.batches.load(Ordering::SeqCst),
            finished,
            stopped,
            errors: self.errors.lock().unwrap().clone(),
        }
    }
}

pub struct Operations {
    kept: Mutex<VecDeque<Arc<Operation>>>,
    running: Arc<Semaphore>,
}

impl Operations {
    pub fn new() -> Operations {
        Operations { kept: Mutex::new(VecDeque::new()), running: Arc::new(Semaphore::new(MAX_RUNNING)) }
    }

    pub fn get(&self, id: &str) -> Option<Arc<Operation>> {
        self.kept.lock().unwrap().iter().find(|o| o.id == id).cloned()
    }

    /// A place to run one more operation, or None when MAX_RUNNING run.
    pub fn permit(&self) -> Option<tokio::sync::OwnedSemaphorePermit> {
        self.running.clone().try_acquire_owned().ok()
    }

    fn keep(&self, op: Arc<Operation>) {
        let mut kept = self.kept.lock().unwrap();
        kept.push_back(op);
        while kept.len() > KEPT {
            // the oldest finished one; running ones stay (at most MAX_RUNNING)
            match kept.iter().position(|o| o.finished.load(Ordering::SeqCst)) {
                Some(at) => {
                    kept.remove(at);
                }
                None => break,
            }
        }
    }
}

/// The id range an operation walks: the jobs that matched when it started.
struct Range {
    /// the newest id (walked down from it)
    high: Option<String>,
    /// with a text filter: the oldest id of the window searched
    low: Option<String>,
}

impl Conn {
    /// How many jobs `action` would touch: those the filter matches that it
    /// applies to (for the list's filters with a text filter, in the window
    /// of the newest jobs the list searched).
    pub async fn bulk_count(&mut self, filter: &Filter, action: &str) -> Result<i64, FindError> {
        let s = self.s.clone();
        let t = self.client.transaction().await?;
        t.batch_execute(&format!("SET LOCAL statement_timeout = '{}'", find::STATEMENT_TIMEOUT)).await?;
        if filter.json.is_some() {
            define_try_jsonb(&t).await?;
        }
        let mut sql = Sql::new();
        let (from, mut conditions) = filter.source(&s, &mut sql, "j.id, j.status, j.payload, j.error");
        let statuses: Vec<String> = applies_to(action).iter().map(|s| s.to_string()).collect();
        conditions.push(format!("j.status = ANY ({})", sql.bind(statuses, "text[]")));
        sql.text = format!("SELECT pg_catalog.count(*) FROM {from} {}", find::where_of(&conditions));
        let n: i64 = t.query_one(&sql.text, &sql.params()).await?.get(0);
        t.commit().await?;
        Ok(n)
    }

    /// The ids an operation walks between: the newest matching job's now, and
    /// with a text filter the oldest of the window.
    async fn range(&mut self, filter: &Filter) -> Result<Range, FindError> {
        let s = self.s.clone();
        let t = self.client.transaction().await?;
        t.batch_execute(&format!("SET LOCAL statement_timeout = '{}'", find::STATEMENT_TIMEOUT)).await?;
        let mut sql = Sql::new();
        // (uuid has no max() aggregate: the ends by the primary key's order)
        let range = if filter.windowed() {
            // the window itself, text filters aside: its ends
            let plain = filter.plain_conditions(&mut sql);
            let n = sql.bind(filter.window(), "bigint");
            sql.text = format!(
                "SELECT w.id::text FROM (SELECT j.id FROM {s}.jobs j {} ORDER BY j.id DESC LIMIT {n}) w ORDER BY w.id",
                find::where_of(&plain)
            );
            let high_sql = format!("{} DESC LIMIT 1", sql.text);
            let low_sql = format!("{} LIMIT 1", sql.text);
            let high = t.query_opt(&high_sql, &sql.params()).await?.map(|r| r.get(0));
            let low = t.query_opt(&low_sql, &sql.params()).await?.map(|r| r.get(0));
            Range { high, low }
        } else {
            sql.text = format!("SELECT j.id::text FROM {s}.jobs j ORDER BY j.id DESC LIMIT 1");
            Range { high: t.query_opt(&sql.text, &[]).await?.map(|r| r.get(0)), low: None }
        };
        t.commit().await?;
        Ok(range)
    }

    /// One batch: the next BATCH ids below `below` (or from the range's
    /// top) that still match and that the action applies to, locked, and the
    /// action done on them, in one transaction. Returns the ids taken (the
    /// last is where the next batch starts) and how many were changed.
    async fn batch(&mut self, filter: &Filter, action: &str, range: &Range, below: Option<&str>) -> Result<(Vec<String>, i64), Failure> {
        let (s, v) = (self.s.clone(), self.v.clone());
        let t = self.client.transaction().await?;
        batch_session(&t, filter).await?;
        let sql = batch_select(&s, filter, action, range, below, true);
        let ids: Vec<String> = t.query(&sql.text, &sql.params()).await.map_err(|e| timeout_explained(e.into()))?.iter().map(|r| r.get(0)).collect();
        if ids.is_empty() {
            t.commit().await?;
            return Ok((ids, 0));
        }
        let changed: i64 = t.query_one(&act_sql(&s, &v, action, "pg_catalog.unnest($1::text[])"), &[&ids]).await?.get(0);
        t.commit().await?;
        Ok((ids, changed))
    }

    /// The action on one job, alone (after its batch failed): Ok(changed).
    async fn one(&self, action: &str, id: &str) -> Result<i64, Failure> {
        let ids = vec![id.to_string()];
        let row = self.client.query_one(&act_sql(&self.s, &self.v, action, "pg_catalog.unnest($1::text[])"), &[&ids]).await?;
        Ok(row.get(0))
    }

    /// Delete one job, from its page: only an ended job, and not one a
    /// workflow child still waits for; its steps and parents' list go with it,
    /// as rq_prune does.
    pub async fn delete_job(&self, id: &str) -> Result<(), Failure> {
        let Ok(uuid) = id.parse::<uuid::Uuid>() else {
            return Err(Failure { sqlstate: "22P02".into(), message: format!("{id:?} is not a job id") });
        };
        let s = &self.s;
        let row = self
            .client
            .query_opt(
                &format!(
                    "SELECT j.status, EXISTS (SELECT FROM {s}.job_dependencies d WHERE d.parent_id = j.id)
                     FROM {s}.jobs j WHERE j.id = $1::text::uuid"
                ),
                &[&uuid.to_string()],
            )
            .await?;
        let Some(row) = row else {
            return Err(Failure { sqlstate: "P0002".into(), message: format!("There is no job {uuid}.") });
        };
        let (status, waited_for): (String, bool) = (row.get(0), row.get(1));
        if !applies_to("delete").contains(&status.as_str()) {
            return Err(Failure { sqlstate: "55000".into(), message: refusal(&status) });
        }
        if waited_for {
            return Err(Failure {
                sqlstate: "55000".into(),
                message: "A workflow child still waits for this job (job_dependencies): deleting it would leave the child \
                          blocked for ever. Let raquel settle the workflow first (rq_settle_workflows), or cancel the child."
                    .into(),
            });
        }
        let changed = self.one("delete", &uuid.to_string()).await?;
        if changed == 0 {
            // it changed between the look and the delete
            return Err(Failure { sqlstate: "55000".into(), message: format!("Job {uuid} changed meanwhile and was not deleted: reload its page.") });
        }
        Ok(())
    }
}

fn refusal(status: &str) -> String {
    match status {
        "claimed" => "This job is claimed: a worker is running it. Cancel it first (or wait for it to end); only ended jobs \
                      (success, cancelled, expired, exhausted) are deleted."
            .into(),
        other => format!(
            "This job is {other}, not ended: only ended jobs (success, cancelled, expired, exhausted) are deleted. Cancel it first."
        ),
    }
}

/// The statement that does `action` on the ids `ids` (a set-returning SQL
/// expression of text) and returns how many jobs it changed. A job the
/// action no longer applies to is left alone: the delete says so in its
/// conditions; retry and cancel are given only jobs locked in a status they
/// accept (their batch's SELECT … FOR UPDATE).
fn act_sql(s: &str, v: &str, action: &str, ids: &str) -> String {
    match action {
        "retry" | "cancel" => format!(
            "SELECT pg_catalog.count(*) FROM {ids} AS b(id) CROSS JOIN LATERAL {v}.rq_{action}(b.id::uuid) r"
        ),
        // as rq_prune deletes (sql/duties.sql): the job, its steps, the list
        // of its parents; never a job a workflow child still waits for
        _ => format!(
            "WITH gone AS (
                 DELETE FROM {s}.jobs j USING {ids} AS b(id)
                 WHERE j.id = b.id::uuid AND j.status IN ('success', 'cancelled', 'expired', 'exhausted')
                   AND NOT EXISTS (SELECT FROM {s}.job_dependencies d WHERE d.parent_id = j.id)
                 RETURNING j.id
             ), steps AS (
                 DELETE FROM {s}.job_steps st USING gone WHERE st.job_id = gone.id
             ), parents AS (
                 DELETE FROM {s}.job_parents p USING gone WHERE p.child_id = gone.id
             )
             SELECT pg_catalog.count(*) FROM gone"
        ),
    }
}

/// Start an operation: counts what it will touch, then runs in a task.
/// Err: a message to show (too many running) or the database's failure.
pub async fn start(app: Arc<App>, filter: Filter, action: &str) -> Result<Arc<Operation>, FindError> {
    let Some(permit) = app.ops.permit() else {
        return Err(FindError::Invalid(format!(
            "{MAX_RUNNING} bulk operations are running already: wait for one to end, then send this again."
        )));
    };
    let mut c = app.db.get().await?;
    let total = c.bulk_count(&filter, action).await?;
    let range = c.range(&filter).await?;
    drop(c);
    let mut id = [0u8; 12];
    getrandom::fill(&mut id).map_err(|e| FindError::Invalid(format!("no random id: {e}")))?;
    let op = Arc::new(Operation {
        id: hex::encode(id),
        action: action.to_string(),
        filter: filter.describe(),
        back: filter.query(),
        total,
        done: AtomicI64::new(0),
        failed: AtomicI64::new(0),
        batches: AtomicI64::new(0),
        finished: AtomicBool::new(false),
        stopped: Mutex::new(None),
        errors: Mutex::new(Vec::new()),
    });
    app.ops.keep(op.clone());
    let task_op = op.clone();
    let action = action.to_string();
    tokio::spawn(async move {
        let op = task_op;
        if let Err(why) = run(&app.db, &op, &filter, &action, &range).await {
            *op.stopped.lock().unwrap() = Some(why);
        }
        op.finished.store(true, Ordering::SeqCst);
        drop(permit);
    });
    Ok(op)
}

async fn run(db: &Db, op: &Operation, filter: &Filter, action: &str, range: &Range) -> Result<(), String> {
    if range.high.is_none() {
        return Ok(());
    }
    let said = |f: Failure| format!("{} (SQLSTATE {})", f.message, f.sqlstate);
    let mut below: Option<String> = None;
    loop {
        // a connection a batch, so that pages are served meanwhile
        let mut c = db.get().await.map_err(said)?;
        match c.batch(filter, action, range, below.as_deref()).await {
            Ok((ids, changed)) => {
                op.batches.fetch_add(1, Ordering::SeqCst);
                let Some(last) = ids.last().cloned() else { return Ok(()) };
                op.done.fetch_add(changed, Ordering::SeqCst);
                below = Some(last);
            }
            Err(f) if f.unavailable() || f.is("57014") => return Err(said(f)),
            Err(f) => {
                // one job of the batch refused (a retried job's key taken by
                // a newer job, say): the batch again, one job at a time, each
                // alone, the refusals counted and shown
                let _ = f;
                let ids = c.batch_ids(filter, action, range, below.as_deref()).await.map_err(said)?;
                let Some(last) = ids.last().cloned() else { return Ok(()) };
                for id in &ids {
                    match c.one(action, id).await {
                        Ok(n) => {
                            op.done.fetch_add(n, Ordering::SeqCst);
                        }
                        Err(f) => {
                            op.failed.fetch_add(1, Ordering::SeqCst);
                            let mut errors = op.errors.lock().unwrap();
                            if errors.len() < ERRORS_KEPT {
                                errors.push(format!("{id}: {}", said(f)));
                            }
                        }
                    }
                }
                op.batches.fetch_add(1, Ordering::SeqCst);
                below = Some(last);
            }
        }
    }
}

impl Conn {
    /// The ids a batch would take, without taking them (to do them one by
    /// one when the batch failed).
    async fn batch_ids(&mut self, filter: &Filter, action: &str, range: &Range, below: Option<&str>) -> Result<Vec<String>, Failure> {
        let s = self.s.clone();
        let t = self.client.transaction().await?;
        batch_session(&t, filter).await?;
        let sql = batch_select(&s, filter, action, range, below, false);
        let ids = t.query(&sql.text, &sql.params()).await.map_err(|e| timeout_explained(e.into()))?.iter().map(|r| r.get(0)).collect();
        t.commit().await?;
        Ok(ids)
    }
}

/// A batch's transaction: the timeout, and the try-jsonb function if needed.
async fn batch_session(t: &tokio_postgres::Transaction<'_>, filter: &Filter) -> Result<(), Failure> {
    t.batch_execute(&format!("SET LOCAL statement_timeout = '{}'", find::STATEMENT_TIMEOUT)).await?;
    if filter.json.is_some() {
        define_try_jsonb(t).await.map_err(|e| match e {
            FindError::Db(f) => f,
            FindError::Invalid(m) => Failure { sqlstate: "22023".into(), message: m },
        })?;
    }
    Ok(())
}

/// The next BATCH ids below `below` (or from the range's top) that match the
/// filter now and that `action` applies to, newest first; locked with `lock`.
fn batch_select(s: &str, filter: &Filter, action: &str, range: &Range, below: Option<&str>, lock: bool) -> Sql {
    let mut sql = Sql::new();
    let mut conditions = filter.plain_conditions(&mut sql);
    conditions.extend(filter.text_conditions(&mut sql));
    let statuses: Vec<String> = applies_to(action).iter().map(|s| s.to_string()).collect();
    conditions.push(format!("j.status = ANY ({})", sql.bind(statuses, "text[]")));
    if let Some(high) = &range.high {
        conditions.push(format!("j.id <= {}::uuid", sql.bind(high.clone(), "text")));
    }
    if let Some(low) = &range.low {
        conditions.push(format!("j.id >= {}::uuid", sql.bind(low.clone(), "text")));
    }
    if let Some(below) = below {
        conditions.push(format!("j.id < {}::uuid", sql.bind(below.to_string(), "text")));
    }
    let limit = sql.bind(BATCH, "bigint");
    sql.text = format!(
        "SELECT j.id::text FROM {s}.jobs j {} ORDER BY j.id DESC LIMIT {limit}{}",
        find::where_of(&conditions),
        if lock { " FOR UPDATE OF j" } else { "" }
    );
    sql
}
