//! The worker runtime against the real server, in this process: draining
//! with concurrency across two workers (each job handled exactly once), a
//! failure recorded with its error and trace, lease extension, the bound on
//! a batched completion's wait, and the durable context.

mod common;

use raquel_pg::{enqueue, enqueue_batch, EnqueueOptions, HandlerError, Job, Outcome, Payload, Worker};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_workers_drain_every_job_exactly_once() {
    let dsn = common::database("worker");
    let client = common::connect(&dsn).await;
    const N: usize = 600;
    let payloads: Vec<Payload> = (0..N).map(|i| Payload::Text(i.to_string())).collect();
    enqueue_batch(&client, "drain", payloads, None, &EnqueueOptions::new()).await.unwrap();

    let seen: Arc<Mutex<HashMap<String, usize>>> = Arc::new(Mutex::new(HashMap::new()));
    let (total, around_calls) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let all_done = CancellationToken::new();
    let mut runs = Vec::new();
    for w in 0..2 {
        let (seen, total, around_calls, all_done) = (seen.clone(), total.clone(), around_calls.clone(), all_done.clone());
        let stop = all_done.clone();
        let worker = Worker::new(dsn.clone())
            .name(format!("drain-{w}"))
            .concurrency(4)
            // the second worker with a local queue of claimed jobs
            .prefetch(if w == 1 { 8 } else { 0 })
            .claim_wait(Duration::from_millis(500))
            .around(move |_info, run| {
                let around_calls = around_calls.clone();
                async move {
                    let outcome = run.await;
                    assert_eq!(outcome, Outcome::Completed);
                    around_calls.fetch_add(1, Ordering::SeqCst);
                    outcome
                }
            })
            .handle("drain", move |job: Job| {
                let (seen, total, all_done) = (seen.clone(), total.clone(), all_done.clone());
                async move {
                    *seen.lock().unwrap().entry(job.payload().unwrap().to_string()).or_insert(0) += 1;
                    // a little work, so that the jobs overlap
                    tokio::time::sleep(Duration::from_millis(2)).await;
                    if total.fetch_add(1, Ordering::SeqCst) + 1 == N {
                        all_done.cancel();
                    }
                    Ok(())
                }
            });
        runs.push(tokio::spawn(async move { worker.run_until(async move { stop.cancelled().await }).await }));
    }
    let limit = tokio::time::timeout(Duration::from_secs(60), all_done.cancelled()).await;
    assert!(limit.is_ok(), "only {} of {N} jobs handled in 60 s", total.load(Ordering::SeqCst));
    let mut claimed = 0;
    let mut completed = 0;
    for run in runs {
        let stats = run.await.unwrap().unwrap();
        assert_eq!(stats.refused, 0);
        claimed += stats.claimed;
        completed += stats.completed;
    }
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), N, "every job handled");
    let doubled: Vec<_> = seen.iter().filter(|(_, &count)| count != 1).collect();
    assert!(doubled.is_empty(), "handled more than once: {doubled:?}");
    assert_eq!((claimed, completed), (N as u64, N as u64));
    assert_eq!(around_calls.load(Ordering::SeqCst), N, "the hook ran around every job");
    let row = client
        .query_one("SELECT count(*) FILTER (WHERE status = 'success'), count(*) FILTER (WHERE attempts = 1) FROM jobs WHERE queue = 'drain'", &[])
        .await
        .unwrap();
    assert_eq!((row.get::<_, i64>(0), row.get::<_, i64>(1)), (N as i64, N as i64), "all succeeded, on their first attempt");
}

/// An error with a cause, as a handler's errors often are.
#[derive(Debug)]
struct ReportFailed(std::io::Error);
impl std::fmt::Display for ReportFailed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("could not write the report")
    }
}
impl std::error::Error for ReportFailed {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.0)
    }
}

#[tokio::test]
async fn a_failure_is_recorded_with_its_error_and_trace() {
    let dsn = common::database("worker");
    let client = common::connect(&dsn).await;
    let once = EnqueueOptions::new().max_retries(0);
    let failing = enqueue(&client, "failing", "error", &once).await.unwrap();
    let panicking = enqueue(&client, "failing", "panic", &once).await.unwrap();
    let stop = CancellationToken::new();
    let worker = Worker::new(dsn.clone()).concurrency(2).claim_wait(Duration::from_millis(500)).handle("failing", |job: Job| async move {
        if job.payload() == Some("panic") {
            panic!("the handler gave up");
        }
        let cause = std::io::Error::new(std::io::ErrorKind::Other, "disk on fire");
        Err::<(), HandlerError>(Box::new(ReportFailed(cause)))
    });
    let stopping = stop.clone();
    let run = tokio::spawn(worker.run_until(async move { stopping.cancelled().await }));
    for id in [failing.id, panicking.id] {
        common::wait_until(Duration::from_secs(20), "the failing job exhausted", || {
            let client = &client;
            async move { common::status(client, id).await == "exhausted" }
        })
        .await;
    }
    stop.cancel();
    let stats = run.await.unwrap().unwrap();
    assert_eq!((stats.failed, stats.completed), (2, 0));
    let row = client.query_one("SELECT error, error_trace FROM jobs WHERE id = $1", &[&failing.id]).await.unwrap();
    let (error, trace): (String, String) = (row.get(0), row.get(1));
    assert_eq!(error, "could not write the report");
    // the trace: the error's Debug form and its chain of causes
    assert!(trace.starts_with("ReportFailed(") && trace.contains("\ncaused by: disk on fire"), "trace: {trace}");
    let row = client.query_one("SELECT error, error_trace FROM jobs WHERE id = $1", &[&panicking.id]).await.unwrap();
    let (error, trace): (String, String) = (row.get(0), row.get(1));
    assert_eq!(error, "the handler panicked: the handler gave up");
    assert!(trace.contains("failing"), "trace: {trace}");
}

#[tokio::test]
async fn lease_extension_keeps_a_slow_job_from_being_rescued() {
    let dsn = common::database("worker");
    let client = common::connect(&dsn).await;
    let slow = enqueue(&client, "slow", "x", &EnqueueOptions::new()).await.unwrap();
    let stop = CancellationToken::new();
    let runs = Arc::new(AtomicUsize::new(0));
    let handler_runs = runs.clone();
    // a one-second lease and a handler of four: without the extension the
    // launcher (raquel.worker_interval, 1 s) rescues it
    let worker = Worker::new(dsn.clone()).lease(Duration::from_secs(1)).concurrency(2).handle("slow", move |_job: Job| {
        let runs = handler_runs.clone();
        async move {
            runs.fetch_add(1, Ordering::SeqCst);
            tokio::time::sleep(Duration::from_secs(4)).await;
            Ok(())
        }
    });
    let stopping = stop.clone();
    let run = tokio::spawn(worker.run_until(async move { stopping.cancelled().await }));
    common::wait_until(Duration::from_secs(20), "the slow job succeeded", || {
        let client = &client;
        async move { common::status(client, slow.id).await == "success" }
    })
    .await;
    stop.cancel();
    let stats = run.await.unwrap().unwrap();
    assert_eq!((stats.completed, stats.refused), (1, 0));
    assert_eq!(runs.load(Ordering::SeqCst), 1, "the handler ran once");
    let attempts: i32 = client.query_one("SELECT attempts FROM jobs WHERE id = $1", &[&slow.id]).await.unwrap().get(0);
    assert_eq!(attempts, 1, "never rescued");
}

#[tokio::test]
async fn a_completion_waits_no_longer_than_its_bound() {
    let dsn = common::database("worker");
    let client = common::connect(&dsn).await;
    let stop = CancellationToken::new();
    let ended: Arc<Mutex<Option<Instant>>> = Arc::new(Mutex::new(None));
    let handler_ended = ended.clone();
    // The claim waits 20 s: after the job is claimed, the loop's next claim
    // waits (a slot is free) while the handler still runs, so only the
    // flusher, after completion_delay, can send the completion.
    let worker = Worker::new(dsn.clone())
        .concurrency(2)
        .claim_wait(Duration::from_secs(20))
        .completion_delay(Duration::from_millis(100))
        .handle("bounded", move |_job: Job| {
            let ended = handler_ended.clone();
            async move {
                tokio::time::sleep(Duration::from_millis(500)).await;
                *ended.lock().unwrap() = Some(Instant::now());
                Ok(json!({"done": true}))
            }
        });
    let stopping = stop.clone();
    let run = tokio::spawn(worker.run_until(async move { stopping.cancelled().await }));
    tokio::time::sleep(Duration::from_millis(300)).await;
    let job = enqueue(&client, "bounded", "x", &EnqueueOptions::new()).await.unwrap();
    common::wait_until(Duration::from_secs(5), "the handler ran", || {
        let ended = ended.clone();
        async move { ended.lock().unwrap().is_some() }
    })
    .await;
    common::wait_until(Duration::from_secs(5), "the job completed", || {
        let client = &client;
        async move { common::status(client, job.id).await == "success" }
    })
    .await;
    let waited = ended.lock().unwrap().unwrap().elapsed();
    // 100 ms bound, measured from here with polls of 20 ms: a second is generous,
    // and far below the 20 s the claim waits
    assert!(waited < Duration::from_secs(1), "the completion took {waited:?}");
    let result: Value = client.query_one("SELECT result FROM jobs WHERE id = $1", &[&job.id]).await.unwrap().get(0);
    assert_eq!(result, json!({"done": true}));
    let started = Instant::now();
    stop.cancel();
    run.await.unwrap().unwrap();
    // the waiting claim is cancelled at shutdown, not waited out
    assert!(started.elapsed() < Duration::from_secs(5), "shutdown took {:?}", started.elapsed());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_durable_context_steps_sleeps_waits_and_awaits() {
    let dsn = common::database("worker");
    let client = common::connect(&dsn).await;
    let computed = Arc::new(AtomicUsize::new(0));
    let step_runs = computed.clone();
    let stop = CancellationToken::new();
    let worker = Worker::new(dsn.clone())
        .concurrency(4)
        .claim_wait(Duration::from_secs(1))
        .handle("orders", move |job: Job| {
            let step_runs = step_runs.clone();
            async move {
                let n: i32 = job
                    .step("count", || async {
                        step_runs.fetch_add(1, Ordering::SeqCst);
                        Ok(41)
                    })
                    .await?;
                job.sleep("nap", Duration::from_millis(1500)).await?;
                let paid = job.wait_event("pay", &format!("paid:{}", job.id()), Some(Duration::from_secs(60))).await?;
                let child: uuid::Uuid =
                    job.step("child", || async { Ok(job.enqueue("packing", "box", &EnqueueOptions::new()).await?.id) }).await?;
                let end = job.await_job(child).await?;
                Ok(json!({"n": n + 1, "paid": paid, "child": end.result, "status": end.status}))
            }
        })
        .handle("packing", |_job: Job| async move { Ok(json!({"box": "B-7"})) });
    let stopping = stop.clone();
    let run = tokio::spawn(worker.run_until(async move { stopping.cancelled().await }));
    let started = Instant::now();
    let order = enqueue(&client, "orders", "order 7", &EnqueueOptions::new()).await.unwrap();
    // parked for the event once the sleep is over
    common::wait_until(Duration::from_secs(20), "the job waits for its event", || {
        let client = &client;
        async move {
            client
                .query_one("SELECT coalesce((SELECT waiting_for_event FROM rq_stats() WHERE queue = 'orders'), 0) > 0", &[])
                .await
                .unwrap()
                .get::<_, bool>(0)
        }
    })
    .await;
    assert!(started.elapsed() >= Duration::from_millis(1500), "the sleep lasted {:?}", started.elapsed());
    assert_ne!(common::status(&client, order.id).await, "success");
    let other = common::connect(&dsn).await;
    raquel_pg::emit(&other, &format!("paid:{}", order.id), Some(json!({"amount": 10})), None).await.unwrap();
    common::wait_until(Duration::from_secs(20), "the order completed", || {
        let client = &client;
        async move { common::status(client, order.id).await == "success" }
    })
    .await;
    stop.cancel();
    let stats = run.await.unwrap().unwrap();
    let row = client.query_one("SELECT result, attempts FROM jobs WHERE id = $1", &[&order.id]).await.unwrap();
    let (result, attempts): (Value, i32) = (row.get(0), row.get(1));
    assert_eq!(result, json!({"n": 42, "paid": {"amount": 10}, "child": {"box": "B-7"}, "status": "success"}));
    // the sleep, the event and the child each ended an attempt and began another
    assert!(attempts >= 4, "attempts {attempts}");
    assert_eq!(computed.load(Ordering::SeqCst), 1, "the step ran once across {attempts} attempts");
    assert!(stats.parked >= 3, "{stats:?}");
    assert_eq!(stats.failed, 0, "{stats:?}");
}

#[tokio::test]
async fn a_worker_without_handlers_is_refused_clearly() {
    let error = Worker::new(common::database("worker")).run_until(async {}).await.unwrap_err();
    assert!(error.to_string().contains("no handler"), "{error}");
}

#[tokio::test]
async fn prefetched_jobs_wait_for_a_slot_and_are_handed_back_at_shutdown() {
    let dsn = common::database("worker");
    let client = common::connect(&dsn).await;
    for _ in 0..4 {
        enqueue(&client, "prefetched", "x", &EnqueueOptions::new()).await.unwrap();
    }
    let running = Arc::new(AtomicUsize::new(0));
    let (handler_running, most) = (running.clone(), Arc::new(AtomicUsize::new(0)));
    let handler_most = most.clone();
    let stop = CancellationToken::new();
    let worker = Worker::new(dsn.clone()).concurrency(1).prefetch(3).shutdown_timeout(Duration::from_secs(10)).handle(
        "prefetched",
        move |_job: Job| {
            let (running, most) = (handler_running.clone(), handler_most.clone());
            async move {
                most.fetch_max(running.fetch_add(1, Ordering::SeqCst) + 1, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(1500)).await;
                running.fetch_sub(1, Ordering::SeqCst);
                Ok(())
            }
        },
    );
    let stopping = stop.clone();
    let run = tokio::spawn(worker.run_until(async move { stopping.cancelled().await }));
    // all four claimed in one go: one running, three waiting in the process
    common::wait_until(Duration::from_secs(10), "four jobs claimed", || {
        let client = &client;
        async move {
            client
                .query_one("SELECT count(*) = 4 FROM jobs WHERE queue = 'prefetched' AND status = 'claimed'", &[])
                .await
                .unwrap()
                .get::<_, bool>(0)
        }
    })
    .await;
    stop.cancel();
    let stats = run.await.unwrap().unwrap();
    assert_eq!((stats.claimed, stats.completed, stats.handed_back), (4, 1, 3), "{stats:?}");
    assert_eq!(most.load(Ordering::SeqCst), 1, "never more than the concurrency at once");
    let row = client
        .query_one(
            "SELECT count(*) FILTER (WHERE status = 'success'), count(*) FILTER (WHERE status = 'queued') FROM jobs WHERE queue = 'prefetched'",
            &[],
        )
        .await
        .unwrap();
    assert_eq!((row.get::<_, i64>(0), row.get::<_, i64>(1)), (1, 3));
}

#[tokio::test]
async fn a_lost_claim_connection_ends_run_with_an_error() {
    let dsn = common::database("worker");
    let client = common::connect(&dsn).await;
    // named, so that only this worker's connection is terminated (other
    // tests' workers share the database)
    let named = format!("{dsn} application_name=rs-lost-claim");
    let worker = Worker::new(named).claim_wait(Duration::from_secs(30)).handle("lost", |_job: Job| async move { Ok(()) });
    let run = tokio::spawn(worker.run_until(std::future::pending()));
    let terminated = || {
        let client = &client;
        async move {
            client
                .query_one(
                    "SELECT count(pg_terminate_backend(pid)) > 0 FROM pg_stat_activity WHERE application_name = 'rs-lost-claim' \
                     AND query LIKE '%rq_complete_batch_and_claim%'",
                    &[],
                )
                .await
                .unwrap()
                .get::<_, bool>(0)
        }
    };
    common::wait_until(Duration::from_secs(10), "the worker's waiting claim terminated", terminated).await;
    let ended = tokio::time::timeout(Duration::from_secs(10), run).await.expect("run ended within 10 s").unwrap();
    let error = ended.unwrap_err();
    assert!(matches!(error, raquel_pg::Error::Closed("claim")), "{error}");
}
