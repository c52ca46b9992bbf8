//! What the dashboard's tests share: the test server (RAQUEL_TEST_DSN, set
//! by bin/test), a database filled with jobs in every status, the dashboard
//! started as a child process, headless Chromium through chromedriver, and
//! an HTTP client that logs in.
#![allow(dead_code)]

use fantoccini::{Client, ClientBuilder, Locator};
use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub const XSS: &str = "<script>window.__xss=1</script><img src=x onerror=\"window.__xss=2\">";

/// The dashboards the tests start ask for this user and password.
pub const USER: &str = "raquel";
pub const PASSWORD: &str = "test-password-9f2c";

pub fn server_dsn() -> String {
    std::env::var("RAQUEL_TEST_DSN").expect("RAQUEL_TEST_DSN is not set: run the browser tests through bin/test")
}

pub fn sql(db: &str) -> postgres::Client {
    postgres::Client::connect(&format!("{} dbname={db}", server_dsn()), postgres::NoTls).expect("connecting to the test server")
}

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

pub fn wait_for_port(port: u16, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "{what} did not start listening on {port}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A child process stopped when the test ends, passing or not.
pub struct Running(pub Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A new, empty database with raquel.
pub fn fresh_db(name: &str) -> postgres::Client {
    let mut admin = sql("postgres");
    admin.batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)")).unwrap();
    admin.batch_execute(&format!("CREATE DATABASE {name}")).unwrap();
    let mut c = sql(name);
    c.batch_execute("CREATE EXTENSION raquel").unwrap();
    c
}

/// Jobs in every status, a schedule, a paused and a limited queue, a
/// workflow and a payload that tries to run script; its metrics recorded.
/// Returns the database's name.
pub fn fill(name: &str) -> String {
    let mut c = fresh_db(name);
    c.batch_execute(
        "SELECT rq_enqueue('mail', 'hello ' || i) FROM generate_series(1, 6) i;
         SELECT rq_complete(id, attempts) FROM rq_claim(ARRAY['mail'], batch => 2) j;
         SELECT count(*) FROM rq_claim(ARRAY['mail']);
         SELECT rq_fail(id, attempts, 'boom: <b>not bold</b>', 'at line 1') FROM rq_claim(ARRAY['mail']) j;
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
    c.batch_execute("SELECT rq_fail(id, attempts, 'no retry left') FROM rq_claim(ARRAY['once']) j").unwrap();
    c.execute("SELECT rq_enqueue('xss', $1::text)", &[&XSS]).unwrap();
    let parent: String = c.query_one("SELECT id::text FROM rq_enqueue('flow', 'parent')", &[]).unwrap().get(0);
    c.execute("SELECT rq_enqueue('flow', 'child', after => ARRAY[$1::text::uuid])", &[&parent]).unwrap();
    // a durable job: a step recorded, then parked for an event
    c.execute("SELECT rq_enqueue('durable', 'order 1')", &[]).unwrap();
    let row = c.query_one("SELECT id::text, attempts FROM rq_claim(ARRAY['durable'])", &[]).unwrap();
    let (durable, attempt): (String, i32) = (row.get(0), row.get(1));
    c.execute("SELECT rq_step($1::text::uuid, $2, 'reserve', '{\"stock\": 1}')", &[&durable, &attempt]).unwrap();
    c.execute(
        "SELECT parked FROM rq_wait_event($1::text::uuid, $2, 'payment', 'paid:1', timeout => '1 day')",
        &[&durable, &attempt],
    )
    .unwrap();
    c.batch_execute("SELECT raquel_internal.rq_record_metrics()").unwrap();
    let statuses: i64 = c.query_one("SELECT count(DISTINCT status) FROM jobs", &[]).unwrap().get(0);
    assert_eq!(statuses, 8, "jobs in every status");
    name.to_string()
}

/// How a test starts the dashboard. By default on 127.0.0.1, read-only, as
/// the server's own user, with PASSWORD (from RAQUEL_DASHBOARD_PASSWORD).
pub struct Dashboard {
    pub db: String,
    pub user: Option<String>,
    pub read_write: bool,
    pub password: Option<String>,
    pub args: Vec<String>,
    pub dsn_extra: String,
}

/// A started dashboard: the process, its base URL and port.
pub struct Started {
    pub process: Running,
    pub base: String,
    pub port: u16,
}

impl Dashboard {
    pub fn on(db: &str) -> Dashboard {
        Dashboard { db: db.into(), user: None, read_write: false, password: Some(PASSWORD.into()), args: Vec::new(), dsn_extra: String::new() }
    }

    pub fn user(mut self, user: &str) -> Self {
        self.user = Some(user.into());
        self
    }

    pub fn read_write(mut self) -> Self {
        self.read_write = true;
        self
    }

    pub fn no_password(mut self) -> Self {
        self.password = None;
        self
    }

    pub fn arg(mut self, arg: &str) -> Self {
        self.args.push(arg.into());
        self
    }

    pub fn dsn(&self) -> String {
        let mut dsn = format!("{} dbname={}{}", server_dsn(), self.db, self.dsn_extra);
        if let Some(user) = &self.user {
            dsn = format!("{dsn} user={user}");
        }
        dsn
    }

    /// The command, without --port.
    pub fn command(&self) -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_raquel-dashboard"));
        command.args(["--dsn", &self.dsn()]).args(&self.args).env_remove("RAQUEL_DASHBOARD_PASSWORD");
        if let Some(password) = &self.password {
            command.env("RAQUEL_DASHBOARD_PASSWORD", password);
        }
        if self.read_write {
            command.arg("--read-write");
        }
        command
    }

    pub fn start(&self) -> Started {
        let port = free_port();
        let mut command = self.command();
        command.args(["--port", &port.to_string()]).stdout(Stdio::null());
        let process = Running(command.spawn().expect("starting the dashboard"));
        wait_for_port(port, "the dashboard");
        Started { process, base: format!("http://127.0.0.1:{port}"), port }
    }
}

/// The URL with the test's user and password in it, which Chromium uses to
/// answer the dashboard's HTTP Basic challenge.
pub fn with_credentials(url: &str) -> String {
    url.replacen("://", &format!("://{USER}:{PASSWORD}@"), 1)
}

/// An HTTP client; `http_get` and friends log in with PASSWORD.
pub fn http() -> reqwest::Client {
    reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap()
}

pub async fn get(url: &str) -> reqwest::Response {
    http().get(url).basic_auth(USER, Some(PASSWORD)).send().await.unwrap_or_else(|e| panic!("GET {url}: {e}"))
}

/// What a confirmation page hands its form: the session cookie it sets
/// (`name=value`) and the CSRF token in the form, each if it is there.
pub async fn session_and_token_of(page: reqwest::Response) -> (Option<String>, Option<String>) {
    let cookie = page.headers().get("set-cookie").map(|c| c.to_str().unwrap().split(';').next().unwrap().to_string());
    let body = page.text().await.unwrap();
    let token = body.split("name=\"csrf\" value=\"").nth(1).map(|t| t.split('"').next().unwrap().to_string());
    (cookie, token)
}

/// The confirmation form of `base``path` sent as the dashboard's own page
/// sends it: logged in, with the session and token, from its own origin.
pub async fn post_confirmed(base: &str, path: &str, cookie: &str, token: &str) -> reqwest::Response {
    http()
        .post(format!("{base}{path}"))
        .basic_auth(USER, Some(PASSWORD))
        .header("cookie", cookie)
        .header("origin", base)
        .form(&[("csrf", token)])
        .send()
        .await
        .unwrap()
}

/// Headless Chromium through chromedriver, with `extra` switches.
pub async fn browser_with(extra: &[&str]) -> (Running, Client) {
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
    let mut args = vec![
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--disable-background-networking",
        "--window-size=1280,900",
    ];
    args.extend_from_slice(extra);
    let mut caps = serde_json::Map::new();
    caps.insert("goog:chromeOptions".into(), serde_json::json!({ "binary": "/usr/bin/chromium", "args": args }));
    let client = ClientBuilder::native()
        .capabilities(caps)
        .connect(&format!("http://127.0.0.1:{port}"))
        .await
        .expect("a Chromium session");
    (driver, client)
}

pub async fn browser() -> (Running, Client) {
    browser_with(&[]).await
}

/// A browser that has logged in to the dashboard at `base`: Chromium
/// answers the Basic challenge with the URL's credentials, and keeps them
/// for the rest of the origin.
pub async fn logged_in_browser(base: &str) -> (Running, Client) {
    let (driver, b) = browser().await;
    b.goto(&with_credentials(&format!("{base}/"))).await.unwrap();
    let h1 = b.find(Locator::Css("h1")).await.expect("a page after logging in").text().await.unwrap();
    assert_eq!(h1, "Queues", "logged in");
    (driver, b)
}

pub async fn screenshot(client: &Client, name: &str) {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target/screenshots");
    std::fs::create_dir_all(&dir).unwrap();
    let png = client.screenshot().await.expect("a screenshot");
    std::fs::write(dir.join(format!("{name}.png")), png).unwrap();
}

/// A screenshot for the dashboard's guide, kept with the run's others;
/// with RAQUEL_GUIDE_SCREENSHOTS=1 also written to
/// docs/src/images/dashboard/NAME.png (the guide shows what the code
/// draws: docs/src/contributing.md says when to). Not by default: every
/// run draws other ids and times, and a test run leaves the checkout as
/// it was. The browser's window is the fixed size browser_with gives it
/// (1280×900), so each run draws the same frame.
pub async fn guide_screenshot(client: &Client, name: &str) {
    screenshot(client, name).await;
    if std::env::var_os("RAQUEL_GUIDE_SCREENSHOTS").is_none_or(|v| v != "1") {
        return;
    }
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/src/images/dashboard");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target/screenshots").join(format!("{name}.png")),
        dir.join(format!("{name}.png")),
    )
    .unwrap();
}

/// The text of the element `css` selects, waiting (up to fantoccini's
/// default 30 s) for a page that a click is still loading to show it.
pub async fn text(client: &Client, css: &str) -> String {
    client.wait().for_element(Locator::Css(css)).await.unwrap_or_else(|e| panic!("{css}: {e}")).text().await.unwrap()
}

/// Clicks the element with id `id`, once the page shows it.
pub async fn click(client: &Client, id: &str) {
    client.wait().for_element(Locator::Id(id)).await.unwrap_or_else(|e| panic!("#{id}: {e}")).click().await.unwrap();
}

pub async fn texts(client: &Client, css: &str) -> Vec<String> {
    let mut out = Vec::new();
    for e in client.find_all(Locator::Css(css)).await.unwrap() {
        out.push(e.text().await.unwrap());
    }
    out
}

/// The whole text of the page shown.
pub async fn body_text(client: &Client) -> String {
    client.find(Locator::Css("body")).await.unwrap().text().await.unwrap()
}

pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap()
}
