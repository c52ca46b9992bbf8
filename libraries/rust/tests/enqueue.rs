//! Enqueueing through the library: alone, inside a caller's transaction
//! (rolled back: no job; committed: the job), with options, and in batches.

mod common;

use raquel_pg::{enqueue, enqueue_batch, EnqueueOptions, Payload};
use serde_json::json;
use std::time::Duration;

#[tokio::test]
async fn enqueue_alone_with_options() {
    let dsn = common::database("enqueue");
    let client = common::connect(&dsn).await;
    let job = enqueue(&client, "alone", "hello", &EnqueueOptions::new().priority(7).max_retries(2)).await.unwrap();
    assert_eq!((job.queue.as_str(), job.status.as_str(), job.priority), ("alone", "queued", 7));
    assert_eq!(job.payload.as_deref(), Some("hello"));
    // another connection sees it: it committed
    let other = common::connect(&dsn).await;
    let row = other
        .query_one("SELECT payload, priority, max_retry_count FROM jobs WHERE id = $1", &[&job.id])
        .await
        .unwrap();
    assert_eq!((row.get::<_, String>(0), row.get::<_, i32>(1), row.get::<_, Option<i32>>(2)), ("hello".into(), 7, Some(2)));

    // a delay puts it in the future; JSON goes as jsonb (stored as text)
    let later = enqueue(&client, "alone", json!({"n": 1}), &EnqueueOptions::new().delay(Duration::from_secs(3600)))
        .await
        .unwrap();
    let ahead: bool = other
        .query_one("SELECT scheduled_at > rq_now_ms() + 3500000 FROM jobs WHERE id = $1", &[&later.id])
        .await
        .unwrap()
        .get(0);
    assert!(ahead, "the delayed job is due in an hour");
    assert_eq!(serde_json::from_str::<serde_json::Value>(later.payload.as_deref().unwrap()).unwrap(), json!({"n": 1}));

    // a key deduplicates while the job is unfinished
    let first = enqueue(&client, "alone", "a", &EnqueueOptions::new().key("k-1")).await.unwrap();
    let again = enqueue(&client, "alone", "b", &EnqueueOptions::new().key("k-1")).await.unwrap();
    assert_eq!(first.id, again.id);

    // a refusal comes back as an error with the server's SQLSTATE
    let refused = enqueue(&client, "alone", Payload::None, &EnqueueOptions::new().max_retries(-1)).await.unwrap_err();
    assert!(refused.sqlstate().is_some(), "{refused}");
    assert!(refused.to_string().contains("rq_enqueue into alone"), "{refused}");
}

#[tokio::test]
async fn enqueue_in_a_transaction_that_rolls_back_makes_no_job() {
    let dsn = common::database("enqueue");
    let mut client = common::connect(&dsn).await;
    let other = common::connect(&dsn).await;
    let count = |queue: &'static str| {
        let other = &other;
        async move { other.query_one("SELECT count(*) FROM jobs WHERE queue = $1", &[&queue]).await.unwrap().get::<_, i64>(0) }
    };

    let tx = client.transaction().await.unwrap();
    let job = enqueue(&tx, "in-tx", "rolled back", &EnqueueOptions::new()).await.unwrap();
    enqueue_batch(&tx, "in-tx", vec!["x".into(), "y".into()], None, &EnqueueOptions::new()).await.unwrap();
    // not visible to another session before the commit
    assert_eq!(count("in-tx").await, 0);
    tx.rollback().await.unwrap();
    assert_eq!(count("in-tx").await, 0);
    let gone = other.query_opt("SELECT 1 FROM jobs WHERE id = $1", &[&job.id]).await.unwrap();
    assert!(gone.is_none(), "the rolled-back job exists");

    let tx = client.transaction().await.unwrap();
    enqueue(&tx, "in-tx", "committed", &EnqueueOptions::new()).await.unwrap();
    tx.commit().await.unwrap();
    assert_eq!(count("in-tx").await, 1);
}

#[tokio::test]
async fn enqueue_batch_text_json_and_keys() {
    let dsn = common::database("enqueue");
    let client = common::connect(&dsn).await;
    let jobs = enqueue_batch(
        &client,
        "batch",
        vec!["a".into(), "b".into(), Payload::None],
        Some(vec![Some("ka".into()), Some("ka".into()), None]),
        &EnqueueOptions::new().priority(3),
    )
    .await
    .unwrap();
    // "ka" twice in the batch makes one job (the first payload's), so two rows
    assert_eq!(jobs.len(), 2);
    assert_ne!(jobs[0].id, jobs[1].id);
    assert_eq!(jobs[0].payload.as_deref(), Some("a"));
    assert!(jobs.iter().all(|j| j.priority == 3));
    let json = enqueue_batch(&client, "batch-json", vec![json!({"i": 1}).into(), json!({"i": 2}).into()], None, &EnqueueOptions::new())
        .await
        .unwrap();
    assert_eq!(json.len(), 2);
    let count: i64 = client.query_one("SELECT count(*) FROM jobs WHERE queue LIKE 'batch%'", &[]).await.unwrap().get(0);
    assert_eq!(count, 4);
    let misuse = enqueue_batch(&client, "batch", vec!["c".into()], None, &EnqueueOptions::new().key("k")).await.unwrap_err();
    assert!(misuse.to_string().contains("keys"), "{misuse}");
}
