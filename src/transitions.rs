//! A job's transitions, in one place.
//!
//! Every change of a job's status that raquel makes is written in one of
//! three homes, and nowhere else (the test below reads `sql/` and `src/`
//! and fails when a status is written, or a job inserted, outside them):
//!
//! - the statements the verbs run, `sql/transition.*.sql`, whose texts are
//!   the constants of this module;
//! - the transitions written in PL/pgSQL, `sql/transitions.sql`;
//! - the direct path, `src/direct.rs` (and `src/direct/`), which writes the
//!   same rows as the statements without the executor's planning when the
//!   table is as raquel made it, and hands over to them when it is not.
//!
//! | transition | from → to | planned | direct |
//! |---|---|---|---|
//! | enqueue | → queued | [`ENQUEUE`]; a batch: `rq_enqueue_batch_planned` | `direct::insert`, `direct::insert_batch` |
//! | hold for parents | queued → blocked (or cancelled) | `rq_hold_for_parents` | |
//! | release by a parent | blocked → queued, or cancelled | `rq_parent_ended` | |
//! | claim | queued, failed → claimed | [`CLAIM`], [`CLAIM_DISTRIBUTED`]; a grouped queue: `rq_claim_fair` | `direct::claim` |
//! | take (and complete) | queued, failed → success, or deleted | [`TAKE_COMPLETE`], [`TAKE_DELETING`] | `direct::claim` |
//! | complete | claimed → success, or deleted | [`COMPLETE`], [`COMPLETE_DELETING`], [`COMPLETE_BATCH`], [`COMPLETE_BATCH_DELETING`] | `direct::end` |
//! | fail, rescue | claimed → failed, or exhausted | [`FAIL`] (a rescue calls rq_fail) | `direct::end` |
//! | reschedule, sleep, park | claimed → queued | `rq_reschedule` (rq_sleep and rq_wait_event call it) | |
//! | reject | claimed → queued | `rq_reject` | |
//! | cancel | unfinished → cancelled | `rq_cancel` | |
//! | retry | ended → queued | `rq_retry` | |
//! | expire | queued, failed → expired | `rq_expire`, `rq_expire_distributed` | |
//!
//! (A claim that only locks, `rq_take` without complete, changes no
//! status: sql/claim.take.sql.)
//!
//! Every path that ends a job (success, exhausted, expired, cancelled)
//! hands what it ended to one epilogue, src/ended.rs (from SQL through
//! `raquel_internal.rq_ended`); tests/client/tests/endings.rs ends a job by
//! every path and shows its awaiter woken at the commit.

/// Claims jobs found by a claim's walk (sql/claim.*.sql): claimed, with a
/// lease (src/claim.rs).
pub(crate) const CLAIM: &str = include_str!("../sql/transition.claim.sql");
/// Takes and completes in one statement (rq_take(complete => true)).
pub(crate) const TAKE_COMPLETE: &str = include_str!("../sql/transition.take_complete.sql");
/// The same in a queue without history: the jobs are deleted.
pub(crate) const TAKE_DELETING: &str = include_str!("../sql/transition.take_deleting.sql");
/// A claim on a distributed table, one queue's shard (src/distributed.rs).
pub(crate) const CLAIM_DISTRIBUTED: &str = include_str!("../sql/transition.claim_distributed.sql");
/// rq_complete (src/finish.rs).
pub(crate) const COMPLETE: &str = include_str!("../sql/transition.complete.sql");
/// rq_complete in a queue without history.
pub(crate) const COMPLETE_DELETING: &str = include_str!("../sql/transition.complete_deleting.sql");
/// rq_fail: failed, due after its backoff, or exhausted.
pub(crate) const FAIL: &str = include_str!("../sql/transition.fail.sql");
/// rq_complete_batch.
pub(crate) const COMPLETE_BATCH: &str = include_str!("../sql/transition.complete_batch.sql");
/// rq_complete_batch in a queue without history.
pub(crate) const COMPLETE_BATCH_DELETING: &str = include_str!("../sql/transition.complete_batch_deleting.sql");
/// rq_enqueue's INSERT (src/enqueue.rs).
pub(crate) const ENQUEUE: &str = include_str!("../sql/transition.enqueue.sql");

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};

    /// The words and the marks `(`, `)`, `,`, `=`, `;` of `text`, with its
    /// comments (SQL's `--`, Rust's `//`) left out, upper-cased. In SQL
    /// (`sql`), what a string literal holds is left out too (a Prometheus
    /// label `status="…"` is not a write); in Rust a quote is only a
    /// space, as the SQL a string literal holds is what is looked for.
    fn tokens(text: &str, sql: bool) -> Vec<String> {
        let mut out = Vec::new();
        for line in text.lines() {
            let line = match (line.find("--"), line.find("//")) {
                (Some(a), Some(b)) => &line[..a.min(b)],
                (Some(a), None) | (None, Some(a)) => &line[..a],
                (None, None) => line,
            };
            let mut spaced = String::new();
            let mut quoted = false;
            for c in line.chars() {
                match c {
                    '\'' if sql => {
                        quoted = !quoted;
                        spaced.push(' ');
                    }
                    _ if quoted => {}
                    '(' | ')' | ',' | '=' | ';' => {
                        spaced.push(' ');
                        spaced.push(c);
                        spaced.push(' ');
                    }
                    '"' | '\'' | '`' => spaced.push(' '),
                    c => spaced.push(c),
                }
            }
            out.extend(spaced.split_whitespace().map(str::to_uppercase));
        }
        out
    }

    /// Where `text` writes a job's status: an UPDATE's `SET status =` (or
    /// `, status =` in its list, `j.status` too), an INSERT into the jobs
    /// table (a job born, its status the column's default or given), or a
    /// tuple's status column set by Rust (`Col::Status`); each as the
    /// tokens around it.
    fn status_writes(text: &str, sql: bool) -> Vec<String> {
        let t = tokens(text, sql);
        let mut found = Vec::new();
        for i in 0..t.len() {
            let status = |w: &str| w == "STATUS" || w.ends_with(".STATUS");
            let jobs = |w: &str| w == "JOBS" || w.ends_with(".JOBS") || w == "@JOBS@";
            let write = (t[i] == "SET" || t[i] == ",") && t.get(i + 1).is_some_and(|w| status(w)) && t.get(i + 2).is_some_and(|w| w == "=")
                || t[i] == "INSERT" && t.get(i + 1).is_some_and(|w| w == "INTO") && t.get(i + 2).is_some_and(|w| jobs(w))
                || t[i].contains("COL::STATUS");
            if write {
                found.push(t[i.saturating_sub(2)..(i + 4).min(t.len())].join(" "));
            }
        }
        found
    }

    fn repo() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).to_path_buf()
    }

    /// sql/'s files but the released and generated scripts (copies of the
    /// sources, which the upgrade tests compare), and src/'s, each by its
    /// path from the repository ("sql/claim.sql", "src/direct/step.rs").
    fn sources() -> Vec<(String, String)> {
        let mut found = Vec::new();
        let mut folders = vec![repo().join("sql"), repo().join("src")];
        while let Some(folder) = folders.pop() {
            for entry in std::fs::read_dir(&folder).unwrap() {
                let path = entry.unwrap().path();
                let name = path.strip_prefix(repo()).unwrap().to_string_lossy().into_owned();
                if path.is_dir() {
                    folders.push(path);
                } else if (name.ends_with(".sql") && !name.starts_with("sql/raquel--")) || name.ends_with(".rs") {
                    found.push((name, std::fs::read_to_string(&path).unwrap()));
                }
            }
        }
        found
    }

    /// A transition's home (the module's doc lists them). src/pg_tests.rs
    /// sets jobs' statuses by hand to test the verbs on them, and this
    /// module holds the patterns themselves.
    fn home(file: &str) -> bool {
        file == "sql/transitions.sql"
            || (file.starts_with("sql/transition.") && file.ends_with(".sql"))
            || file == "src/direct.rs"
            || file.starts_with("src/direct/")
            || file == "src/pg_tests.rs"
            || file == "src/transitions.rs"
    }

    #[test]
    fn the_scan_sees_a_status_written() {
        assert_eq!(status_writes("UPDATE jobs SET status = 'queued' WHERE id = $1", true).len(), 1);
        assert_eq!(status_writes("UPDATE @jobs@ j\n  SET attempts = 1,\n      j.status='claimed'", true).len(), 1);
        assert_eq!(status_writes("INSERT INTO @extschema@.jobs (queue) VALUES ('q')", true).len(), 1);
        assert_eq!(status_writes("insert into @jobs@ as j (queue)", true).len(), 1);
        assert_eq!(status_writes("        put(Col::Status, Some(x));", false).len(), 1);
        // reading a status is not writing one
        assert!(status_writes("SELECT 1 FROM jobs WHERE status = 'queued' AND j.status = $1", true).is_empty());
        assert!(status_writes("-- UPDATE jobs SET status = 'queued'\n// SET status = 'x'", true).is_empty());
        assert!(status_writes(r#"SELECT format('{queue="%s",status="%s"}', q, s)"#, true).is_empty());
        // the SQL in a Rust string is looked at
        assert_eq!(status_writes("const S: &str = \"UPDATE @jobs@ j SET status = 'failed'\";", false).len(), 1);
        assert!(status_writes("let (status, lease) = f(); let status = 1;", false).is_empty());
    }

    #[test]
    fn a_status_is_written_only_by_the_transitions() {
        let mut elsewhere = Vec::new();
        let mut at_home = 0;
        for (file, text) in sources() {
            let writes = status_writes(&text, file.ends_with(".sql"));
            if home(&file) {
                at_home += writes.len();
            } else {
                elsewhere.extend(writes.into_iter().map(|w| format!("{file}: {w}")));
            }
        }
        assert!(
            elsewhere.is_empty(),
            "a job's status is written outside its transitions (src/transitions.rs says where they live):\n{}",
            elsewhere.join("\n")
        );
        // every transition of the table above is found where it lives
        assert!(at_home >= 30, "only {at_home} status writes found in the transitions' files: the scan misses them");
    }
}
