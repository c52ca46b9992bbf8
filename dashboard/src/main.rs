//! raquel's dashboard: a small web program that shows a database's queue
//! (README "Metrics and the dashboard"). `bin/dashboard --dsn DSN` builds
//! and starts it on 127.0.0.1:8432.
//!
//! It reads with plain SELECTs, so that a role with SELECT on the tables
//! (and no other right) can look; with `--read-write` it also retries and
//! cancels jobs and pauses and resumes queues through raquel's functions,
//! each behind a confirmation page and a CSRF token. Every value shown is
//! escaped by the templates (payloads and errors are user data).

mod charts;
mod csrf;
mod db;
mod pages;

use axum::Router;
use clap::Parser;
use std::net::SocketAddr;
use std::sync::Arc;

#[derive(Parser, Debug)]
#[command(name = "raquel-dashboard", about = "A web page that shows a raquel job queue")]
struct Args {
    /// libpq-style connection string, e.g. "host=/var/run/postgresql dbname=app user=viewer"
    #[arg(long)]
    dsn: String,
    /// the port to listen on
    #[arg(long, default_value_t = 8432)]
    port: u16,
    /// the address to listen on: localhost unless you say otherwise
    #[arg(long, default_value = "127.0.0.1")]
    bind: std::net::IpAddr,
    /// allow retry, cancel, pause and resume (off: the page only reads)
    #[arg(long, default_value_t = false, conflicts_with = "read_only")]
    read_write: bool,
    /// only read (the default; says so explicitly)
    #[arg(long, default_value_t = false)]
    read_only: bool,
}

/// What every request needs.
pub struct App {
    pub dsn: String,
    pub read_write: bool,
    pub templates: minijinja::Environment<'static>,
    pub csrf: csrf::Csrf,
}

#[tokio::main]
async fn main() {
    let args = Args::parse();
    let app = Arc::new(App {
        dsn: args.dsn,
        read_write: args.read_write,
        templates: pages::templates(),
        csrf: csrf::Csrf::new(),
    });
    let router: Router = pages::router(app);
    let address = SocketAddr::new(args.bind, args.port);
    let listener = match tokio::net::TcpListener::bind(address).await {
        Ok(listener) => listener,
        Err(e) => {
            eprintln!("raquel-dashboard: cannot listen on {address}: {e}");
            std::process::exit(1);
        }
    };
    println!(
        "raquel-dashboard: http://{address}/ ({})",
        if args.read_write { "read-write" } else { "read-only" }
    );
    if let Err(e) = axum::serve(listener, router).with_graceful_shutdown(shutdown()).await {
        eprintln!("raquel-dashboard: {e}");
        std::process::exit(1);
    }
}

async fn shutdown() {
    let _ = tokio::signal::ctrl_c().await;
}
