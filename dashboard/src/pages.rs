//! The pages and the actions: routes, the templates they fill, the
//! security headers every response carries, and errors as pages (with the
//! server's SQLSTATE) rather than panics.

use crate::charts::{self, Series};
use crate::csrf::{self, COOKIE};
use crate::db::{self, Failure, JobFilter};
use crate::App;
use axum::extract::{Form, Path, Query, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{Html, IntoResponse, Redirect, Response};
use axum::routing::get;
use axum::Router;
use minijinja::context;
use serde::Deserialize;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

type Shared = State<Arc<App>>;

pub fn templates() -> minijinja::Environment<'static> {
    let mut env = minijinja::Environment::new();
    // .html templates escape every value (minijinja's auto-escape)
    for (name, text) in [
        ("base.html", include_str!("../templates/base.html")),
        ("queues.html", include_str!("../templates/queues.html")),
        ("jobs.html", include_str!("../templates/jobs.html")),
        ("job.html", include_str!("../templates/job.html")),
        ("schedules.html", include_str!("../templates/schedules.html")),
        ("workflows.html", include_str!("../templates/workflows.html")),
        ("confirm.html", include_str!("../templates/confirm.html")),
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
        .route("/static/style.css", get(style))
        .route("/jobs/{id}/{action}", get(confirm_job).post(act_on_job))
        .route("/queues/{queue}/{action}", get(confirm_queue).post(act_on_queue))
        .fallback(|State(app): Shared, headers: HeaderMap| async move {
            page(&app, &headers, StatusCode::NOT_FOUND, "error.html", context! { title => "Not found", message => "There is no such page." })
        })
        .with_state(app)
}

/// A rendered page with the session cookie (made when missing) and the
/// security headers: no script at all, nothing from elsewhere, no framing.
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
    let h = response.headers_mut();
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static("default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"),
    );
    h.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    h.insert(header::REFERRER_POLICY, HeaderValue::from_static("same-origin"));
    if new {
        let value = format!("{COOKIE}={session}; Path=/; HttpOnly; SameSite=Strict");
        h.insert(header::SET_COOKIE, HeaderValue::from_str(&value).expect("hex is a header value"));
    }
    response
}

/// What a page handler answers: the page, or a page that says what failed.
type Answer = Result<Response, Response>;

/// A connection with the dashboard's role, or the page that says why not.
async fn connect(app: &App, headers: &HeaderMap) -> Result<tokio_postgres::Client, Response> {
    db::connect(&app.dsn).await.map_err(|f| failure(app, headers, f))
}

fn failure(app: &App, headers: &HeaderMap, f: Failure) -> Response {
    let status = match f.sqlstate.as_str() {
        "42501" => StatusCode::FORBIDDEN,
        s if s.starts_with("22") || s.starts_with("55") || s == "P0002" => StatusCode::CONFLICT,
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    };
    page(app, headers, status, "error.html", context! { title => "The database said no", failure => f })
}

async fn style() -> Response {
    ([(header::CONTENT_TYPE, "text/css; charset=utf-8")], include_str!("../static/style.css")).into_response()
}

#[derive(Deserialize)]
struct Range {
    range: Option<String>,
}

async fn queues(State(app): Shared, headers: HeaderMap, Query(q): Query<Range>) -> Answer {
    let day = q.range.as_deref() == Some("day");
    let c = connect(&app, &headers).await?;
    let mut queues = db::queue_counts(&c).await.map_err(|f| failure(&app, &headers, f))?;
    let mut notes = Vec::new();
    match db::queue_limits(&c).await {
        Ok(limits) => {
            for (name, paused, text) in limits {
                match queues.iter_mut().find(|q| q.name == name) {
                    Some(q) => (q.paused, q.limits) = (paused, text),
                    None => queues.push(db::Queue { name, counts: vec![0; db::STATUSES.len()], paused, limits: text, ..Default::default() }),
                }
            }
            queues.sort_by(|a, b| a.name.cmp(&b.name));
        }
        Err(f) => notes.push(format!("Flow settings not shown: {} ({})", f.message, f.sqlstate)),
    }
    // charts: per queue, throughput and wait over the last hour or day
    let (since, span_ms) = if day { ("1 day", 86_400_000) } else { ("1 hour", 3_600_000) };
    let now_ms = chrono::Utc::now().timestamp_millis();
    let from_ms = now_ms - span_ms;
    let mut charts: BTreeMap<String, (String, String)> = BTreeMap::new();
    match db::metrics(&c, since).await {
        Ok(minutes) => {
            let mut by_queue: BTreeMap<&str, HashMap<i64, &db::Minute>> = BTreeMap::new();
            for m in &minutes {
                by_queue.entry(&m.queue).or_default().insert(m.minute_ms, m);
            }
            for (queue, by_minute) in by_queue {
                // every minute of the range: a minute without a row had no events
                let first = from_ms / 60_000 * 60_000 + 60_000;
                let row = |minute: i64| by_minute.get(&minute).copied();
                let points = |f: &dyn Fn(Option<&db::Minute>) -> Option<f64>| {
                    (first..=now_ms).step_by(60_000).map(|minute| (minute, f(row(minute)))).collect::<Vec<_>>()
                };
                let throughput = charts::line_chart(
                    &format!("{queue}: jobs a minute"),
                    "/min",
                    from_ms,
                    now_ms,
                    &[
                        Series { label: "enqueued", class: "a", points: points(&|m| Some(m.map_or(0, |m| m.enqueued) as f64)) },
                        Series { label: "succeeded", class: "b", points: points(&|m| Some(m.map_or(0, |m| m.succeeded) as f64)) },
                        Series { label: "failed", class: "c", points: points(&|m| Some(m.map_or(0, |m| m.failed) as f64)) },
                    ],
                );
                let wait = charts::line_chart(
                    &format!("{queue}: wait from due to claim"),
                    "ms",
                    from_ms,
                    now_ms,
                    &[
                        Series { label: "p50", class: "a", points: points(&|m| m.and_then(|m| m.wait_p50)) },
                        Series { label: "p95", class: "b", points: points(&|m| m.and_then(|m| m.wait_p95)) },
                        Series { label: "p99", class: "c", points: points(&|m| m.and_then(|m| m.wait_p99)) },
                    ],
                );
                charts.insert(queue.to_string(), (throughput, wait));
            }
        }
        Err(f) if f.is("42883") => notes.push("No metrics: this database's raquel is older than 0.4.0 (ALTER EXTENSION raquel UPDATE).".into()),
        Err(f) => notes.push(format!("Metrics not shown: {} ({})", f.message, f.sqlstate)),
    }
    let charts: Vec<_> = charts.into_iter().map(|(queue, (throughput, wait))| context! { queue, throughput, wait }).collect();
    Ok(page(&app, &headers, StatusCode::OK, "queues.html", context! {
        title => "Queues", queues, statuses => db::STATUSES, charts, notes, day,
    }))
}

#[derive(Deserialize)]
struct JobQuery {
    queue: Option<String>,
    status: Option<String>,
    q: Option<String>,
    before: Option<String>,
}

fn non_empty(s: Option<String>) -> Option<String> {
    s.filter(|s| !s.trim().is_empty())
}

async fn jobs(State(app): Shared, headers: HeaderMap, Query(q): Query<JobQuery>) -> Answer {
    let before = non_empty(q.before.clone()).and_then(|b| {
        let (at, id) = b.split_once('_')?;
        Some((at.parse().ok()?, id.parse().ok()?))
    });
    let filter = JobFilter { queue: non_empty(q.queue), status: non_empty(q.status), error: non_empty(q.q), before };
    let c = connect(&app, &headers).await?;
    let mut rows = db::jobs(&c, &filter).await.map_err(|f| failure(&app, &headers, f))?;
    let next = if rows.len() > db::PAGE {
        rows.truncate(db::PAGE);
        rows.last().map(|r| format!("{}_{}", r.enqueued_at, r.id))
    } else {
        None
    };
    Ok(page(&app, &headers, StatusCode::OK, "jobs.html", context! {
        title => "Jobs", jobs => rows, next, statuses => db::STATUSES,
        queue => filter.queue, status => filter.status, q => filter.error,
    }))
}

async fn job(State(app): Shared, headers: HeaderMap, Path(id): Path<String>) -> Answer {
    let not_found = |app: &App| {
        page(app, &headers, StatusCode::NOT_FOUND, "error.html", context! { title => "No such job", message => format!("There is no job {id}.") })
    };
    let Ok(uuid) = id.parse::<uuid::Uuid>() else { return Ok(not_found(&app)) };
    let c = connect(&app, &headers).await?;
    Ok(match db::job(&c, uuid).await.map_err(|f| failure(&app, &headers, f))? {
        Some(job) => page(&app, &headers, StatusCode::OK, "job.html", context! { title => format!("Job {}", job.id), job }),
        None => not_found(&app),
    })
}

async fn schedules(State(app): Shared, headers: HeaderMap) -> Answer {
    let c = connect(&app, &headers).await?;
    let (schedules, note) = match db::schedules(&c).await {
        Ok(s) => (s, None),
        Err(f) => (Vec::new(), Some(format!("Schedules not shown: {} ({})", f.message, f.sqlstate))),
    };
    Ok(page(&app, &headers, StatusCode::OK, "schedules.html", context! { title => "Schedules", schedules, note }))
}

async fn workflows(State(app): Shared, headers: HeaderMap) -> Answer {
    let c = connect(&app, &headers).await?;
    let (edges, note) = match db::workflows(&c).await {
        Ok(e) => (e, None),
        Err(f) => (Vec::new(), Some(format!("Workflows not shown: {} ({})", f.message, f.sqlstate))),
    };
    Ok(page(&app, &headers, StatusCode::OK, "workflows.html", context! { title => "Workflows", edges, note }))
}

const JOB_ACTIONS: [&str; 2] = ["retry", "cancel"];
const QUEUE_ACTIONS: [&str; 2] = ["pause", "resume"];

fn refuse_read_only(app: &App, headers: &HeaderMap) -> Option<Response> {
    (!app.read_write).then(|| {
        page(app, headers, StatusCode::FORBIDDEN, "error.html", context! {
            title => "Read-only", message => "This dashboard was started read-only; start it with --read-write to act on jobs and queues.",
        })
    })
}

async fn confirm_job(State(app): Shared, headers: HeaderMap, Path((id, action)): Path<(String, String)>) -> Response {
    confirm(&app, &headers, "job", &id, &action, &JOB_ACTIONS)
}

async fn confirm_queue(State(app): Shared, headers: HeaderMap, Path((queue, action)): Path<(String, String)>) -> Response {
    confirm(&app, &headers, "queue", &queue, &action, &QUEUE_ACTIONS)
}

fn confirm(app: &App, headers: &HeaderMap, kind: &str, target: &str, action: &str, allowed: &[&str]) -> Response {
    if let Some(refused) = refuse_read_only(app, headers) {
        return refused;
    }
    if !allowed.contains(&action) {
        return page(app, headers, StatusCode::NOT_FOUND, "error.html", context! { title => "Not found", message => "There is no such page." });
    }
    page(app, headers, StatusCode::OK, "confirm.html", context! { title => format!("{action} {kind}"), kind, target, action })
}

#[derive(Deserialize)]
struct ActionForm {
    csrf: Option<String>,
}

async fn act_on_job(State(app): Shared, headers: HeaderMap, Path((id, action)): Path<(String, String)>, Form(form): Form<ActionForm>) -> Answer {
    act(&app, &headers, &id, &action, &JOB_ACTIONS, form, format!("/jobs/{id}")).await
}

async fn act_on_queue(
    State(app): Shared,
    headers: HeaderMap,
    Path((queue, action)): Path<(String, String)>,
    Form(form): Form<ActionForm>,
) -> Answer {
    act(&app, &headers, &queue, &action, &QUEUE_ACTIONS, form, "/".to_string()).await
}

/// Whether a POST came from this dashboard's own pages: the Origin, when
/// the browser sends one, is the host the request was sent to. (The pages'
/// Referrer-Policy is same-origin: with no-referrer, browsers send
/// `Origin: null`, which this refuses.)
fn same_origin(headers: &HeaderMap) -> bool {
    let Some(origin) = headers.get(header::ORIGIN).and_then(|v| v.to_str().ok()) else { return true };
    let host = headers.get(header::HOST).and_then(|v| v.to_str().ok()).unwrap_or_default();
    origin.strip_prefix("http://").or_else(|| origin.strip_prefix("https://")) == Some(host)
}

async fn act(app: &App, headers: &HeaderMap, target: &str, action: &str, allowed: &[&str], form: ActionForm, back: String) -> Answer {
    if let Some(refused) = refuse_read_only(app, headers) {
        return Err(refused);
    }
    let session = csrf::session_of(headers.get(header::COOKIE).and_then(|v| v.to_str().ok()));
    let token_ok = match (&session, &form.csrf) {
        (Some(session), Some(token)) => app.csrf.verify(session, token),
        _ => false,
    };
    if !same_origin(headers) || !token_ok {
        return Err(page(app, headers, StatusCode::FORBIDDEN, "error.html", context! {
            title => "Refused", message => "The form's token is missing or wrong (a request from another site, or an expired page): go back, reload and try again.",
        }));
    }
    if !allowed.contains(&action) {
        return Err(page(app, headers, StatusCode::NOT_FOUND, "error.html", context! { title => "Not found", message => "There is no such action." }));
    }
    let c = connect(app, headers).await?;
    db::act(&c, action, target).await.map_err(|f| failure(app, headers, f))?;
    Ok(Redirect::to(&path_escape(&back)).into_response())
}

/// A path with each segment's characters that a URL cannot hold escaped.
fn path_escape(path: &str) -> String {
    let mut out = String::new();
    for b in path.bytes() {
        if b.is_ascii_alphanumeric() || b"/-_.~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}
