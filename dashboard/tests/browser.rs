//! The dashboard in a real browser: Debian's headless Chromium, driven
//! through chromedriver (WebDriver), against a real server with raquel
//! (RAQUEL_TEST_DSN, set by bin/test). Each page is loaded against jobs in
//! every status and checked in the rendered DOM; screenshots are kept in
//! dashboard/target/screenshots/ as the run's artifacts.

use fantoccini::{Client, ClientBuilder, Locator};
use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const XSS: &str = "<script>window.__xss=1</script><img src=x onerror=\"window.__xss=2\">";

fn server_dsn() -> String {
    std::env::var("RAQUEL_TEST_DSN").expect("RAQUEL_TEST_DSN is not set: run the browser tests through bin/test")
}

fn sql(db: &str) -> postgres::Client {
    postgres::Client::connect(&format!("{} dbname={db}", server_dsn()), postgres::NoTls).expect("connecting to the test server")
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn wait_for_port(port: u16, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "{what} did not start listening on {port}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A child process stopped when the test ends, passing or not.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Jobs in every status, a schedule, a paused and a limited queue, a
/// workflow and a payload that tries to run script; its metrics recorded.
/// Returns the database's name.
fn fill(name: &str) -> String {
    let mut admin = sql("postgres");
    admin.batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)")).unwrap();
    admin.batch_execute(&format!("CREATE DATABASE {name}")).unwrap();
    let mut c = sql(name);
    c.batch_execute("CREATE EXTENSION raquel").unwrap();
    c.batch_execute(
        "SELECT rq_enqueue('mail', 'hello ' || i) FROM generate_series(1, 6) i;
         SELECT rq_complete(id) FROM rq_claim(ARRAY['mail'], batch => 2) j;
         SELECT count(*) FROM rq_claim(ARRAY['mail']);
         SELECT rq_fail(id, 'boom: <b>not bold</b>', 'at line 1') FROM rq_claim(ARRAY['mail']) j;
         SELECT rq_enqueue('once', 'x', max_retry_count => 0);
         SELECT rq_cancel(id) FROM rq_enqueue('mail', 'to cancel') j;
         SELECT rq_enqueue('mail', 'to expire', at => now() - interval '1 hour', max_age => '1 second');
         SELECT rq_expire();
         SELECT rq_pause('reports');
         SELECT rq_set_limits('limited', max_claimed => 2);
         SELECT rq_enqueue('limited', 'l');
         SELECT rq_schedule('nightly', '0 3 * * *', 'reports', 'run');",
    )
    .unwrap();
    c.batch_execute("SELECT rq_fail(id, 'no retry left') FROM rq_claim(ARRAY['once']) j").unwrap();
    c.execute("SELECT rq_enqueue('xss', $1::text)", &[&XSS]).unwrap();
    let parent: String = c.query_one("SELECT id::text FROM rq_enqueue('flow', 'parent')", &[]).unwrap().get(0);
    c.execute("SELECT rq_enqueue('flow', 'child', after => ARRAY[$1::text::uuid])", &[&parent]).unwrap();
    c.batch_execute("SELECT rq_record_metrics()").unwrap();
    let statuses: i64 = c.query_one("SELECT count(DISTINCT status) FROM jobs", &[]).unwrap().get(0);
    assert_eq!(statuses, 8, "jobs in every status");
    name.to_string()
}

/// A dashboard on `db` as `user` (the server's own user when None).
fn dashboard(db: &str, user: Option<&str>, read_write: bool) -> (Running, String) {
    let port = free_port();
    let mut dsn = format!("{} dbname={db}", server_dsn());
    if let Some(user) = user {
        dsn = format!("{dsn} user={user}");
    }
    let mut command = Command::new(env!("CARGO_BIN_EXE_raquel-dashboard"));
    command.args(["--dsn", &dsn, "--port", &port.to_string()]).stdout(Stdio::null());
    if read_write {
        command.arg("--read-write");
    }
    let child = Running(command.spawn().expect("starting the dashboard"));
    wait_for_port(port, "the dashboard");
    (child, format!("http://127.0.0.1:{port}"))
}

/// Headless Chromium through chromedriver.
async fn browser() -> (Running, Client) {
    let port = free_port();
    let driver = Running(
        Command::new("chromedriver")
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("starting chromedriver (Debian package chromium-driver; bin/setup installs it)"),
    );
    wait_for_port(port, "chromedriver");
    let mut caps = serde_json::Map::new();
    caps.insert(
        "goog:chromeOptions".into(),
        serde_json::json!({
            "binary": "/usr/bin/chromium",
            "args": ["--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                     "--disable-background-networking", "--window-size=1280,900"]
        }),
    );
    let client = ClientBuilder::native()
        .capabilities(caps)
        .connect(&format!("http://127.0.0.1:{port}"))
        .await
        .expect("a Chromium session");
    (driver, client)
}

async fn screenshot(client: &Client, name: &str) {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target/screenshots");
    std::fs::create_dir_all(&dir).unwrap();
    let png = client.screenshot().await.expect("a screenshot");
    std::fs::write(dir.join(format!("{name}.png")), png).unwrap();
}

/// The text of the element `css` selects, waiting (up to fantoccini's
/// default 30 s) for a page that a click is still loading to show it.
async fn text(client: &Client, css: &str) -> String {
    client.wait().for_element(Locator::Css(css)).await.unwrap_or_else(|e| panic!("{css}: {e}")).text().await.unwrap()
}

/// Clicks the element with id `id`, once the page shows it.
async fn click(client: &Client, id: &str) {
    client.wait().for_element(Locator::Id(id)).await.unwrap_or_else(|e| panic!("#{id}: {e}")).click().await.unwrap();
}

async fn texts(client: &Client, css: &str) -> Vec<String> {
    let mut out = Vec::new();
    for e in client.find_all(Locator::Css(css)).await.unwrap() {
        out.push(e.text().await.unwrap());
    }
    out
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap()
}

#[test]
fn every_page_shows_what_the_database_holds() {
    let db = fill("rq_dashboard_pages");
    let mut c = sql(&db);
    let counts: Vec<(String, i64)> = c
        .query("SELECT status, count(*) FROM jobs WHERE queue = 'mail' GROUP BY 1", &[])
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    let failed: i64 = c.query_one("SELECT count(*) FROM jobs WHERE status = 'failed'", &[]).unwrap().get(0);
    let xss_id: String = c.query_one("SELECT id::text FROM jobs WHERE queue = 'xss'", &[]).unwrap().get(0);
    let child: String = c.query_one("SELECT id::text FROM jobs WHERE status = 'blocked'", &[]).unwrap().get(0);
    let (_dashboard, base) = dashboard(&db, None, false);
    runtime().block_on(async {
        let (_driver, b) = browser().await;

        // queues: each status's count, flow settings, charts
        b.goto(&format!("{base}/")).await.unwrap();
        for (status, n) in &counts {
            let shown = text(&b, &format!("tr[data-queue='mail'] td[data-status='{status}']")).await;
            assert_eq!(shown, n.to_string(), "mail's {status} jobs");
        }
        assert!(text(&b, "tr[data-queue='reports'] td.flow").await.contains("paused"));
        assert!(text(&b, "tr[data-queue='limited'] td.flow").await.contains("at most 2 claimed"));
        let charts = b.find_all(Locator::Css("#charts svg.chart")).await.unwrap().len();
        assert!(charts >= 2, "a throughput and a wait chart: {charts}");
        assert_eq!(text(&b, "#mode").await, "read-only");
        assert!(b.find_all(Locator::Css(".action")).await.unwrap().is_empty(), "no actions when read-only");
        screenshot(&b, "queues").await;

        // jobs, filtered by status and by error text
        b.goto(&format!("{base}/jobs?status=failed")).await.unwrap();
        let statuses = texts(&b, "#jobs td.status").await;
        assert_eq!(statuses.len() as i64, failed);
        assert!(statuses.iter().all(|s| s == "failed"), "{statuses:?}");
        screenshot(&b, "jobs").await;
        b.goto(&format!("{base}/jobs?q=no+retry")).await.unwrap();
        let errors = texts(&b, "#jobs td.error").await;
        assert_eq!(errors, ["no retry left"]);
        // a search for a pattern character finds it literally, not as a pattern
        b.goto(&format!("{base}/jobs?q=%25")).await.unwrap();
        assert_eq!(texts(&b, "#jobs td.error").await.len(), 0);

        // a job's detail shows user data as text
        b.goto(&format!("{base}/jobs/{xss_id}")).await.unwrap();
        assert_eq!(text(&b, "#payload").await, XSS);
        assert!(b.find_all(Locator::Css("#payload img, #payload script")).await.unwrap().is_empty());
        let xss = b.execute("return typeof window.__xss", vec![]).await.unwrap();
        assert_eq!(xss, serde_json::json!("undefined"), "the payload ran as script");
        screenshot(&b, "job").await;
        b.goto(&format!("{base}/jobs?queue=mail&status=failed")).await.unwrap();
        b.find(Locator::Css("#jobs td.id a")).await.unwrap().click().await.unwrap();
        assert_eq!(text(&b, "#error").await, "boom: <b>not bold</b>");
        assert_eq!(text(&b, "#trace").await, "at line 1");

        // schedules and workflows
        b.goto(&format!("{base}/schedules")).await.unwrap();
        assert_eq!(texts(&b, "#schedules td.name").await, ["nightly"]);
        screenshot(&b, "schedules").await;
        b.goto(&format!("{base}/workflows")).await.unwrap();
        assert_eq!(texts(&b, "#workflows td.child").await, [child.clone()]);
        screenshot(&b, "workflows").await;

        // an unknown job is a page that says so
        b.goto(&format!("{base}/jobs/00000000-0000-7000-8000-000000000000")).await.unwrap();
        assert!(text(&b, "#message").await.contains("no job"));
        b.close().await.unwrap();
    });
}

#[test]
fn a_read_only_dashboard_refuses_every_action() {
    let db = fill("rq_dashboard_read_only");
    let id: String = sql(&db).query_one("SELECT id::text FROM jobs WHERE status = 'failed' LIMIT 1", &[]).unwrap().get(0);
    let (_dashboard, base) = dashboard(&db, None, false);
    runtime().block_on(async {
        let http = reqwest::Client::new();
        for path in [format!("/jobs/{id}/retry"), "/queues/mail/pause".to_string()] {
            let get = http.get(format!("{base}{path}")).send().await.unwrap();
            assert_eq!(get.status(), 403, "GET {path}");
            let post = http.post(format!("{base}{path}")).form(&[("csrf", "x")]).send().await.unwrap();
            assert_eq!(post.status(), 403, "POST {path}");
        }
    });
    let status: String = sql(&db).query_one("SELECT status FROM jobs WHERE id = $1::text::uuid", &[&id]).unwrap().get(0);
    assert_eq!(status, "failed", "nothing changed");
}

#[test]
fn retry_clicked_in_the_browser_requeues_the_job_and_forged_posts_do_not() {
    let db = fill("rq_dashboard_retry");
    let id: String = sql(&db).query_one("SELECT id::text FROM jobs WHERE status = 'exhausted' LIMIT 1", &[]).unwrap().get(0);
    let (_dashboard, base) = dashboard(&db, None, true);
    runtime().block_on(async {
        // forged: no cookie, a wrong token, another site's Origin
        let http = reqwest::Client::new();
        let no_token = http.post(format!("{base}/jobs/{id}/retry")).form(&[("csrf", "0")]).send().await.unwrap();
        assert_eq!(no_token.status(), 403);
        let page = http.get(format!("{base}/jobs/{id}/retry")).send().await.unwrap();
        let cookie = page.headers()["set-cookie"].to_str().unwrap().split(';').next().unwrap().to_string();
        let body = page.text().await.unwrap();
        let token = body.split("name=\"csrf\" value=\"").nth(1).unwrap().split('"').next().unwrap().to_string();
        let wrong = http
            .post(format!("{base}/jobs/{id}/retry"))
            .header("cookie", &cookie)
            .form(&[("csrf", "00ff")])
            .send()
            .await
            .unwrap();
        assert_eq!(wrong.status(), 403);
        let foreign = http
            .post(format!("{base}/jobs/{id}/retry"))
            .header("cookie", &cookie)
            .header("origin", "http://evil.example")
            .form(&[("csrf", token.as_str())])
            .send()
            .await
            .unwrap();
        assert_eq!(foreign.status(), 403);
        let still: String = tokio::task::block_in_place(|| {
            sql(&db).query_one("SELECT status FROM jobs WHERE id = $1::text::uuid", &[&id]).unwrap().get(0)
        });
        assert_eq!(still, "exhausted", "forged posts changed nothing");

        // the real thing, in the browser
        let (_driver, b) = browser().await;
        b.goto(&format!("{base}/jobs/{id}")).await.unwrap();
        assert_eq!(text(&b, "#status").await, "exhausted");
        click(&b, "retry").await;
        screenshot(&b, "confirm").await;
        click(&b, "yes").await;
        assert_eq!(text(&b, "#status").await, "queued", "the page shows the retried job");
        // retrying it again is refused with the database's reason, and changes nothing
        b.goto(&format!("{base}/jobs/{id}/retry")).await.unwrap();
        click(&b, "yes").await;
        assert!(text(&b, "#failure").await.contains("SQLSTATE 55000"));
        b.close().await.unwrap();
    });
    let status: String = sql(&db).query_one("SELECT status FROM jobs WHERE id = $1::text::uuid", &[&id]).unwrap().get(0);
    assert_eq!(status, "queued");
}

#[test]
fn a_role_with_only_select_sees_every_page() {
    let db = fill("rq_dashboard_viewer");
    let mut c = sql(&db);
    c.batch_execute(
        "DROP ROLE IF EXISTS rq_dash_viewer; CREATE ROLE rq_dash_viewer LOGIN;
         GRANT SELECT ON jobs, queue_limits, schedules, job_dependencies, metrics TO rq_dash_viewer;
         DROP ROLE IF EXISTS rq_dash_jobs_only; CREATE ROLE rq_dash_jobs_only LOGIN;
         GRANT SELECT ON jobs TO rq_dash_jobs_only;",
    )
    .unwrap();
    let id: String = c.query_one("SELECT id::text FROM jobs LIMIT 1", &[]).unwrap().get(0);
    for (role, whole) in [("rq_dash_viewer", true), ("rq_dash_jobs_only", false)] {
        let (_dashboard, base) = dashboard(&db, Some(role), false);
        runtime().block_on(async {
            let http = reqwest::Client::new();
            for path in ["/", "/jobs", &format!("/jobs/{id}"), "/schedules", "/workflows"] {
                let response = http.get(format!("{base}{path}")).send().await.unwrap();
                assert_eq!(response.status(), 200, "{role}: {path}");
                let body = response.text().await.unwrap();
                if !whole && (path == "/schedules" || path == "/") {
                    assert!(body.contains("class=\"note\""), "{role} is told what it may not see on {path}");
                }
            }
            if whole {
                let (_driver, b) = browser().await;
                b.goto(&format!("{base}/")).await.unwrap();
                assert!(!texts(&b, "#queues td.name").await.is_empty());
                b.close().await.unwrap();
            }
        });
    }
    c.batch_execute("DROP OWNED BY rq_dash_viewer, rq_dash_jobs_only; DROP ROLE rq_dash_viewer; DROP ROLE rq_dash_jobs_only").unwrap();
}

/// The job list pages through a queue newest first, each job once. 250 jobs
/// (three pages) in CI; RAQUEL_DASHBOARD_JOBS=10000 for a release (README).
#[test]
fn the_job_list_pages_through_every_job_once() {
    let n: i64 = std::env::var("RAQUEL_DASHBOARD_JOBS").ok().and_then(|n| n.parse().ok()).unwrap_or(250);
    let db = "rq_dashboard_paging";
    let mut admin = sql("postgres");
    admin.batch_execute(&format!("DROP DATABASE IF EXISTS {db} WITH (FORCE)")).unwrap();
    admin.batch_execute(&format!("CREATE DATABASE {db}")).unwrap();
    let mut c = sql(db);
    c.batch_execute("CREATE EXTENSION raquel").unwrap();
    // several jobs share an enqueued_at: the id breaks the tie
    c.execute("SELECT count(*) FROM rq_enqueue_batch('many', ARRAY(SELECT i::text FROM generate_series(1, $1::bigint) i))", &[&n])
        .unwrap();
    let (_dashboard, base) = dashboard(db, None, false);
    let seen = runtime().block_on(async {
        let (_driver, b) = browser().await;
        b.goto(&format!("{base}/jobs?queue=many")).await.unwrap();
        let mut seen = Vec::new();
        loop {
            let ids = texts(&b, "#jobs td.id").await;
            assert!(ids.len() <= 100, "a page holds at most 100 jobs");
            seen.extend(ids);
            // followed with goto, which returns once the next page has loaded
            match b.find(Locator::Id("next")).await {
                Ok(next) => {
                    let href = next.prop("href").await.unwrap().expect("the link's address");
                    b.goto(&href).await.unwrap();
                }
                Err(_) => break,
            }
        }
        b.close().await.unwrap();
        seen
    });
    let mut distinct = seen.clone();
    distinct.sort();
    distinct.dedup();
    assert_eq!((seen.len() as i64, distinct.len() as i64), (n, n), "every job once");
    let newest_first: Vec<String> = c
        .query("SELECT id::text FROM jobs ORDER BY enqueued_at DESC, id DESC", &[])
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(seen, newest_first);
}
