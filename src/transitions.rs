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
//! | claim | queued, failed → claimed | [`CLAIM`], [`CLAIM_DISTRIBUTED`]; a grouped queue's grouped jobs: `sql/claim.fair.sql`, `sql/claim.fair_group.sql` | `direct::claim`, `direct::claim_fair` |
//! | take (and complete) | queued, failed → success, or deleted | [`TAKE_COMPLETE`], [`TAKE_DELETING`] | `direct::claim` |
//! | complete | claimed → success, or deleted | [`COMPLETE`], [`COMPLETE_DELETING`], [`COMPLETE_BATCH`], [`COMPLETE_BATCH_DELETING`] | `direct::end` |
//! | fail, rescue | claimed → failed, or exhausted | [`FAIL`] (a rescue calls rq_fail) | `direct::end` |
//! | reschedule, sleep, park | claimed → queued | [`RESCHEDULE`] (rq_sleep and rq_wait_event call rq_reschedule) | |
//! | reject | claimed → queued | [`REJECT`] | |
//! | cancel | unfinished → cancelled | [`CANCEL`] | |
//! | retry | ended → queued | [`RETRY`] | |
//! | expire | queued, failed → expired | `rq_expire`, `rq_expire_distributed` | |
//!
//! A job's history (rq_history): the transitions that end an attempt
//! without ending the job (fail with a retry left, so a rescue too;
//! reschedule and the sleeps and parks through it; reject) append the
//! attempt to the row's past_attempts in the same write, and so does retry
//! for the end it resets (exhausted, cancelled, expired): the statements by
//! `past_attempts_set`, the direct fail by `direct::end`. The ends that
//! stay the job's own (success, exhausted, cancelled, expired) are read
//! from the row itself.
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
/// rq_reschedule (src/job_verbs.rs).
pub(crate) const RESCHEDULE: &str = include_str!("../sql/transition.reschedule.sql");
/// rq_reject.
pub(crate) const REJECT: &str = include_str!("../sql/transition.reject.sql");
/// rq_cancel.
pub(crate) const CANCEL: &str = include_str!("../sql/transition.cancel.sql");
/// rq_retry.
pub(crate) const RETRY: &str = include_str!("../sql/transition.retry.sql");

/// How many earlier attempts a job keeps in past_attempts: the oldest is
/// dropped as one more is appended, so that a job retried for ever stays
/// bounded.
pub(crate) const PAST_ATTEMPTS_KEPT: usize = 100;

/// One attempt of a job's history as a statement appends it to
/// past_attempts (sql/schema.sql, read by rq_history): each field a SQL
/// expression over the row `j` (before the UPDATE) and the parameters.
pub(crate) struct PastAttempt<'a> {
    pub attempt: &'a str,
    pub worker: &'a str,
    pub claimed_at: &'a str,
    pub ended_at: &'a str,
    pub outcome: &'a str,
    pub error: &'a str,
    pub trace: &'a str,
}

/// The statements' `@history_set@`: `, past_attempts = …`, appending
/// `entry` when `when` holds (a SQL condition), the oldest entry dropped
/// when PAST_ATTEMPTS_KEPT are kept; nothing on a table older than 0.6.0,
/// which has no past_attempts (`history` false: install::Mode::history).
/// Built-in functions schema-qualified (tests/client/tests/hostile.rs).
pub(crate) fn past_attempts_set(history: bool, when: &str, entry: &PastAttempt) -> String {
    if !history {
        return String::new();
    }
    let PastAttempt { attempt, worker, claimed_at, ended_at, outcome, error, trace } = entry;
    format!(
        ", past_attempts = CASE WHEN {when} THEN \
         (CASE WHEN pg_catalog.jsonb_array_length(j.past_attempts) >= {PAST_ATTEMPTS_KEPT} THEN j.past_attempts - 0 \
               ELSE coalesce(j.past_attempts, '[]'::pg_catalog.jsonb) END) \
         || pg_catalog.jsonb_build_array(pg_catalog.jsonb_build_object(\
         'attempt', {attempt}, 'worker', {worker}, 'claimed_at', {claimed_at}, 'ended_at', {ended_at}, \
         'outcome', {outcome}, 'error', {error}, 'trace', {trace})) \
         ELSE j.past_attempts END"
    )
}

/// Whether an ended job's current attempt is its own, not one that
/// past_attempts already holds (a job cancelled or expired while queued
/// after a failure or a reschedule, or never claimed): a SQL condition on
/// the row `j`. rq_history (sql/observe.sql) decides the same way.
pub(crate) const OWN_ATTEMPT: &str = "(j.claimed_at IS NOT NULL \
    AND j.attempts > coalesce((j.past_attempts -> -1 ->> 'attempt')::integer, 0))";

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};

    /// The words and the marks `(`, `)`, `,`, `=`, `:=`, `;` of `text`,
    /// upper-cased, with its comments (`--` and `//` to the end of a line,
    /// `/* … */`) left out. A quote is a space: the SQL a string holds
    /// (a Rust string literal, or a PL/pgSQL `EXECUTE`'s text) is looked
    /// at too. A Prometheus label (`status="…"`) is not a column.
    fn tokens(text: &str) -> Vec<String> {
        let mut text = text.replace("status=\"", "status_label=\"").replace(":=", " := ");
        while let Some(open) = text.find("/*") {
            let close = text[open..].find("*/").map_or(text.len(), |c| open + c + 2);
            text.replace_range(open..close, " ");
        }
        let mut out = Vec::new();
        for line in text.lines() {
            let line = match (line.find("--"), line.find("//")) {
                (Some(a), Some(b)) => &line[..a.min(b)],
                (Some(a), None) | (None, Some(a)) => &line[..a],
                (None, None) => line,
            };
            let mut spaced = String::new();
            for c in line.chars() {
                match c {
                    '(' | ')' | ',' | ';' => {
                        spaced.push(' ');
                        spaced.push(c);
                        spaced.push(' ');
                    }
                    // (an `=` alone, not `:=`'s, nor `<=`, `>=`, `!=`)
                    '=' if !matches!(spaced.chars().last(), Some(':' | '<' | '>' | '!')) => spaced.push_str(" = "),
                    '"' | '\'' | '`' => spaced.push(' '),
                    c => spaced.push(c),
                }
            }
            out.extend(spaced.split_whitespace().map(str::to_uppercase));
        }
        out
    }

    /// Where `text` writes a job's status, each as the tokens around it:
    /// - an UPDATE's `SET status =` (or `, status =` in its list, `j.status`
    ///   too), `SET (…, status, …) =`, and a PL/pgSQL assignment
    ///   (`NEW.status := …`, or `=` as a statement);
    /// - a job born: an INSERT, MERGE or COPY into the jobs table (its
    ///   status the column's default, or given);
    /// - in Rust, a tuple's status column set (`set(Col::Status, …)`,
    ///   `put(…)`, `values[at(Col::Status)] = …`), a row of a
    ///   table updated (`table_tuple_update` and its kin) or, with
    ///   `inserts`, inserted (`simple_table_tuple_insert` and its kin).
    fn status_writes(text: &str, inserts: bool) -> Vec<String> {
        const UPDATES: &[&str] = &["TABLE_TUPLE_UPDATE", "SIMPLE_TABLE_TUPLE_UPDATE", "HEAP_UPDATE", "SIMPLE_HEAP_UPDATE", "HEAP_MODIFY_TUPLE"];
        const INSERTS: &[&str] =
            &["TABLE_TUPLE_INSERT", "SIMPLE_TABLE_TUPLE_INSERT", "HEAP_INSERT", "SIMPLE_HEAP_INSERT", "TABLE_MULTI_INSERT", "HEAP_MULTI_INSERT"];
        let t = tokens(text);
        let at = |i: usize| t.get(i).map_or("", String::as_str);
        let status = |w: &str| w == "STATUS" || w.ends_with(".STATUS");
        let jobs = |w: &str| w == "JOBS" || w.ends_with(".JOBS") || w == "@JOBS@";
        let call = |w: &str| w.rsplit("::").next().unwrap_or(w).to_string();
        let mut found = Vec::new();
        for i in 0..t.len() {
            let before = if i == 0 { ";" } else { at(i - 1) };
            let write = status(at(i))
                && (at(i + 1) == ":="
                    || at(i + 1) == "=" && ["SET", ",", ";", "BEGIN", "LOOP"].contains(&before))
                || at(i) == "SET" && at(i + 1) == "(" && t[i + 2..].iter().take_while(|w| *w != ")").any(|w| status(w))
                || at(i) == "INTO" && jobs(at(i + 1)) && ["INSERT", "MERGE"].contains(&before)
                || at(i) == "COPY" && jobs(at(i + 1))
                || at(i) == "COL::STATUS"
                    && (before == "(" && i >= 2 && ["SET", "PUT"].iter().any(|f| t[i - 2].ends_with(f))
                        || at(i + 1) == ")" && at(i + 2) == "]" && at(i + 3) == "=")
                || at(i + 1) == "(" && UPDATES.contains(&call(at(i)).as_str())
                || inserts && at(i + 1) == "(" && INSERTS.contains(&call(at(i)).as_str());
            if write {
                found.push(t[i.saturating_sub(2)..(i + 4).min(t.len())].join(" "));
            }
        }
        found
    }

    fn repo() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).to_path_buf()
    }

    /// sql/'s files and src/'s, each by its path from the repository
    /// ("sql/claim.sql", "src/direct/step.rs"). The install and update
    /// scripts (`sql/raquel--*.sql`) are left out: they are copies of these
    /// sources, generated or written for an update, and the upgrade tests
    /// compare what each installs with what the sources install.
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

    /// A transition's home (the module's doc lists them): each one must
    /// write a status. src/pg_tests.rs sets statuses by hand to test the
    /// verbs on them, this module holds the patterns themselves, and
    /// src/direct/step.rs inserts rows of job_steps (no status).
    fn home(file: &str) -> Option<bool> {
        let statement = file.starts_with("sql/transition.") && file.ends_with(".sql");
        if statement || file == "sql/transitions.sql" || file == "src/direct.rs" {
            Some(true)
        } else if ["src/pg_tests.rs", "src/transitions.rs"].contains(&file) {
            Some(false)
        } else {
            None
        }
    }

    #[test]
    fn the_scan_sees_a_status_written() {
        let writes = |text: &str| status_writes(text, true).len();
        assert_eq!(writes("UPDATE jobs SET status = 'queued' WHERE id = $1"), 1);
        assert_eq!(writes("UPDATE @jobs@ j\n  SET attempts = 1,\n      j.status='claimed'"), 1);
        assert_eq!(writes("UPDATE jobs SET (finished_at, status) = (1, 'success')"), 1);
        assert_eq!(writes("BEGIN\n    NEW.status := 'queued';\n    NEW.status = 'failed';"), 2);
        assert_eq!(writes("INSERT INTO @extschema@.jobs (queue) VALUES ('q')"), 1);
        assert_eq!(writes("insert into @jobs@ as j (queue)"), 1);
        assert_eq!(writes("MERGE INTO jobs j USING x ON false WHEN NOT MATCHED THEN INSERT (queue) VALUES ('q')"), 1);
        assert_eq!(writes("COPY jobs (queue) FROM STDIN"), 1);
        assert_eq!(writes("EXECUTE format('UPDATE %s SET status = %L', t, 'queued')"), 1);
        assert_eq!(writes("        put(Col::Status, Some(x));"), 1);
        assert_eq!(writes("values[at(Col::Status)] = d;"), 1);
        assert_eq!(writes("if nulls[at(Col::Status)] { return; } let s = values[at(Col::Status)];"), 0);
        assert_eq!(writes("pg_sys::table_tuple_update(rel, tid, slot)"), 1);
        assert_eq!(status_writes("pg_sys::simple_table_tuple_insert(rel, slot)", true).len(), 1);
        assert!(status_writes("pg_sys::simple_table_tuple_insert(rel, slot)", false).is_empty());
        // the SQL in a Rust string is looked at
        assert_eq!(writes("const S: &str = \"UPDATE @jobs@ j SET status = 'failed'\";"), 1);
        // reading a status is not writing one
        assert_eq!(writes("SELECT 1 FROM jobs WHERE status = 'queued' AND j.status = $1"), 0);
        assert_eq!(writes("IF NEW.status = 'queued' THEN RETURN NULL; END IF;"), 0);
        assert_eq!(writes("CASE WHEN w.t IS NULL THEN j.status = 'claimed' ELSE j.status <= 'x' END"), 0);
        assert_eq!(writes("-- UPDATE jobs SET status = 'queued'\n// SET status = 'x'\n/* SET status = 'y' */"), 0);
        assert_eq!(writes(r#"SELECT format('{queue="%s",status="%s"}', q, s)"#), 0);
        assert_eq!(writes("let (status, lease) = f(); let status = 1;"), 0);
    }

    #[test]
    fn a_status_is_written_only_by_the_transitions() {
        let module = std::fs::read_to_string(repo().join("src/transitions.rs")).unwrap();
        let mut elsewhere = Vec::new();
        let mut homes = 0;
        for (file, text) in sources() {
            let writes = status_writes(&text, file != "src/direct/step.rs");
            match home(&file) {
                Some(true) => {
                    homes += 1;
                    assert!(!writes.is_empty(), "{file} is a home of the transitions, but the scan finds no status written there");
                    // a statement file is a home only as one of this module's
                    if file.starts_with("sql/transition.") {
                        let name = file.trim_start_matches("sql/");
                        assert!(
                            module.contains(&format!("include_str!(\"../sql/{name}\")")),
                            "{file} is not one of src/transitions.rs's statements"
                        );
                    }
                }
                Some(false) => {}
                None => elsewhere.extend(writes.into_iter().map(|w| format!("{file}: {w}"))),
            }
        }
        assert!(
            elsewhere.is_empty(),
            "a job's status is written outside its transitions (src/transitions.rs says where they live):\n{}",
            elsewhere.join("\n")
        );
        assert!(homes >= 12, "only {homes} homes of the transitions found");
    }
}
