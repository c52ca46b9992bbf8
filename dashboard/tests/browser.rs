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
        for path in [format!("/jobs/{id}/retry"), "/queues/mail/pause".to_string()] {
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
        let page = get(&format!("{base}/jobs/{id}/retry")).await;
        let cookie = page.headers()["set-cookie"].to_str().unwrap().split(';').next().unwrap().to_string();
        let body = page.text().await.unwrap();
        let token = body.split("name=\"csrf\" value=\"").nth(1).unwrap().split('"').next().unwrap().to_string();
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
        let dashboard = Dashboard::on(&db).user(role).start();
        let base = dashboard.base.clone();
        runtime().block_on(async {
            for path in ["/", "/jobs", &format!("/jobs/{id}"), "/schedules", "/workflows"] {
                let response = get(&format!("{base}{path}")).await;
                assert_eq!(response.status(), 200, "{role}: {path}");
                let body = response.text().await.unwrap();
                if !whole && (path == "/schedules" || path == "/") {
                    assert!(body.contains("class=\"note\""), "{role} is told what it may not see on {path}");
                }
            }
            if whole {
                let (_driver, b) = logged_in_browser(&base).await;
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
