//! A queue worker as an OS process of its own, for the fault tests: they
//! SIGKILL it mid-job, terminate its backend, crash its server, and expect it
//! to reconnect and carry on.
//!
//! Usage: fault-worker DSN NAME STYLE EVENTS_FILE STOP_FILE SECONDS
//!
//! STYLE is how it works a job of queue `q`:
//! - `tx`: claim, inside work and completion in one transaction (README, "A
//!   worker in three statements"): a worker that dies leaves nothing claimed.
//! - `lease`: the claim commits on its own first (the README's way for work
//!   outside the database), then the completion and the inside work commit
//!   together: a worker that dies leaves a lease for the background worker
//!   to rescue, and a late worker is fenced off by its attempt number. The
//!   completion comes first there: it presents the token before anything is
//!   written, so a late worker is refused by the fence (55000) and a
//!   `duplicate` can only mean the fence let a second attempt through.
//!   These workers also take queue `stale`, whose jobs make a worker late on
//!   purpose: on the first attempt it stalls until its lease has run out and
//!   another worker has claimed the job (which holds attempt 2 and later for
//!   a second), then presents its stale token (event `stale`): the fence
//!   must refuse it while the job is in another worker's hands. One worker
//!   is late at a time; a `stale` job claimed while another is late is
//!   done at once.
//!
//! Either way the "outside" work is a line appended to EVENTS_FILE before the
//! completion, so it survives this process and the server: the test counts it
//! as work done at least once. The "inside" work is a row of `done_inside`,
//! whose primary key on job_id makes a second commit for one job fail
//! (23505), which this worker records as `duplicate`.
//!
//! Event lines: `connected`, `outside ID ATTEMPT`, `done ID ATTEMPT`,
//! `duplicate ID ATTEMPT`, `fenced ID ATTEMPT`, `stale ID ATTEMPT` (about to
//! complete with a token it knows is stale), `conflict ID ATTEMPT` (40001:
//! the job changed under the completion, try again), `lost SQLSTATE` (the
//! connection or server went away), `error SQLSTATE MESSAGE` (anything else);
//! each ends with ` @` and the Unix time in milliseconds.
//!
//! It stops when STOP_FILE exists, after SECONDS, or when the test that
//! started it is gone, so that no worker outlives its test.

use postgres::{Client, NoTls};
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::PathBuf;
use std::thread::sleep;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

const CLAIM: &str = "SELECT id::text, attempts, queue \
                     FROM rq_claim($2::text[], worker => $1, lease => '2 seconds', wait => '500 ms')";
/// Whether another worker holds the job now (claimed, under a later
/// attempt), and whether a later attempt ended it already.
const TAKEN_OVER: &str = "SELECT status = 'claimed' AND attempts > $2, status <> 'claimed' AND attempts > $2 \
                          FROM jobs WHERE id = $1::text::uuid";
const INSIDE: &str = "INSERT INTO done_inside (job_id, attempt, worker) VALUES ($1::text::uuid, $2, $3)";
const COMPLETE: &str = "SELECT (rq_complete($1::text::uuid, attempt => $2)).status";

/// The longest pretend work on a job, between the outside and inside work:
/// long enough that kills land mid-job, short next to the 2 s lease.
const MAX_WORK_MS: u64 = 8;
/// Whether this worker is the one late worker (a session advisory lock,
/// gone with the connection should the worker die while late).
const LATE_LOCK: &str = "SELECT pg_try_advisory_lock(7310, 1)";
const LATE_UNLOCK: &str = "SELECT pg_advisory_unlock(7310, 1)";

/// How long a `stale` job's later attempts hold it: time for the late worker
/// to present its token while the job is taken, well within the lease.
const STALE_HOLD: Duration = Duration::from_secs(1);
/// How long a late worker waits for its job to be taken over, at most.
const STALE_WAIT: Duration = Duration::from_secs(10);

#[derive(Clone, Copy, PartialEq)]
enum Style {
    Tx,
    Lease,
}

struct Worker {
    dsn: String,
    name: String,
    style: Style,
    events: File,
    stop_file: PathBuf,
    deadline: Instant,
    parent: i32,
    random: u64,
}

/// A job this worker holds: its id and attempt number (the fencing token).
struct Job {
    id: String,
    attempt: i32,
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let [_, dsn, name, style, events, stop_file, seconds] = args.as_slice() else {
        eprintln!("usage: fault-worker DSN NAME tx|lease EVENTS_FILE STOP_FILE SECONDS");
        std::process::exit(2);
    };
    let style = match style.as_str() {
        "tx" => Style::Tx,
        "lease" => Style::Lease,
        other => panic!("unknown style {other}"),
    };
    let events = OpenOptions::new().create(true).append(true).open(events).expect("the events file");
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos() as u64;
    let mut worker = Worker {
        dsn: dsn.clone(),
        name: name.clone(),
        style,
        events,
        stop_file: PathBuf::from(stop_file),
        deadline: Instant::now() + Duration::from_secs(seconds.parse().expect("SECONDS")),
        // SAFETY: getppid has no preconditions and cannot fail.
        parent: unsafe { libc::getppid() },
        random: nanos ^ u64::from(std::process::id()) | 1,
    };
    worker.run();
}

impl Worker {
    fn should_stop(&self) -> bool {
        // SAFETY: as above.
        let orphaned = unsafe { libc::getppid() } != self.parent;
        orphaned || Instant::now() >= self.deadline || self.stop_file.exists()
    }

    /// One line per event, ending with the Unix time in milliseconds,
    /// written with a single write(2) on an O_APPEND file: a SIGKILL leaves
    /// whole lines, and the kernel keeps them.
    fn note(&mut self, line: String) {
        let ms = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis();
        self.events.write_all(format!("{line} @{ms}\n").as_bytes()).expect("writing an event");
    }

    fn pause_for_work(&mut self) {
        // xorshift: enough to spread the kills over every step of a job
        self.random ^= self.random << 13;
        self.random ^= self.random >> 7;
        self.random ^= self.random << 17;
        sleep(Duration::from_millis(self.random % (MAX_WORK_MS + 1)));
    }

    /// Connects (again) whenever the connection is lost, until told to stop.
    fn run(&mut self) {
        while !self.should_stop() {
            let mut client = match Client::connect(&self.dsn, NoTls) {
                Ok(client) => client,
                Err(_) => {
                    // the server is down or restarting: try again shortly
                    sleep(Duration::from_millis(100));
                    continue;
                }
            };
            self.note("connected".into());
            while !self.should_stop() {
                let mut job = None;
                let result = match self.style {
                    Style::Tx => self.work_in_one_transaction(&mut client, &mut job),
                    Style::Lease => self.work_under_a_lease(&mut client, &mut job),
                };
                let Err(error) = result else { continue };
                let code = error.code().map_or("none", |c| c.code()).to_string();
                let job_words = job.as_ref().map_or(String::new(), |j| format!("{} {}", j.id, j.attempt));
                match code.as_str() {
                    "23505" => self.note(format!("duplicate {job_words}")),
                    "55000" => self.note(format!("fenced {job_words}")),
                    "40001" => self.note(format!("conflict {job_words}")),
                    // connection gone, admin/crash shutdown, server starting up
                    c if c == "none" || c.starts_with("08") || c.starts_with("57P") => {
                        self.note(format!("lost {code}"))
                    }
                    _ => self.note(format!("error {code} {}", error.to_string().replace('\n', " "))),
                }
                if client.is_closed() || !matches!(code.as_str(), "23505" | "55000" | "40001") {
                    break; // reconnect
                }
            }
        }
    }

    fn work_in_one_transaction(&mut self, client: &mut Client, job: &mut Option<Job>) -> Result<(), postgres::Error> {
        let mut tx = client.transaction()?;
        let Some(row) = tx.query_opt(CLAIM, &[&self.name, &vec!["q"]])? else {
            return tx.commit();
        };
        let claimed = job.insert(Job { id: row.get(0), attempt: row.get(1) });
        let (id, attempt) = (claimed.id.clone(), claimed.attempt);
        self.note(format!("outside {id} {attempt}"));
        self.pause_for_work();
        tx.execute(INSIDE, &[&id, &attempt, &self.name])?;
        tx.query_one(COMPLETE, &[&id, &attempt])?;
        tx.commit()?;
        self.note(format!("done {id} {attempt}"));
        Ok(())
    }

    fn work_under_a_lease(&mut self, client: &mut Client, job: &mut Option<Job>) -> Result<(), postgres::Error> {
        let Some(row) = client.query_opt(CLAIM, &[&self.name, &vec!["q", "stale"]])? else {
            return Ok(());
        };
        let claimed = job.insert(Job { id: row.get(0), attempt: row.get(1) });
        let (id, attempt) = (claimed.id.clone(), claimed.attempt);
        self.note(format!("outside {id} {attempt}"));
        self.pause_for_work();
        if row.get::<_, String>(2) == "stale" {
            if attempt == 1 {
                // One late worker at a time: were every lease worker stalled
                // on a first attempt, none would be left to take a job over.
                if client.query_one(LATE_LOCK, &[])?.get::<_, bool>(0) {
                    let taken_over = self.wait_until_taken_over(client, &id, attempt);
                    client.execute(LATE_UNLOCK, &[])?;
                    if taken_over? {
                        self.note(format!("stale {id} {attempt}"));
                    }
                }
            } else {
                sleep(STALE_HOLD);
            }
        }
        let mut tx = client.transaction()?;
        tx.query_one(COMPLETE, &[&id, &attempt])?;
        tx.execute(INSIDE, &[&id, &attempt, &self.name])?;
        tx.commit()?;
        self.note(format!("done {id} {attempt}"));
        Ok(())
    }

    /// Stalls, as a worker in a long GC pause would, until the lease ran
    /// out, the background worker rescued the job and another worker
    /// claimed it; whether that happened within STALE_WAIT. A job a later
    /// attempt ended already (this worker was paused through the window)
    /// ends the wait at once: the late worker must not keep the late lock
    /// for nothing.
    fn wait_until_taken_over(&mut self, client: &mut Client, id: &str, attempt: i32) -> Result<bool, postgres::Error> {
        let deadline = Instant::now() + STALE_WAIT;
        while Instant::now() < deadline {
            let row = client.query_one(TAKEN_OVER, &[&id, &attempt])?;
            let (held, ended): (bool, bool) = (row.get(0), row.get(1));
            if held || ended {
                return Ok(held);
            }
            sleep(Duration::from_millis(20));
        }
        Ok(false)
    }
}
