//! A durable function in Rust (the `postgres` crate): an order's life as one
//! raquel job, as examples/durable.py has it.
//!
//! Each order job runs five steps, and any attempt, after an error or after
//! its worker was killed, goes on where the last one stopped: "reserve"
//! (a row inserted and the step recorded in one transaction: exactly once),
//! "cool-off" (rq_sleep: the job sleeps, holding no worker and no lease),
//! "payment" (rq_wait_event: parked until 'paid:<order>' is emitted; its
//! payload is the step's result), "pack" (a child job enqueued in
//! <queue>-packing, its id recorded as the step "pack-job" in the same
//! transaction, and waited for with rq_wait_job; this worker packs too: a
//! packing job writes its packing and completes with the box, in one
//! transaction) and "ship" (a row inserted with the paid amount, the step
//! recorded and the job completed with a result, in one transaction). A worker killed mid-job loses its lease; the background
//! worker hands the job out again, and the next attempt skips the steps
//! recorded.
//!
//! ```sh
//! RAQUEL_DSN="host=/tmp/raquel-dev port=54320 user=postgres dbname=raquel" \
//!     cargo run --manifest-path tests/client/Cargo.toml --bin durable-example -- orders
//! ```
//!
//! Prints one line a step done ("<order> <step>"). Options: --lease SECONDS
//! (default 5), --cool-off SECONDS (default 1), --idle-exit SECONDS (stop
//! after that long without work; default: run forever).

use postgres::{Client, NoTls};
use std::collections::HashMap;
use std::time::{Duration, Instant};

const TABLES: &str = "CREATE TABLE IF NOT EXISTS reservations (order_id text PRIMARY KEY, job_id uuid NOT NULL); \
                      CREATE TABLE IF NOT EXISTS packings (order_id text PRIMARY KEY, job_id uuid NOT NULL); \
                      CREATE TABLE IF NOT EXISTS shipments (order_id text PRIMARY KEY, amount numeric NOT NULL)";

/// How an attempt ended: the job is done, it sleeps or waits (parked), or
/// what it waited for failed.
enum Ended {
    Done,
    Parked,
    Failed(String),
}

/// One attempt of the order's durable function, from its start.
fn run(client: &mut Client, queue: &str, id: &str, attempt: i32, order: &str, cool_off: f64) -> Result<Ended, postgres::Error> {
    let done: HashMap<String, Option<String>> = client
        .query("SELECT name, result::text FROM job_steps WHERE job_id = $1::text::uuid", &[&id])?
        .iter()
        .map(|row| (row.get(0), row.get(1)))
        .collect();

    if !done.contains_key("reserve") {
        // the step's own write and its record commit together, or neither
        let mut tx = client.transaction()?;
        tx.execute("INSERT INTO reservations VALUES ($1, $2::text::uuid)", &[&order, &id])?;
        tx.execute("SELECT rq_step($1::text::uuid, $2, 'reserve', to_jsonb($3::text))", &[&id, &attempt, &order])?;
        tx.commit()?;
        println!("{order} reserve");
    }

    let sleeping: bool = client
        .query_one(
            "SELECT rq_sleep($1::text::uuid, $2, 'cool-off', delay => make_interval(secs => $3))",
            &[&id, &attempt, &cool_off],
        )?
        .get(0);
    if sleeping {
        return Ok(Ended::Parked);
    }

    let row = client.query_one(
        "SELECT parked, (payload->>'amount')::text FROM rq_wait_event($1::text::uuid, $2, 'payment', $3)",
        &[&id, &attempt, &format!("paid:{order}")],
    )?;
    let (parked, amount): (bool, Option<String>) = (row.get(0), row.get(1));
    if parked {
        return Ok(Ended::Parked);
    }

    // the child that packs: its id recorded with its enqueue, so that a
    // later attempt waits for the same child
    let child = match done.get("pack-job") {
        Some(Some(recorded)) => recorded.trim_matches('"').to_string(),
        _ => {
            let mut tx = client.transaction()?;
            let child: String =
                tx.query_one("SELECT id::text FROM rq_enqueue($1::text || '-packing', $2::text)", &[&queue, &order])?.get(0);
            tx.execute("SELECT rq_step($1::text::uuid, $2, 'pack-job', to_jsonb($3::text))", &[&id, &attempt, &child])?;
            tx.commit()?;
            println!("{order} pack-job");
            child
        }
    };
    let row = client.query_one(
        "SELECT parked, status, result->>'box' FROM rq_wait_job($1::text::uuid, $2, 'packed', $3::text::uuid)",
        &[&id, &attempt, &child],
    )?;
    let (parked, status, packed): (bool, Option<String>, Option<String>) = (row.get(0), row.get(1), row.get(2));
    if parked {
        return Ok(Ended::Parked);
    }
    if status.as_deref() != Some("success") {
        return Ok(Ended::Failed(format!("packing job {child} ended {status:?}")));
    }

    let mut tx = client.transaction()?;
    tx.execute("INSERT INTO shipments VALUES ($1, $2::text::numeric)", &[&order, &amount])?;
    tx.execute("SELECT rq_step($1::text::uuid, $2, 'ship')", &[&id, &attempt])?;
    tx.execute(
        "SELECT rq_complete($1::text::uuid, $2, jsonb_build_object('shipped', $3::text, 'box', $4::text))",
        &[&id, &attempt, &order, &packed],
    )?;
    tx.commit()?;
    println!("{order} ship");
    Ok(Ended::Done)
}

/// A packing job: its packing written and the job completed, in one transaction.
fn pack(client: &mut Client, id: &str, attempt: i32, order: &str) -> Result<Ended, postgres::Error> {
    let mut tx = client.transaction()?;
    tx.execute("INSERT INTO packings VALUES ($1, $2::text::uuid)", &[&order, &id])?;
    tx.execute(
        "SELECT rq_complete($1::text::uuid, $2, jsonb_build_object('box', 'B-' || $3::text))",
        &[&id, &attempt, &order],
    )?;
    tx.commit()?;
    println!("{order} packed");
    Ok(Ended::Done)
}

fn main() -> Result<(), postgres::Error> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let option = |name: &str, default: f64| -> f64 {
        args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).map_or(default, |v| v.parse().expect(name))
    };
    let Some(queue) = args.first() else {
        eprintln!("usage: durable-example QUEUE [--lease SECONDS] [--cool-off SECONDS] [--idle-exit SECONDS]");
        std::process::exit(2);
    };
    let (lease, cool_off) = (option("--lease", 5.0), option("--cool-off", 1.0));
    let idle_exit =
        args.iter().any(|a| a == "--idle-exit").then(|| Duration::from_secs_f64(option("--idle-exit", 0.0)));
    let dsn = std::env::var("RAQUEL_DSN").expect("RAQUEL_DSN");
    let mut client = Client::connect(&dsn, NoTls)?;
    client.batch_execute(TABLES)?;
    let worker = format!("rust-durable-{}", std::process::id());
    let mut idle_since = Instant::now();
    loop {
        let Some(job) = client.query_opt(
            "SELECT id::text, attempts, payload, queue FROM rq_claim(ARRAY[$1::text, $1::text || '-packing'], worker => $2, \
             lease => make_interval(secs => $3), wait => '1 second')",
            &[queue, &worker, &lease],
        )?
        else {
            if idle_exit.is_some_and(|limit| idle_since.elapsed() >= limit) {
                return Ok(());
            }
            continue;
        };
        idle_since = Instant::now();
        let (id, attempt, order, of): (String, i32, String, String) = (job.get(0), job.get(1), job.get(2), job.get(3));
        let ended = if &of == queue { run(&mut client, queue, &id, attempt, &order, cool_off) } else { pack(&mut client, &id, attempt, &order) };
        match ended {
            Ok(Ended::Done | Ended::Parked) => {}
            Ok(Ended::Failed(why)) => {
                eprintln!("{order} failed: {why}");
                client.execute("SELECT rq_fail($1::text::uuid, $2, $3)", &[&id, &attempt, &why])?;
            }
            // the attempt failed: retried after the backoff
            Err(error) if !client.is_closed() => {
                eprintln!("{order} failed: {error}");
                client.execute("SELECT rq_fail($1::text::uuid, $2, $3)", &[&id, &attempt, &error.to_string()])?;
            }
            Err(error) => return Err(error),
        }
    }
}
