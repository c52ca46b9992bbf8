//! Worker processes killed or stopped mid-work (examples/test_worker.rs, an
//! OS process of its own): a worker SIGKILLed mid-job loses its lease and
//! another finishes the job, the dead attempt's completion refused by
//! fencing; a worker SIGTERMed with jobs in hand stops claiming, completes
//! what finished, hands back the rest within its deadline, and a second
//! worker finishes them: none lost, none doubled.

mod common;

use raquel_pg::{enqueue, EnqueueOptions, Job, Worker};
use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, BufReader, Lines};
use tokio::process::{Child, ChildStdout, Command};
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

/// examples/test_worker, which `cargo test` builds next to the tests.
fn test_worker() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let path = exe.parent().and_then(|deps| deps.parent()).unwrap().join("examples/test_worker");
    assert!(path.exists(), "{} is missing: cargo test builds the examples", path.display());
    path
}

fn spawn_worker(dsn: &str, queue: &str, lease: &str, concurrency: &str, shutdown: &str) -> (Child, Lines<BufReader<ChildStdout>>) {
    let mut child = Command::new(test_worker())
        .args([dsn, queue, lease, concurrency, shutdown])
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("starting examples/test_worker");
    let lines = BufReader::new(child.stdout.take().unwrap()).lines();
    (child, lines)
}

/// The next `started <id> <attempt>` line, within 20 s.
async fn next_start(lines: &mut Lines<BufReader<ChildStdout>>) -> (Uuid, i32) {
    let line = tokio::time::timeout(Duration::from_secs(20), lines.next_line())
        .await
        .expect("the worker process started a job within 20 s")
        .unwrap()
        .expect("the worker process's output ended");
    let words: Vec<&str> = line.split(' ').collect();
    assert_eq!(words[0], "started", "{line}");
    (words[1].parse().unwrap(), words[2].parse().unwrap())
}

/// A worker in this process that handles every job of `queue` at once,
/// recording it in `handled` as the process does, until `stop`.
fn finisher(dsn: &str, queue: &str, stop: CancellationToken) -> tokio::task::JoinHandle<Result<raquel_pg::Stats, raquel_pg::Error>> {
    let worker = Worker::new(dsn).name("finisher").concurrency(4).claim_wait(Duration::from_millis(500)).handle(queue, |job: Job| async move {
        job.client().execute("INSERT INTO handled VALUES ($1, $2, 0)", &[&job.id(), &job.attempt()]).await?;
        Ok(())
    });
    tokio::spawn(worker.run_until(async move { stop.cancelled().await }))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_killed_mid_job_loses_it_to_another_and_is_fenced_out() {
    let dsn = common::database("processes");
    let client = common::connect(&dsn).await;
    let options = EnqueueOptions::new().retry_delays(Duration::ZERO, Duration::ZERO).backoff_base(Duration::ZERO);
    let job = enqueue(&client, "killed", "hang", &options).await.unwrap();
    // a one-second lease, extended while the process lives
    let (mut child, mut lines) = spawn_worker(&dsn, "killed", "1", "1", "5");
    let (id, attempt) = next_start(&mut lines).await;
    assert_eq!((id, attempt), (job.id, 1));
    // still its job two leases later: the process extends it
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let row = client.query_one("SELECT status, attempts FROM jobs WHERE id = $1", &[&id]).await.unwrap();
    assert_eq!((row.get::<_, String>(0), row.get::<_, i32>(1)), ("claimed".into(), 1), "extended while alive");

    child.start_kill().unwrap(); // SIGKILL
    child.wait().await.unwrap();
    let stop = CancellationToken::new();
    let finishing = finisher(&dsn, "killed", stop.clone());
    common::wait_until(Duration::from_secs(20), "another worker completed the killed worker's job", || {
        let client = &client;
        async move { common::status(client, id).await == "success" }
    })
    .await;
    stop.cancel();
    let stats = finishing.await.unwrap().unwrap();
    assert_eq!(stats.completed, 1);
    let row = client.query_one("SELECT attempts FROM jobs WHERE id = $1", &[&id]).await.unwrap();
    assert_eq!(row.get::<_, i32>(0), 2, "rescued once, then done");
    let error: Option<String> =
        client.query_one("SELECT error FROM rq_history($1) WHERE attempt = 1", &[&id]).await.unwrap().get(0);
    assert!(error.unwrap_or_default().contains("lease expired"), "the first attempt ended by its lease");
    // the dead attempt's completion, had it come, is refused: fencing
    let refused = client.query_one("SELECT 1 FROM rq_complete($1, $2)", &[&id, &attempt]).await.unwrap_err();
    assert_eq!(refused.code().map(|c| c.code()), Some("55000"), "{refused}");
    let handled: i64 = client.query_one("SELECT count(*) FROM handled WHERE job_id = $1", &[&id]).await.unwrap().get(0);
    assert_eq!(handled, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_during_a_batch_completes_the_finished_hands_back_the_rest() {
    let dsn = common::database("processes");
    let client = common::connect(&dsn).await;
    // Claimed first (priority): two that outlast the deadline, two that
    // finish within it; then twenty quick ones.
    let mut ids = Vec::new();
    for (payload, priority) in [("slow", 10), ("slow", 10), ("mid", 5), ("mid", 5)] {
        ids.push(enqueue(&client, "termed", payload, &EnqueueOptions::new().priority(priority)).await.unwrap().id);
    }
    let slow = [ids[0], ids[1]];
    for _ in 0..20 {
        ids.push(enqueue(&client, "termed", "quick", &EnqueueOptions::new()).await.unwrap().id);
    }
    let (mut child, mut lines) = spawn_worker(&dsn, "termed", "30", "4", "3");
    let mut in_hand = Vec::new();
    for _ in 0..4 {
        in_hand.push(next_start(&mut lines).await.0);
    }
    assert!(slow.iter().all(|id| in_hand.contains(id)), "the slow jobs are in hand");
    let termed = Instant::now();
    let pid = child.id().unwrap() as i32;
    assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
    let status = tokio::time::timeout(Duration::from_secs(15), child.wait()).await.expect("exited after SIGTERM").unwrap();
    let took = termed.elapsed();
    assert!(status.success(), "the worker exited {status}");
    // the 3 s deadline, then the hand-back: well within 10 s
    assert!(took >= Duration::from_secs(2) && took < Duration::from_secs(10), "stopped after {took:?}");
    let mut rest = String::new();
    while let Some(line) = lines.next_line().await.unwrap() {
        rest = line;
    }
    let counts: Vec<u64> = rest.strip_prefix("stats ").expect(&rest).split(' ').map(|n| n.parse().unwrap()).collect();
    let (claimed, completed, handed_back) = (counts[0], counts[1], counts[2]);
    assert_eq!(handed_back, 2, "the two slow jobs handed back");
    assert_eq!(claimed, completed + handed_back, "every job it claimed was completed or handed back");
    for id in slow {
        let row = client.query_one("SELECT status, claimed_by FROM jobs WHERE id = $1", &[&id]).await.unwrap();
        assert_eq!(row.get::<_, String>(0), "queued", "handed back at once");
    }
    // it stopped claiming: no job is left claimed by it
    let claimed_now: i64 =
        client.query_one("SELECT count(*) FROM jobs WHERE queue = 'termed' AND status = 'claimed'", &[]).await.unwrap().get(0);
    assert_eq!(claimed_now, 0);

    let stop = CancellationToken::new();
    let finishing = finisher(&dsn, "termed", stop.clone());
    common::wait_until(Duration::from_secs(30), "the second worker finished the rest", || {
        let client = &client;
        async move {
            let done: i64 = client
                .query_one("SELECT count(*) FROM jobs WHERE queue = 'termed' AND status = 'success'", &[])
                .await
                .unwrap()
                .get(0);
            done == 24
        }
    })
    .await;
    stop.cancel();
    let second = finishing.await.unwrap().unwrap();
    assert_eq!(second.completed + completed, 24, "first {completed} + second {}", second.completed);
    // none lost, none doubled: each job handled (its work recorded) exactly once
    let rows = client
        .query("SELECT j.id, count(h.job_id) FROM jobs j LEFT JOIN handled h ON h.job_id = j.id WHERE j.queue = 'termed' GROUP BY j.id", &[])
        .await
        .unwrap();
    assert_eq!(rows.len(), 24);
    for row in rows {
        assert_eq!(row.get::<_, i64>(1), 1, "job {} handled {} times", row.get::<_, Uuid>(0), row.get::<_, i64>(1));
    }
}
