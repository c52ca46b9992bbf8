//! The dashboard in a real browser: Debian's headless Chromium, driven
//! through chromedriver (WebDriver), against a real server with raquel
//! (RAQUEL_TEST_DSN, set by bin/test). Each page is loaded against jobs in
//! every status and checked in the rendered DOM; screenshots are kept in
//! dashboard/target/screenshots/ as the run's artifacts. The dashboards
//! ask for a password (common::PASSWORD), which the browser is given in the
//! first URL it loads.

mod common;

use common::*;
use fantoccini::Locator;

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
    let durable: String = c.query_one("SELECT id::text FROM jobs WHERE queue = 'durable'", &[]).unwrap().get(0);
    let dashboard = Dashboard::on(&db).start();
    let base = dashboard.base.clone();
    runtime().block_on(async {
        let (_driver, b) = logged_in_browser(&base).await;

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

        // a durable job: its steps, and the event it is parked for
        b.goto(&format!("{base}/jobs/{durable}")).await.unwrap();
        assert_eq!(texts(&b, "#steps td.step").await, ["reserve"]);
        assert_eq!(texts(&b, "#steps td.result").await, [r#"{"stock": 1}"#]);
        assert_eq!(text(&b, "#wait-event").await, "paid:1");
        screenshot(&b, "job-durable").await;

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
    let dashboard = Dashboard::on(&db).start();
    let base = dashboard.base.clone();
    runtime().block_on(async {
        for path in [format!("/jobs/{id}/retry"), "/queues/pause?queue=mail".to_string()] {
            let get = get(&format!("{base}{path}")).await;
            assert_eq!(get.status(), 403, "GET {path}");
            let post = http().post(format!("{base}{path}")).basic_auth(USER, Some(PASSWORD)).form(&[("csrf", "x")]).send().await.unwrap();
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
    let dashboard = Dashboard::on(&db).read_write().start();
    let base = dashboard.base.clone();
    let own_origin = base.clone();
    runtime().block_on(async {
        // forged: no cookie, a wrong token, another site's Origin, no Origin
        let post = || http().post(format!("{base}/jobs/{id}/retry")).basic_auth(USER, Some(PASSWORD));
        let no_token = post().header("origin", &own_origin).form(&[("csrf", "0")]).send().await.unwrap();
        assert_eq!(no_token.status(), 403);
        let (cookie, token) = session_and_token_of(get(&format!("{base}/jobs/{id}/retry")).await).await;
        let (cookie, token) = (cookie.expect("a session cookie"), token.expect("a CSRF token"));
        let wrong = post().header("cookie", &cookie).header("origin", &own_origin).form(&[("csrf", "00ff")]).send().await.unwrap();
        assert_eq!(wrong.status(), 403);
        let foreign = post()
            .header("cookie", &cookie)
            .header("origin", "http://evil.example")
            .form(&[("csrf", token.as_str())])
            .send()
            .await
            .unwrap();
        assert_eq!(foreign.status(), 403);
        // Browsers send an Origin with every POST: one without is no form of ours
        let no_origin = post().header("cookie", &cookie).form(&[("csrf", token.as_str())]).send().await.unwrap();
        assert_eq!(no_origin.status(), 403);
        let still: String = tokio::task::block_in_place(|| {
            sql(&db).query_one("SELECT status FROM jobs WHERE id = $1::text::uuid", &[&id]).unwrap().get(0)
        });
        assert_eq!(still, "exhausted", "forged posts changed nothing");

        // the real thing, in the browser
        let (_driver, b) = logged_in_browser(&base).await;
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

/// The grant the dashboard's page of the book gives its viewer role
/// (docs/src/guides/dashboard.md), for `role`.
fn documented_viewer_grant(role: &str) -> String {
    let page = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/src/guides/dashboard.md")).unwrap();
    let grant = page.lines().find(|l| l.starts_with("GRANT SELECT ON ") && l.ends_with(" TO raquel_viewer;")).expect("the viewer's grant");
    grant.replace(" TO raquel_viewer;", &format!(" TO {role};"))
}

/// A role granted what the book's dashboard page grants its viewer sees
/// every page whole (a durable job's steps and event too); a role that may
/// read only `jobs` sees every page, each saying what it leaves out.
#[test]
fn a_role_with_only_select_sees_every_page() {
    let db = fill("rq_dashboard_viewer");
    let mut c = sql(&db);
    c.batch_execute(&format!(
        "DROP ROLE IF EXISTS rq_dash_viewer; CREATE ROLE rq_dash_viewer LOGIN;
         {}
         DROP ROLE IF EXISTS rq_dash_jobs_only; CREATE ROLE rq_dash_jobs_only LOGIN;
         GRANT SELECT ON jobs TO rq_dash_jobs_only;",
        documented_viewer_grant("rq_dash_viewer")
    ))
    .unwrap();
    let id: String = c.query_one("SELECT id::text FROM jobs LIMIT 1", &[]).unwrap().get(0);
    let durable: String = c.query_one("SELECT id::text FROM jobs WHERE queue = 'durable'", &[]).unwrap().get(0);
    for (role, whole) in [("rq_dash_viewer", true), ("rq_dash_jobs_only", false)] {
        let dashboard = Dashboard::on(&db).user(role).start();
        let base = dashboard.base.clone();
        runtime().block_on(async {
            for path in ["/", "/jobs", &format!("/jobs/{id}"), &format!("/jobs/{durable}"), "/schedules", "/workflows"] {
                let response = get(&format!("{base}{path}")).await;
                assert_eq!(response.status(), 200, "{role}: {path}");
                let body = response.text().await.unwrap();
                if !whole && (path == "/schedules" || path == "/") {
                    assert!(body.contains("class=\"note\""), "{role} is told what it may not see on {path}");
                }
                if whole {
                    assert!(!body.contains("may not read"), "{role} reads every table {path} reads");
                }
            }
            let (_driver, b) = logged_in_browser(&base).await;
            b.goto(&format!("{base}/jobs/{durable}")).await.unwrap();
            let notes = texts(&b, "p.note").await;
            if whole {
                assert_eq!(texts(&b, "#steps td.step").await, ["reserve"], "{role}: the durable job's step");
                assert_eq!(text(&b, "#wait-event").await, "paid:1");
                assert!(notes.is_empty(), "{notes:?}");
            } else {
                for table in ["job_steps", "job_waits", "job_dependencies"] {
                    assert!(notes.iter().any(|n| n.contains(&format!("may not read {table} "))), "{role} is told of {table}: {notes:?}");
                }
                assert!(texts(&b, "#steps td.step").await.is_empty());
                screenshot(&b, "job-unreadable-tables").await;
            }
            if whole {
                b.goto(&format!("{base}/")).await.unwrap();
                assert!(!texts(&b, "#queues td.name").await.is_empty());
            }
            b.close().await.unwrap();
        });
    }
    c.batch_execute("DROP OWNED BY rq_dash_viewer, rq_dash_jobs_only; DROP ROLE rq_dash_viewer; DROP ROLE rq_dash_jobs_only").unwrap();
}

/// A job that failed, was rescued after its lease lapsed, then completed:
/// its page, served as the documented viewer role, lists its three
/// attempts, the first error intact and its trace as text.
#[test]
fn a_jobs_page_shows_every_attempt() {
    let db = "rq_dashboard_attempts";
    let mut c = fresh_db(db);
    c.batch_execute(&format!(
        "DROP ROLE IF EXISTS rq_dash_attempts_viewer; CREATE ROLE rq_dash_attempts_viewer LOGIN; {}",
        documented_viewer_grant("rq_dash_attempts_viewer")
    ))
    .unwrap();
    let id: String = c
        .query_one("SELECT id::text FROM rq_enqueue('payments', 'order 7', min_retry_delay => '0', backoff_base => '0')", &[])
        .unwrap()
        .get(0);
    let attempt: i32 = c.query_one("SELECT attempts FROM rq_claim(ARRAY['payments'], 'worker-a')", &[]).unwrap().get(0);
    c.execute("SELECT rq_fail($1::text::uuid, $2, 'card declined', $3)", &[&id, &attempt, &XSS]).unwrap();
    let attempt: i32 =
        c.query_one("SELECT attempts FROM rq_claim(ARRAY['payments'], 'worker-b', lease => '10 milliseconds')", &[]).unwrap().get(0);
    assert_eq!(attempt, 2);
    std::thread::sleep(std::time::Duration::from_millis(50));
    c.batch_execute("SELECT rq_rescue()").unwrap();
    let attempt: i32 = c.query_one("SELECT attempts FROM rq_claim(ARRAY['payments'], 'worker-c')", &[]).unwrap().get(0);
    c.execute("SELECT rq_complete($1::text::uuid, $2)", &[&id, &attempt]).unwrap();
    let dashboard = Dashboard::on(db).user("rq_dash_attempts_viewer").start();
    let base = dashboard.base.clone();
    runtime().block_on(async {
        let (_driver, b) = logged_in_browser(&base).await;
        b.goto(&format!("{base}/jobs/{id}")).await.unwrap();
        assert_eq!(text(&b, "#status").await, "success");
        assert!(texts(&b, "p.note").await.is_empty(), "the viewer reads the history");
        assert_eq!(texts(&b, "#attempts td.attempt").await, ["1", "2", "3"]);
        assert_eq!(texts(&b, "#attempts td.worker").await, ["worker-a", "worker-b", "worker-c"]);
        assert_eq!(texts(&b, "#attempts td.outcome").await, ["failed", "failed", "success"]);
        let errors = texts(&b, "#attempts td.error").await;
        assert_eq!(errors[0], "card declined", "the first error intact: {errors:?}");
        assert!(errors[1].starts_with("lease expired: worker worker-b"), "{errors:?}");
        assert_eq!(errors[2], "");
        let claimed = texts(&b, "#attempts td.claimed").await;
        let ended = texts(&b, "#attempts td.ended").await;
        assert!(claimed.iter().chain(&ended).all(|t| t.ends_with(" UTC")), "{claimed:?} {ended:?}");
        // the trace, collapsed in a <details>, is the text given: no markup ran
        let trace = b.execute("return document.querySelector('#attempts td.trace pre').textContent", vec![]).await.unwrap();
        assert_eq!(trace, serde_json::json!(XSS));
        assert!(b.find_all(Locator::Css("#attempts img, #attempts script")).await.unwrap().is_empty());
        let xss = b.execute("return typeof window.__xss", vec![]).await.unwrap();
        assert_eq!(xss, serde_json::json!("undefined"), "the trace ran as script");
        // past_attempts is shown as the attempts, not again as a column
        assert!(!texts(&b, "#fields th").await.iter().any(|t| t == "past_attempts"));
        b.find(Locator::Css("#attempts td.trace summary")).await.unwrap().click().await.unwrap();
        screenshot(&b, "job-attempts").await;
        b.close().await.unwrap();
    });
    c.batch_execute("DROP OWNED BY rq_dash_attempts_viewer; DROP ROLE rq_dash_attempts_viewer").unwrap();
}

/// The job list pages through a queue newest first, each job once. 250 jobs
/// (three pages) in CI; RAQUEL_DASHBOARD_JOBS=10000 for a release (README).
#[test]
fn the_job_list_pages_through_every_job_once() {
    let n: i64 = std::env::var("RAQUEL_DASHBOARD_JOBS").ok().and_then(|n| n.parse().ok()).unwrap_or(250);
    let db = "rq_dashboard_paging";
    let mut c = fresh_db(db);
    // several jobs share an enqueued_at: the id breaks the tie
    c.execute("SELECT count(*) FROM rq_enqueue_batch('many', ARRAY(SELECT i::text FROM generate_series(1, $1::bigint) i))", &[&n])
        .unwrap();
    let dashboard = Dashboard::on(db).start();
    let base = dashboard.base.clone();
    let seen = runtime().block_on(async {
        let (_driver, b) = logged_in_browser(&base).await;
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

#[test]
fn the_browser_is_asked_for_the_password() {
    let db = fill("rq_dashboard_browser_auth");
    let dashboard = Dashboard::on(&db).start();
    let base = dashboard.base.clone();
    runtime().block_on(async {
        let (_driver, b) = browser().await;
        // no password, or a wrong one: 401, and nothing of the queue
        for url in [format!("{base}/"), format!("{base}/").replacen("://", &format!("://{USER}:wrong@"), 1)] {
            b.goto(&url).await.unwrap();
            // headless Chromium cannot ask; it shows its own error page
            let status = b.execute("return performance.getEntriesByType('navigation').map(e => e.responseStatus)", vec![]).await.unwrap();
            assert_eq!(status, serde_json::json!([401]), "{url}");
            let html = b.source().await.unwrap();
            assert!(b.find_all(Locator::Css("#queues")).await.unwrap().is_empty());
            assert!(!html.contains("mail") && !html.contains("hello"), "{url}: {html}");
        }
        // the right one: the page, and the rest of the site without asking again
        b.goto(&with_credentials(&format!("{base}/"))).await.unwrap();
        assert!(!texts(&b, "#queues td.name").await.is_empty());
        b.goto(&format!("{base}/jobs?queue=mail")).await.unwrap();
        assert!(!texts(&b, "#jobs td.id").await.is_empty(), "the credentials are kept for the origin");
        screenshot(&b, "logged-in").await;
        b.close().await.unwrap();
    });
}

/// A page of another site whose name was re-pointed at 127.0.0.1 (DNS
/// rebinding) is same-origin with `http://rebind.evil.example:PORT`, which
/// Chromium here resolves to the dashboard (--host-resolver-rules): it may
/// read whatever that origin answers and post forms to it.
#[test]
fn a_rebinding_page_gets_nothing_and_changes_nothing() {
    let db = fill("rq_dashboard_rebinding");
    let mut c = sql(&db);
    let ids: Vec<String> = c
        .query("SELECT id::text FROM jobs WHERE status = 'queued' AND queue = 'mail' ORDER BY id LIMIT 2", &[])
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    let (target, control) = (ids[0].clone(), ids[1].clone());
    let xss: String = c.query_one("SELECT id::text FROM jobs WHERE queue = 'xss'", &[]).unwrap().get(0);
    let dashboard = Dashboard::on(&db).read_write().start();
    let (base, port) = (dashboard.base.clone(), dashboard.port);
    let evil = format!("http://rebind.evil.example:{port}");
    // builds a form in the page shown and posts it, as the rebinding page's
    // script would; `arguments`: a cookie to set first (or ""), the action,
    // the token; marks the page, so that the next one can be told apart
    const POST: &str = "if (arguments[0]) { document.cookie = arguments[0]; }
        const form = document.createElement('form');
        form.method = 'post'; form.action = arguments[1];
        const token = document.createElement('input');
        token.type = 'hidden'; token.name = 'csrf'; token.value = arguments[2];
        form.appendChild(token); document.body.appendChild(form);
        window.__before_post = true; form.submit();";
    let status = |id: &str| -> String { sql(&db).query_one("SELECT status FROM jobs WHERE id = $1::text::uuid", &[&id]).unwrap().get(0) };
    runtime().block_on(async {
        let (_driver, b) = browser_with(&["--host-resolver-rules=MAP rebind.evil.example 127.0.0.1"]).await;
        let posted = || async {
            // the page the form's POST led to has loaded
            for _ in 0..600 {
                let done = b.execute("return window.__before_post === undefined && document.readyState === 'complete'", vec![]).await;
                if done.ok() == Some(serde_json::json!(true)) {
                    return;
                }
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            }
            panic!("the form's POST led nowhere");
        };

        // Control: the same script in the dashboard's own origin, with the
        // token of its confirmation page, cancels a job.
        b.goto(&with_credentials(&format!("{base}/jobs/{control}/cancel"))).await.unwrap();
        let token = b.find(Locator::Css("input[name=csrf]")).await.unwrap().attr("value").await.unwrap().unwrap();
        let args = vec![serde_json::json!(""), serde_json::json!(format!("/jobs/{control}/cancel")), serde_json::json!(token)];
        b.execute(POST, args).await.unwrap();
        posted().await;
        assert_eq!(text(&b, "#status").await, "cancelled", "the script's POST works where it is allowed");

        // Every page in the rebinding origin, the password given even (a
        // rebinding page would not have it): refused, nothing shown.
        for path in [
            "/".to_string(),
            "/?range=day".into(),
            "/jobs".into(),
            format!("/jobs/{xss}"),
            "/schedules".into(),
            "/workflows".into(),
            format!("/jobs/{target}/cancel"),
            "/queues/pause?queue=mail".into(),
            "/static/style.css".into(),
        ] {
            b.goto(&with_credentials(&format!("{evil}{path}"))).await.unwrap();
            let body = body_text(&b).await;
            assert!(body.contains("does not answer to that host name"), "{evil}{path} was served: {body}");
            for data in ["mail", "hello", "window.__xss", "nightly", "Cancel"] {
                assert!(!body.contains(data), "{evil}{path} shows {data:?}");
            }
            assert!(b.find_all(Locator::Css("input[name=csrf]")).await.unwrap().is_empty(), "{evil}{path} gave a token");
        }
        screenshot(&b, "rebinding").await;

        // A POST from the rebinding origin with a real session and token
        // (got from the dashboard's own address, as no page here gives one):
        // refused, and the job is still queued.
        let (cookie, token) = session_and_token_of(get(&format!("{base}/jobs/{target}/cancel")).await).await;
        let (cookie, token) = (cookie.expect("a session cookie"), token.expect("a CSRF token"));
        b.goto(&with_credentials(&format!("{evil}/jobs/{target}/cancel"))).await.unwrap();
        let args = vec![serde_json::json!(format!("{cookie}; path=/")), serde_json::json!(format!("/jobs/{target}/cancel")), serde_json::json!(token)];
        b.execute(POST, args).await.unwrap();
        posted().await;
        let body = body_text(&b).await;
        assert!(body.contains("does not answer to that host name"), "the POST was answered: {body}");
        assert_eq!(tokio::task::block_in_place(|| status(&target)), "queued", "the rebinding page cancelled the job");
        b.close().await.unwrap();
    });
    assert_eq!(status(&control), "cancelled");
}

/// Queue names are data: any of them is one piece of a URL.
#[test]
fn queues_of_any_name_are_paused_and_resumed_in_the_browser() {
    let names = ["a/b", "what?", "hash#tag", "100%", "%2F", "with space", "ünïcødé ✓", "a/b?c#d%e f&g=h+i", "..", "."];
    let db = "rq_dashboard_names";
    let mut c = fresh_db(db);
    for name in names {
        c.execute("SELECT rq_enqueue($1::text, 'for ' || $1::text)", &[&name]).unwrap();
    }
    let paused = |name: &str| -> bool {
        sql(db).query_opt("SELECT paused FROM queue_limits WHERE queue = $1", &[&name]).unwrap().is_some_and(|r| r.get(0))
    };
    let dashboard = Dashboard::on(db).read_write().start();
    let base = dashboard.base.clone();
    runtime().block_on(async {
        let (_driver, b) = logged_in_browser(&base).await;
        // the row of queue `name` on the page shown
        let row = |name: &'static str| {
            let b = &b;
            async move {
                for row in b.find_all(Locator::Css("#queues tr[data-queue]")).await.unwrap() {
                    if row.attr("data-queue").await.unwrap().as_deref() == Some(name) {
                        return row;
                    }
                }
                panic!("no row for queue {name:?} on {}", b.current_url().await.unwrap());
            }
        };
        for name in names {
            for (action, want) in [("pause", true), ("resume", false)] {
                b.goto(&format!("{base}/")).await.unwrap();
                row(name).await.find(Locator::LinkText(action)).await.unwrap().click().await.unwrap();
                assert_eq!(text(&b, "#confirm code").await, name, "the confirmation names the queue");
                click(&b, "yes").await;
                // back on the queues, this one first
                b.wait().for_element(Locator::Css("#queues")).await.unwrap();
                let flow = row(name).await.find(Locator::Css("td.flow")).await.unwrap().text().await.unwrap();
                assert_eq!(flow.contains("paused"), want, "{name:?} after {action}: {flow:?}");
                assert_eq!(tokio::task::block_in_place(|| paused(name)), want, "{name:?} after {action}");
            }
            // its jobs, through the link of its name
            b.goto(&format!("{base}/")).await.unwrap();
            row(name).await.find(Locator::Css("td.name a")).await.unwrap().click().await.unwrap();
            b.wait().for_element(Locator::Css("#jobs")).await.unwrap();
            assert_eq!(texts(&b, "#jobs td.queue").await, [name], "the jobs of {name:?}");
        }
        screenshot(&b, "queue-names").await;
        b.close().await.unwrap();
    });
}
