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
        guide_screenshot(&b, "queues").await;

        // jobs, filtered by status and by error text
        b.goto(&format!("{base}/jobs?status=failed")).await.unwrap();
        let statuses = texts(&b, "#jobs td.status").await;
        assert_eq!(statuses.len() as i64, failed);
        assert!(statuses.iter().all(|s| s == "failed"), "{statuses:?}");
        guide_screenshot(&b, "jobs").await;
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
        guide_screenshot(&b, "schedules").await;
        b.goto(&format!("{base}/workflows")).await.unwrap();
        assert_eq!(texts(&b, "#workflows td.child").await, [child.clone()]);
        guide_screenshot(&b, "workflows").await;

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
        guide_screenshot(&b, "job-attempts").await;
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

/// Pause, resume and run now, clicked on the schedules page: each changes
/// the database as it says; run now enqueues one job due now with the
/// schedule's queue, payload and options, and shows it.
#[test]
fn schedules_are_paused_resumed_and_run_now_in_the_browser() {
    let db = fill("rq_dashboard_schedules");
    let mut c = sql(&db);
    c.batch_execute(
        "SELECT rq_schedule('with options', '0 4 * * *', 'opts', '{\"report\": 1}', max_age => '1 hour',
             max_retry_count => 7, min_retry_delay => '2 seconds', max_retry_delay => '1 minute',
             backoff_base => '3 seconds', priority => 5)",
    )
    .unwrap();
    let enabled = |name: &str| -> bool {
        sql(&db).query_one("SELECT enabled FROM schedules WHERE name = $1", &[&name]).unwrap().get(0)
    };
    let dashboard = Dashboard::on(&db).read_write().start();
    let base = dashboard.base.clone();
    let job = runtime().block_on(async {
        let (_driver, b) = logged_in_browser(&base).await;
        b.goto(&format!("{base}/schedules")).await.unwrap();
        assert_eq!(text(&b, "tr[data-schedule='nightly'] td.state").await, "enabled");
        for (action, state, want) in [("pause", "paused", false), ("resume", "enabled", true)] {
            b.goto(&format!("{base}/schedules")).await.unwrap();
            b.find(Locator::Css(&format!("tr[data-schedule='nightly'] a.{action}"))).await.unwrap().click().await.unwrap();
            assert_eq!(text(&b, "#confirm code").await, "nightly", "the confirmation names the schedule");
            if action == "pause" {
                screenshot(&b, "confirm-schedule").await;
            }
            click(&b, "yes").await;
            b.wait().for_element(Locator::Css("#schedules")).await.unwrap();
            assert_eq!(text(&b, "tr[data-schedule='nightly'] td.state").await, state, "after {action}");
            assert_eq!(tokio::task::block_in_place(|| enabled("nightly")), want, "after {action}");
        }
        b.goto(&format!("{base}/schedules")).await.unwrap();
        b.find(Locator::Css("tr[data-schedule='with options'] a.run")).await.unwrap().click().await.unwrap();
        assert_eq!(text(&b, "#confirm code").await, "with options");
        click(&b, "yes").await;
        // the job's own page
        assert_eq!(text(&b, "#status").await, "queued");
        assert_eq!(text(&b, "#payload").await, "{\"report\": 1}");
        let url = b.current_url().await.unwrap();
        let job = url.path().rsplit('/').next().unwrap().to_string();
        // an unknown schedule: the database's refusal, nothing enqueued
        b.goto(&format!("{base}/schedules/run?schedule=no%20such")).await.unwrap();
        click(&b, "yes").await;
        assert!(text(&b, "#failure").await.contains("P0002"), "an unknown schedule is refused");
        b.goto(&format!("{base}/schedules")).await.unwrap();
        b.close().await.unwrap();
        job
    });
    let row = c
        .query_one(
            "SELECT j.queue, j.payload, j.status::text, j.max_age = s.max_age, j.max_retry_count = s.max_retry_count,
                    j.min_retry_delay = s.min_retry_delay, j.max_retry_delay = s.max_retry_delay,
                    j.backoff_base = s.backoff_base, j.priority = s.priority,
                    j.scheduled_at <= raquel_internal.rq_now_ms(), s.max_age, s.priority
             FROM jobs j, schedules s WHERE j.id = $1::text::uuid AND s.name = 'with options'",
            &[&job],
        )
        .unwrap();
    assert_eq!((row.get::<_, String>(0), row.get::<_, String>(1), row.get::<_, String>(2)), ("opts".into(), "{\"report\": 1}".into(), "queued".into()));
    for i in 3..=9 {
        assert!(row.get::<_, bool>(i), "column {i} of the run-now job differs from the schedule's");
    }
    assert_eq!((row.get::<_, i64>(10), row.get::<_, i32>(11)), (3_600_000, 5), "the schedule's options were set");
    let jobs: i64 = c.query_one("SELECT count(*) FROM jobs WHERE queue = 'opts'", &[]).unwrap().get(0);
    assert_eq!(jobs, 1, "run now enqueued one job");
}

/// The charts draw what `metrics` holds: known rows for two queues ten
/// minutes ago (the worker writes the current minute only), read back from
/// each series' figures; the totals sum the queues; the ready column and
/// the oldest wait come from the jobs.
#[test]
fn the_charts_draw_the_figures_in_metrics() {
    let db = "rq_dashboard_charts";
    let mut c = fresh_db(db);
    // a histogram of 161 buckets with 90, 9 and 1 runs in buckets 40, 60 and 80
    c.batch_execute(
        "CREATE TEMP TABLE h AS SELECT array_agg(CASE i WHEN 40 THEN 90 WHEN 60 THEN 9 WHEN 80 THEN 1 ELSE 0 END ORDER BY i) AS run
             FROM generate_series(1, 161) i;
         INSERT INTO metrics (queue, minute, enqueued, succeeded, failed, run_histogram, backlog)
         SELECT q.queue, (raquel_internal.rq_now_ms() / 60000 - 10) * 60000, q.enqueued, q.succeeded, q.failed, h.run, q.backlog
         FROM h, (VALUES ('alpha', 6, 5, 1, 17), ('beta', 4, 2, 2, 3)) q (queue, enqueued, succeeded, failed, backlog);
         SELECT rq_enqueue('alpha', 'late ' || i, at => now() - interval '1 hour') FROM generate_series(1, 3) i;
         SELECT rq_enqueue('beta', 'later', at => now() + interval '1 hour');",
    )
    .unwrap();
    let expected: Vec<String> = c
        .query(
            "SELECT to_char(raquel_internal.rq_histogram_percentile(h.run, p), 'FM999999990.000') FROM h, unnest(ARRAY[0.5, 0.95, 0.99]::float8[]) WITH ORDINALITY u (p, n) ORDER BY n",
            &[],
        )
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert!(expected.iter().all(|e| e != "0.000"), "{expected:?}");
    let dashboard = Dashboard::on(db).start();
    let base = dashboard.base.clone();
    runtime().block_on(async {
        let (_driver, b) = logged_in_browser(&base).await;
        b.goto(&format!("{base}/")).await.unwrap();
        let figure = |chart: String, series: &'static str| {
            let b = &b;
            async move {
                let css = format!("svg[aria-label='{chart}'] g[data-series='{series}']");
                b.find(Locator::Css(&css)).await.unwrap_or_else(|e| panic!("{css}: {e}")).attr("data-max").await.unwrap().unwrap_or_default()
            }
        };
        for queue in ["alpha", "beta"] {
            for (series, want) in ["p50", "p95", "p99"].into_iter().zip(&expected) {
                assert_eq!(&figure(format!("{queue}: run time, claim to end"), series).await, want, "{queue}'s run {series}");
            }
        }
        assert_eq!(figure("alpha: ready jobs".into(), "ready").await, "17.000");
        assert_eq!(figure("beta: ready jobs".into(), "ready").await, "3.000");
        assert_eq!(figure("alpha: jobs a minute".into(), "enqueued").await.parse::<f64>().unwrap() >= 6.0, true);
        // every queue's events summed: at least the rows above (the worker
        // may add the minute's own enqueues, 4 at most)
        let total = |series: &'static str| figure("All queues: jobs a minute".into(), series);
        assert_eq!(total("failed").await, "3.000", "1 + 2 failed");
        assert_eq!(total("succeeded").await, "7.000", "5 + 2 succeeded");
        assert_eq!(total("enqueued").await, "10.000", "6 + 4 enqueued");
        // ready now: alpha's three late jobs, the oldest due an hour ago; beta's is not due
        assert_eq!(text(&b, "tr[data-queue='alpha'] td.ready").await, "3");
        assert!(text(&b, "tr[data-queue='alpha'] td.oldest").await.starts_with("1 h 0 min"));
        assert_eq!(text(&b, "tr[data-queue='beta'] td.ready").await, "0");
        assert_eq!(text(&b, "tr[data-queue='beta'] td.oldest").await, "");
        b.close().await.unwrap();
    });
}

/// `?refresh=5` (the "Reload every 5 s" link) adds a meta refresh to the
/// queues page and a job's page, and only then; the CSP is the same either
/// way: the reload needs no script.
#[test]
fn live_refresh_is_a_meta_refresh_asked_for_and_the_csp_stays() {
    let db = fill("rq_dashboard_refresh");
    let job: String = sql(&db).query_one("SELECT id::text FROM jobs WHERE status = 'failed' LIMIT 1", &[]).unwrap().get(0);
    let dashboard = Dashboard::on(&db).start();
    let base = dashboard.base.clone();
    const META: &str = "<meta http-equiv=\"refresh\" content=\"5\">";
    const CSP: &str = "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";
    runtime().block_on(async {
        for page in ["/".to_string(), format!("/jobs/{job}")] {
            for (query, meta) in [("", false), ("?refresh=5", true), ("?refresh=1", false), ("?refresh=x", false)] {
                let url = if page.contains('?') { format!("{base}{page}&{}", &query[1..]) } else { format!("{base}{page}{query}") };
                let response = get(&url).await;
                assert_eq!(response.status(), 200, "{url}");
                assert_eq!(response.headers().get("content-security-policy").unwrap(), CSP, "{url}");
                let body = response.text().await.unwrap();
                assert_eq!(body.contains(META), meta, "{url}");
                assert!(!body.contains("<script"), "{url}");
            }
        }
        let (_driver, b) = logged_in_browser(&base).await;
        for page in ["/".to_string(), format!("/jobs/{job}")] {
            b.goto(&format!("{base}{page}")).await.unwrap();
            assert!(b.find_all(Locator::Css("meta[http-equiv=refresh]")).await.unwrap().is_empty());
            click(&b, "live-on").await;
            b.wait().for_element(Locator::Id("live-off")).await.unwrap();
            assert!(b.current_url().await.unwrap().query().unwrap_or_default().contains("refresh=5"));
            let meta = b.find(Locator::Css("meta[http-equiv=refresh]")).await.unwrap();
            assert_eq!(meta.attr("content").await.unwrap().as_deref(), Some("5"));
            click(&b, "live-off").await;
            b.wait().for_element(Locator::Id("live-on")).await.unwrap();
            assert!(b.find_all(Locator::Css("meta[http-equiv=refresh]")).await.unwrap().is_empty(), "{page}: live refresh stopped");
        }
        b.close().await.unwrap();
    });
}

/// A workflow drawn as a graph: a node per job with its status (as text and
/// as the class that colours it), a link to its page, an edge per
/// parent; one of more than 200 jobs draws the first 200 and says how many
/// more.
#[test]
fn a_workflow_is_drawn_as_a_graph_of_its_jobs() {
    let db = "rq_dashboard_graph";
    let mut c = fresh_db(db);
    let id = |c: &mut postgres::Client, sql: &str, after: &[&String]| -> String {
        let after: Vec<String> = after.iter().map(|s| s.to_string()).collect();
        c.query_one(sql, &[&after]).unwrap().get(0)
    };
    let a: String = c.query_one("SELECT id::text FROM rq_enqueue('etl', 'extract')", &[]).unwrap().get(0);
    let bb = id(&mut c, "SELECT id::text FROM rq_enqueue('etl', 'transform 1', after => $1::text[]::uuid[])", &[&a]);
    let cc = id(&mut c, "SELECT id::text FROM rq_enqueue('etl', 'transform 2', after => $1::text[]::uuid[])", &[&a]);
    let d = id(&mut c, "SELECT id::text FROM rq_enqueue('etl', 'load', after => $1::text[]::uuid[])", &[&bb, &cc]);
    // the first job succeeds: its children are queued, its edges stay in job_parents
    c.batch_execute("SELECT rq_complete(id, attempts) FROM rq_claim(ARRAY['etl'])").unwrap();
    // a big one: a parent and 250 children
    let big: String = c.query_one("SELECT id::text FROM rq_enqueue('fan', 'parent')", &[]).unwrap().get(0);
    // its children enqueued a later millisecond: the parent is the oldest
    std::thread::sleep(std::time::Duration::from_millis(5));
    c.execute("SELECT count(*) FROM rq_enqueue_batch('fan', ARRAY(SELECT 'child ' || i FROM generate_series(1, 250) i), after => ARRAY[$1::text::uuid])", &[&big])
        .unwrap();
    // a dense one: 40 children each after the same 40 parents, 1,600 edges
    let parents: Vec<String> = c
        .query("SELECT id::text FROM rq_enqueue_batch('dense', ARRAY(SELECT 'parent ' || i FROM generate_series(1, 40) i))", &[])
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    let dense: String = c
        .query(
            "SELECT id::text FROM rq_enqueue_batch('dense', ARRAY(SELECT 'child ' || i FROM generate_series(1, 40) i),
                 after => $1::text[]::uuid[])",
            &[&parents],
        )
        .unwrap()[0]
        .get(0);
    let dashboard = Dashboard::on(db).start();
    let base = dashboard.base.clone();
    runtime().block_on(async {
        let (_driver, b) = logged_in_browser(&base).await;
        // its edges are bounded too: the first 1,000 drawn, and the page says so
        b.goto(&format!("{base}/workflows/{dense}")).await.unwrap();
        assert_eq!(b.find_all(Locator::Css("#graph a.node")).await.unwrap().len(), 80);
        assert_eq!(b.find_all(Locator::Css("#graph line.edge")).await.unwrap().len(), 1000);
        let shown = text(&b, "#shown").await;
        assert!(shown.starts_with("80 jobs; 1000 edges (the first 1000 drawn"), "{shown}");
        b.goto(&format!("{base}/jobs/{d}")).await.unwrap();
        click(&b, "graph").await;
        b.wait().for_element(Locator::Css("#graph svg.graph")).await.unwrap();
        let mut nodes = Vec::new();
        for node in b.find_all(Locator::Css("#graph a.node")).await.unwrap() {
            let id = node.attr("data-id").await.unwrap().unwrap();
            let status = node.attr("data-status").await.unwrap().unwrap();
            let depth = node.attr("data-depth").await.unwrap().unwrap();
            let href = node.attr("href").await.unwrap().unwrap();
            let class = node.find(Locator::Css("rect")).await.unwrap().attr("class").await.unwrap().unwrap();
            let shown = node.find(Locator::Css("text.status")).await.unwrap().text().await.unwrap();
            assert_eq!(href, format!("/jobs/{id}"));
            assert_eq!(class, format!("status-{status}"));
            assert_eq!(shown, status, "the status in text");
            nodes.push((id, status, depth));
        }
        nodes.sort();
        let mut want = vec![
            (a.clone(), "success".to_string(), "0".to_string()),
            (bb.clone(), "queued".into(), "1".into()),
            (cc.clone(), "queued".into(), "1".into()),
            (d.clone(), "blocked".into(), "2".into()),
        ];
        want.sort();
        assert_eq!(nodes, want);
        assert_eq!(b.find_all(Locator::Css("#graph line.edge")).await.unwrap().len(), 4);
        assert!(text(&b, "#shown").await.starts_with("4 jobs;"));
        guide_screenshot(&b, "workflow").await;
        // a node is a link to its job
        b.find(Locator::Css(&format!("#graph a.node[data-id='{bb}']"))).await.unwrap().click().await.unwrap();
        b.wait().for_element(Locator::Id("status")).await.unwrap();
        assert!(b.current_url().await.unwrap().path().ends_with(&bb));

        // bounded: the first 200 of 251, and how many more
        b.goto(&format!("{base}/workflows/{big}")).await.unwrap();
        assert_eq!(b.find_all(Locator::Css("#graph a.node")).await.unwrap().len(), 200);
        let shown = text(&b, "#shown").await;
        assert!(shown.contains("the first 200 shown: 51 more not drawn"), "{shown}");
        assert_eq!(b.find_all(Locator::Css(&format!("#graph a.node[data-id='{big}']"))).await.unwrap().len(), 1, "the parent, oldest, is drawn");
        // the workflows page links to the graphs
        b.goto(&format!("{base}/workflows")).await.unwrap();
        assert!(!b.find_all(Locator::Css("#workflows a.graph")).await.unwrap().is_empty());
        screenshot(&b, "workflows-with-graph-links").await;
        b.close().await.unwrap();
    });
}
