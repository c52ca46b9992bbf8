//! Every promise of the errors page (docs/src/reference/errors.md), held
//! against the errors it describes: each SQLSTATE of its table of what a
//! verb raises is raised by a case below, with that code; the message
//! names the value it refuses; the facts the page says are in the DETAIL
//! are there and the fix it names is in the HINT; the refusal changes
//! nothing (the jobs table's rows are as they were); and no CONTEXT line
//! shows raquel's internal helpers, which a user cannot act on. The page's
//! own example and its quoted messages are read from the page, so the page
//! and the code cannot drift apart without this failing.

use raquel_client_tests::{connect, fresh_db, jobs_digest};

const PAGE: &str = include_str!("../../../docs/src/reference/errors.md");

/// The SQLSTATEs of the page's table "What a verb raises".
fn codes_on_the_page() -> Vec<String> {
    let table = PAGE.split("## What a verb raises").nth(1).expect("the page has its table").split("\n## ").next().unwrap();
    table
        .lines()
        .filter_map(|l| l.strip_prefix("| "))
        .filter_map(|l| l.split(" |").next())
        .filter(|code| code.len() == 5 && code.chars().all(|c| c.is_ascii_alphanumeric()))
        .map(str::to_string)
        .collect()
}

/// The page's row for `code`, whole.
fn row(code: &str) -> &'static str {
    PAGE.lines().find(|l| l.starts_with(&format!("| {code} |"))).unwrap_or_else(|| panic!("no row for {code}"))
}

/// What one case expects of its error.
struct Case {
    code: &'static str,
    /// Run first, in the case's database (may be empty).
    setup: String,
    /// The role the statement runs as (None: the test's own, a superuser).
    role: Option<String>,
    statement: String,
    /// Each is in the message.
    message: Vec<String>,
    /// Each is in the DETAIL.
    detail: Vec<String>,
    /// Each is in the HINT.
    hint: Vec<String>,
    /// Each is in the CONTEXT.
    context: Vec<String>,
}

impl Case {
    fn new(code: &'static str, statement: impl Into<String>) -> Case {
        Case { code, setup: String::new(), role: None, statement: statement.into(), message: vec![], detail: vec![], hint: vec![], context: vec![] }
    }
    fn setup(mut self, sql: impl Into<String>) -> Case {
        self.setup = sql.into();
        self
    }
    fn as_role(mut self, role: &str) -> Case {
        self.role = Some(role.to_string());
        self
    }
    fn message(mut self, part: impl Into<String>) -> Case {
        self.message.push(part.into());
        self
    }
    fn detail(mut self, part: impl Into<String>) -> Case {
        self.detail.push(part.into());
        self
    }
    fn hint(mut self, part: impl Into<String>) -> Case {
        self.hint.push(part.into());
        self
    }
    fn context(mut self, part: impl Into<String>) -> Case {
        self.context.push(part.into());
        self
    }
}

/// The SQLSTATEs of the page that no case raises, each with why: a race
/// between two transactions, which the concurrency tests provoke.
const RACES: &[(&str, &str)] = &[(
    "40001",
    "a keyed enqueue racing the end of its key's holder, and a job changed between a verb's UPDATE and its look at why: \
     tests/client/tests/concurrency.rs and key_period.rs",
)];

#[test]
fn every_promise_of_the_errors_page_holds() {
    let db = fresh_db("rq_it_errors_page");
    let mut c = connect(&db);
    let role = "rq_it_errors_page_producer";
    c.batch_execute(&format!(
        "DROP ROLE IF EXISTS {role}; CREATE ROLE {role}; SELECT rq_grant_producer('{role}');
         SELECT rq_enqueue('ep', 'a'), rq_enqueue('ep', 'b'), rq_enqueue('ep', 'c');"
    ))
    .unwrap();
    let claimed: (String, i32) = {
        let r = c.query_one("SELECT id::text, attempts FROM rq_claim(ARRAY['ep'])", &[]).unwrap();
        (r.get(0), r.get(1))
    };
    let queued: String = c.query_one("SELECT id::text FROM jobs WHERE status = 'queued' ORDER BY id LIMIT 1", &[]).unwrap().get(0);
    let unknown = "00000000-0000-7000-8000-000000000000";
    let at_max = "00000000-0000-7000-8000-0000000000aa";

    // The page's own example, as it shows it.
    let example = PAGE.split("```text\n").nth(1).unwrap().split("```").next().unwrap();
    let call = example.lines().find_map(|l| l.strip_prefix("=# ")).expect("the example's call");
    let shown = example.lines().find_map(|l| l.strip_prefix("ERROR:  ")).expect("the example's error");
    // The DETAIL the page quotes for 22004, and the message it gives.
    let fencing_detail = row("22004").split("the DETAIL: \"").nth(1).and_then(|d| d.split("\" |").next()).expect("22004's DETAIL");

    let cases = vec![
        Case::new("22023", call.trim_end_matches(';')).message(shown),
        Case::new("22023", "SELECT rq_enqueue(NULL, 'x')").message("queue"),
        Case::new("22023", "SELECT rq_enqueue('ep', 'x', max_retry_count => -3)").message("-3"),
        Case::new("22004", format!("SELECT rq_complete('{}', NULL)", claimed.0))
            .message(format!("cannot complete job {} without its attempt", claimed.0))
            .detail(fencing_detail)
            .hint("attempt"),
        Case::new("22004", format!("SELECT rq_extend('{}', NULL)", claimed.0)).message(format!("cannot extend job {}", claimed.0)),
        Case::new("22008", "SELECT rq_ms_to_timestamptz(9223372036854775807)").message("9223372036854775807"),
        Case::new("22003", "SELECT * FROM rq_claim(ARRAY['ep-max'])")
            .setup(format!("INSERT INTO jobs (id, queue, payload, attempts) VALUES ('{at_max}', 'ep-max', 'x', 2147483647)"))
            .message(at_max),
        Case::new("54000", "SELECT rq_enqueue('ep', repeat('x', 100))")
            .setup("SET raquel.max_payload_size = 10")
            .message("queue ep is 100 bytes")
            .message("(10 bytes)"),
        Case::new("42501", format!("SELECT * FROM rq_cancel('{queued}')"))
            .as_role(role)
            .message("jobs")
            .hint(format!("rq_grant_worker('{role}')")),
        Case::new("42501", format!("SELECT * FROM rq_retry('{queued}')")).as_role(role).hint("rq_grant_worker"),
        Case::new("42501", "SELECT * FROM rq_claim(ARRAY['ep'])").as_role(role).hint("rq_grant_worker"),
        Case::new("42704", "SELECT rq_grant_producer(4294967290::oid::regrole)").message("4294967290"),
        Case::new("P0002", format!("SELECT * FROM rq_cancel('{unknown}')")).message(unknown),
        // a user's own frames stay in the CONTEXT (raquel's helpers' go)
        Case::new("P0002", "SELECT ep_mine()")
            .setup(format!("CREATE OR REPLACE FUNCTION ep_mine() RETURNS void LANGUAGE plpgsql AS $$ BEGIN PERFORM rq_cancel('{unknown}'); END $$"))
            .message(unknown)
            .context("ep_mine()"),
        Case::new("42704", "SELECT ep_grant()")
            .setup("CREATE OR REPLACE FUNCTION ep_grant() RETURNS void LANGUAGE plpgsql AS $$ BEGIN PERFORM rq_grant_worker(4294967290::oid::regrole); END $$")
            .message("4294967290")
            .context("rq_grant_worker(regrole)")
            .context("ep_grant()"),
        Case::new("P0002", format!("SELECT * FROM rq_complete('{unknown}', 1)")).message(unknown),
        // a job's history: the page names rq_history under both codes
        Case::new("P0002", format!("SELECT * FROM rq_history('{unknown}')")).message(unknown),
        Case::new("22023", "SELECT * FROM rq_history(NULL)").message("id"),
        // "The DETAIL gives its status and attempt."
        Case::new("55000", format!("SELECT * FROM rq_complete('{queued}', 1)"))
            .message(&queued)
            .detail("queued")
            .detail("attempt 0"),
        Case::new("55000", format!("SELECT * FROM rq_complete('{}', {})", claimed.0, claimed.1 + 1))
            .message(&claimed.0)
            .detail(format!("attempt {}", claimed.1)),
        Case::new("55000", format!("SELECT * FROM rq_retry('{queued}')")).message(&queued).detail("queued"),
        Case::new("55000", format!("SELECT * FROM rq_reschedule('{queued}', 0)")).message(&queued).detail("queued"),
        // a step's name recorded as another kind
        Case::new("55000", format!("SELECT rq_sleep('{}', {}, 'ep-kind', delay => '1 hour')", claimed.0, claimed.1))
            .setup(format!("SELECT rq_step('{}', {}, 'ep-kind', '1')", claimed.0, claimed.1))
            .message("is a step (rq_step), not a sleep (rq_sleep)")
            .detail(format!("Attempt {} recorded it at 20", claimed.1)),
        Case::new("0A000", "SELECT * FROM rq_take(ARRAY['ep-paused'])").setup("SELECT rq_pause('ep-paused')").message("ep-paused"),
        Case::new("39P01", "INSERT INTO ep_scratch VALUES (1)")
            .setup(
                "CREATE TABLE IF NOT EXISTS ep_scratch (x int);
                 CREATE OR REPLACE TRIGGER ep_scratch_events AFTER INSERT ON ep_scratch
                     FOR EACH STATEMENT EXECUTE FUNCTION raquel_internal.rq_job_events()",
            )
            .message("trigger"),
        Case::new("23505", format!("SELECT rq_step('{}', {}, 'ep-step', '1')", claimed.0, claimed.1))
            .setup(format!("SELECT rq_step('{}', {}, 'ep-step', '1')", claimed.0, claimed.1))
            .message("ep-step")
            .detail(format!("Attempt {} recorded it at 20", claimed.1)),
        Case::new("23514", format!("UPDATE jobs SET status = 'done' WHERE id = '{queued}'")).message("status").message("'done'"),
        Case::new("23514", "INSERT INTO jobs (queue, payload, attempts) VALUES ('ep', 'x', -1)").message("attempts").message("-1"),
        Case::new("23514", "INSERT INTO jobs (queue, payload, max_age) VALUES ('ep', 'x', 0)").message("max_age").message("0"),
        Case::new("23514", "INSERT INTO jobs (queue, payload, min_retry_delay, max_retry_delay) VALUES ('ep', 'x', 5000, 10)")
            .message("min_retry_delay (5000 ms)")
            .message("max_retry_delay (10 ms)"),
    ];

    // The page and the cases cover the same codes.
    let on_page = codes_on_the_page();
    assert!(on_page.len() >= 14, "the page's table read as {on_page:?}");
    for code in &on_page {
        let raced = RACES.iter().any(|(r, _)| r == code);
        assert!(raced || cases.iter().any(|case| case.code == code), "the errors page names {code}, which no case raises");
    }
    for case in &cases {
        assert!(on_page.iter().any(|code| code == case.code), "{} is raised by {:?} but not on the errors page", case.code, case.statement);
    }

    let mut failures = Vec::new();
    for case in &cases {
        if !case.setup.is_empty() {
            c.batch_execute(&case.setup).unwrap_or_else(|e| panic!("setup of {:?}: {e}", case.statement));
        }
        let before = jobs_digest(&mut c);
        if let Some(role) = &case.role {
            c.batch_execute(&format!("SET ROLE {role}")).unwrap();
        }
        let error = match c.batch_execute(&case.statement) {
            Ok(()) => {
                failures.push(format!("{:?} succeeded; the page says it raises {}", case.statement, case.code));
                c.batch_execute("RESET ROLE; RESET raquel.max_payload_size").unwrap();
                continue;
            }
            Err(e) => e.as_db_error().cloned().unwrap_or_else(|| panic!("{:?}: not a server error: {e}", case.statement)),
        };
        c.batch_execute("RESET ROLE; RESET raquel.max_payload_size").unwrap();
        let said = format!(
            "{:?} raised {} {:?} (DETAIL {:?}, HINT {:?}, CONTEXT {:?})",
            case.statement,
            error.code().code(),
            error.message(),
            error.detail(),
            error.hint(),
            error.where_()
        );
        if error.code().code() != case.code {
            failures.push(format!("{said}; the page says {}", case.code));
        }
        for part in &case.message {
            if !error.message().contains(part.as_str()) {
                failures.push(format!("{said}; its message does not name {part:?}"));
            }
        }
        for part in &case.detail {
            if !error.detail().unwrap_or_default().contains(part.as_str()) {
                failures.push(format!("{said}; its DETAIL does not say {part:?}"));
            }
        }
        for part in &case.hint {
            if !error.hint().unwrap_or_default().contains(part.as_str()) {
                failures.push(format!("{said}; its HINT does not say {part:?}"));
            }
        }
        for part in &case.context {
            if !error.where_().unwrap_or_default().contains(part.as_str()) {
                failures.push(format!("{said}; its CONTEXT does not show {part:?}"));
            }
        }
        if error.where_().unwrap_or_default().contains("raquel_internal") {
            failures.push(format!("{said}; its CONTEXT shows raquel's internal helpers"));
        }
        if jobs_digest(&mut c) != before {
            failures.push(format!("{said}; the jobs table changed"));
        }
    }
    c.batch_execute(&format!("DROP OWNED BY {role}; DROP ROLE {role}")).unwrap();
    assert!(failures.is_empty(), "{} of {} cases break the errors page's promises:\n{}", failures.len(), cases.len(), failures.join("\n"));
}
