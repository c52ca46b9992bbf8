//! Keys under concurrency, notifications, and the row trigger: behaviour that
//! only shows with several real connections and real commits.

use postgres::fallible_iterator::FallibleIterator;
use raquel_client_tests::{connect, fresh_db};
use std::thread;
use std::time::Duration;

/// Session B enqueues payload 'b' with key 'k'; returns once B is (most
/// likely) blocked behind the caller's uncommitted job with that key.
fn enqueue_key_k_in_another_session(db: &str) -> thread::JoinHandle<String> {
    let db = db.to_string();
    let b = thread::spawn(move || {
        let mut b = connect(&db);
        b.query_one("SELECT id::text FROM rq_enqueue('q', 'b', key => 'k')", &[]).unwrap().get::<_, String>(0)
    });
    thread::sleep(Duration::from_millis(500));
    b
}

#[test]
fn two_sessions_enqueueing_one_key_at_once_get_one_job() {
    let db = fresh_db("rq_it_key_race");
    let mut a = connect(&db);
    let mut tx = a.transaction().unwrap();
    let first: String =
        tx.query_one("SELECT id::text FROM rq_enqueue('q', 'a', key => 'k')", &[]).unwrap().get(0);

    // B enqueues the same key while A's job is not committed: B waits for A.
    let b = enqueue_key_k_in_another_session(&db);
    assert!(!b.is_finished(), "B waits for A's uncommitted job with the key");
    tx.commit().unwrap();
    assert_eq!(b.join().unwrap(), first, "B got A's job");
    let n: i64 = connect(&db).query_one("SELECT count(*) FROM jobs", &[]).unwrap().get(0);
    assert_eq!(n, 1);
}

#[test]
fn a_key_whose_job_rolled_back_is_free_for_the_waiting_session() {
    let db = fresh_db("rq_it_key_rollback");
    let mut a = connect(&db);
    let mut tx = a.transaction().unwrap();
    let first: String =
        tx.query_one("SELECT id::text FROM rq_enqueue('q', 'a', key => 'k')", &[]).unwrap().get(0);
    let b = enqueue_key_k_in_another_session(&db);
    tx.rollback().unwrap();
    let second = b.join().unwrap();
    assert_ne!(second, first);
    let payload: String = connect(&db).query_one("SELECT payload FROM jobs", &[]).unwrap().get(0);
    assert_eq!(payload, "b");
}

#[test]
fn many_sessions_racing_on_keys_make_one_job_per_key() {
    let db = fresh_db("rq_it_key_many");
    let handles: Vec<_> = (0..4)
        .map(|_| {
            let db = db.clone();
            thread::spawn(move || {
                let mut c = connect(&db);
                for round in 0..50 {
                    c.batch_execute(&format!(
                        "SELECT rq_enqueue_batch('q', ARRAY['1', '2', '3'], \
                         keys => ARRAY['a{round}', 'b{round}', 'c{round}'])"
                    ))
                    .unwrap();
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    let row = connect(&db).query_one("SELECT count(*), count(DISTINCT key) FROM jobs", &[]).unwrap();
    assert_eq!(row.get::<_, i64>(0), 150);
    assert_eq!(row.get::<_, i64>(1), 150);
}

/// The channels of the notifications `listener` receives until `quiet` passes
/// without one.
fn channels_heard(listener: &mut postgres::Client, quiet: Duration) -> Vec<String> {
    listener.notifications().timeout_iter(quiet).map(|n| Ok(n.channel().to_string())).collect().unwrap()
}

#[test]
fn a_listener_hears_one_notification_per_queue_per_transaction() {
    let db = fresh_db("rq_it_listen");
    let mut listener = connect(&db);
    listener.batch_execute("LISTEN rq_emails; LISTEN rq_sms").unwrap();
    let mut producer = connect(&db);
    producer.batch_execute("SET raquel.notify = on").unwrap();

    let mut tx = producer.transaction().unwrap();
    tx.batch_execute(
        "SELECT rq_enqueue('emails', '1'); SELECT rq_enqueue('emails', '2'); \
         SELECT rq_enqueue_batch('emails', ARRAY['3', '4']); \
         INSERT INTO jobs (queue, payload) VALUES ('sms', 'plain insert')",
    )
    .unwrap();
    // nothing before commit
    let early: Vec<_> =
        listener.notifications().timeout_iter(Duration::from_millis(300)).collect().unwrap();
    assert!(early.is_empty(), "no notification before commit: {early:?}");
    tx.commit().unwrap();

    let mut heard = channels_heard(&mut listener, Duration::from_secs(2));
    heard.sort();
    assert_eq!(heard, vec!["rq_emails", "rq_sms"]);

    // a rolled-back enqueue notifies nobody
    let mut tx = producer.transaction().unwrap();
    tx.batch_execute("SELECT rq_enqueue('emails', 'never')").unwrap();
    tx.rollback().unwrap();
    let after: Vec<_> =
        listener.notifications().timeout_iter(Duration::from_millis(500)).collect().unwrap();
    assert!(after.is_empty(), "{after:?}");
}

#[test]
fn enqueues_notify_only_where_raquel_notify_is_on() {
    let db = fresh_db("rq_it_notify_setting");
    let mut listener = connect(&db);
    listener.batch_execute("LISTEN rq_q").unwrap();
    let hear = |listener: &mut postgres::Client| -> usize {
        listener.notifications().timeout_iter(Duration::from_millis(500)).count().unwrap()
    };
    // off by default: the job is there, the notification is not
    connect(&db).batch_execute("SELECT rq_enqueue('q', 'quiet')").unwrap();
    assert_eq!(hear(&mut listener), 0);
    // on for the database: every new session's enqueues notify
    connect("postgres").batch_execute(&format!("ALTER DATABASE {db} SET raquel.notify = on")).unwrap();
    connect(&db).batch_execute("SELECT rq_enqueue('q', 'loud')").unwrap();
    assert_eq!(hear(&mut listener), 1);
    // and a session can still turn it off for itself
    connect(&db).batch_execute("SET raquel.notify = off; SELECT rq_enqueue('q', 'quiet again')").unwrap();
    assert_eq!(hear(&mut listener), 0);
    // a queue name too long for a channel is notified on rq_<md5>
    let long = "q".repeat(70);
    let channel: String = listener.query_one("SELECT rq_channel($1)", &[&long]).unwrap().get(0);
    assert_eq!(channel.len(), 35);
    listener.batch_execute(&format!("LISTEN \"{channel}\"")).unwrap();
    connect(&db).batch_execute(&format!("INSERT INTO jobs (queue) VALUES ('{long}')")).unwrap();
    assert_eq!(channels_heard(&mut listener, Duration::from_millis(500)), vec![channel]);
    let jobs: i64 = connect(&db).query_one("SELECT count(*) FROM jobs", &[]).unwrap().get(0);
    assert_eq!(jobs, 4);
}

#[test]
fn the_row_trigger_enqueues_on_commit_and_not_on_rollback() {
    let db = fresh_db("rq_it_trigger");
    let mut app = connect(&db);
    app.batch_execute(
        "CREATE TABLE signups (email text PRIMARY KEY); \
         CREATE TRIGGER welcome AFTER INSERT ON signups \
             FOR EACH ROW EXECUTE FUNCTION rq_enqueue_trigger('welcome_emails')",
    )
    .unwrap();
    let mut worker = connect(&db);

    let mut tx = app.transaction().unwrap();
    tx.execute("INSERT INTO signups VALUES ('a@b.c')", &[]).unwrap();
    tx.rollback().unwrap();
    assert_eq!(worker.query("SELECT * FROM rq_claim(ARRAY['welcome_emails'])", &[]).unwrap().len(), 0);

    app.execute("INSERT INTO signups VALUES ('d@e.f')", &[]).unwrap();
    let payload: String = worker
        .query_one("SELECT payload FROM rq_claim(ARRAY['welcome_emails'])", &[])
        .unwrap()
        .get(0);
    assert!(payload.contains(r#""new": {"email": "d@e.f"}"#), "{payload}");
    assert!(payload.contains(r#""op": "INSERT""#), "{payload}");
}
