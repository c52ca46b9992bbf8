//! A durable three-step worker with a sleep and an event (raquel-pg).
//!
//! Each job of `orders` (its payload an order number) reserves stock, sleeps
//! a second, waits for the event `paid:<order>`, then charges and ships.
//! Steps run once across attempts: a worker killed after "reserve" leaves it
//! recorded, and the next attempt goes on from there. Emit the payment with
//! `SELECT rq_emit('paid:42', '{"amount": 10}')`.
//!
//! ```sh
//! RAQUEL_DSN="host=/tmp/raquel-dev port=54320 user=postgres dbname=raquel" \
//!     cargo run --manifest-path libraries/rust/Cargo.toml --example durable
//! ```

use raquel_pg::{HandlerError, Job, Worker};
use serde_json::{json, Value};
use std::time::Duration;

// The handler: 9 lines (the README counts them).
async fn order(job: Job) -> Result<Value, HandlerError> {
    let order = job.payload().unwrap_or_default().to_string();
    let stock = job.step("reserve", || async { Ok(format!("R-{order}")) }).await?;
    job.sleep("cool-off", Duration::from_secs(1)).await?;
    let paid = job.wait_event("payment", &format!("paid:{order}"), None).await?;
    let charge = job.step("charge", || async { Ok(json!({"order": order, "paid": paid})) }).await?;
    let shipped = job.step("ship", || async { Ok(format!("{order} shipped with {stock}")) }).await?;
    Ok(json!({"charge": charge, "shipped": shipped}))
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dsn = std::env::var("RAQUEL_DSN").map_err(|_| "set RAQUEL_DSN to the database's DSN")?;
    let stats = Worker::new(dsn).handle("orders", order).concurrency(10).run().await?;
    println!("{stats:?}");
    Ok(())
}
