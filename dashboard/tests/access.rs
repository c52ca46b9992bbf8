//! Who the dashboard answers, over plain HTTP (and HTTPS): a forged Host
//! (DNS rebinding) gets nothing, every page needs the password, the program
//! refuses to start unsafely, TLS serves the pages, and every kind of answer
//! carries the security headers. The same in a real browser: browser.rs.

mod common;

use common::*;
use std::io::Read;
use std::process::Stdio;

const FOREIGN: &str = "rebind.evil.example";

/// Every kind of page, for a database filled by `fill`.
fn every_path(db: &str) -> Vec<String> {
    let mut c = sql(db);
    let job: String = c.query_one("SELECT id::text FROM jobs WHERE queue = 'xss'", &[]).unwrap().get(0);
    let failed: String = c.query_one("SELECT id::text FROM jobs WHERE status = 'failed' LIMIT 1", &[]).unwrap().get(0);
    vec![
        "/".into(),
        "/?range=day".into(),
        "/jobs".into(),
        "/jobs?queue=mail&status=failed".into(),
        format!("/jobs/{job}"),
        "/schedules".into(),
        "/workflows".into(),
        format!("/jobs/{failed}/retry"),
        "/queues/pause?queue=mail".into(),
        "/schedules/pause?schedule=nightly".into(),
        "/schedules/resume?schedule=nightly".into(),
        "/schedules/run?schedule=nightly".into(),
        format!("/workflows/{job}"),
        "/?refresh=5".into(),
        format!("/jobs/{job}?refresh=5"),
        "/static/style.css".into(),
        "/no-such-page".into(),
    ]
}

/// A cookie and token from the confirmation page at `url`, fetched as the
/// dashboard's own user would.
async fn session_and_token(url: &str) -> (String, String) {
    let page = get(url).await;
    assert_eq!(page.status(), 200, "{url}");
    let (cookie, token) = session_and_token_of(page).await;
    (cookie.expect("a session cookie"), token.expect("a CSRF token"))
}

fn status_of(db: &str, id: &str) -> String {
    sql(db).query_one("SELECT status FROM jobs WHERE id = $1::text::uuid", &[&id]).unwrap().get(0)
}

#[test]
fn a_request_for_another_host_name_gets_nothing() {
    let db = fill("rq_dashboard_hosts");
    let paths = every_path(&db);
    let queued: String = sql(&db).query_one("SELECT id::text FROM jobs WHERE status = 'queued' LIMIT 1", &[]).unwrap().get(0);
    let dashboard = Dashboard::on(&db).read_write().start();
    let (base, port) = (dashboard.base.clone(), dashboard.port);
    runtime().block_on(async {
        let foreign = format!("{FOREIGN}:{port}");
        for path in &paths {
            // as a rebinding page sends it: its own name, and the password
            // (which a rebinding page would not even have)
            let response = http().get(format!("{base}{path}")).header("host", &foreign).basic_auth(USER, Some(PASSWORD)).send().await.unwrap();
            assert_eq!(response.status(), 421, "GET {path} for {foreign}");
            assert!(response.headers().get("set-cookie").is_none(), "no session for {foreign}");
            let body = response.text().await.unwrap();
            assert!(body.contains("does not answer to that host name"), "{path}: {body}");
            for data in ["mail", "hello", "<script>", "nightly", "csrf"] {
                assert!(!body.contains(data), "GET {path} for {foreign} shows {data:?}: {body}");
            }
        }
        // the names it serves: its address and localhost; with
        // --allowed-host, that name too
        let answer = |base: &str, host: &str| {
            http().get(format!("{base}/")).header("host", host).basic_auth(USER, Some(PASSWORD)).send()
        };
        for host in [format!("127.0.0.1:{port}"), format!("localhost:{port}"), format!("[::1]:{port}")] {
            assert_eq!(answer(&base, &host).await.unwrap().status(), 200, "Host {host}");
        }
        for host in ["dash.example.test".to_string(), format!("127.0.0.1:{}", port + 1), format!("localhost.{FOREIGN}:{port}"), String::new()] {
            assert_eq!(answer(&base, &host).await.unwrap().status(), 421, "Host {host:?}");
        }
        // the same, answering also to the name a proxy forwards
        let proxied = Dashboard::on(&db).read_write().arg("--allowed-host").arg("dash.example.test").start();
        for host in ["dash.example.test", "DASH.example.test"] {
            assert_eq!(answer(&proxied.base, host).await.unwrap().status(), 200, "Host {host} with --allowed-host");
        }
        assert_eq!(answer(&proxied.base, &format!("dash.example.test:{port}")).await.unwrap().status(), 421, "another port");

        // A POST for the foreign name, from its origin, with a real session
        // and token (got from the dashboard's own address): refused.
        let path = format!("/jobs/{queued}/cancel");
        let (cookie, token) = session_and_token(&format!("{base}{path}")).await;
        let post = |base: &str, host: String, origin: String| {
            http()
                .post(format!("{base}{path}"))
                .header("host", host)
                .header("origin", origin)
                .header("cookie", &cookie)
                .basic_auth(USER, Some(PASSWORD))
                .form(&[("csrf", token.clone())])
                .send()
        };
        let rebinding = post(&base, foreign.clone(), format!("http://{foreign}")).await.unwrap();
        assert_eq!(rebinding.status(), 421);
        // its own Host, another site's Origin: refused too
        let cross_site = post(&base, format!("127.0.0.1:{port}"), format!("http://{foreign}")).await.unwrap();
        assert_eq!(cross_site.status(), 403);
        assert_eq!(tokio::task::block_in_place(|| status_of(&db, &queued)), "queued", "nothing changed");
        // the name a proxy forwards, as Host and Origin: served (with a
        // session of that dashboard)
        let (cookie, token) = session_and_token(&format!("{}{path}", proxied.base)).await;
        let served = http()
            .post(format!("{}{path}", proxied.base))
            .header("host", "dash.example.test")
            .header("origin", "http://dash.example.test")
            .header("cookie", &cookie)
            .basic_auth(USER, Some(PASSWORD))
            .form(&[("csrf", token)])
            .send()
            .await
            .unwrap();
        assert_eq!(served.status(), 303);
        assert_eq!(tokio::task::block_in_place(|| status_of(&db, &queued)), "cancelled");
    });
}

#[test]
fn every_page_needs_the_password() {
    let db = fill("rq_dashboard_auth");
    let paths = every_path(&db);
    let failed: String = sql(&db).query_one("SELECT id::text FROM jobs WHERE status = 'failed' LIMIT 1", &[]).unwrap().get(0);
    let dashboard = Dashboard::on(&db).read_write().start();
    let base = dashboard.base.clone();
    runtime().block_on(async {
        for path in &paths {
            let url = format!("{base}{path}");
            let none = http().get(&url).send().await.unwrap();
            assert_eq!(none.status(), 401, "GET {path} without a password");
            let challenge = none.headers().get("www-authenticate").map(|v| v.to_str().unwrap().to_string());
            assert_eq!(challenge.as_deref(), Some("Basic realm=\"raquel dashboard\", charset=\"UTF-8\""), "{path}");
            let body = none.text().await.unwrap();
            assert!(!body.contains("mail") && !body.contains("hello"), "{path}: {body}");
            for (user, password) in [(USER, "wrong"), ("someone", PASSWORD), (USER, ""), (USER, &PASSWORD[..PASSWORD.len() - 1])] {
                let wrong = http().get(&url).basic_auth(user, Some(password)).send().await.unwrap();
                assert_eq!(wrong.status(), 401, "GET {path} as {user}:{password}");
            }
            let garbage = http().get(&url).header("authorization", "Basic %%%").send().await.unwrap();
            assert_eq!(garbage.status(), 401);
            let right = get(&url).await;
            let want = if path == "/no-such-page" { 404 } else { 200 };
            assert_eq!(right.status(), want, "GET {path} with the password");
        }
        // an action without the password, with a real session and token: refused
        let path = format!("/jobs/{failed}/retry");
        let (cookie, token) = session_and_token(&format!("{base}{path}")).await;
        let post = http()
            .post(format!("{base}{path}"))
            .header("cookie", cookie)
            .header("origin", &base)
            .form(&[("csrf", token)])
            .send()
            .await
            .unwrap();
        assert_eq!(post.status(), 401);
    });
    assert_eq!(status_of(&db, &failed), "failed", "nothing changed");
}

/// Runs the dashboard with `args` (and the password in the environment
/// when `password`), expecting it to refuse to start: its message. One that
/// starts listening instead is stopped, and the test fails.
fn refused(args: &[&str], password: bool) -> String {
    let mut dashboard = Dashboard::on("postgres");
    if !password {
        dashboard = dashboard.no_password();
    }
    for arg in args {
        dashboard = dashboard.arg(arg);
    }
    let port = free_port();
    let mut child = Running(
        dashboard.command().args(["--port", &port.to_string()]).stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap(),
    );
    let exit = loop {
        if let Some(exit) = child.0.try_wait().unwrap() {
            break exit;
        }
        let listening = std::net::TcpStream::connect(("127.0.0.1", port)).is_ok();
        assert!(!listening, "{args:?} (password: {password}) started listening on {port}");
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    let mut stderr = String::new();
    child.0.stderr.take().unwrap().read_to_string(&mut stderr).unwrap();
    assert!(!exit.success() && exit.code().is_some(), "{args:?}: exited with {exit}: {stderr}");
    assert!(stderr.starts_with("raquel-dashboard: "), "{args:?}: {stderr}");
    stderr
}

#[test]
fn the_program_refuses_to_start_unsafely_and_says_what_to_do() {
    // a password is needed for --read-write and beyond loopback
    for args in [&["--read-write"][..], &["--bind", "0.0.0.0", "--behind-tls-proxy", "--allowed-host", "dash.example.test"]] {
        let message = refused(args, false);
        assert!(message.contains("--password-file") && message.contains("RAQUEL_DASHBOARD_PASSWORD"), "{args:?}: {message}");
    }
    // never on the command line
    assert!(refused(&["--password", PASSWORD], false).contains("--password-file"));
    assert!(refused(&["--password-file", "/nonexistent/password"], false).contains("cannot read the password file"));
    // beyond loopback, TLS or a proxy that does it
    for bind in ["0.0.0.0", "::"] {
        let message = refused(&["--bind", bind, "--allowed-host", "dash.example.test"], true);
        assert!(message.contains("--tls-cert") && message.contains("--behind-tls-proxy"), "{bind}: {message}");
    }
    // a wildcard address, and no name to answer to
    assert!(refused(&["--bind", "0.0.0.0", "--behind-tls-proxy"], true).contains("--allowed-host"));
    // a certificate that is not one
    let dir = tempdir("bad-tls");
    std::fs::write(dir.join("cert.pem"), "not a certificate").unwrap();
    std::fs::write(dir.join("key.pem"), "not a key").unwrap();
    let (cert, key) = (dir.join("cert.pem").display().to_string(), dir.join("key.pem").display().to_string());
    assert!(refused(&["--tls-cert", &cert, "--tls-key", &key], false).contains("cannot use the certificate"));

    // with all of it, it starts, and warns that the proxy's side is plain HTTP
    let port = free_port();
    let mut child = Running(
        Dashboard::on("postgres")
            .arg("--bind")
            .arg("0.0.0.0")
            .arg("--behind-tls-proxy")
            .arg("--allowed-host")
            .arg("dash.example.test")
            .command()
            .args(["--port", &port.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    wait_for_port(port, "the dashboard behind a proxy");
    let _ = child.0.kill();
    let _ = child.0.wait();
    let mut stderr = String::new();
    child.0.stderr.take().unwrap().read_to_string(&mut stderr).unwrap();
    assert!(stderr.contains("warning: --behind-tls-proxy"), "{stderr}");
}

fn tempdir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("raquel-dashboard-test-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn tls_serves_the_pages() {
    let db = fill("rq_dashboard_tls");
    let dir = tempdir("tls");
    let cert = rcgen::generate_simple_self_signed(vec!["localhost".to_string(), "127.0.0.1".to_string()]).unwrap();
    std::fs::write(dir.join("cert.pem"), cert.cert.pem()).unwrap();
    std::fs::write(dir.join("key.pem"), cert.key_pair.serialize_pem()).unwrap();
    let dashboard = Dashboard::on(&db)
        .read_write()
        .arg("--tls-cert")
        .arg(&dir.join("cert.pem").display().to_string())
        .arg("--tls-key")
        .arg(&dir.join("key.pem").display().to_string())
        .start();
    let port = dashboard.port;
    let failed: String = sql(&db).query_one("SELECT id::text FROM jobs WHERE status = 'failed' LIMIT 1", &[]).unwrap().get(0);
    runtime().block_on(async {
        let https = reqwest::Client::builder()
            .add_root_certificate(reqwest::Certificate::from_pem(cert.cert.pem().as_bytes()).unwrap())
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap();
        for base in [format!("https://127.0.0.1:{port}"), format!("https://localhost:{port}")] {
            let page = https.get(format!("{base}/")).basic_auth(USER, Some(PASSWORD)).send().await.unwrap();
            assert_eq!(page.status(), 200, "{base}/");
            assert!(page.text().await.unwrap().contains("data-queue=\"mail\""));
            let anonymous = https.get(format!("{base}/")).send().await.unwrap();
            assert_eq!(anonymous.status(), 401);
        }
        // the session cookie is for HTTPS only, and an action works
        let base = format!("https://127.0.0.1:{port}");
        let confirm = https.get(format!("{base}/jobs/{failed}/retry")).basic_auth(USER, Some(PASSWORD)).send().await.unwrap();
        let set_cookie = confirm.headers()["set-cookie"].to_str().unwrap().to_string();
        assert!(set_cookie.contains("; Secure"), "{set_cookie}");
        let body = confirm.text().await.unwrap();
        let token = body.split("name=\"csrf\" value=\"").nth(1).unwrap().split('"').next().unwrap().to_string();
        let post = https
            .post(format!("{base}/jobs/{failed}/retry"))
            .basic_auth(USER, Some(PASSWORD))
            .header("cookie", set_cookie.split(';').next().unwrap())
            .header("origin", &base)
            .form(&[("csrf", token.clone())])
            .send()
            .await
            .unwrap();
        assert_eq!(post.status(), 303);
        // over HTTP/2 (which Chromium speaks over TLS) the host is the
        // :authority, not a Host header: checked the same
        let h2 = reqwest::Client::builder()
            .add_root_certificate(reqwest::Certificate::from_pem(cert.cert.pem().as_bytes()).unwrap())
            .resolve("rebind.evil.example", ([127, 0, 0, 1], port).into())
            .danger_accept_invalid_hostnames(true)
            .build()
            .unwrap();
        let served = h2.get(format!("https://localhost:{port}/jobs")).basic_auth(USER, Some(PASSWORD)).send().await.unwrap();
        assert_eq!((served.version(), served.status().as_u16()), (reqwest::Version::HTTP_2, 200));
        let refused = h2.get(format!("https://rebind.evil.example:{port}/jobs")).basic_auth(USER, Some(PASSWORD)).send().await.unwrap();
        assert_eq!((refused.version(), refused.status().as_u16()), (reqwest::Version::HTTP_2, 421));
        // plain HTTP to the TLS port gets no page
        let plain = http().get(format!("http://127.0.0.1:{port}/")).basic_auth(USER, Some(PASSWORD)).send().await;
        assert!(plain.map(|r| r.status() != 200).unwrap_or(true), "plain HTTP was served");
    });
    assert_eq!(status_of(&db, &failed), "queued");
    std::fs::remove_dir_all(dir).ok();
}

/// The headers every answer must carry; `referrer` is the page's policy.
fn assert_security_headers(what: &str, response: &reqwest::Response, referrer: &str) {
    let h = response.headers();
    let get = |name: &str| h.get(name).map(|v| v.to_str().unwrap().to_string()).unwrap_or_default();
    assert_eq!(get("cache-control"), "no-store", "{what}: Cache-Control");
    assert_eq!(get("x-frame-options"), "DENY", "{what}: X-Frame-Options");
    assert_eq!(get("x-content-type-options"), "nosniff", "{what}: X-Content-Type-Options");
    assert_eq!(get("referrer-policy"), referrer, "{what}: Referrer-Policy");
    let csp = get("content-security-policy");
    for directive in ["default-src 'none'", "frame-ancestors 'none'", "form-action 'self'"] {
        assert!(csp.contains(directive), "{what}: Content-Security-Policy {csp:?} lacks {directive}");
    }
}

#[test]
fn every_kind_of_answer_carries_the_security_headers() {
    let db = fill("rq_dashboard_headers");
    let mut c = sql(&db);
    let job: String = c.query_one("SELECT id::text FROM jobs WHERE queue = 'xss'", &[]).unwrap().get(0);
    let exhausted: String = c.query_one("SELECT id::text FROM jobs WHERE status = 'exhausted' LIMIT 1", &[]).unwrap().get(0);
    let dashboard = Dashboard::on(&db).read_write().start();
    let (base, port) = (dashboard.base.clone(), dashboard.port);
    runtime().block_on(async {
        let page = |path: String| {
            let url = format!("{base}{path}");
            async move { get(&url).await }
        };
        for (what, path, status) in [
            ("the queues", "/".to_string(), 200),
            ("a job's payload", format!("/jobs/{job}"), 200),
            ("the jobs", "/jobs".into(), 200),
            ("the schedules", "/schedules".into(), 200),
            ("the workflows", "/workflows".into(), 200),
            ("the stylesheet", "/static/style.css".into(), 200),
            ("an unknown page", "/nope".into(), 404),
            ("an unknown job", "/jobs/00000000-0000-7000-8000-000000000000".into(), 404),
        ] {
            let response = page(path).await;
            assert_eq!(response.status(), status, "{what}");
            assert_security_headers(what, &response, "no-referrer");
        }
        let css = page("/static/style.css".into()).await;
        assert!(css.headers()["content-type"].to_str().unwrap().starts_with("text/css"));
        // the confirmation page keeps the Referer same-origin, so that its
        // form's POST carries its Origin
        let confirm = page(format!("/jobs/{exhausted}/retry")).await;
        assert_security_headers("a confirmation page", &confirm, "same-origin");
        // the refusals: no password, another host, a forged POST
        let unauthorized = http().get(format!("{base}/")).send().await.unwrap();
        assert_eq!(unauthorized.status(), 401);
        assert_security_headers("401", &unauthorized, "no-referrer");
        let misdirected = http().get(format!("{base}/")).header("host", format!("{FOREIGN}:{port}")).send().await.unwrap();
        assert_eq!(misdirected.status(), 421);
        assert_security_headers("421", &misdirected, "no-referrer");
        let forged = http().post(format!("{base}/jobs/{exhausted}/retry")).basic_auth(USER, Some(PASSWORD)).form(&[("csrf", "0")]).send().await.unwrap();
        assert_eq!(forged.status(), 403);
        assert_security_headers("403", &forged, "no-referrer");
        // an action's redirect
        let (cookie, token) = session_and_token(&format!("{base}/jobs/{exhausted}/retry")).await;
        let done = post_confirmed(&base, &format!("/jobs/{exhausted}/retry"), &cookie, &token).await;
        assert_eq!(done.status(), 303);
        assert_security_headers("an action's redirect", &done, "no-referrer");
        // a refusal from the database (retrying a queued job): 409
        let (cookie, token) = session_and_token(&format!("{base}/jobs/{exhausted}/retry")).await;
        let conflict = post_confirmed(&base, &format!("/jobs/{exhausted}/retry"), &cookie, &token).await;
        assert_eq!(conflict.status(), 409);
        assert_security_headers("409", &conflict, "no-referrer");
    });
}

/// The schedules' actions (pause, resume, run now) obey the rules of every
/// other action: absent from a read-only dashboard; on a read-write one
/// refused without the password, without the form's CSRF token (or with a
/// wrong one), and without an Origin of the dashboard's own. None of them
/// changes the schedule or enqueues a job; the real form does.
#[test]
fn the_schedule_actions_are_refused_without_password_token_or_origin() {
    let db = fill("rq_dashboard_schedule_actions");
    let state = |db: &str| -> (bool, i64) {
        let mut c = sql(db);
        let enabled: bool = c.query_one("SELECT enabled FROM schedules WHERE name = 'nightly'", &[]).unwrap().get(0);
        let jobs: i64 = c.query_one("SELECT count(*) FROM jobs WHERE queue = 'reports'", &[]).unwrap().get(0);
        (enabled, jobs)
    };
    let before = state(&db);
    assert!(before.0, "nightly starts enabled");
    let actions = ["/schedules/pause?schedule=nightly", "/schedules/resume?schedule=nightly", "/schedules/run?schedule=nightly"];
    {
        let read_only = Dashboard::on(&db).start();
        let base = read_only.base.clone();
        runtime().block_on(async {
            let page = get(&format!("{base}/schedules")).await.text().await.unwrap();
            assert!(!page.contains("/schedules/pause") && !page.contains("/schedules/run"), "no action links when read-only");
            for path in actions {
                assert_eq!(get(&format!("{base}{path}")).await.status(), 403, "GET {path} read-only");
                let post = http().post(format!("{base}{path}")).basic_auth(USER, Some(PASSWORD)).header("origin", &base).form(&[("csrf", "x")]).send().await.unwrap();
                assert_eq!(post.status(), 403, "POST {path} read-only");
            }
        });
    }
    let dashboard = Dashboard::on(&db).read_write().start();
    let base = dashboard.base.clone();
    runtime().block_on(async {
        for path in actions {
            let (cookie, token) = session_and_token(&format!("{base}{path}")).await;
            let post = |cookie: Option<&str>, token: &str, origin: Option<&str>, password: bool| {
                let mut request = http().post(format!("{base}{path}")).form(&[("csrf", token.to_string())]);
                if let Some(cookie) = cookie {
                    request = request.header("cookie", cookie);
                }
                if let Some(origin) = origin {
                    request = request.header("origin", origin);
                }
                if password {
                    request = request.basic_auth(USER, Some(PASSWORD));
                }
                request.send()
            };
            let no_password = post(Some(&cookie), &token, Some(&base), false).await.unwrap();
            assert_eq!(no_password.status(), 401, "POST {path} without the password");
            let no_cookie = post(None, &token, Some(&base), true).await.unwrap();
            assert_eq!(no_cookie.status(), 403, "POST {path} without the session");
            let wrong_token = post(Some(&cookie), "00ff", Some(&base), true).await.unwrap();
            assert_eq!(wrong_token.status(), 403, "POST {path} with a wrong token");
            let foreign = post(Some(&cookie), &token, Some("http://evil.example"), true).await.unwrap();
            assert_eq!(foreign.status(), 403, "POST {path} from another origin");
            let no_origin = post(Some(&cookie), &token, None, true).await.unwrap();
            assert_eq!(no_origin.status(), 403, "POST {path} without an Origin");
        }
        assert_eq!(tokio::task::block_in_place(|| state(&db)), before, "no refused POST changed anything");
        // the real thing: pause, then run now (a job in reports), then resume
        for (path, want) in [
            (actions[0], (false, before.1)),
            (actions[2], (false, before.1 + 1)),
            (actions[1], (true, before.1 + 1)),
        ] {
            let (cookie, token) = session_and_token(&format!("{base}{path}")).await;
            let done = post_confirmed(&base, path, &cookie, &token).await;
            assert_eq!(done.status(), 303, "POST {path}");
            assert_eq!(tokio::task::block_in_place(|| state(&db)), want, "after {path}");
        }
    });
}
