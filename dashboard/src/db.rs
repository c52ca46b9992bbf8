//! Every statement the dashboard runs, in one place. Reading is plain
//! SELECTs of raquel's tables (and rq_metrics, a SQL function over the
//! metrics table), so a role with SELECT on them is enough; the actions call
//! raquel's functions. One connection per request: a person looking at a
//! page does not need a pool.

use serde::Serialize;
use tokio_postgres::{Client, NoTls};

/// A failure to show: its SQLSTATE (when the server gave one) and message.
#[derive(Debug, Serialize)]
pub struct Failure {
    pub sqlstate: String,
    pub message: String,
}

impl From<tokio_postgres::Error> for Failure {
    fn from(e: tokio_postgres::Error) -> Failure {
        match e.as_db_error() {
            Some(db) => Failure { sqlstate: db.code().code().to_string(), message: db.message().to_string() },
            None => Failure { sqlstate: String::new(), message: e.to_string() },
        }
    }
}

impl Failure {
    pub fn is(&self, sqlstate: &str) -> bool {
        self.sqlstate == sqlstate
    }
}

pub async fn connect(dsn: &str) -> Result<Client, Failure> {
    let (client, connection) = tokio_postgres::connect(dsn, NoTls).await?;
    tokio::spawn(async move {
        let _ = connection.await;
    });
    Ok(client)
}

pub const STATUSES: [&str; 8] = ["queued", "claimed", "success", "failed", "cancelled", "expired", "exhausted", "blocked"];

#[derive(Serialize, Default)]
pub struct Queue {
    pub name: String,
    pub counts: Vec<i64>,
    pub total: i64,
    pub paused: bool,
    pub limits: String,
}

/// Each queue with its jobs counted by status (in STATUSES order).
pub async fn queue_counts(c: &Client) -> Result<Vec<Queue>, Failure> {
    let rows = c.query("SELECT queue, status, count(*) FROM jobs GROUP BY 1, 2 ORDER BY 1", &[]).await?;
    let mut queues: Vec<Queue> = Vec::new();
    for row in rows {
        let (name, status, n): (String, String, i64) = (row.get(0), row.get(1), row.get(2));
        if queues.last().is_none_or(|q| q.name != name) {
            queues.push(Queue { name, counts: vec![0; STATUSES.len()], ..Queue::default() });
        }
        let queue = queues.last_mut().expect("pushed above");
        if let Some(i) = STATUSES.iter().position(|s| *s == status) {
            queue.counts[i] += n;
        }
        queue.total += n;
    }
    Ok(queues)
}

/// Flow settings by queue: paused, and the limits as text.
pub async fn queue_limits(c: &Client) -> Result<Vec<(String, bool, String)>, Failure> {
    let rows = c
        .query(
            "SELECT queue, paused, concat_ws(', ',
                 'at most ' || max_claimed || ' claimed',
                 rate || ' per ' || per::text,
                 'at most ' || group_max_claimed || ' a group') FROM queue_limits ORDER BY 1",
            &[],
        )
        .await?;
    Ok(rows.iter().map(|r| (r.get(0), r.get(1), r.get(2))).collect())
}

#[derive(Serialize)]
pub struct Minute {
    pub queue: String,
    pub minute_ms: i64,
    pub enqueued: i64,
    pub succeeded: i64,
    pub failed: i64,
    pub wait_p50: Option<f64>,
    pub wait_p95: Option<f64>,
    pub wait_p99: Option<f64>,
}

/// The metrics of every queue since `since` (an interval's text) ago.
pub async fn metrics(c: &Client, since: &str) -> Result<Vec<Minute>, Failure> {
    let rows = c
        .query(
            "SELECT queue, (extract(epoch FROM minute) * 1000)::bigint, enqueued, succeeded, failed,
                    wait_p50_ms, wait_p95_ms, wait_p99_ms
             FROM rq_metrics(NULL, $1::text::interval) ORDER BY queue, minute",
            &[&since],
        )
        .await?;
    Ok(rows
        .iter()
        .map(|r| Minute {
            queue: r.get(0),
            minute_ms: r.get(1),
            enqueued: r.get(2),
            succeeded: r.get(3),
            failed: r.get(4),
            wait_p50: r.get(5),
            wait_p95: r.get(6),
            wait_p99: r.get(7),
        })
        .collect())
}

#[derive(Serialize)]
pub struct JobRow {
    pub id: String,
    pub queue: String,
    pub status: String,
    pub priority: i32,
    pub attempts: i32,
    pub enqueued_at: i64,
    pub enqueued: String,
    pub error: Option<String>,
}

pub struct JobFilter {
    pub queue: Option<String>,
    pub status: Option<String>,
    pub error: Option<String>,
    /// the last row of the page before: (enqueued_at, id)
    pub before: Option<(i64, uuid::Uuid)>,
}

pub const PAGE: usize = 100;

/// Jobs newest first, filtered; one more than a page, to know whether
/// there is a next one. The error search is a substring, not a pattern.
pub async fn jobs(c: &Client, f: &JobFilter) -> Result<Vec<JobRow>, Failure> {
    let pattern = f.error.as_ref().map(|text| {
        let escaped = text.replace('\\', "\\\\").replace('%', "\\%").replace('_', "\\_");
        format!("%{escaped}%")
    });
    let (before_at, before_id) = match f.before {
        Some((at, id)) => (Some(at), Some(id.to_string())),
        None => (None, None),
    };
    let rows = c
        .query(
            "SELECT id::text, queue, status, priority, attempts, enqueued_at, left(error, 200)
             FROM jobs
             WHERE ($1::text IS NULL OR queue = $1)
               AND ($2::text IS NULL OR status = $2)
               AND ($3::text IS NULL OR error ILIKE $3)
               AND ($4::bigint IS NULL OR (enqueued_at, id) < ($4, $5::text::uuid))
             ORDER BY enqueued_at DESC, id DESC
             LIMIT 101",
            &[&f.queue, &f.status, &pattern, &before_at, &before_id],
        )
        .await?;
    Ok(rows
        .iter()
        .map(|r| {
            let at: i64 = r.get(5);
            JobRow {
                id: r.get(0),
                queue: r.get(1),
                status: r.get(2),
                priority: r.get(3),
                attempts: r.get(4),
                enqueued_at: at,
                enqueued: utc(Some(at)),
                error: r.get(6),
            }
        })
        .collect())
}

#[derive(Serialize)]
pub struct Field {
    pub name: String,
    pub value: Option<String>,
    /// for a time column (ms since the epoch): the instant in UTC
    pub when: Option<String>,
}

#[derive(Serialize)]
pub struct Job {
    pub id: String,
    pub queue: String,
    pub status: String,
    pub payload: Option<String>,
    pub error: Option<String>,
    pub error_trace: Option<String>,
    pub fields: Vec<Field>,
    pub parents: Vec<(String, String)>,
    pub children: Vec<(String, String)>,
}

/// One job, every column in the table's order, or None.
pub async fn job(c: &Client, id: uuid::Uuid) -> Result<Option<Job>, Failure> {
    let id = id.to_string();
    let rows = c
        .query(
            "SELECT e.key, e.value FROM jobs j, json_each_text(row_to_json(j)) e WHERE j.id = $1::text::uuid",
            &[&id],
        )
        .await?;
    if rows.is_empty() {
        return Ok(None);
    }
    let mut fields = Vec::new();
    for row in rows {
        let (name, value): (String, Option<String>) = (row.get(0), row.get(1));
        let when = if name.ends_with("_at") { value.as_deref().and_then(|v| v.parse().ok()).map(|ms| utc(Some(ms))) } else { None };
        fields.push(Field { name, value, when });
    }
    let get = |name: &str| fields.iter().find(|f| f.name == name).and_then(|f| f.value.clone());
    let (queue, status) = (get("queue").unwrap_or_default(), get("status").unwrap_or_default());
    let (payload, error, error_trace) = (get("payload"), get("error"), get("error_trace"));
    // workflows: the edges still pending (a table the role may not read)
    let edges = |sql: &'static str| {
        let id = id.clone();
        async move {
            match c.query(sql, &[&id]).await {
                Ok(rows) => rows.iter().map(|r| (r.get(0), r.get::<_, Option<String>>(1).unwrap_or_default())).collect(),
                Err(_) => Vec::new(),
            }
        }
    };
    let parents = edges(
        "SELECT d.parent_id::text, p.status FROM job_dependencies d LEFT JOIN jobs p ON p.id = d.parent_id
         WHERE d.child_id = $1::text::uuid ORDER BY 1",
    )
    .await;
    let children = edges(
        "SELECT d.child_id::text, c.status FROM job_dependencies d LEFT JOIN jobs c ON c.id = d.child_id
         WHERE d.parent_id = $1::text::uuid ORDER BY 1",
    )
    .await;
    Ok(Some(Job { id, queue, status, payload, error, error_trace, fields, parents, children }))
}

#[derive(Serialize)]
pub struct Schedule {
    pub name: String,
    pub cron: String,
    pub timezone: String,
    pub queue: String,
    pub enabled: bool,
    pub next_run: String,
    pub last_run: String,
    pub last_job_id: Option<String>,
}

pub async fn schedules(c: &Client) -> Result<Vec<Schedule>, Failure> {
    let rows = c
        .query(
            "SELECT name, cron, timezone, queue, enabled, next_run_at, last_run_at, last_job_id::text FROM schedules ORDER BY name",
            &[],
        )
        .await?;
    Ok(rows
        .iter()
        .map(|r| Schedule {
            name: r.get(0),
            cron: r.get(1),
            timezone: r.get(2),
            queue: r.get(3),
            enabled: r.get(4),
            next_run: utc(r.get(5)),
            last_run: utc(r.get(6)),
            last_job_id: r.get(7),
        })
        .collect())
}

#[derive(Serialize)]
pub struct Edge {
    pub parent: String,
    pub parent_queue: String,
    pub parent_status: String,
    pub child: String,
    pub child_queue: String,
    pub child_status: String,
}

/// The pending edges of workflows: children waiting for their parents.
pub async fn workflows(c: &Client) -> Result<Vec<Edge>, Failure> {
    let rows = c
        .query(
            "SELECT d.parent_id::text, coalesce(p.queue, ''), coalesce(p.status, 'gone'),
                    d.child_id::text, coalesce(k.queue, ''), coalesce(k.status, 'gone')
             FROM job_dependencies d
             LEFT JOIN jobs p ON p.id = d.parent_id
             LEFT JOIN jobs k ON k.id = d.child_id
             ORDER BY d.child_id, d.parent_id
             LIMIT 500",
            &[],
        )
        .await?;
    Ok(rows
        .iter()
        .map(|r| Edge {
            parent: r.get(0),
            parent_queue: r.get(1),
            parent_status: r.get(2),
            child: r.get(3),
            child_queue: r.get(4),
            child_status: r.get(5),
        })
        .collect())
}

/// The actions: raquel's functions, whose errors (wrong status, unknown
/// job) come back with their SQLSTATE and change nothing.
pub async fn act(c: &Client, action: &str, target: &str) -> Result<(), Failure> {
    let sql = match action {
        "retry" => "SELECT 1 FROM rq_retry($1::text::uuid)",
        "cancel" => "SELECT 1 FROM rq_cancel($1::text::uuid)",
        "pause" => "SELECT 1 FROM rq_pause($1)",
        "resume" => "SELECT 1 FROM rq_resume($1)",
        _ => return Err(Failure { sqlstate: "22023".into(), message: format!("no action {action}") }),
    };
    c.query(sql, &[&target]).await?;
    Ok(())
}

/// ms since the epoch as a UTC instant ("" for none).
pub fn utc(ms: Option<i64>) -> String {
    ms.and_then(chrono::DateTime::from_timestamp_millis)
        .map(|t| t.format("%Y-%m-%d %H:%M:%S%.3f UTC").to_string())
        .unwrap_or_default()
}
