//! The pages and the actions: routes, the templates they fill, and errors
//! as pages (with the server's SQLSTATE) rather than panics. Who may ask,
//! and the headers every answer carries, are src/access.rs's.
//!
//! Every page is bounded, whatever the database holds: 50 queues a page
//! (their charts only), 100 jobs, schedules or workflow edges a page, and of
//! a job's payload, error, trace and other columns the first 65,536
//! characters each, and its attempts (101 at most) with the first 250
//! characters of each one's error and trace, and of a workflow's graph
//! 200 jobs (docs/src/guides/dashboard.md
//! gives the byte bound the tests hold).

use crate::charts::{self, Series};
use crate::csrf::{self, COOKIE};
use crate::db::{self, Conn, Failure, Keyset};
use crate::find::{Filter, FindError, FindQuery};
use crate::bulk;
use crate::{access, App};
use axum::extract::{Form, Path, Query, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::middleware;
use axum::response::{Html, IntoResponse, Redirect, Response};
use axum::routing::get;
use axum::Router;
use minijinja::context;
use percent_encoding::{utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};
use serde::Deserialize;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

type Shared = State<Arc<App>>;

/// What stays as it is in a piece of a URL: RFC 3986's unreserved
/// characters. Everything else is percent-encoded, `/`, `?`, `#`, `%` and
/// spaces included, so a queue name is one path segment or one query value.
const URL_PART: &AsciiSet = &NON_ALPHANUMERIC.remove(b'-').remove(b'.').remove(b'_').remove(b'~');

pub fn url_part(text: &str) -> String {
    utf8_percent_encode(text, URL_PART).to_string()
}

pub fn templates() -> minijinja::Environment<'static> {
    let mut env = minijinja::Environment::new();
    // .html templates escape every value (minijinja's auto-escape); `url`
    // encodes a value for a URL (minijinja's own urlencode leaves `/` as it is)
    env.add_filter("url", |value: String| url_part(&value));
    for (name, text) in [
        ("base.html", include_str!("../templates/base.html")),
        ("queues.html", include_str!("../templates/queues.html")),
        ("jobs.html", include_str!("../templates/jobs.html")),
        ("job.html", include_str!("../templates/job.html")),
        ("schedules.html", include_str!("../templates/schedules.html")),
        ("workflows.html", include_str!("../templates/workflows.html")),
        ("workflow.html", include_str!("../templates/workflow.html")),
        ("confirm.html", include_str!("../templates/confirm.html")),
        ("bulk.html", include_str!("../templates/bulk.html")),
        ("operation.html", include_str!("../templates/operation.html")),
        ("error.html", include_str!("../templates/error.html")),
    ] {
        env.add_template(name, text).expect("the templates parse");
    }
    env
}

pub fn router(app: Arc<App>) -> Router {
    Router::new()
        .route("/", get(queues))
        .route("/jobs", get(jobs))
        .route("/jobs/{id}", get(job))
        .route("/schedules", get(schedules))
        .route("/workflows", get(workflows))
        .route("/workflows/{id}", get(workflow))
        .route("/static/style.css", get(style))
        .route("/jobs/{id}/{action}", get(confirm_job).post(act_on_job))
        // a queue's name is a query value, not a path segment: a queue may be
        // called `..`, which browsers resolve away in a path even encoded
        .route("/queues/{action}", get(confirm_queue).post(act_on_queue))
        // a schedule's name is a query value too, for the same reason
        .route("/schedules/{action}", get(confirm_schedule).post(act_on_schedule))
        // every job a filter of the list matches (src/bulk.rs), and the
        // progress of such an operation
        .route("/bulk/{action}", get(confirm_bulk).post(start_bulk))
        .route("/operations/{id}", get(operation))
        .fallback(|State(app): Shared, headers: HeaderMap| async move {
            page(&app, &headers, StatusCode::NOT_FOUND, "error.html", context! { title => "Not found", message => "There is no such page." })
        })
        .with_state(app.clone())
        // the last layer runs first: the headers wrap every answer, the
        // Host and password checks' refusals too
        .layer(middleware::from_fn_with_state(app, access::check))
        .layer(middleware::from_fn(access::headers))
}

/// A rendered page with the session cookie (made when missing).
fn page(app: &App, headers: &HeaderMap, status: StatusCode, template: &str, values: minijinja::Value) -> Response {
    let cookie = headers.get(header::COOKIE).and_then(|v| v.to_str().ok());
    let (session, new) = match csrf::session_of(cookie) {
        Some(s) => (s, false),
        None => (app.csrf.new_session(), true),
    };
    let values = context! { read_write => app.read_write, csrf => app.csrf.token(&session), ..values };
    let body = match app.templates.get_template(template).and_then(|t| t.render(values)) {
        Ok(body) => body,
        Err(e) => return (StatusCode::INTERNAL_SERVER_ERROR, format!("template {template}: {e}")).into_response(),
    };
    let mut response = (status, Html(body)).into_response();
    if new {
        let secure = if app.access.https() { "; Secure" } else { "" };
        let value = format!("{COOKIE}={session}; Path=/; HttpOnly; SameSite=Strict{secure}");
        response.headers_mut().insert(header::SET_COOKIE, HeaderValue::from_str(&value).expect("hex is a header value"));
    }
    response
}

/// What a page handler answers: the page, or a page that says what failed.
type Answer = Result<Response, Response>;

/// A connection from the pool, or the page that says why not.
async fn connect(app: &App, headers: &HeaderMap) -> Result<Conn, Response> {
    app.db.get().await.map_err(|f| failure(app, headers, f))
}

fn failure(app: &App, headers: &HeaderMap, f: Failure) -> Response {
    let status = match f.sqlstate.as_str() {
        "42501" => StatusCode::FORBIDDEN,
        _ if f.unavailable() => StatusCode::SERVICE_UNAVAILABLE,
        s if s.starts_with("22") || s.starts_with("55") || s == "P0002" => StatusCode::CONFLICT,
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    };
    let mut response = page(app, headers, status, "error.html", context! { title => "The database said no", failure => f });
    if status == StatusCode::SERVICE_UNAVAILABLE {
        response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from_static("2"));
    }
    response
}

async fn style() -> Response {
    ([(header::CONTENT_TYPE, "text/css; charset=utf-8")], include_str!("../static/style.css")).into_response()
}

fn non_empty(s: Option<String>) -> Option<String> {
    s.filter(|s| !s.trim().is_empty())
}

/// The seconds between reloads a page was asked for (`?refresh=N`, 2 to
/// 300; anything else: none). The page then carries `<meta
/// http-equiv="refresh">`: a reload with no script, so the CSP stays as it
/// is (docs/src/guides/dashboard.md, "Live refresh").
fn refresh_of(asked: Option<&str>) -> Option<u32> {
    asked.and_then(|n| n.trim().parse::<u32>().ok()).filter(|n| (2..=300).contains(n))
}

/// The seconds a page's "live" link asks for.
pub const LIVE_SECONDS: u32 = 5;

/// A query string (with its `?`, or "" for none) of the pairs given a
/// value, each percent-encoded.
fn query_string(pairs: &[(&str, Option<&str>)]) -> String {
    let parts: Vec<String> = pairs.iter().filter_map(|(k, v)| v.map(|v| format!("{k}={}", url_part(v)))).collect();
    if parts.is_empty() { String::new() } else { format!("?{}", parts.join("&")) }
}

/// A duration for people: "850 ms", "42 s", "7 min 3 s", "5 h 12 min", "3 d 4 h".
pub fn duration(ms: i64) -> String {
    let ms = ms.max(0);
    let s = ms / 1000;
    match s {
        _ if ms < 1000 => format!("{ms} ms"),
        0..=59 => format!("{s} s"),
        60..=3599 => format!("{} min {} s", s / 60, s % 60),
        3600..=86_399 => format!("{} h {} min", s / 3600, s % 3600 / 60),
        _ => format!("{} d {} h", s / 86_400, s % 86_400 / 3600),
    }
}

#[derive(Deserialize)]
struct QueuesQuery {
    range: Option<String>,
    prefix: Option<String>,
    after: Option<String>,
    before: Option<String>,
    refresh: Option<String>,
}

async fn queues(State(app): Shared, headers: HeaderMap, Query(q): Query<QueuesQuery>) -> Answer {
    let day = q.range.as_deref() == Some("day");
    let refresh = refresh_of(q.refresh.as_deref());
    // the same page with live refresh on and off
    let live = |on: bool| {
        let seconds = LIVE_SECONDS.to_string();
        query_string(&[
            ("range", q.range.as_deref().filter(|_| day)),
            ("prefix", q.prefix.as_deref().filter(|p| !p.trim().is_empty())),
            ("after", q.after.as_deref().filter(|p| !p.trim().is_empty())),
            ("before", q.before.as_deref().filter(|p| !p.trim().is_empty())),
            ("refresh", on.then_some(seconds.as_str())),
        ])
    };
    let (live_on, live_off) = (format!("/{}", live(true)), format!("/{}", live(false)));
    let prefix = non_empty(q.prefix);
    let from = match (non_empty(q.after), non_empty(q.before)) {
        (Some(after), _) => Keyset::After(after),
        (None, Some(before)) => Keyset::Before(before),
        (None, None) => Keyset::First,
    };
    let c = connect(&app, &headers).await?;
    let mut notes = Vec::new();
    let fail = |f| failure(&app, &headers, f);
    // the queues with flow settings too, when the role may read them
    let (mut names, with_limits) = match c.queue_names(true, prefix.as_deref(), &from).await {
        Ok(names) => (names, true),
        Err(f) if f.is("42501") => {
            notes.push(format!("Flow settings not shown: {} ({})", f.message, f.sqlstate));
            (c.queue_names(false, prefix.as_deref(), &from).await.map_err(fail)?, false)
        }
        Err(f) => return Err(fail(f)),
    };
    // the page, and where the pages before and after it start
    let more = names.len() > db::QUEUES_PAGE;
    let (previous, next) = match &from {
        Keyset::Before(_) => {
            if more {
                names.remove(0);
            }
            (names.first().filter(|_| more).cloned(), names.last().cloned())
        }
        Keyset::After(_) => {
            names.truncate(db::QUEUES_PAGE);
            (names.first().cloned(), names.last().filter(|_| more).cloned())
        }
        Keyset::First => {
            names.truncate(db::QUEUES_PAGE);
            (None, names.last().filter(|_| more).cloned())
        }
    };
    let mut queues = c.queue_counts(&names).await.map_err(fail)?;
    if with_limits {
        match c.queue_limits(&names).await {
            Ok(limits) => {
                for (name, paused, text) in limits {
                    if let Some(q) = queues.iter_mut().find(|q| q.name == name) {
                        (q.paused, q.limits) = (paused, text);
                    }
                }
            }
            Err(f) => notes.push(format!("Flow settings not shown: {} ({})", f.message, f.sqlstate)),
        }
    }
    // what raquel says an operator should fix (sql/warnings.sql, 0.6.0 on)
    match c.warnings().await {
        Ok(warnings) => notes.extend(warnings.into_iter().map(|(w, hint)| format!("Warning: {w}. {hint}"))),
        Err(f) if f.is("42883") || f.is("3F000") => {}
        Err(f) => notes.push(format!("Warnings not shown: {} ({})", f.message, f.sqlstate)),
    }
    // ready now, and how long the one due longest ago has waited
    let mut ready: BTreeMap<String, (i64, String)> = BTreeMap::new();
    match c.ready(&names).await {
        Ok((now, rows)) => {
            for r in rows {
                ready.insert(r.queue, (r.count, r.oldest_due_ms.map(|due| duration(now - due)).unwrap_or_default()));
            }
        }
        Err(f) => notes.push(format!("Ready jobs not shown: {} ({})", f.message, f.sqlstate)),
    }
    let ready: Vec<(i64, String)> = queues.iter().map(|q| ready.get(&q.name).cloned().unwrap_or((0, String::new()))).collect();
    let charts = queue_charts(&c, &names, day, &mut notes).await;
    let totals = totals_chart(&c, day, &mut notes).await;
    Ok(page(&app, &headers, StatusCode::OK, "queues.html", context! {
        title => "Queues", queues, ready, statuses => db::STATUSES, charts, totals, notes, day, prefix, previous, next,
        refresh, live_on, live_off,
    }))
}

/// The span and bucket of the charts (ms), and the first bucket's start.
fn chart_span(day: bool) -> (i64, i64, i64, i64) {
    let (span_ms, bucket_ms) = if day { (86_400_000, 900_000) } else { (3_600_000, 60_000) };
    let now_ms = chrono::Utc::now().timestamp_millis();
    (span_ms, bucket_ms, (now_ms - span_ms) / bucket_ms * bucket_ms, now_ms)
}

/// Every queue's jobs a minute, summed, over the range: one chart.
async fn totals_chart(c: &Conn, day: bool, notes: &mut Vec<String>) -> Option<String> {
    let (span_ms, bucket_ms, first, now_ms) = chart_span(day);
    let totals = match c.totals(span_ms, bucket_ms).await {
        Ok(t) => t,
        // older than 0.4.0 (the queue charts say so) or not readable
        Err(f) if f.is("42P01") || f.is("42883") => return None,
        Err(f) => {
            notes.push(format!("Totals not shown: {} ({})", f.message, f.sqlstate));
            return None;
        }
    };
    let by_start: HashMap<i64, &db::Total> = totals.iter().map(|t| (t.start_ms, t)).collect();
    let minutes_a_bucket = (bucket_ms / 60_000) as f64;
    let points = |f: &dyn Fn(&db::Total) -> i64| {
        (first..=now_ms)
            .step_by(bucket_ms as usize)
            .map(|start| (start, Some(by_start.get(&start).map_or(0.0, |t| f(t) as f64 / minutes_a_bucket))))
            .collect::<Vec<_>>()
    };
    let per = if day { " (means of 15 minutes)" } else { "" };
    Some(charts::line_chart(
        &format!("All queues: jobs a minute{per}"),
        "/min",
        first,
        now_ms,
        &[
            Series { label: "enqueued", class: "a", points: points(&|t| t.enqueued) },
            Series { label: "succeeded", class: "b", points: points(&|t| t.succeeded) },
            Series { label: "failed", class: "c", points: points(&|t| t.failed) },
        ],
    ))
}

/// Per queue of the page, throughput and wait over the last hour (a point
/// a minute) or day (a point per 15 minutes, so that a day's page is no
/// bigger than an hour's: 96 points instead of 1440).
async fn queue_charts(c: &Conn, names: &[String], day: bool, notes: &mut Vec<String>) -> Vec<minijinja::Value> {
    let (span_ms, bucket_ms, first, now_ms) = chart_span(day);
    let minutes_a_bucket = (bucket_ms / 60_000) as f64;
    let buckets = match c.metrics(names, span_ms, bucket_ms).await {
        Ok(buckets) => buckets,
        Err(f) if f.is("42P01") || f.is("42883") => {
            notes.push("No metrics: this database's raquel is older than 0.4.0 (ALTER EXTENSION raquel UPDATE).".into());
            return Vec::new();
        }
        Err(f) => {
            notes.push(format!("Metrics not shown: {} ({})", f.message, f.sqlstate));
            return Vec::new();
        }
    };
    let mut by_queue: BTreeMap<&str, HashMap<i64, &db::Bucket>> = BTreeMap::new();
    for b in &buckets {
        by_queue.entry(&b.queue).or_default().insert(b.start_ms, b);
    }
    let (per, worst) = if day { (" (means of 15 minutes)", " (worst minute of 15)") } else { ("", "") };
    let mut charts = Vec::new();
    for (queue, by_start) in by_queue {
        // every bucket of the range: a bucket without a row had no events
        let points = |f: &dyn Fn(Option<&db::Bucket>) -> Option<f64>| {
            (first..=now_ms).step_by(bucket_ms as usize).map(|start| (start, f(by_start.get(&start).copied()))).collect::<Vec<_>>()
        };
        let rate = |n: i64| n as f64 / minutes_a_bucket;
        let throughput = charts::line_chart(
            &format!("{queue}: jobs a minute{per}"),
            "/min",
            first,
            now_ms,
            &[
                Series { label: "enqueued", class: "a", points: points(&|b| Some(b.map_or(0.0, |b| rate(b.enqueued)))) },
                Series { label: "succeeded", class: "b", points: points(&|b| Some(b.map_or(0.0, |b| rate(b.succeeded)))) },
                Series { label: "failed", class: "c", points: points(&|b| Some(b.map_or(0.0, |b| rate(b.failed)))) },
            ],
        );
        let wait = charts::line_chart(
            &format!("{queue}: wait from due to claim{worst}"),
            "ms",
            first,
            now_ms,
            &[
                Series { label: "p50", class: "a", points: points(&|b| b.and_then(|b| b.wait_p50)) },
                Series { label: "p95", class: "b", points: points(&|b| b.and_then(|b| b.wait_p95)) },
                Series { label: "p99", class: "c", points: points(&|b| b.and_then(|b| b.wait_p99)) },
            ],
        );
        let run = charts::line_chart(
            &format!("{queue}: run time, claim to end{worst}"),
            "ms",
            first,
            now_ms,
            &[
                Series { label: "p50", class: "a", points: points(&|b| b.and_then(|b| b.run_p50)) },
                Series { label: "p95", class: "b", points: points(&|b| b.and_then(|b| b.run_p95)) },
                Series { label: "p99", class: "c", points: points(&|b| b.and_then(|b| b.run_p99)) },
            ],
        );
        let most = if day { " (most of 15 minutes)" } else { "" };
        let ready = charts::line_chart(
            &format!("{queue}: ready jobs{most}"),
            "jobs",
            first,
            now_ms,
            &[Series { label: "ready", class: "a", points: points(&|b| b.and_then(|b| b.backlog).map(|n| n as f64)) }],
        );
        charts.push(context! { queue, throughput, wait, run, ready });
    }
    charts
}

/// A filter that is not valid: 400, naming the bad value.
fn bad_filter(app: &App, headers: &HeaderMap, message: String) -> Response {
    page(app, headers, StatusCode::BAD_REQUEST, "error.html", context! { title => "Bad filter", message })
}

fn find_failure(app: &App, headers: &HeaderMap, e: FindError) -> Response {
    match e {
        FindError::Invalid(message) => page(app, headers, StatusCode::SERVICE_UNAVAILABLE, "error.html", context! { title => "Not now", message }),
        FindError::Db(f) => failure(app, headers, f),
    }
}

fn filter_of(app: &App, headers: &HeaderMap, q: &FindQuery) -> Result<Filter, Response> {
    Filter::parse(q, chrono::Utc::now().timestamp_millis()).map_err(|m| bad_filter(app, headers, m))
}

async fn jobs(State(app): Shared, headers: HeaderMap, Query(q): Query<FindQuery>) -> Answer {
    let filter = filter_of(&app, &headers, &q)?;
    let mut c = connect(&app, &headers).await?;
    let (mut rows, count) = c.find(&filter).await.map_err(|e| find_failure(&app, &headers, e))?;
    let next = if rows.len() > db::PAGE {
        rows.truncate(db::PAGE);
        rows.last().map(|r| format!("{}_{}", r.enqueued_at, r.id))
    } else {
        None
    };
    Ok(page(&app, &headers, StatusCode::OK, "jobs.html", context! {
        title => "Jobs", jobs => rows, next, statuses => db::STATUSES, count, query => filter.query(), any => filter.any(),
        queue => filter.queue, queue_prefix => filter.prefix, status => filter.status, since => filter.since,
        from_at => filter.from_text, to_at => filter.to_text, q => filter.text, json => filter.json,
    }))
}

#[derive(Deserialize)]
struct Refresh {
    refresh: Option<String>,
}

async fn job(State(app): Shared, headers: HeaderMap, Path(id): Path<String>, Query(q): Query<Refresh>) -> Answer {
    let refresh = refresh_of(q.refresh.as_deref());
    let not_found = |app: &App| {
        page(app, &headers, StatusCode::NOT_FOUND, "error.html", context! { title => "No such job", message => format!("There is no job {id}.") })
    };
    let Ok(uuid) = id.parse::<uuid::Uuid>() else { return Ok(not_found(&app)) };
    let c = connect(&app, &headers).await?;
    Ok(match c.job(uuid).await.map_err(|f| failure(&app, &headers, f))? {
        Some(job) => page(&app, &headers, StatusCode::OK, "job.html", context! {
            title => format!("Job {}", job.id), job, shown => db::SHOWN_CHARS, edges_shown => db::EDGES_SHOWN,
            attempt_chars => db::ATTEMPT_CHARS, refresh, live_seconds => LIVE_SECONDS,
        }),
        None => not_found(&app),
    })
}

#[derive(Deserialize)]
struct After {
    after: Option<String>,
}

async fn schedules(State(app): Shared, headers: HeaderMap, Query(q): Query<After>) -> Answer {
    let c = connect(&app, &headers).await?;
    let (mut schedules, note) = match c.schedules(non_empty(q.after).as_deref()).await {
        Ok(s) => (s, None),
        Err(f) => (Vec::new(), Some(format!("Schedules not shown: {} ({})", f.message, f.sqlstate))),
    };
    let next = (schedules.len() > db::PAGE).then(|| {
        schedules.truncate(db::PAGE);
        schedules.last().map(|s| s.name.clone())
    });
    Ok(page(&app, &headers, StatusCode::OK, "schedules.html", context! { title => "Schedules", schedules, note, next => next.flatten() }))
}

async fn workflows(State(app): Shared, headers: HeaderMap, Query(q): Query<After>) -> Answer {
    let after = non_empty(q.after).and_then(|a| {
        let (child, parent) = a.split_once('_')?;
        Some((child.parse().ok()?, parent.parse().ok()?))
    });
    let c = connect(&app, &headers).await?;
    let (mut edges, note) = match c.workflows(after).await {
        Ok(e) => (e, None),
        Err(f) => (Vec::new(), Some(format!("Workflows not shown: {} ({})", f.message, f.sqlstate))),
    };
    let next = (edges.len() > db::PAGE).then(|| {
        edges.truncate(db::PAGE);
        edges.last().map(|e| format!("{}_{}", e.child, e.parent))
    });
    Ok(page(&app, &headers, StatusCode::OK, "workflows.html", context! { title => "Workflows", edges, note, next => next.flatten() }))
}

/// A workflow drawn as a graph: the jobs linked to job `id` through their
/// parents, either way (the first db::WORKFLOW_NODES, oldest first).
async fn workflow(State(app): Shared, headers: HeaderMap, Path(id): Path<String>) -> Answer {
    let not_found = |app: &App| {
        page(app, &headers, StatusCode::NOT_FOUND, "error.html", context! { title => "No such job", message => format!("There is no job {id}.") })
    };
    let Ok(uuid) = id.parse::<uuid::Uuid>() else { return Ok(not_found(&app)) };
    let c = connect(&app, &headers).await?;
    let Some(w) = c.workflow(uuid).await.map_err(|f| failure(&app, &headers, f))? else { return Ok(not_found(&app)) };
    let index: HashMap<&str, usize> = w.nodes.iter().enumerate().map(|(i, n)| (n.id.as_str(), i)).collect();
    let edges: Vec<(usize, usize)> =
        w.edges.iter().filter_map(|(child, parent)| Some((*index.get(child.as_str())?, *index.get(parent.as_str())?))).collect();
    let nodes: Vec<charts::GraphNode> = w
        .nodes
        .iter()
        .map(|n| charts::GraphNode { id: &n.id, queue: &n.queue, status: &n.status, href: format!("/jobs/{}", url_part(&n.id)) })
        .collect();
    let graph = charts::graph(&nodes, &edges);
    let shown = w.nodes.len() as i64;
    let more = w.total - shown;
    let beyond = w.total >= db::WORKFLOW_COUNTED;
    Ok(page(&app, &headers, StatusCode::OK, "workflow.html", context! {
        title => "Workflow", job => id, graph, shown, more, beyond, counted => db::WORKFLOW_COUNTED, table => w.table,
        edges => w.edges.len(), more_edges => w.more_edges,
    }))
}

const JOB_ACTIONS: [&str; 3] = ["retry", "cancel", "delete"];
const QUEUE_ACTIONS: [&str; 2] = ["pause", "resume"];
const SCHEDULE_ACTIONS: [&str; 3] = ["pause", "resume", "run"];

fn refuse_read_only(app: &App, headers: &HeaderMap) -> Option<Response> {
    (!app.read_write).then(|| {
        page(app, headers, StatusCode::FORBIDDEN, "error.html", context! {
            title => "Read-only", message => "This dashboard was started read-only; start it with --read-write to act on jobs, queues and schedules.",
        })
    })
}

async fn confirm_job(State(app): Shared, headers: HeaderMap, Path((id, action)): Path<(String, String)>) -> Response {
    confirm(&app, &headers, "job", &id, &action, &JOB_ACTIONS)
}

#[derive(Deserialize)]
struct QueueParam {
    queue: Option<String>,
}

fn no_queue(app: &App, headers: &HeaderMap) -> Response {
    page(app, headers, StatusCode::NOT_FOUND, "error.html", context! { title => "Not found", message => "Name a queue: ?queue=NAME." })
}

async fn confirm_queue(State(app): Shared, headers: HeaderMap, Path(action): Path<String>, Query(q): Query<QueueParam>) -> Response {
    match q.queue {
        Some(queue) => confirm(&app, &headers, "queue", &queue, &action, &QUEUE_ACTIONS),
        None => no_queue(&app, &headers),
    }
}

#[derive(Deserialize)]
struct ScheduleParam {
    schedule: Option<String>,
}

fn no_schedule(app: &App, headers: &HeaderMap) -> Response {
    page(app, headers, StatusCode::NOT_FOUND, "error.html", context! { title => "Not found", message => "Name a schedule: ?schedule=NAME." })
}

async fn confirm_schedule(State(app): Shared, headers: HeaderMap, Path(action): Path<String>, Query(q): Query<ScheduleParam>) -> Response {
    match q.schedule {
        Some(schedule) => confirm(&app, &headers, "schedule", &schedule, &action, &SCHEDULE_ACTIONS),
        None => no_schedule(&app, &headers),
    }
}

fn confirm(app: &App, headers: &HeaderMap, kind: &str, target: &str, action: &str, allowed: &[&str]) -> Response {
    if let Some(refused) = refuse_read_only(app, headers) {
        return refused;
    }
    if !allowed.contains(&action) {
        return page(app, headers, StatusCode::NOT_FOUND, "error.html", context! { title => "Not found", message => "There is no such page." });
    }
    // "run" a schedule: say what it does
    let verb = if action == "run" { "run now" } else { action };
    let mut response = page(app, headers, StatusCode::OK, "confirm.html", context! { title => format!("{verb} {kind}"), kind, target, action => verb });
    // This page's form must send its Origin, which the POST is checked
    // against: under no-referrer (every other page's policy) browsers send
    // `Origin: null` instead. Same-origin still sends nothing to other sites.
    response.headers_mut().insert(header::REFERRER_POLICY, HeaderValue::from_static("same-origin"));
    response
}

#[derive(Deserialize)]
struct ActionForm {
    csrf: Option<String>,
}

async fn act_on_job(State(app): Shared, headers: HeaderMap, Path((id, action)): Path<(String, String)>, Form(form): Form<ActionForm>) -> Answer {
    // a deleted job has no page to go back to: the list of its queue's jobs
    let back = if action == "delete" { "/jobs".to_string() } else { format!("/jobs/{}", url_part(&id)) };
    act(&app, &headers, &id, &action, &JOB_ACTIONS, form, back).await
}

async fn act_on_queue(
    State(app): Shared,
    headers: HeaderMap,
    Path(action): Path<String>,
    Query(q): Query<QueueParam>,
    Form(form): Form<ActionForm>,
) -> Answer {
    let Some(queue) = q.queue else { return Err(no_queue(&app, &headers)) };
    // back to the queues, starting with this one
    act(&app, &headers, &queue, &action, &QUEUE_ACTIONS, form, format!("/?prefix={}", url_part(&queue))).await
}

async fn act_on_schedule(
    State(app): Shared,
    headers: HeaderMap,
    Path(action): Path<String>,
    Query(q): Query<ScheduleParam>,
    Form(form): Form<ActionForm>,
) -> Answer {
    let Some(schedule) = q.schedule else { return Err(no_schedule(&app, &headers)) };
    allowed_post(&app, &headers, &action, &SCHEDULE_ACTIONS, &form)?;
    let c = connect(&app, &headers).await?;
    // run: to the job made; pause and resume: back to the schedules
    let back = match c.act_on_schedule(&action, &schedule).await.map_err(|f| failure(&app, &headers, f))? {
        Some(job) => format!("/jobs/{}", url_part(&job)),
        None => "/schedules".to_string(),
    };
    Ok(Redirect::to(&back).into_response())
}

async fn act(app: &App, headers: &HeaderMap, target: &str, action: &str, allowed: &[&str], form: ActionForm, back: String) -> Answer {
    allowed_post(app, headers, action, allowed, &form)?;
    let c = connect(app, headers).await?;
    c.act(action, target).await.map_err(|f| failure(app, headers, f))?;
    Ok(Redirect::to(&back).into_response())
}

/// Whether an action's POST may be done: check_post, and an action there is.
fn allowed_post(app: &App, headers: &HeaderMap, action: &str, allowed: &[&str], form: &ActionForm) -> Result<(), Response> {
    check_post(app, headers, form)?;
    if !allowed.contains(&action) {
        return Err(page(app, headers, StatusCode::NOT_FOUND, "error.html", context! { title => "Not found", message => "There is no such action." }));
    }
    Ok(())
}

/// Every action's POST: read-write, the session's CSRF token, our Origin.
fn check_post(app: &App, headers: &HeaderMap, form: &ActionForm) -> Result<(), Response> {
    if let Some(refused) = refuse_read_only(app, headers) {
        return Err(refused);
    }
    let session = csrf::session_of(headers.get(header::COOKIE).and_then(|v| v.to_str().ok()));
    let token_ok = match (&session, &form.csrf) {
        (Some(session), Some(token)) => app.csrf.verify(session, token),
        _ => false,
    };
    if !app.access.origin_allowed(headers) || !token_ok {
        return Err(page(app, headers, StatusCode::FORBIDDEN, "error.html", context! {
            title => "Refused", message => "The form's token is missing or wrong, or it was sent from another site (or an expired page): go back, reload and try again.",
        }));
    }
    Ok(())
}

/// The confirmation of a bulk action: what the filter matches, and how
/// many of those jobs the action will touch.
async fn confirm_bulk(State(app): Shared, headers: HeaderMap, Path(action): Path<String>, Query(q): Query<FindQuery>) -> Answer {
    if let Some(refused) = refuse_read_only(&app, &headers) {
        return Err(refused);
    }
    if !bulk::ACTIONS.contains(&action.as_str()) {
        return Err(page(&app, &headers, StatusCode::NOT_FOUND, "error.html", context! { title => "Not found", message => "There is no such page." }));
    }
    let filter = filter_of(&app, &headers, &q)?;
    if !filter.any() {
        return Err(bad_filter(&app, &headers, "A bulk action needs a filter: choose a queue, a status, a time range or a text on the jobs page first.".into()));
    }
    let mut c = connect(&app, &headers).await?;
    let count = c.bulk_count(&filter, &action).await.map_err(|e| find_failure(&app, &headers, e))?;
    let mut response = page(&app, &headers, StatusCode::OK, "bulk.html", context! {
        title => format!("{action} every matching job"), action, count, filter => filter.describe(), query => filter.query(),
        applies_to => bulk::applies_to(&action), windowed => filter.windowed(), window => crate::find::thousands(filter.window()),
        batch => bulk::BATCH,
    });
    // as confirm(): the form must send its Origin
    response.headers_mut().insert(header::REFERRER_POLICY, HeaderValue::from_static("same-origin"));
    Ok(response)
}

async fn start_bulk(
    State(app): Shared,
    headers: HeaderMap,
    Path(action): Path<String>,
    Query(q): Query<FindQuery>,
    Form(form): Form<ActionForm>,
) -> Answer {
    check_post(&app, &headers, &form)?;
    if !bulk::ACTIONS.contains(&action.as_str()) {
        return Err(page(&app, &headers, StatusCode::NOT_FOUND, "error.html", context! { title => "Not found", message => "There is no such action." }));
    }
    let filter = filter_of(&app, &headers, &q)?;
    if !filter.any() {
        return Err(bad_filter(&app, &headers, "A bulk action needs a filter.".into()));
    }
    let op = bulk::start(app.clone(), filter, &action).await.map_err(|e| find_failure(&app, &headers, e))?;
    Ok(Redirect::to(&format!("/operations/{}", op.id)).into_response())
}

/// A bulk operation's progress; the page reloads itself (a meta refresh:
/// the CSP allows no script) until the operation ends.
async fn operation(State(app): Shared, headers: HeaderMap, Path(id): Path<String>) -> Answer {
    let Some(op) = app.ops.get(&id) else {
        return Err(page(&app, &headers, StatusCode::NOT_FOUND, "error.html", context! {
            title => "No such operation", message => "There is no such operation (the dashboard remembers its last ones until it restarts).",
        }));
    };
    let p = op.progress();
    Ok(page(&app, &headers, StatusCode::OK, "operation.html", context! { title => format!("{} every matching job", p.action), op => p }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn url_parts_keep_only_unreserved_characters() {
        assert_eq!(url_part("a/b?c#d%e f"), "a%2Fb%3Fc%23d%25e%20f");
        assert_eq!(url_part("é-._~"), "%C3%A9-._~");
    }

    #[test]
    fn refresh_is_bounded_and_durations_read_well() {
        assert_eq!(refresh_of(Some("5")), Some(5));
        assert_eq!(refresh_of(Some("1")), None);
        assert_eq!(refresh_of(Some("301")), None);
        assert_eq!(refresh_of(Some("5\"><script>")), None);
        assert_eq!(refresh_of(None), None);
        assert_eq!(duration(850), "850 ms");
        assert_eq!(duration(42_000), "42 s");
        assert_eq!(duration(3_723_000), "1 h 2 min");
        assert_eq!(query_string(&[("a", Some("x y")), ("b", None)]), "?a=x%20y");
        assert_eq!(query_string(&[("b", None)]), "");
    }
}
