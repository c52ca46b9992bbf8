//! What the database holds does not decide what a page costs: every page
//! stays under PAGE_BOUND bytes with many queues, a day of metrics, huge
//! values and long lists, and paging through the queues shows each once. A
//! burst of requests takes no more database connections than the pool
//! holds, and one that waits too long for a connection is told to come back.
//!
//! RAQUEL_DASHBOARD_QUEUES sets how many queues (300 here, in CI; 10010 for a
//! release, docs/src/guides/dashboard.md).

mod common;

use common::*;
use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

/// The most bytes any page may have. The largest is a job's page whose
/// payload, error, trace and worker name each hold a megabyte of characters
/// that HTML escapes six bytes each: 4 × 65,536 characters shown × 6 bytes,
/// and 100 earlier attempts of such characters: 100 × (2 × 250 + 2 × 100)
/// characters shown × 6 bytes.
const PAGE_BOUND: usize = 2 << 20;

/// Characters each escaped into the most bytes (`&lt;`, `&#34;`, …).
const WORST: &str = "<\"&'/";

fn queues() -> usize {
    std::env::var("RAQUEL_DASHBOARD_QUEUES").ok().and_then(|n| n.parse().ok()).unwrap_or(300)
}

/// The queues of a page's table, in its order (`<tr data-queue="…">`; the
/// names here need no unescaping).
fn page_queues(body: &str) -> Vec<String> {
    body.split("<tr data-queue=\"").skip(1).map(|s| s.split('"').next().unwrap().to_string()).collect()
}

/// The address a link with id `id` points to, if the page has one.
fn link(body: &str, id: &str) -> Option<String> {
    let at = body.find(&format!("id=\"{id}\" href=\""))?;
    let href = body[at..].split("href=\"").nth(1)?.split('"').next()?;
    Some(href.replace("&amp;", "&"))
}

async fn bounded_page(base: &str, path: &str) -> String {
    let response = get(&format!("{base}{path}")).await;
    assert_eq!(response.status(), 200, "{path}");
    let body = response.text().await.unwrap();
    assert!(body.len() <= PAGE_BOUND, "{path} is {} bytes, more than {PAGE_BOUND}", body.len());
    body
}

#[test]
fn every_page_stays_bounded_and_the_queues_page_through_once_each() {
    let n = queues();
    let db = "rq_dashboard_limits";
    let mut c = fresh_db(db);
    // n queues of a job each, and three that only have flow settings
    c.execute(
        "INSERT INTO jobs (queue, payload) SELECT 'q' || lpad(i::text, 5, '0'), 'p' FROM generate_series(1, $1::int) i",
        &[&(n as i32)],
    )
    .unwrap();
    c.batch_execute("SELECT rq_pause('zz-paused-' || i) FROM generate_series(1, 3) i").unwrap();
    // metrics: a minute for every queue, and for the first page's queues as
    // many points as the charts draw: every minute of the last hour, and a
    // minute in each 15 of the rest of the day (the day view's buckets; a
    // bucket's other minutes would add rows, not bytes)
    c.batch_execute(
        "INSERT INTO metrics (queue, minute, enqueued, succeeded, failed, wait_histogram)
         SELECT q.queue, m.minute, 7, 5, 1, (SELECT array_agg(CASE WHEN b = 40 THEN 5 ELSE 0 END) FROM generate_series(1, 161) b)
         FROM (SELECT DISTINCT queue FROM jobs) q
         CROSS JOIN LATERAL (SELECT (rq_now_ms() / 60000 - s) * 60000 AS minute
                             FROM generate_series(0, CASE WHEN q.queue <= 'q00050' THEN 1439 ELSE 0 END) s
                             WHERE s < 60 OR s % 15 = 0) m
         ON CONFLICT DO NOTHING",
    )
    .unwrap();
    // a job with a megabyte in each unbounded text column, and the 100
    // earlier attempts past_attempts keeps, each with 10,000 characters in
    // its worker, outcome, error and trace
    let big = WORST.repeat((1 << 20) / WORST.len());
    let ten_k = WORST.repeat(10_000 / WORST.len());
    let huge: String = c
        .query_one(
            "UPDATE jobs SET payload = $1, error = $1, error_trace = $1, claimed_by = $1,
                 past_attempts = (SELECT jsonb_agg(jsonb_build_object('attempt', i, 'worker', $2::text, 'claimed_at', 0,
                                      'ended_at', 0, 'outcome', $2::text, 'error', $2::text, 'trace', $2::text) ORDER BY i)
                                  FROM generate_series(1, 100) i)
             WHERE id = (SELECT id FROM jobs ORDER BY id LIMIT 1) RETURNING id::text",
            &[&big, &ten_k],
        )
        .unwrap()
        .get(0);
    // 250 schedules, and a parent with 250 children waiting for it
    c.batch_execute("SELECT rq_schedule('s' || lpad(i::text, 3, '0'), '0 3 * * *', 'reports', 'run') FROM generate_series(1, 250) i")
        .unwrap();
    let parent: String = c.query_one("SELECT id::text FROM rq_enqueue('flow', 'parent')", &[]).unwrap().get(0);
    c.execute("SELECT count(rq_enqueue('flow', 'child', after => ARRAY[$1::text::uuid])) FROM generate_series(1, 250)", &[&parent])
        .unwrap();
    let all: Vec<String> = c
        .query("SELECT queue FROM jobs UNION SELECT queue FROM queue_limits ORDER BY 1", &[])
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert!(all.len() > n);

    let dashboard = Dashboard::on(db).start();
    let base = dashboard.base.clone();
    let mut largest: Vec<(usize, String)> = Vec::new();
    runtime().block_on(async {
        // forward through every page of queues, then back
        let mut seen = Vec::new();
        let mut pages = vec!["/".to_string()];
        loop {
            let path = pages.last().unwrap().clone();
            let body = bounded_page(&base, &path).await;
            largest.push((body.len(), path.clone()));
            let names = page_queues(&body);
            assert!(!names.is_empty() && names.len() <= 50, "{path}: {} queues", names.len());
            seen.extend(names);
            match link(&body, "next") {
                Some(next) => pages.push(next),
                None => break,
            }
        }
        let distinct: BTreeSet<&String> = seen.iter().collect();
        assert_eq!(distinct.len(), seen.len(), "a queue shown twice");
        assert_eq!(seen, all, "every queue once, in name order");
        let mut back = Vec::new();
        let mut path = link(&bounded_page(&base, pages.last().unwrap()).await, "previous");
        while let Some(p) = path {
            let body = bounded_page(&base, &p).await;
            back.splice(0..0, page_queues(&body));
            path = link(&body, "previous");
        }
        let last_page = page_queues(&bounded_page(&base, pages.last().unwrap()).await);
        back.extend(last_page);
        assert_eq!(back, all, "the previous links lead back through the same pages");
        // a name prefix
        let prefixed = page_queues(&bounded_page(&base, "/?prefix=q0001").await);
        let want: Vec<&String> = all.iter().filter(|q| q.starts_with("q0001")).take(50).collect();
        assert_eq!(prefixed.iter().collect::<Vec<_>>(), want);

        // every other page
        for path in [
            "/?range=day".to_string(),
            "/?range=day&prefix=q".into(),
            "/jobs".into(),
            "/jobs?status=queued".into(),
            // the filters (src/find.rs): a text that every job holds, a JSON
            // object (the huge payload is no JSON), a queue prefix, a week
            "/jobs?q=p&queue=q&queue_match=prefix&since=week".into(),
            "/jobs?json=%7B%22a%22%3A1%7D".into(),
            format!("/jobs/{huge}"),
            format!("/jobs/{parent}"),
            "/schedules".into(),
            "/workflows".into(),
        ] {
            let body = bounded_page(&base, &path).await;
            largest.push((body.len(), path.clone()));
            if path == format!("/jobs/{huge}") {
                assert_eq!(body.matches("class=\"note cut\"").count(), 3, "payload, error and trace say they were cut");
                assert!(body.contains(&format!("of {} bytes", big.len())), "the full size is shown");
                assert_eq!(body.matches("<td class=\"attempt\">").count(), 100, "every attempt kept");
            }
            if path == format!("/jobs/{parent}") {
                assert_eq!(body.matches("waits for it</li>").count(), 100, "the first 100 children");
            }
            if path.starts_with("/jobs?q=p") {
                assert_eq!(body.matches("<tr data-id=").count(), 100, "a page of the text filter's matches");
            }
            if path == "/?range=day&prefix=q" {
                // q00001 to q00050, each with a day of metrics
                assert_eq!(body.matches("<section class=\"charts\"").count(), 50, "charts for the page's queues only");
            }
        }
        // schedules and workflows page through every row once
        for (first, cell, want) in [("/schedules", "<td class=\"name\">", 250), ("/workflows", "<td class=\"child\">", 250)] {
            let (mut path, mut rows) = (Some(first.to_string()), 0);
            while let Some(p) = path {
                let body = bounded_page(&base, &p).await;
                rows += body.matches(cell).count();
                path = link(&body, "next");
            }
            assert_eq!(rows, want, "{first}");
        }
    });
    largest.sort();
    eprintln!("limits: {n} queues; the largest pages: {:?}", &largest[largest.len().saturating_sub(4)..]);
}

#[test]
fn a_burst_of_requests_takes_no_more_connections_than_the_pool() {
    let db = fill("rq_dashboard_burst");
    // the default pool: 4 connections
    let dashboard = Dashboard::on(&db).start();
    let base = dashboard.base.clone();
    let stop = Arc::new(AtomicBool::new(false));
    let (most, samples, refused) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    // Another client, during the burst: a new connection each time, which
    // counts the dashboard's connections.
    let sampler = {
        let (stop, most, samples, refused, db) = (stop.clone(), most.clone(), samples.clone(), refused.clone(), db.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::SeqCst) {
                match postgres::Client::connect(&format!("{} dbname={db}", server_dsn()), postgres::NoTls) {
                    Ok(mut c) => {
                        let n: i64 = c
                            .query_one(
                                "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'raquel-dashboard' AND datname = $1",
                                &[&db],
                            )
                            .unwrap()
                            .get(0);
                        most.fetch_max(n as usize, Ordering::SeqCst);
                        samples.fetch_add(1, Ordering::SeqCst);
                    }
                    Err(e) => {
                        eprintln!("burst: another client could not connect: {e}");
                        refused.fetch_add(1, Ordering::SeqCst);
                    }
                }
            }
        })
    };
    let answers = runtime().block_on(async {
        let client = http();
        // all at once: each a task of its own
        let requests: Vec<_> = (0..150)
            .map(|i| {
                let path = ["/", "/?range=day", "/jobs", "/schedules", "/workflows"][i % 5];
                tokio::spawn(client.get(format!("{base}{path}")).basic_auth(USER, Some(PASSWORD)).send())
            })
            .collect();
        let mut answers = Vec::new();
        for request in requests {
            answers.push(request.await.unwrap());
        }
        answers
    });
    stop.store(true, Ordering::SeqCst);
    sampler.join().unwrap();
    let mut by_status = std::collections::BTreeMap::new();
    let mut errors = Vec::new();
    for answer in answers {
        match answer {
            Ok(response) => *by_status.entry(response.status().as_u16()).or_insert(0) += 1,
            Err(e) => errors.push(e.to_string()),
        }
    }
    let (most, samples, refused) = (most.load(Ordering::SeqCst), samples.load(Ordering::SeqCst), refused.load(Ordering::SeqCst));
    eprintln!("burst: answers by status {by_status:?}; at most {most} dashboard connections in {samples} samples");
    assert!(errors.is_empty(), "requests with no answer: {errors:?}");
    assert!(by_status.keys().all(|s| *s == 200 || *s == 503), "every request answered 200 or 503: {by_status:?}");
    assert!(by_status.contains_key(&200), "some pages were served: {by_status:?}");
    assert!(samples > 0 && most >= 1, "the other client saw the dashboard's connections ({samples} samples)");
    assert!(most <= 4, "{most} connections, more than the pool's 4");
    assert_eq!(refused, 0, "another client could not connect during the burst");
}

#[test]
fn a_request_that_waits_too_long_for_a_connection_gets_503() {
    let db = fill("rq_dashboard_busy");
    let dashboard = Dashboard::on(&db).arg("--pool-size").arg("1").arg("--pool-wait").arg("1").start();
    let base = dashboard.base.clone();
    // the pool's one connection will wait for this lock
    let (mut locker, mut watcher) = (sql(&db), sql(&db));
    locker.batch_execute("BEGIN; LOCK TABLE jobs IN ACCESS EXCLUSIVE MODE").unwrap();
    runtime().block_on(async {
        let first = tokio::spawn(get_owned(format!("{base}/jobs")));
        // until the dashboard's connection waits for the lock
        loop {
            let waiting: i64 = tokio::task::block_in_place(|| {
                watcher
                    .query_one(
                        "SELECT count(*) FROM pg_stat_activity
                         WHERE application_name = 'raquel-dashboard' AND datname = $1 AND wait_event_type = 'Lock'",
                        &[&db],
                    )
                    .unwrap()
                    .get(0)
            });
            if waiting == 1 {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        let second = get(&format!("{base}/")).await;
        assert_eq!(second.status(), 503);
        assert_eq!(second.headers().get("retry-after").map(|v| v.to_str().unwrap().to_string()).as_deref(), Some("2"));
        assert_eq!(second.headers()["cache-control"], "no-store");
        let body = second.text().await.unwrap();
        assert!(body.contains("All 1 of the dashboard&#x27;s database connections are busy"), "{body}");
        tokio::task::block_in_place(|| locker.batch_execute("COMMIT").unwrap());
        let first = first.await.unwrap();
        assert_eq!(first, 200, "the request that held the connection was served once the lock went");
        assert_eq!(get(&format!("{base}/")).await.status(), 200, "and the next one too");
    });
}

async fn get_owned(url: String) -> u16 {
    get(&url).await.status().as_u16()
}
