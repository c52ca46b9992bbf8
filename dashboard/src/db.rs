//! Every statement the dashboard runs, in one place. Reading is plain
//! SELECTs of raquel's tables (with raquel's functions that anyone may call
//! for the metrics' times and percentiles, and rq_history for a job's
//! attempts, which reads jobs as its caller), so a role with SELECT on them
//! is enough; the actions call raquel's functions.
//!
//! rq_history is called by its raquel_internal name (from 0.6.0 on, as
//! every verb the dashboard calls): no look-alike planted in raquel's
//! schema is called instead or makes the call ambiguous. When it cannot
//! be read, the job's page says so and shows past_attempts as a column.
//!
//! Nothing planted can run in them. A role that may create objects in a
//! schema on the dashboard's search_path (CREATE on `public`, say) could
//! otherwise plant a function or operator that fits a call better than
//! pg_catalog's (`||(text, integer)`, `row_to_json(jobs)`), which would run
//! with the dashboard's role, perhaps a superuser. So:
//! - every connection's search_path is pg_catalog, pg_temp, set in the
//!   startup packet (before any statement) and again when the pool makes it;
//! - raquel's tables and functions are named with raquel's schema, looked up
//!   once in pg_catalog and quoted with quote_ident;
//! - built-ins are called with arguments of the exact types of pg_catalog's
//!   own (explicit casts), so that no look-alike could be a better match
//!   even on another search_path; functions given a table's row are named
//!   with pg_catalog.
//!
//! Connections come from a small pool (--pool-size): a burst of requests
//! waits for one (--pool-wait) and is then answered 503, rather than taking
//! every connection the server has.

use deadpool_postgres::{Hook, HookError, Manager, ManagerConfig, Object, Pool, PoolError, RecyclingMethod, Runtime};
use serde::Serialize;
use std::str::FromStr;
use std::time::Duration;
use tokio::sync::OnceCell;
use tokio_postgres::NoTls;

/// How the dashboard's connections show in pg_stat_activity (unless the
/// DSN names another application).
pub const APPLICATION_NAME: &str = "raquel-dashboard";

/// The search_path of every connection: pg_catalog first, then only this
/// session's own temporary schema (which nobody else can write).
const PINNED_SEARCH_PATH: &str = "pg_catalog, pg_temp";

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

    /// The dashboard or the server is out of connections, or cannot reach
    /// the server: try again later (503).
    pub fn unavailable(&self) -> bool {
        self.sqlstate == "53300" || self.sqlstate == "57P03" || self.sqlstate.starts_with("08")
    }
}

pub struct Db {
    pool: Pool,
    size: usize,
    /// raquel's schema, the schema of its helpers and the schema of the
    /// verbs it calls, quoted: looked up with the first connection
    schema: OnceCell<(String, String, String)>,
}

/// A pooled connection and raquel's schema, which every statement names,
/// and the schema of the helpers it calls (rq_histogram_percentile):
/// raquel_internal, or raquel's own schema in an install older than 0.5.0;
/// and the schema of the verbs it calls (rq_retry, rq_now_ms …):
/// raquel_internal from 0.6.0 on, where only raquel's owner may create, so
/// that no look-alike planted in raquel's schema is called instead or makes
/// the call ambiguous (sql/privileges.sql), raquel's own schema before.
pub struct Conn {
    pub(crate) client: Object,
    pub(crate) s: String,
    h: String,
    pub(crate) v: String,
}

impl Db {
    /// The pool (no connection is made until a page asks).
    pub fn new(dsn: &str, size: usize, wait: Duration) -> Result<Db, String> {
        let mut config = tokio_postgres::Config::from_str(dsn).map_err(|e| format!("--dsn is not a connection string: {e}"))?;
        if config.get_application_name().is_none() {
            config.application_name(APPLICATION_NAME);
        }
        // after the DSN's own options, so that it wins over a search_path there
        let options = format!("{} -c search_path=pg_catalog,pg_temp", config.get_options().unwrap_or_default());
        config.options(options.trim_start());
        let manager = Manager::from_config(config, NoTls, ManagerConfig { recycling_method: RecyclingMethod::Fast });
        let pool = Pool::builder(manager)
            .max_size(size)
            .runtime(Runtime::Tokio1)
            .wait_timeout(Some(wait))
            .create_timeout(Some(Duration::from_secs(10)))
            .recycle_timeout(Some(Duration::from_secs(5)))
            // A pooler in front of the server may drop the startup packet's
            // options: the path is set again, qualified, before first use.
            .post_create(Hook::async_fn(|client, _| {
                Box::pin(async move {
                    client
                        .query_one("SELECT pg_catalog.set_config('search_path', $1::text, false)", &[&PINNED_SEARCH_PATH])
                        .await
                        .map(|_| ())
                        .map_err(HookError::Backend)
                })
            }))
            .build()
            .map_err(|e| format!("cannot make the connection pool: {e}"))?;
        Ok(Db { pool, size, schema: OnceCell::new() })
    }

    pub async fn get(&self) -> Result<Conn, Failure> {
        let client = self.pool.get().await.map_err(|e| match e {
            PoolError::Timeout(_) => Failure {
                sqlstate: "53300".into(),
                message: format!("All {} of the dashboard's database connections are busy: try again in a moment.", self.size),
            },
            PoolError::Backend(e) | PoolError::PostCreateHook(HookError::Backend(e)) => {
                let mut f = Failure::from(e);
                if f.sqlstate.is_empty() {
                    f.sqlstate = "08006".into();
                    f.message = format!("Cannot reach the database: {}", f.message);
                }
                f
            }
            other => Failure { sqlstate: "08006".into(), message: format!("Cannot reach the database: {other}") },
        })?;
        let s = self
            .schema
            .get_or_try_init(|| async {
                let row = client
                    .query_opt(
                        "SELECT pg_catalog.quote_ident(n.nspname::pg_catalog.text),
                                pg_catalog.quote_ident(coalesce(
                                    (SELECT i.nspname FROM pg_catalog.pg_namespace i JOIN pg_catalog.pg_depend d
                                       ON d.classid = 'pg_catalog.pg_namespace'::pg_catalog.regclass AND d.objid = i.oid
                                      AND d.refclassid = 'pg_catalog.pg_extension'::pg_catalog.regclass
                                      AND d.refobjid = e.oid AND d.deptype = 'e'
                                     WHERE i.nspname = 'raquel_internal'::pg_catalog.name),
                                    n.nspname)::pg_catalog.text),
                                pg_catalog.quote_ident(CASE
                                    WHEN pg_catalog.to_regprocedure('raquel_internal.rq_retry(uuid)') IS NOT NULL
                                    THEN 'raquel_internal' ELSE n.nspname::pg_catalog.text END)
                         FROM pg_catalog.pg_extension e JOIN pg_catalog.pg_namespace n ON n.oid = e.extnamespace
                         WHERE e.extname = 'raquel'::pg_catalog.name",
                        &[],
                    )
                    .await?;
                match row {
                    Some(row) => Ok((row.get::<_, String>(0), row.get::<_, String>(1), row.get::<_, String>(2))),
                    None => Err(Failure {
                        sqlstate: "42704".into(),
                        message: "raquel is not installed in this database (CREATE EXTENSION raquel).".into(),
                    }),
                }
            })
            .await?
            .clone();
        let (s, h, v) = s;
        Ok(Conn { client, s, h, v })
    }
}

pub const STATUSES: [&str; 8] = ["queued", "claimed", "success", "failed", "cancelled", "expired", "exhausted", "blocked"];

/// Queues a page of the queues page shows.
pub const QUEUES_PAGE: usize = 50;
/// Rows a page of the jobs, schedules and workflows pages shows.
pub const PAGE: usize = 100;
/// The characters of a payload, error or trace (or any other column) a
/// job's page shows; the page says how long the whole value is.
pub const SHOWN_CHARS: i32 = 65_536;
/// A job's parents or children listed on its page.
pub const EDGES_SHOWN: usize = 100;
/// The steps of a job shown on its page, at most.
pub const STEPS_SHOWN: usize = 200;
/// The attempts of a job shown on its page, at most: rq_history returns the
/// 100 earlier attempts past_attempts keeps and the job's own, and is read
/// with this LIMIT all the same.
pub const ATTEMPTS_SHOWN: usize = 101;
/// The characters of an attempt's error and of its trace shown on the job's
/// page; of its worker and outcome, ATTEMPT_NAME_CHARS. A job's page stays
/// under the bound the tests hold (tests/limits.rs) with 101 attempts of
/// huge values: these take the room the column past_attempts took in the
/// table of columns, where it is no longer shown.
pub const ATTEMPT_CHARS: i32 = 250;
pub const ATTEMPT_NAME_CHARS: i32 = 100;

#[derive(Serialize, Default)]
pub struct Queue {
    pub name: String,
    pub counts: Vec<i64>,
    pub total: i64,
    pub paused: bool,
    pub limits: String,
}

/// Where a page of names starts: the first page, after a name (the next
/// page) or before one (the previous page).
pub enum Keyset {
    First,
    After(String),
    Before(String),
}

#[derive(Serialize)]
pub struct Bucket {
    pub queue: String,
    pub start_ms: i64,
    pub enqueued: i64,
    pub succeeded: i64,
    pub failed: i64,
    pub wait_p50: Option<f64>,
    pub wait_p95: Option<f64>,
    pub wait_p99: Option<f64>,
    /// run time (claim to end) percentiles, the highest minute's of the bucket
    pub run_p50: Option<f64>,
    pub run_p95: Option<f64>,
    pub run_p99: Option<f64>,
    /// ready jobs when a minute of the bucket was recorded, the most of them
    pub backlog: Option<i64>,
}

/// Every queue's events of a bucket, summed (the totals chart).
pub struct Total {
    pub start_ms: i64,
    pub enqueued: i64,
    pub succeeded: i64,
    pub failed: i64,
}

/// A queue's ready jobs now (due, not claimed) and the due time of the
/// one that has waited longest.
pub struct Ready {
    pub queue: String,
    pub count: i64,
    pub oldest_due_ms: Option<i64>,
}

/// The nodes of a workflow's graph a page draws at most; a bigger one shows
/// these and says how many more there are (counted up to WORKFLOW_COUNTED).
pub const WORKFLOW_NODES: usize = 200;
/// How far a workflow is walked to count its jobs: beyond this, the page
/// says "more than".
pub const WORKFLOW_COUNTED: i64 = 10_000;
/// The edges among a graph's nodes drawn at most (200 jobs could have
/// nearly 20,000 among them, each a line of the picture): the page says
/// when some are left out.
pub const WORKFLOW_EDGES: usize = 1_000;

/// A job of a workflow's graph.
#[derive(Serialize, Clone)]
pub struct Node {
    pub id: String,
    pub queue: String,
    /// its status, or "gone" when its row was deleted (pruned)
    pub status: String,
    pub enqueued_at: i64,
}

/// A workflow around one job: its jobs (the first WORKFLOW_NODES, oldest
/// first), the edges among them (child, parent), and how many jobs it has
/// in all (up to WORKFLOW_COUNTED).
pub struct Workflow {
    pub nodes: Vec<Node>,
    pub edges: Vec<(String, String)>,
    /// whether edges among the nodes were left out (more than WORKFLOW_EDGES)
    pub more_edges: bool,
    pub total: i64,
    /// the table the edges were read from (job_parents, or job_dependencies
    /// when the role may not read job_parents)
    pub table: &'static str,
}

#[derive(Serialize)]
pub struct Field {
    pub name: String,
    /// at most SHOWN_CHARS characters of the value
    pub value: Option<String>,
    /// the whole value's length in bytes, when more than is shown
    pub cut_bytes: Option<i32>,
    /// for a time column (ms since the epoch): the instant in UTC
    pub when: Option<String>,
}

#[derive(Serialize)]
pub struct Job {
    pub id: String,
    pub queue: String,
    pub status: String,
    pub payload: Option<Field>,
    pub error: Option<Field>,
    pub error_trace: Option<Field>,
    pub fields: Vec<Field>,
    pub parents: Vec<(String, String)>,
    pub children: Vec<(String, String)>,
    pub more_parents: bool,
    pub more_children: bool,
    /// Its steps recorded (rq_step, rq_sleep, rq_wait_event), oldest first.
    pub steps: Vec<Step>,
    /// The event it is parked for (rq_wait_event), if it is.
    pub wait: Option<Wait>,
    /// Its attempts (rq_history), oldest first.
    pub attempts: Vec<Attempt>,
    /// What the page leaves out because the role may not read its table.
    pub notes: Vec<String>,
}

#[derive(Serialize)]
pub struct Step {
    pub name: String,
    /// Its result as JSON text, cut to SHOWN_CHARS characters.
    pub result: Option<String>,
    pub attempt: i32,
    pub recorded: String,
}

#[derive(Serialize)]
pub struct Attempt {
    pub attempt: Option<i32>,
    pub worker: Option<String>,
    pub claimed: String,
    pub ended: String,
    pub outcome: Option<String>,
    /// its error and trace, each cut to ATTEMPT_CHARS characters
    pub error: Option<Field>,
    pub trace: Option<Field>,
}

#[derive(Serialize)]
pub struct Wait {
    pub event: String,
    pub step: String,
    pub since: String,
    /// When it times out; None: never.
    pub until: Option<String>,
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

#[derive(Serialize)]
pub struct Edge {
    pub parent: String,
    pub parent_queue: String,
    pub parent_status: String,
    pub child: String,
    pub child_queue: String,
    pub child_status: String,
}

impl Conn {
    /// A page of queue names (those with jobs, and with `with_limits` those
    /// with flow settings), in name order, starting with `prefix` when
    /// given; one more than a page, to know whether there is another.
    pub async fn queue_names(&self, with_limits: bool, prefix: Option<&str>, from: &Keyset) -> Result<Vec<String>, Failure> {
        let s = &self.s;
        let names = if with_limits {
            format!("SELECT j.queue FROM {s}.jobs j UNION SELECT l.queue FROM {s}.queue_limits l")
        } else {
            format!("SELECT DISTINCT j.queue FROM {s}.jobs j")
        };
        let (after, before, order) = match from {
            Keyset::First => (None, None, "ASC"),
            Keyset::After(name) => (Some(name.as_str()), None, "ASC"),
            Keyset::Before(name) => (None, Some(name.as_str()), "DESC"),
        };
        let rows = self
            .client
            .query(
                &format!(
                    "SELECT n.queue FROM ({names}) n
                     WHERE ($1::text IS NULL OR pg_catalog.starts_with(n.queue, $1::text))
                       AND ($2::text IS NULL OR n.queue > $2::text)
                       AND ($3::text IS NULL OR n.queue < $3::text)
                     ORDER BY n.queue {order}
                     LIMIT $4::bigint"
                ),
                &[&prefix, &after, &before, &(QUEUES_PAGE as i64 + 1)],
            )
            .await?;
        let mut names: Vec<String> = rows.iter().map(|r| r.get(0)).collect();
        if matches!(from, Keyset::Before(_)) {
            // fetched backwards, nearest first: the page keeps name order,
            // and the one beyond a page is the first
            names.reverse();
        }
        Ok(names)
    }

    /// The jobs of these queues counted by status (in STATUSES order).
    pub async fn queue_counts(&self, names: &[String]) -> Result<Vec<Queue>, Failure> {
        let rows = self
            .client
            .query(
                &format!(
                    "SELECT j.queue, j.status, pg_catalog.count(*) FROM {}.jobs j
                     WHERE j.queue = ANY ($1::text[]) GROUP BY 1, 2",
                    self.s
                ),
                &[&names],
            )
            .await?;
        let mut queues: Vec<Queue> =
            names.iter().map(|name| Queue { name: name.clone(), counts: vec![0; STATUSES.len()], ..Queue::default() }).collect();
        for row in rows {
            let (name, status, n): (String, String, i64) = (row.get(0), row.get(1), row.get(2));
            let Some(queue) = queues.iter_mut().find(|q| q.name == name) else { continue };
            if let Some(i) = STATUSES.iter().position(|s| *s == status) {
                queue.counts[i] += n;
            }
            queue.total += n;
        }
        Ok(queues)
    }

    /// Flow settings of these queues: paused, and the limits as text.
    pub async fn queue_limits(&self, names: &[String]) -> Result<Vec<(String, bool, String)>, Failure> {
        let rows = self
            .client
            .query(
                &format!(
                    "SELECT l.queue, l.paused, pg_catalog.concat_ws(', '::text,
                         'at most '::text || l.max_claimed::text || ' claimed'::text,
                         l.rate::text || ' per '::text || l.per::text,
                         'at most '::text || l.group_max_claimed::text || ' a group'::text)
                     FROM {}.queue_limits l WHERE l.queue = ANY ($1::text[])",
                    self.s
                ),
                &[&names],
            )
            .await?;
        Ok(rows.iter().map(|r| (r.get(0), r.get(1), r.get(2))).collect())
    }

    /// The metrics of these queues over the last `span_ms`, in buckets of
    /// `bucket_ms`: events summed, and of each minute's wait percentiles the
    /// highest. Read from the table by its key (queue, minute), so a page
    /// costs its own queues' rows only; rq_metrics(queue, …) cannot use the
    /// key (its plan serves any queue or all) and took 30 ms a queue with a
    /// day of rows.
    pub async fn metrics(&self, names: &[String], span_ms: i64, bucket_ms: i64) -> Result<Vec<Bucket>, Failure> {
        let rows = self
            .client
            .query(
                &format!(
                    "SELECT m.queue, m.minute / $3::bigint * $3::bigint,
                            pg_catalog.sum(m.enqueued)::bigint, pg_catalog.sum(m.succeeded)::bigint,
                            pg_catalog.sum(m.failed)::bigint,
                            pg_catalog.max({h}.rq_histogram_percentile(m.wait_histogram, 0.5::double precision)),
                            pg_catalog.max({h}.rq_histogram_percentile(m.wait_histogram, 0.95::double precision)),
                            pg_catalog.max({h}.rq_histogram_percentile(m.wait_histogram, 0.99::double precision)),
                            pg_catalog.max({h}.rq_histogram_percentile(m.run_histogram, 0.5::double precision)),
                            pg_catalog.max({h}.rq_histogram_percentile(m.run_histogram, 0.95::double precision)),
                            pg_catalog.max({h}.rq_histogram_percentile(m.run_histogram, 0.99::double precision)),
                            pg_catalog.max(m.backlog)
                     FROM {s}.metrics m
                     WHERE m.queue = ANY ($1::text[]) AND m.minute >= {v}.rq_now_ms() - $2::bigint
                     GROUP BY 1, 2 ORDER BY 1, 2",
                    s = self.s,
                    h = self.h,
                    v = self.v
                ),
                &[&names, &span_ms, &bucket_ms],
            )
            .await?;
        Ok(rows
            .iter()
            .map(|r| Bucket {
                queue: r.get(0),
                start_ms: r.get(1),
                enqueued: r.get(2),
                succeeded: r.get(3),
                failed: r.get(4),
                wait_p50: r.get(5),
                wait_p95: r.get(6),
                wait_p99: r.get(7),
                run_p50: r.get(8),
                run_p95: r.get(9),
                run_p99: r.get(10),
                backlog: r.get(11),
            })
            .collect())
    }

    /// Every queue's events over the last `span_ms`, summed a bucket of
    /// `bucket_ms` (by the minute index: the rows of the span, whatever the
    /// queues).
    pub async fn totals(&self, span_ms: i64, bucket_ms: i64) -> Result<Vec<Total>, Failure> {
        let rows = self
            .client
            .query(
                &format!(
                    "SELECT m.minute / $2::bigint * $2::bigint,
                            pg_catalog.sum(m.enqueued)::bigint, pg_catalog.sum(m.succeeded)::bigint,
                            pg_catalog.sum(m.failed)::bigint
                     FROM {s}.metrics m
                     WHERE m.minute >= {v}.rq_now_ms() - $1::bigint
                     GROUP BY 1 ORDER BY 1",
                    s = self.s,
                    v = self.v
                ),
                &[&span_ms, &bucket_ms],
            )
            .await?;
        Ok(rows.iter().map(|r| Total { start_ms: r.get(0), enqueued: r.get(1), succeeded: r.get(2), failed: r.get(3) }).collect())
    }

    /// The ready jobs of these queues now: queued or failed (waiting for a
    /// retry) and due. With the time now (ms), from the server's clock.
    pub async fn ready(&self, names: &[String]) -> Result<(i64, Vec<Ready>), Failure> {
        let now: i64 = self.client.query_one(&format!("SELECT {}.rq_now_ms()", self.v), &[]).await?.get(0);
        let rows = self
            .client
            .query(
                &format!(
                    "SELECT j.queue, pg_catalog.count(*), pg_catalog.min(j.scheduled_at) FROM {}.jobs j
                     WHERE j.queue = ANY ($1::text[]) AND j.status IN ('queued'::text, 'failed'::text)
                       AND j.scheduled_at <= $2::bigint
                     GROUP BY 1",
                    self.s
                ),
                &[&names, &now],
            )
            .await?;
        Ok((now, rows.iter().map(|r| Ready { queue: r.get(0), count: r.get(1), oldest_due_ms: r.get(2) }).collect()))
    }

    /// The workflow job `id` is part of: the jobs linked to it through the
    /// parents they were enqueued after, either way, walked breadth first
    /// up to WORKFLOW_COUNTED jobs. None: no such job.
    pub async fn workflow(&self, id: uuid::Uuid) -> Result<Option<Workflow>, Failure> {
        let id = id.to_string();
        let exists = self
            .client
            .query_opt(&format!("SELECT 1 FROM {}.jobs j WHERE j.id = $1::text::uuid", self.s), &[&id])
            .await?;
        if exists.is_none() {
            return Ok(None);
        }
        // job_parents keeps every edge while the child is (from 0.5.0 on);
        // job_dependencies only the pending ones, for a role that may not
        // read job_parents or an older install
        let mut last = None;
        for table in ["job_parents", "job_dependencies"] {
            match self.workflow_from(&id, table).await {
                Ok(w) => return Ok(Some(w)),
                Err(f) if f.is("42501") || f.is("42P01") => last = Some(f),
                Err(f) => return Err(f),
            }
        }
        Err(last.expect("a table was tried"))
    }

    async fn workflow_from(&self, id: &str, table: &'static str) -> Result<Workflow, Failure> {
        let s = &self.s;
        // UNION: a job reached twice (a diamond) is walked once; the LIMIT
        // stops the walk itself, not only its output
        let rows = self
            .client
            .query(
                &format!(
                    "WITH RECURSIVE w (id) AS (
                         SELECT $1::text::uuid
                         UNION
                         SELECT n.id FROM w CROSS JOIN LATERAL (
                             SELECT e.parent_id FROM {s}.{table} e WHERE e.child_id = w.id
                             UNION ALL
                             SELECT e.child_id FROM {s}.{table} e WHERE e.parent_id = w.id) n (id))
                     SELECT w.id::text, coalesce(j.queue, ''::text), coalesce(j.status::text, 'gone'::text),
                            coalesce(j.enqueued_at, 0::bigint)
                     FROM (SELECT w.id FROM w LIMIT $2::bigint) w LEFT JOIN {s}.jobs j ON j.id = w.id"
                ),
                &[&id, &WORKFLOW_COUNTED],
            )
            .await?;
        let total = rows.len() as i64;
        let mut nodes: Vec<Node> =
            rows.iter().map(|r| Node { id: r.get(0), queue: r.get(1), status: r.get(2), enqueued_at: r.get(3) }).collect();
        // the oldest first: parents are enqueued before their children
        nodes.sort_by(|a, b| (a.enqueued_at, &a.id).cmp(&(b.enqueued_at, &b.id)));
        nodes.truncate(WORKFLOW_NODES);
        let ids: Vec<String> = nodes.iter().map(|n| n.id.clone()).collect();
        let edges = self
            .client
            .query(
                &format!(
                    "SELECT e.child_id::text, e.parent_id::text FROM {s}.{table} e
                     WHERE e.child_id = ANY ($1::text[]::uuid[]) AND e.parent_id = ANY ($1::text[]::uuid[])
                     ORDER BY 1, 2 LIMIT $2::bigint"
                ),
                &[&ids, &(WORKFLOW_EDGES as i64 + 1)],
            )
            .await?
            .iter()
            .map(|r| (r.get(0), r.get(1)))
            .collect::<Vec<(String, String)>>();
        let more_edges = edges.len() > WORKFLOW_EDGES;
        let mut edges = edges;
        edges.truncate(WORKFLOW_EDGES);
        Ok(Workflow { nodes, edges, more_edges, total, table })
    }

    /// One job, every column in the table's order (each cut to SHOWN_CHARS
    /// characters), or None.
    pub async fn job(&self, id: uuid::Uuid) -> Result<Option<Job>, Failure> {
        let id = id.to_string();
        let rows = self
            .client
            .query(
                &format!(
                    "SELECT e.key, pg_catalog.left(e.value, $2::integer), pg_catalog.octet_length(e.value)
                     FROM {}.jobs j CROSS JOIN LATERAL pg_catalog.json_each_text(pg_catalog.row_to_json(j)) AS e
                     WHERE j.id = $1::text::uuid",
                    self.s
                ),
                &[&id, &SHOWN_CHARS],
            )
            .await?;
        if rows.is_empty() {
            return Ok(None);
        }
        let mut fields = Vec::new();
        for row in rows {
            let (name, value, bytes): (String, Option<String>, Option<i32>) = (row.get(0), row.get(1), row.get(2));
            let cut_bytes = match (&value, bytes) {
                (Some(v), Some(b)) if (v.len() as i64) < b as i64 => Some(b),
                _ => None,
            };
            let when = if name.ends_with("_at") { value.as_deref().and_then(|v| v.parse().ok()).map(|ms| utc(Some(ms))) } else { None };
            fields.push(Field { name, value, cut_bytes, when });
        }
        let text = |name: &str| fields.iter().find(|f| f.name == name).and_then(|f| f.value.clone()).unwrap_or_default();
        let (queue, status) = (text("queue"), text("status"));
        // shown in their own sections, not again in the table of columns
        let mut take = |name: &str| {
            let at = fields.iter().position(|f| f.name == name)?;
            let field = fields.remove(at);
            field.value.is_some().then_some(field)
        };
        let (payload, error, error_trace) = (take("payload"), take("error"), take("error_trace"));
        // Workflows, steps and waits are tables of their own, which a role
        // may not read: the page says what it leaves out then.
        let mut notes: Vec<String> = Vec::new();
        let unread = |e: &tokio_postgres::Error, table: &str, what: &str| -> Option<String> {
            (e.code() == Some(&tokio_postgres::error::SqlState::INSUFFICIENT_PRIVILEGE)).then(|| {
                format!("{what} not shown: this role may not read {table} (GRANT SELECT ON {table}; the dashboard's page of the book lists the grants).")
            })
        };
        // workflows: the edges still pending
        let edges = |direction: &'static str| {
            let (this, other) = if direction == "parents" { ("child_id", "parent_id") } else { ("parent_id", "child_id") };
            let sql = format!(
                "SELECT d.{other}::text, o.status FROM {s}.job_dependencies d LEFT JOIN {s}.jobs o ON o.id = d.{other}
                 WHERE d.{this} = $1::text::uuid ORDER BY d.{other} LIMIT $2::bigint",
                s = self.s
            );
            let id = id.clone();
            async move {
                match self.client.query(&sql, &[&id, &(EDGES_SHOWN as i64 + 1)]).await {
                    Ok(rows) => (rows.iter().map(|r| (r.get(0), r.get::<_, Option<String>>(1).unwrap_or_default())).collect(), None),
                    Err(e) => (Vec::new(), unread(&e, "job_dependencies", "Workflow edges")),
                }
            }
        };
        let ((mut parents, unread_parents), (mut children, unread_children)): ((Vec<_>, _), (Vec<_>, _)) =
            (edges("parents").await, edges("children").await);
        notes.extend(unread_parents.or(unread_children));
        let (more_parents, more_children) = (parents.len() > EDGES_SHOWN, children.len() > EDGES_SHOWN);
        parents.truncate(EDGES_SHOWN);
        children.truncate(EDGES_SHOWN);
        // durable jobs: the steps recorded and the event waited for (tables
        // the role may not read: then none shown)
        let steps = match self
            .client
            .query(
                &format!(
                    "SELECT s.name, pg_catalog.left(s.result::pg_catalog.text, $2::integer), s.attempt, s.recorded_at
                     FROM {}.job_steps s WHERE s.job_id = $1::text::uuid ORDER BY s.recorded_at, s.name LIMIT $3::bigint",
                    self.s
                ),
                &[&id, &SHOWN_CHARS, &(STEPS_SHOWN as i64)],
            )
            .await
        {
            Ok(rows) => rows
                .iter()
                .map(|r| Step { name: r.get(0), result: r.get(1), attempt: r.get(2), recorded: utc(Some(r.get(3))) })
                .collect(),
            Err(e) => {
                notes.extend(unread(&e, "job_steps", "Steps"));
                Vec::new()
            }
        };
        let wait = match self
            .client
            .query_opt(
                &format!("SELECT w.event, w.name, w.since, w.until FROM {}.job_waits w WHERE w.job_id = $1::text::uuid", self.s),
                &[&id],
            )
            .await
        {
            Ok(Some(r)) => Some(Wait {
                event: r.get(0),
                step: r.get(1),
                since: utc(Some(r.get(2))),
                until: r.get::<_, Option<i64>>(3).map(|ms| utc(Some(ms))),
            }),
            Ok(None) => None,
            Err(e) => {
                notes.extend(unread(&e, "job_waits", "The event waited for"));
                None
            }
        };
        // its history: every attempt, oldest first (rq_history, from
        // 0.6.0 on; reads jobs as the dashboard's role, which has read the
        // row already). When it cannot be read, the column past_attempts
        // stays in the table of columns.
        let attempts = match self
            .client
            .query(
                &format!(
                    "SELECT h.attempt, pg_catalog.left(h.worker, $3::integer),
                            (pg_catalog.date_part('epoch'::text, h.claimed_at) * 1000::double precision)::bigint,
                            (pg_catalog.date_part('epoch'::text, h.ended_at) * 1000::double precision)::bigint,
                            pg_catalog.left(h.outcome, $3::integer),
                            pg_catalog.left(h.error, $2::integer), pg_catalog.octet_length(h.error),
                            pg_catalog.left(h.trace, $2::integer), pg_catalog.octet_length(h.trace)
                     FROM {}.rq_history($1::text::uuid) WITH ORDINALITY
                          AS h (attempt, worker, claimed_at, ended_at, outcome, error, trace, n)
                     ORDER BY h.n LIMIT $4::bigint",
                    self.v
                ),
                &[&id, &ATTEMPT_CHARS, &ATTEMPT_NAME_CHARS, &(ATTEMPTS_SHOWN as i64)],
            )
            .await
        {
            Ok(rows) => {
                let cut = |value: Option<String>, bytes: Option<i32>| {
                    value.map(|v| {
                        let cut_bytes = bytes.filter(|b| (v.len() as i64) < *b as i64);
                        Field { name: String::new(), value: Some(v), cut_bytes, when: None }
                    })
                };
                fields.retain(|f| f.name != "past_attempts");
                rows.iter()
                    .map(|r| Attempt {
                        attempt: r.get(0),
                        worker: r.get(1),
                        claimed: utc(r.get(2)),
                        ended: utc(r.get(3)),
                        outcome: r.get(4),
                        error: cut(r.get(5), r.get(6)),
                        trace: cut(r.get(7), r.get(8)),
                    })
                    .collect()
            }
            // an install older than 0.6.0: no history to show
            Err(e) if e.code() == Some(&tokio_postgres::error::SqlState::UNDEFINED_FUNCTION) => Vec::new(),
            Err(e) => {
                let f = Failure::from(e);
                notes.push(format!("Attempts not shown: rq_history said {} (SQLSTATE {}).", f.message, f.sqlstate));
                Vec::new()
            }
        };
        Ok(Some(Job {
            id,
            queue,
            status,
            payload,
            error,
            error_trace,
            fields,
            parents,
            children,
            more_parents,
            more_children,
            steps,
            wait,
            attempts,
            notes,
        }))
    }

    /// Schedules by name after `after`; one more than a page.
    pub async fn schedules(&self, after: Option<&str>) -> Result<Vec<Schedule>, Failure> {
        let rows = self
            .client
            .query(
                &format!(
                    "SELECT s.name, s.cron, s.timezone, s.queue, s.enabled, s.next_run_at, s.last_run_at, s.last_job_id::text
                     FROM {}.schedules s WHERE ($1::text IS NULL OR s.name > $1::text)
                     ORDER BY s.name LIMIT $2::bigint",
                    self.s
                ),
                &[&after, &(PAGE as i64 + 1)],
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

    /// The pending edges of workflows, children waiting for their parents,
    /// after the edge `after` (child, parent); one more than a page.
    pub async fn workflows(&self, after: Option<(uuid::Uuid, uuid::Uuid)>) -> Result<Vec<Edge>, Failure> {
        let (child, parent) = match after {
            Some((c, p)) => (Some(c.to_string()), Some(p.to_string())),
            None => (None, None),
        };
        let s = &self.s;
        let rows = self
            .client
            .query(
                &format!(
                    "SELECT d.parent_id::text, coalesce(p.queue, ''::text), coalesce(p.status, 'gone'::text),
                            d.child_id::text, coalesce(k.queue, ''::text), coalesce(k.status, 'gone'::text)
                     FROM {s}.job_dependencies d
                     LEFT JOIN {s}.jobs p ON p.id = d.parent_id
                     LEFT JOIN {s}.jobs k ON k.id = d.child_id
                     WHERE ($1::text IS NULL OR (d.child_id, d.parent_id) > ($1::text::uuid, $2::text::uuid))
                     ORDER BY d.child_id, d.parent_id
                     LIMIT $3::bigint"
                ),
                &[&child, &parent, &(PAGE as i64 + 1)],
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

    /// What rq_warnings() says (sql/warnings.sql): (warning, hint) each.
    /// Called in raquel_internal, whatever else is planted in raquel's
    /// schema; an install older than 0.6.0 has none (42883).
    pub async fn warnings(&self) -> Result<Vec<(String, String)>, Failure> {
        let rows = self
            .client
            .query("SELECT w.warning, w.hint FROM raquel_internal.rq_warnings() w", &[])
            .await?;
        Ok(rows.iter().map(|r| (r.get(0), r.get(1))).collect())
    }

    /// The actions on a schedule: pause and resume (rq_pause_schedule and
    /// rq_resume_schedule, by their raquel_internal names from 0.6.0 on), and
    /// run: one job now from the schedule's queue, payload and options,
    /// enqueued with rq_enqueue as the schedule's own round would (but due
    /// now), its id returned. An unknown schedule is P0002.
    pub async fn act_on_schedule(&self, action: &str, name: &str) -> Result<Option<String>, Failure> {
        let s = &self.s;
        let row: Option<Option<String>> = match action {
            "pause" => self.client.query_opt(&format!("SELECT 1 FROM {v}.rq_pause_schedule($1::text)", v = self.v), &[&name]).await?.map(|_| None),
            "resume" => self.client.query_opt(&format!("SELECT 1 FROM {v}.rq_resume_schedule($1::text)", v = self.v), &[&name]).await?.map(|_| None),
            "run" => {
                // the options as the schedule keeps them (ms), made intervals
                let ms = |column: &str| format!("(c.{column}::text || ' milliseconds'::text)::interval");
                let sql = format!(
                    "SELECT e.id::text FROM {s}.schedules c CROSS JOIN LATERAL {v}.rq_enqueue(c.queue, c.payload,
                         NULL::timestamptz, NULL::interval, {max_age}, c.max_retry_count, {min_retry_delay},
                         {max_retry_delay}, {backoff_base}, c.priority) e
                     WHERE c.name = $1::text",
                    v = self.v,
                    max_age = ms("max_age"),
                    min_retry_delay = ms("min_retry_delay"),
                    max_retry_delay = ms("max_retry_delay"),
                    backoff_base = ms("backoff_base"),
                );
                self.client.query_opt(&sql, &[&name]).await?.map(|r| Some(r.get::<_, String>(0)))
            }
            _ => return Err(Failure { sqlstate: "22023".into(), message: format!("no action {action}") }),
        };
        row.ok_or_else(|| Failure { sqlstate: "P0002".into(), message: format!("There is no schedule {name:?}.") })
    }

    /// The actions: raquel's functions, whose errors (wrong status, unknown
    /// job) come back with their SQLSTATE and change nothing.
    pub async fn act(&self, action: &str, target: &str) -> Result<(), Failure> {
        let call = match action {
            "retry" => "rq_retry($1::text::uuid)",
            "cancel" => "rq_cancel($1::text::uuid)",
            "pause" => "rq_pause($1::text)",
            "resume" => "rq_resume($1::text)",
            "delete" => return self.delete_job(target).await,
            _ => return Err(Failure { sqlstate: "22023".into(), message: format!("no action {action}") }),
        };
        self.client.query(&format!("SELECT 1 FROM {}.{call}", self.v), &[&target]).await?;
        Ok(())
    }
}

/// ms since the epoch as a UTC instant ("" for none).
pub fn utc(ms: Option<i64>) -> String {
    ms.and_then(chrono::DateTime::from_timestamp_millis)
        .map(|t| t.format("%Y-%m-%d %H:%M:%S%.3f UTC").to_string())
        .unwrap_or_default()
}
