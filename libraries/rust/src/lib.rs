//! raquel-pg: workers and enqueue helpers for raquel, the PostgreSQL job
//! queue extension, on tokio-postgres.
//!
//! A thin layer over raquel's SQL verbs: every call here is one of them
//! (`rq_enqueue`, `rq_complete_batch_and_claim`, `rq_fail`, `rq_extend`,
//! `rq_step`, `rq_sleep`, `rq_wait_event`, `rq_wait_job`, …); the library
//! keeps no table and speaks no protocol of its own.
//!
//! - [`enqueue`] and [`enqueue_batch`] with [`EnqueueOptions`], on a
//!   `Client` or inside the caller's `Transaction`;
//! - [`Worker`]: handlers by queue, concurrency, waiting claims, lease
//!   extension, completions batched across handlers, graceful shutdown on
//!   SIGTERM;
//! - [`Job`]: what a handler gets, with the durable context (`step`,
//!   `sleep`, `wait_event`, `await_job`) fenced by the job's attempt for
//!   the user.

mod enqueue;
mod job;
mod worker;

pub use enqueue::{emit, enqueue, enqueue_batch, EnqueueOptions, Enqueued, Payload};
pub use job::{Job, JobEnd};
pub use worker::{Around, JobInfo, Outcome, Stats, Worker};

/// The error a handler returns: any error type converts into it with `?`
/// (raquel-pg's own [`Error`] included).
pub type HandlerError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// What raquel-pg's calls fail with.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A statement or the connection failed; the server's message (and
    /// SQLSTATE) is in the source.
    #[error("raquel-pg: {context}: {source}")]
    Db {
        context: String,
        #[source]
        source: tokio_postgres::Error,
    },
    /// The job was put to sleep or parked for an event or a job: the attempt
    /// is over and the job comes back when it is due. Return it from the
    /// handler (`?` does): the worker then neither completes nor fails it.
    #[error("raquel-pg: job {0} is parked (sleeping or waiting); this attempt ends here")]
    Parked(uuid::Uuid),
    /// A value could not be turned into JSON or back.
    #[error("raquel-pg: {context}: {source}")]
    Json {
        context: String,
        #[source]
        source: serde_json::Error,
    },
    /// The function given to `step` failed; nothing was recorded.
    #[error("raquel-pg: step {name:?} failed: {source}")]
    Step {
        name: String,
        #[source]
        source: HandlerError,
    },
    /// A worker's connection to the server closed: `run` ends with this
    /// (after its shutdown), for a supervisor or a loop to start it again.
    #[error("raquel-pg: the worker's {0} connection closed")]
    Closed(&'static str),
    /// A setting the worker cannot run with.
    #[error("raquel-pg: {0}")]
    Config(String),
}

impl Error {
    pub(crate) fn db(context: impl Into<String>, source: tokio_postgres::Error) -> Error {
        Error::Db { context: context.into(), source }
    }

    /// The SQLSTATE of a refusal from the server, if this is one.
    pub fn sqlstate(&self) -> Option<&str> {
        match self {
            Error::Db { source, .. } => source.code().map(|code| code.code()),
            _ => None,
        }
    }

    /// True when raquel refused the call because this attempt no longer
    /// holds the job (SQLSTATE 55000: its lease ran out and another attempt
    /// took it, or it was cancelled): fencing at work.
    pub fn is_fenced(&self) -> bool {
        self.sqlstate() == Some("55000")
    }

    /// True for [`Error::Parked`].
    pub fn is_parked(&self) -> bool {
        matches!(self, Error::Parked(_))
    }
}

pub(crate) fn secs(duration: std::time::Duration) -> f64 {
    duration.as_secs_f64()
}

/// Connects with tokio-postgres (no TLS) and drives the connection on a
/// task of its own; the DSN is a libpq key=value string or a URL.
pub async fn connect(dsn: &str) -> Result<tokio_postgres::Client, Error> {
    let (client, connection) =
        tokio_postgres::connect(dsn, tokio_postgres::NoTls).await.map_err(|e| Error::db("connecting", e))?;
    tokio::spawn(async move {
        if let Err(error) = connection.await {
            log::warn!("raquel-pg: connection ended: {error}");
        }
    });
    Ok(client)
}
