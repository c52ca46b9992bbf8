//! Throwaway PostgreSQL clusters that a test owns outright, for the tests that
//! crash, kill and fail over servers (tests/faults.rs, tests/failover.rs).
//! Each has its own data directory under /tmp and its own port on 127.0.0.1,
//! preloads raquel, and is stopped and removed when dropped, whether the test
//! passed or panicked.
//!
//! Optional environment: `RAQUEL_PG_BIN` (default /usr/lib/postgresql/15/bin),
//! `RAQUEL_FAULT_KEEP=1` keeps the data directories and logs for a post-mortem.

use postgres::{Client, NoTls};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::thread::sleep;
use std::time::{Duration, Instant};

/// Where the PostgreSQL 15 programs are.
pub fn pg_bin() -> PathBuf {
    std::env::var_os("RAQUEL_PG_BIN").map_or_else(|| PathBuf::from("/usr/lib/postgresql/15/bin"), PathBuf::from)
}

fn running_as_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// A PostgreSQL program, run as `postgres` when we are root: the server
/// refuses to run as root, and its files must belong to the user it runs as.
fn pg_command(program: &str, dir: &Path) -> Command {
    let path = pg_bin().join(program);
    let mut command = if running_as_root() {
        let mut sudo = Command::new("sudo");
        sudo.args(["-u", "postgres"]).arg(path);
        sudo
    } else {
        Command::new(path)
    };
    // `postgres` may not be allowed into the caller's working directory.
    command.current_dir(dir).stdin(Stdio::null());
    command
}

/// Runs a PostgreSQL program to its end; its output when it fails.
fn run(command: &mut Command) -> Result<(), String> {
    let output = command.output().map_err(|e| format!("{command:?}: {e}"))?;
    if output.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{command:?} ended with {}: {}{}",
            output.status,
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        ))
    }
}

/// Sends SIGKILL to a process (a server backend, say); false when there was
/// no such process any more.
pub fn kill_9(pid: i32) -> bool {
    // SAFETY: kill has no memory-safety preconditions; a stale pid only fails.
    unsafe { libc::kill(pid, libc::SIGKILL) == 0 }
}

pub struct Cluster {
    dir: PathBuf,
    port: u16,
}

impl Cluster {
    /// A new cluster in /tmp/raquel-NAME-PORT (replacing whatever a run that
    /// was itself killed left there), configured but not started. `settings`
    /// are appended to postgresql.conf as `name = 'value'`.
    pub fn create(name: &str, port: u16, settings: &[(&str, &str)]) -> Cluster {
        let cluster = Cluster::empty(name, port);
        run(pg_command("initdb", &cluster.dir)
            .args(["-U", "postgres", "--auth=trust", "-E", "UTF8", "--locale=C", "-D"])
            .arg(cluster.data()))
        .unwrap_or_else(|e| panic!("initdb: {e}"));
        // fsync off: the faults are killed processes, never a lost machine,
        // so what was written is in the page cache and recovery reads it.
        let mut conf = format!(
            "\n# raquel fault tests\nlisten_addresses = '127.0.0.1'\nport = {port}\n\
             unix_socket_directories = '{}'\nshared_preload_libraries = 'raquel'\nmax_connections = 100\n\
             log_line_prefix = '%m [%p] '\nfsync = off\n",
            cluster.dir.display()
        );
        for (setting, value) in settings {
            conf.push_str(&format!("{setting} = '{value}'\n"));
        }
        cluster.append_to("postgresql.conf", &conf);
        cluster
    }

    /// A streaming standby of `primary` made with pg_basebackup (which also
    /// writes primary_conninfo and standby.signal), configured but not
    /// started. The overrides go to postgresql.auto.conf, which is read last,
    /// because the backup copied the primary's own files, ALTER SYSTEM
    /// settings included.
    pub fn standby_of(primary: &Cluster, name: &str, port: u16, settings: &[(&str, &str)]) -> Cluster {
        let standby = Cluster::empty(name, port);
        run(pg_command("pg_basebackup", &standby.dir)
            .args([
                "-h",
                "127.0.0.1",
                "-p",
                &primary.port.to_string(),
                "-U",
                "postgres",
                "-X",
                "stream",
                "-c",
                "fast",
                "-R",
                "-D",
            ])
            .arg(standby.data()))
        .unwrap_or_else(|e| panic!("pg_basebackup: {e}"));
        let mut conf = format!(
            "\n# standby of port {}\nport = {port}\nunix_socket_directories = '{}'\n",
            primary.port,
            standby.dir.display()
        );
        for (setting, value) in settings {
            conf.push_str(&format!("{setting} = '{value}'\n"));
        }
        standby.append_to("postgresql.auto.conf", &conf);
        standby
    }

    fn empty(name: &str, port: u16) -> Cluster {
        let cluster = Cluster { dir: PathBuf::from(format!("/tmp/raquel-{name}-{port}")), port };
        if cluster.dir.exists() {
            if cluster.data().join("postmaster.pid").exists() {
                cluster.stop_immediate();
            }
            std::fs::remove_dir_all(&cluster.dir).unwrap_or_else(|e| panic!("removing {:?}: {e}", cluster.dir));
        }
        std::fs::create_dir_all(&cluster.dir).unwrap();
        if running_as_root() {
            run(Command::new("chown").arg("postgres:").arg(&cluster.dir)).unwrap();
        }
        cluster
    }

    fn append_to(&self, file: &str, text: &str) {
        use std::io::Write;
        let path = self.data().join(file);
        let mut f = std::fs::OpenOptions::new().append(true).open(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
        f.write_all(text.as_bytes()).unwrap();
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn data(&self) -> PathBuf {
        self.dir.join("data")
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    pub fn log_path(&self) -> PathBuf {
        self.dir.join("server.log")
    }

    /// The whole server log (every start appends to it).
    pub fn log(&self) -> String {
        String::from_utf8_lossy(&std::fs::read(self.log_path()).unwrap_or_default()).into_owned()
    }

    /// The last `lines` lines of the server log.
    pub fn log_tail(&self, lines: usize) -> String {
        let log = self.log();
        let tail: Vec<&str> = log.lines().rev().take(lines).collect();
        tail.into_iter().rev().collect::<Vec<_>>().join("\n")
    }

    /// A connection to `db` for the test's own checks, waiting up to a
    /// minute for a server that is restarting; a failure shows the log.
    pub fn checked_connection(&self, db: &str) -> Client {
        self.wait_until_up(db, Duration::from_secs(60));
        self.connect(db).unwrap_or_else(|e| {
            panic!("the server on port {} does not answer: {e}; its log ends:\n{}", self.port, self.log_tail(40))
        })
    }

    /// libpq-style connection words for database `db` over TCP.
    pub fn dsn(&self, db: &str) -> String {
        format!("host=127.0.0.1 port={} user=postgres dbname={db} connect_timeout=5", self.port)
    }

    pub fn connect(&self, db: &str) -> Result<Client, postgres::Error> {
        Client::connect(&self.dsn(db), NoTls)
    }

    /// Starts the server and waits until it takes connections (pg_ctl -w).
    pub fn start(&self) {
        if let Err(e) = run(pg_command("pg_ctl", &self.dir)
            .args(["-w", "-t", "120", "-l"])
            .arg(self.log_path())
            .arg("-D")
            .arg(self.data())
            .arg("start"))
        {
            panic!("the server on port {} did not start: {e}\n{}", self.port, self.log_tail(30));
        }
    }

    /// `pg_ctl stop -m immediate`: every server process quits at once, as in
    /// a power cut; the next start runs crash recovery.
    pub fn stop_immediate(&self) {
        // An error here is a server that was not running: that is stopped too.
        let _ = run(pg_command("pg_ctl", &self.dir).args(["-m", "immediate", "-w", "-D"]).arg(self.data()).arg("stop"));
    }

    pub fn is_running(&self) -> bool {
        run(pg_command("pg_ctl", &self.dir).arg("-D").arg(self.data()).arg("status")).is_ok()
    }

    /// Ends recovery on a standby and waits until it takes writes.
    pub fn promote(&self) {
        run(pg_command("pg_ctl", &self.dir).args(["-w", "-t", "120", "-D"]).arg(self.data()).arg("promote"))
            .unwrap_or_else(|e| panic!("promoting the server on port {}: {e}", self.port));
    }

    /// Waits until a connection to `db` answers a query, up to `limit`;
    /// how long that took, or None.
    pub fn wait_until_up(&self, db: &str, limit: Duration) -> Option<Duration> {
        let start = Instant::now();
        while start.elapsed() < limit {
            if let Ok(mut client) = self.connect(db) {
                if client.simple_query("SELECT 1").is_ok() {
                    return Some(start.elapsed());
                }
            }
            sleep(Duration::from_millis(50));
        }
        None
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        self.stop_immediate();
        if std::env::var_os("RAQUEL_FAULT_KEEP").is_none() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// Notices whether the installed raquel.so was replaced while a test ran
/// (the extension reinstalled): a server that preloaded the old file may
/// then crash, through no fault of the code under test. A test that fails
/// with this guard alive says so.
pub struct LibraryWatch {
    path: PathBuf,
    stamp: Option<(u64, std::time::SystemTime)>,
}

impl LibraryWatch {
    pub fn new() -> LibraryWatch {
        let path = pg_bin().join("../lib/raquel.so");
        let stamp = LibraryWatch::stamp(&path);
        LibraryWatch { path, stamp }
    }

    fn stamp(path: &Path) -> Option<(u64, std::time::SystemTime)> {
        use std::os::unix::fs::MetadataExt;
        let meta = std::fs::metadata(path).ok()?;
        Some((meta.ino(), meta.modified().ok()?))
    }

    pub fn replaced(&self) -> bool {
        LibraryWatch::stamp(&self.path) != self.stamp
    }
}

impl Default for LibraryWatch {
    fn default() -> Self {
        LibraryWatch::new()
    }
}

impl Drop for LibraryWatch {
    fn drop(&mut self) {
        if std::thread::panicking() && self.replaced() {
            use std::io::Write;
            let _ = writeln!(
                std::io::stderr(),
                "note: {} was replaced while this test ran (the extension was reinstalled); servers that had \
                 loaded the old library may have crashed because of that: run the test again",
                self.path.display()
            );
        }
    }
}
