//! raquel's dashboard: a small web program that shows a database's queue
//! (docs/src/guides/dashboard.md). `bin/dashboard --dsn DSN` builds
//! and starts it on 127.0.0.1:8432.
//!
//! It reads with plain SELECTs, so that a role with SELECT on the tables
//! (and no other right) can look; with `--read-write` it also retries and
//! cancels jobs, pauses and resumes queues and schedules, and runs a
//! schedule now, through raquel's functions, each behind a confirmation
//! page and a CSRF token. Every value shown is escaped by the templates
//! (payloads and errors are user data).
//!
//! Who may ask (src/access.rs): only requests addressed to a host name the
//! dashboard serves are answered (DNS rebinding), with a password when one
//! is set; one is required beyond loopback and with `--read-write`, and TLS
//! (its own, or a proxy's) beyond loopback. What it runs (src/db.rs): every
//! connection's search_path is pinned and every object named with its
//! schema, so nothing planted on the search_path runs with its role's rights.

mod access;
mod bulk;
mod charts;
mod csrf;
mod db;
mod find;
mod pages;

use clap::Parser;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// The environment variable a password may come from (never the command
/// line, which every user of the machine can read in `ps`).
const PASSWORD_ENV: &str = "RAQUEL_DASHBOARD_PASSWORD";

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
    bind: IpAddr,
    /// allow retry, cancel, delete (one job or every job a filter matches), pause and resume, and run a schedule now (off: the page only reads); needs a password
    #[arg(long, default_value_t = false, conflicts_with = "read_only")]
    read_write: bool,
    /// only read (the default; says so explicitly)
    #[arg(long, default_value_t = false)]
    read_only: bool,
    /// another name the dashboard answers to, as browsers send it in the Host
    /// header (e.g. the name a reverse proxy serves: dash.example.com, or
    /// dash.example.com:8443); repeatable. Requests for any other name are refused.
    #[arg(long = "allowed-host", value_name = "NAME[:PORT]")]
    allowed_hosts: Vec<String>,
    /// the user name of the HTTP Basic authentication
    #[arg(long, default_value = "raquel", value_name = "NAME")]
    auth_user: String,
    /// a file whose first line is the password (HTTP Basic authentication);
    /// or set RAQUEL_DASHBOARD_PASSWORD. Required with --read-write and beyond loopback.
    #[arg(long, value_name = "FILE")]
    password_file: Option<PathBuf>,
    /// (refused: a password on the command line is visible to every user of the machine)
    #[arg(long, hide = true)]
    password: Option<String>,
    /// serve HTTPS with this certificate chain (PEM); needs --tls-key
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// the private key of --tls-cert (PEM)
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// a TLS-terminating proxy is in front: allows plain HTTP beyond loopback
    /// (the proxy's traffic to this program is not encrypted)
    #[arg(long, default_value_t = false, conflicts_with = "tls_cert")]
    behind_tls_proxy: bool,
    /// how many database connections the dashboard keeps at most
    #[arg(long, default_value_t = 4, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=100))]
    pool_size: u16,
    /// how long a request waits for a free connection before it is answered 503
    #[arg(long, default_value_t = 5, value_name = "SECONDS", value_parser = clap::value_parser!(u64).range(1..=300))]
    pool_wait: u64,
}

/// What every request needs.
pub struct App {
    pub db: db::Db,
    pub read_write: bool,
    pub templates: minijinja::Environment<'static>,
    pub csrf: csrf::Csrf,
    pub access: access::Access,
    /// the bulk operations running and done (src/bulk.rs)
    pub ops: bulk::Operations,
}

/// The settings checked: what to listen on, and whom to answer.
struct Settings {
    address: SocketAddr,
    access: access::Access,
    tls: Option<(PathBuf, PathBuf)>,
    warnings: Vec<String>,
}

/// The startup rules (docs/src/guides/dashboard.md, security decisions): a
/// refusal says what to do instead.
fn settings(args: &Args, env_password: Option<String>) -> Result<Settings, String> {
    if args.password.is_some() {
        return Err(format!(
            "a password on the command line is visible to every user of this machine (ps): \
             put it in a file only you can read and pass --password-file FILE, or set {PASSWORD_ENV}"
        ));
    }
    let password = match (&args.password_file, env_password) {
        (Some(_), Some(_)) => {
            return Err(format!("both --password-file and {PASSWORD_ENV} are set: give the password one way"));
        }
        (Some(file), None) => {
            let text = std::fs::read_to_string(file)
                .map_err(|e| format!("cannot read the password file {}: {e}", file.display()))?;
            // the first line, without its line end: `echo secret > file` works
            Some(text.lines().next().unwrap_or_default().to_string())
        }
        (None, Some(password)) => Some(password),
        (None, None) => None,
    };
    if args.auth_user.is_empty() || args.auth_user.contains(':') {
        return Err("--auth-user must be a name without a colon (HTTP Basic authentication splits on it)".into());
    }
    if password.as_deref() == Some("") {
        return Err("the password is empty: write one in the password file (or RAQUEL_DASHBOARD_PASSWORD)".into());
    }
    let loopback = args.bind.is_loopback();
    let address = SocketAddr::new(args.bind, args.port);
    if password.is_none() && (!loopback || args.read_write) {
        let why = if args.read_write {
            "--read-write lets whoever reaches the dashboard retry, cancel, pause and resume"
        } else {
            "listening beyond loopback lets whoever reaches the port read every payload"
        };
        return Err(format!(
            "{why}: set a password. Put it in a file only you can read and pass --password-file FILE \
             (or set {PASSWORD_ENV}); browsers then ask for user {:?} and that password.",
            args.auth_user
        ));
    }
    let tls = args.tls_cert.clone().zip(args.tls_key.clone());
    let mut warnings = Vec::new();
    if !loopback && tls.is_none() {
        if !args.behind_tls_proxy {
            return Err(format!(
                "listening on {address} without TLS would send the password and every payload in clear text: \
                 give --tls-cert FILE --tls-key FILE, or, when a TLS-terminating proxy is in front, say so \
                 with --behind-tls-proxy"
            ));
        }
        warnings.push(format!(
            "--behind-tls-proxy: this program speaks plain HTTP on {address}; make sure only the TLS proxy \
             can reach that address"
        ));
    }
    let https = tls.is_some() || args.behind_tls_proxy;
    let access = access::Access::new(address, &args.allowed_hosts, https, password.map(|p| (args.auth_user.clone(), p)))?;
    if args.bind.is_unspecified() && args.allowed_hosts.is_empty() {
        return Err(format!(
            "--bind {} answers only requests addressed to the names given with --allowed-host (and to \
             localhost): name the host clients use, e.g. --allowed-host dash.example.com:{}",
            args.bind, args.port
        ));
    }
    Ok(Settings { address, access, tls, warnings })
}

fn refuse(message: &str) -> ! {
    eprintln!("raquel-dashboard: {message}");
    std::process::exit(2);
}

#[tokio::main]
async fn main() {
    let args = Args::parse();
    let settings = settings(&args, std::env::var(PASSWORD_ENV).ok()).unwrap_or_else(|m| refuse(&m));
    for warning in &settings.warnings {
        eprintln!("raquel-dashboard: warning: {warning}");
    }
    let db = db::Db::new(&args.dsn, args.pool_size.into(), Duration::from_secs(args.pool_wait)).unwrap_or_else(|m| refuse(&m));
    let app = Arc::new(App {
        db,
        read_write: args.read_write,
        templates: pages::templates(),
        csrf: csrf::Csrf::new(),
        access: settings.access,
        ops: bulk::Operations::new(),
    });
    let https = app.access.https();
    let router = pages::router(app.clone()).into_make_service();

    let address = settings.address;
    // the certificate read before the port is taken: one that cannot be
    // used is refused before anything listens
    let tls = match &settings.tls {
        Some((cert, key)) => {
            // ring: the one provider this program is built with
            let _ = rustls::crypto::ring::default_provider().install_default();
            Some(axum_server::tls_rustls::RustlsConfig::from_pem_file(cert, key).await.unwrap_or_else(|e| {
                refuse(&format!("cannot use the certificate {} and key {}: {e}", cert.display(), key.display()))
            }))
        }
        None => None,
    };
    // bound here, so that a port in use is a clear message, not a panic
    let listener = std::net::TcpListener::bind(address)
        .and_then(|l| l.set_nonblocking(true).map(|()| l))
        .unwrap_or_else(|e| {
            eprintln!("raquel-dashboard: cannot listen on {address}: {e}");
            std::process::exit(1);
        });
    let handle = axum_server::Handle::new();
    tokio::spawn({
        let handle = handle.clone();
        async move {
            let _ = tokio::signal::ctrl_c().await;
            handle.graceful_shutdown(Some(Duration::from_secs(5)));
        }
    });
    let served = match tls {
        Some(config) => {
            announce(address, "https", &app);
            axum_server::from_tcp_rustls(listener, config).handle(handle).serve(router).await
        }
        None => {
            announce(address, if https { "http (behind a TLS proxy)" } else { "http" }, &app);
            axum_server::from_tcp(listener).handle(handle).serve(router).await
        }
    };
    if let Err(e) = served {
        eprintln!("raquel-dashboard: {e}");
        std::process::exit(1);
    }
}

fn announce(address: SocketAddr, scheme: &str, app: &App) {
    println!(
        "raquel-dashboard: {scheme} on {address} ({}, {}; answers to {})",
        if app.read_write { "read-write" } else { "read-only" },
        if app.access.has_password() { "password required" } else { "no password" },
        app.access.hosts().join(", ")
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(extra: &[&str]) -> Args {
        let mut all = vec!["raquel-dashboard", "--dsn", "dbname=x"];
        all.extend_from_slice(extra);
        Args::try_parse_from(all).unwrap()
    }

    fn refusal(extra: &[&str], password: Option<&str>) -> String {
        match settings(&args(extra), password.map(str::to_string)) {
            Ok(_) => panic!("{extra:?} was accepted"),
            Err(message) => message,
        }
    }

    #[test]
    fn loopback_and_read_only_needs_nothing_else() {
        let s = settings(&args(&[]), None).unwrap();
        assert!(!s.access.has_password());
        assert!(s.warnings.is_empty());
    }

    #[test]
    fn read_write_or_beyond_loopback_needs_a_password() {
        assert!(refusal(&["--read-write"], None).contains("--password-file"));
        assert!(refusal(&["--bind", "0.0.0.0", "--behind-tls-proxy", "--allowed-host", "a"], None).contains("--password-file"));
        assert!(settings(&args(&["--read-write"]), Some("pw".into())).unwrap().access.has_password());
        assert!(refusal(&["--read-write"], Some("")).contains("empty"));
        assert!(refusal(&["--password", "pw"], None).contains("--password-file"));
        assert!(refusal(&["--auth-user", "a:b"], Some("pw")).contains("colon"));
    }

    #[test]
    fn beyond_loopback_needs_tls_or_a_proxy_and_a_name() {
        assert!(refusal(&["--bind", "10.1.2.3"], Some("pw")).contains("--tls-cert"));
        let proxied = settings(&args(&["--bind", "10.1.2.3", "--behind-tls-proxy"]), Some("pw".into())).unwrap();
        assert_eq!(proxied.warnings.len(), 1, "a warning about plain HTTP behind the proxy");
        assert!(refusal(&["--bind", "0.0.0.0", "--behind-tls-proxy"], Some("pw")).contains("--allowed-host"));
    }
}
