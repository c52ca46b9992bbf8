//! No privilege escalation through planted look-alikes.
//!
//! A role that may create objects in a schema on the search_path (here: CREATE
//! on `public`) can plant functions, aggregates and operators named like the
//! built-ins the extension calls, with argument types that fit a call site
//! better than pg_catalog's own (`public.quote_ident(name)` beats
//! `pg_catalog.quote_ident(text)` for a `name` argument,
//! `public.format(text, text, integer)` beats `pg_catalog.format(text,
//! VARIADIC "any")`, `public.*(bigint, interval)` beats the built-in that
//! needs a cast). A function of the extension that runs with its caller's
//! search_path then runs the planted code with the caller's rights: a
//! superuser's, or the background worker's (the bootstrap superuser).
//!
//! The planted objects are derived from the code, not listed by hand: every
//! identifier followed by `(` and every operator in the function bodies of
//! the extension (pg_proc.prosrc of its members), in the statements its Rust
//! prepares (sql/<idea>.<statement>.sql) and in the SQL strings of the Rust
//! code (src/worker.rs whole, and the other files' strings that hold a
//! statement), intersected with pg_catalog's functions and operators. For
//! each built-in overload, look-alikes are planted whose argument types are
//! the types the extension passes (see PALETTE), as many as the call sites'
//! argument counts need; each calls the built-in, so that the verbs go on
//! working, after it leaves its evidence: a WARNING "planted <object> ran as
//! <role> in database <db> (<backend type>)", which reaches the client that
//! ran the statement, and the server log whoever ran it (a WARNING is not
//! undone by the caller's rollback, unlike a row or a NOTIFY).
//!
//! The tests: every function of the extension that resolves a name pins its
//! search_path (those written in SQL, and the C functions that run SQL); the
//! planted look-alikes do run under the released 0.1.0 (so they are strong
//! enough to catch the defect); and under this version none of them runs,
//! whatever verb the superuser, a producer or a worker calls, and whatever
//! the background worker does.

use postgres::error::DbError;
use postgres::{Client, Config, NoTls, SimpleQueryMessage};
use raquel_client_tests::{connect, eventually, reset_server, server_dsn, set_server};
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// What the pinned search_path of every function of the extension must be.
const PINNED: &str = "search_path=pg_catalog, pg_temp";

/// The types the extension passes to built-ins: its columns' and
/// parameters' types, what its literals become, the catalog types the
/// background worker reads (name, regrole), and the table's row type and
/// arrays of these. `@jobs@` is the table's row type, qualified.
const PALETTE: &[&str] = &[
    "text",
    "name",
    "character varying",
    "integer",
    "bigint",
    "smallint",
    "numeric",
    "double precision",
    "boolean",
    "uuid",
    "jsonb",
    "interval",
    "timestamp with time zone",
    "regrole",
    "oid",
    "text[]",
    "uuid[]",
    "integer[]",
    "bigint[]",
    "jsonb[]",
    "@jobs@",
    "@jobs@[]",
];

/// Up to this many argument-type combinations per call shape are planted
/// (every combination of the types each position may take); beyond it, one
/// position at a time is varied (see `variants`).
const FULL_PRODUCT_LIMIT: usize = 256;

/// The functions of pgrx's #[pg_test]s (schema `tests`) are members of the
/// extension only in test builds; they are not the extension's code.
const TEST_SCHEMA: &str = "tests";

// ---------------------------------------------------------------------------
// Sessions that keep what the server tells them.

#[derive(Clone, Debug)]
struct Notice {
    message: String,
    context: String,
}

struct Session {
    role: String,
    client: Client,
    notices: Arc<Mutex<Vec<Notice>>>,
}

fn session(db: &str, role: &str) -> Session {
    let mut config: Config = server_dsn().parse().expect("RAQUEL_TEST_DSN is a libpq connection string");
    config.dbname(db).user(role).application_name(&format!("rq_hostile as {role}"));
    let notices: Arc<Mutex<Vec<Notice>>> = Arc::default();
    let sink = notices.clone();
    config.notice_callback(move |notice: DbError| {
        sink.lock().unwrap().push(Notice {
            message: notice.message().to_string(),
            context: notice.where_().unwrap_or("").replace('\n', " / "),
        })
    });
    let client = config.connect(NoTls).unwrap_or_else(|e| panic!("connecting to {db} as {role}: {e}"));
    Session { role: role.to_string(), client, notices }
}

/// A superuser session whose own statements can never resolve to a planted
/// object: it reads the catalog and arranges rows for the test.
fn pinned_session(db: &str, role: &str) -> Session {
    let mut s = session(db, role);
    s.client.batch_execute("SET search_path = pg_catalog, pg_temp").unwrap();
    s
}

fn server_log_path() -> String {
    std::env::var("RAQUEL_TEST_LOG").expect("RAQUEL_TEST_LOG is not set: run the tests through bin/test")
}

fn server_log_len() -> u64 {
    std::fs::metadata(server_log_path()).map(|m| m.len()).unwrap_or(0)
}

fn server_log_since(offset: u64) -> String {
    let bytes = std::fs::read(server_log_path()).unwrap_or_default();
    String::from_utf8_lossy(&bytes[(offset as usize).min(bytes.len())..]).into_owned()
}

// ---------------------------------------------------------------------------
// What the extension's code calls: identifiers followed by `(`, operators.

#[derive(Clone, Debug, PartialEq)]
enum Tok {
    Word(String),
    Op(String),
    Open(char),
    Close(char),
    Comma,
    Dot,
    Arrow,
    Other,
}

const OP_CHARS: &str = "+-*/<>=~!@#%^&|`?";

/// PostgreSQL's lexical rules, as far as they decide what is a name, a call,
/// an operator, a literal or a comment.
fn sql_tokens(sql: &str) -> Vec<Tok> {
    let s: Vec<char> = sql.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < s.len() {
        let c = s[i];
        let next = s.get(i + 1).copied();
        if c == '-' && next == Some('-') {
            while i < s.len() && s[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            i += 2;
            while i + 1 < s.len() && !(s[i] == '*' && s[i + 1] == '/') {
                i += 1;
            }
            i += 2;
        } else if c == '\'' {
            i += 1;
            while i < s.len() {
                if s[i] == '\'' {
                    if s.get(i + 1) == Some(&'\'') {
                        i += 2;
                        continue;
                    }
                    break;
                }
                i += 1;
            }
            i += 1;
            out.push(Tok::Other);
        } else if c == '"' {
            let start = i + 1;
            i += 1;
            while i < s.len() && s[i] != '"' {
                i += 1;
            }
            out.push(Tok::Word(s[start..i.min(s.len())].iter().collect()));
            i += 1;
        } else if c == '$' && next.is_some_and(|n| n.is_ascii_digit()) {
            i += 1;
            while i < s.len() && s[i].is_ascii_digit() {
                i += 1;
            }
            out.push(Tok::Other);
        } else if c == '$' {
            // a dollar quote: skip to the same tag
            let mut j = i + 1;
            while j < s.len() && (s[j].is_alphanumeric() || s[j] == '_') {
                j += 1;
            }
            if j < s.len() && s[j] == '$' {
                let tag: String = s[i..=j].iter().collect();
                let rest: String = s[j + 1..].iter().collect();
                let end = rest.find(&tag).map_or(s.len(), |e| j + 1 + rest[..e].chars().count() + tag.chars().count());
                i = end;
            } else {
                i += 1;
            }
            out.push(Tok::Other);
        } else if c.is_alphabetic() || c == '_' {
            let start = i;
            while i < s.len() && (s[i].is_alphanumeric() || s[i] == '_' || s[i] == '$') {
                i += 1;
            }
            out.push(Tok::Word(s[start..i].iter().collect::<String>().to_lowercase()));
        } else if c.is_ascii_digit() {
            while i < s.len() && (s[i].is_ascii_alphanumeric() || s[i] == '.') {
                i += 1;
            }
            out.push(Tok::Other);
        } else if c == ':' {
            i += if next == Some(':') || next == Some('=') { 2 } else { 1 };
            out.push(Tok::Other);
        } else if OP_CHARS.contains(c) {
            let start = i;
            while i < s.len() && OP_CHARS.contains(s[i]) {
                // a comment starts inside the run: the operator ends there
                if i > start && ((s[i] == '-' && s.get(i + 1) == Some(&'-')) || (s[i] == '/' && s.get(i + 1) == Some(&'*'))) {
                    break;
                }
                i += 1;
            }
            let mut op: String = s[start..i].iter().collect();
            // A name of several characters ends in + or - only if it holds
            // one of ~ ! @ # % ^ & | ` ? (PostgreSQL's rule): give the rest back.
            while op.len() > 1 && (op.ends_with('+') || op.ends_with('-')) && !op.contains(|c| "~!@#%^&|`?".contains(c)) {
                op.pop();
                i -= 1;
            }
            out.push(match op.as_str() {
                "=>" => Tok::Arrow,
                "!=" => Tok::Op("<>".into()),
                _ => Tok::Op(op),
            });
        } else if c.is_whitespace() {
            i += 1;
        } else {
            out.push(match c {
                '(' | '[' => Tok::Open(c),
                ')' | ']' => Tok::Close(c),
                ',' => Tok::Comma,
                '.' => Tok::Dot,
                _ => Tok::Other,
            });
            i += 1;
        }
    }
    out
}

/// How a function is called: its number of arguments and the names given to
/// them (`make_interval(secs => …)`).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct CallShape {
    arity: usize,
    named: Vec<String>,
}

#[derive(Default, Debug)]
struct CodeUses {
    calls: BTreeMap<String, BTreeSet<CallShape>>,
    operators: BTreeSet<String>,
}

/// The shape of the call whose `(` is at `open`.
fn call_shape(t: &[Tok], open: usize) -> CallShape {
    let (mut depth, mut commas, mut anything, mut order_by) = (0, 0, false, false);
    let mut named = Vec::new();
    let mut j = open + 1;
    while j < t.len() {
        match &t[j] {
            Tok::Open(_) => depth += 1,
            Tok::Close(_) if depth == 0 => break,
            Tok::Close(_) => depth -= 1,
            Tok::Comma if depth == 0 && !order_by => commas += 1,
            Tok::Word(w) if depth == 0 && w == "order" => order_by = true,
            Tok::Arrow if depth == 0 => {
                if let Tok::Word(name) = &t[j - 1] {
                    named.push(name.clone());
                }
            }
            _ => {}
        }
        // count(*) has no argument
        if !(depth == 0 && t[j] == Tok::Op("*".into()) && matches!(t.get(j + 1), Some(Tok::Close(_)))) {
            anything = true;
        }
        j += 1;
    }
    CallShape { arity: if anything { commas + 1 } else { 0 }, named }
}

fn note_sql(sql: &str, uses: &mut CodeUses) {
    let t = sql_tokens(&without_placeholders(sql));
    for (i, tok) in t.iter().enumerate() {
        match tok {
            Tok::Word(w) => {
                let qualified = i > 0 && t[i - 1] == Tok::Dot;
                if t.get(i + 1) == Some(&Tok::Open('(')) && !qualified {
                    let shape = call_shape(&t, i + 1);
                    // unnest(a, b) in FROM is ROWS FROM (unnest(a), unnest(b))
                    if w == "unnest" && shape.arity > 1 {
                        uses.calls.entry(w.clone()).or_default().insert(CallShape { arity: 1, named: vec![] });
                    }
                    uses.calls.entry(w.clone()).or_default().insert(shape);
                }
                // constructs that call an operator looked up by name
                let previous = if i > 0 { t.get(i - 1) } else { None };
                let implied: &[&str] = match w.as_str() {
                    "in" if previous == Some(&Tok::Word("not".into())) => &["<>", "="],
                    "in" | "nullif" => &["="],
                    "distinct" if previous == Some(&Tok::Word("is".into())) => &["="],
                    "between" => &[">=", "<="],
                    "like" => &["~~", "!~~"],
                    "ilike" => &["~~*", "!~~*"],
                    _ => &[],
                };
                uses.operators.extend(implied.iter().map(|o| o.to_string()));
            }
            Tok::Op(op) => {
                uses.operators.insert(op.clone());
            }
            _ => {}
        }
    }
}

/// `@jobs@`, `@queue_filter@`, … (the templates' placeholders) become a name.
fn without_placeholders(sql: &str) -> String {
    let mut out = String::new();
    let mut rest = sql;
    while let Some(at) = rest.find('@') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        match after.find('@') {
            Some(end) if end > 0 && after[..end].chars().all(|c| c.is_ascii_lowercase() || c == '_') => {
                out.push_str("placeholder");
                rest = &after[end + 1..];
            }
            _ => {
                out.push('@');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

/// The string literals of a Rust source file, with `\` line continuations
/// joined.
fn rust_string_literals(src: &str) -> Vec<String> {
    let s: Vec<char> = src.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < s.len() {
        let c = s[i];
        if c == '/' && s.get(i + 1) == Some(&'/') {
            while i < s.len() && s[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && s.get(i + 1) == Some(&'*') {
            while i + 1 < s.len() && !(s[i] == '*' && s[i + 1] == '/') {
                i += 1;
            }
            i += 2;
        } else if c == 'r' && matches!(s.get(i + 1), Some('"') | Some('#')) && (i == 0 || !s[i - 1].is_alphanumeric()) {
            let mut j = i + 1;
            let mut hashes = 0;
            while s.get(j) == Some(&'#') {
                hashes += 1;
                j += 1;
            }
            if s.get(j) != Some(&'"') {
                i += 1;
                continue;
            }
            let close: String = std::iter::once('"').chain(std::iter::repeat('#').take(hashes)).collect();
            let rest: String = s[j + 1..].iter().collect();
            let end = rest.find(&close).unwrap_or(rest.len());
            out.push(rest[..end].to_string());
            i = j + 1 + rest[..end].chars().count() + close.chars().count();
        } else if c == '\'' {
            // a char literal ('"', '\'') or a lifetime
            if s.get(i + 1) == Some(&'\\') {
                i += 3;
                while i < s.len() && s[i] != '\'' {
                    i += 1;
                }
                i += 1;
            } else if s.get(i + 2) == Some(&'\'') {
                i += 3;
            } else {
                i += 1;
            }
        } else if c == '"' {
            let mut text = String::new();
            i += 1;
            while i < s.len() && s[i] != '"' {
                if s[i] == '\\' {
                    match s.get(i + 1) {
                        Some('\n') => {
                            i += 2;
                            while i < s.len() && s[i].is_whitespace() {
                                i += 1;
                            }
                            continue;
                        }
                        Some('n') => text.push('\n'),
                        Some(other) => text.push(*other),
                        None => {}
                    }
                    i += 2;
                } else {
                    text.push(s[i]);
                    i += 1;
                }
            }
            i += 1;
            out.push(text);
        } else {
            i += 1;
        }
    }
    out
}

fn repo_path(relative: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").join(relative)
}

/// Every Rust file of the extension (src/, its modules' folders too), by
/// its path under src/ ("claim.rs", "direct/step.rs").
fn rust_sources() -> Vec<(String, std::path::PathBuf)> {
    let src = repo_path("src");
    let mut found = Vec::new();
    let mut folders = vec![src.clone()];
    while let Some(folder) = folders.pop() {
        for entry in std::fs::read_dir(&folder).expect("the repository's src/ directory") {
            let path = entry.unwrap().path();
            if path.is_dir() {
                folders.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                found.push((path.strip_prefix(&src).unwrap().to_string_lossy().into_owned(), path));
            }
        }
    }
    assert!(found.len() > 10, "found only {} Rust files under src/", found.len());
    found
}

/// Where the extension's code is written down, as (origin, SQL text).
fn extension_code(observer: &mut Client) -> Vec<(String, String)> {
    let mut code = Vec::new();
    // The bodies of the functions written in SQL and PL/pgSQL, as installed
    // (a C function's prosrc is its symbol).
    for row in observer
        .query(
            "SELECT p.oid::pg_catalog.regprocedure::pg_catalog.text, p.prosrc
             FROM pg_catalog.pg_depend d
             JOIN pg_catalog.pg_proc p ON p.oid OPERATOR(pg_catalog.=) d.objid
             JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) p.pronamespace
             JOIN pg_catalog.pg_language l ON l.oid OPERATOR(pg_catalog.=) p.prolang
             WHERE d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_proc'::pg_catalog.regclass
               AND d.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_extension'::pg_catalog.regclass
               AND d.refobjid OPERATOR(pg_catalog.=) (SELECT e.oid FROM pg_catalog.pg_extension e
                                                     WHERE e.extname OPERATOR(pg_catalog.=) 'raquel')
               AND d.deptype OPERATOR(pg_catalog.=) 'e'
               AND n.nspname OPERATOR(pg_catalog.<>) $1
               AND l.lanname OPERATOR(pg_catalog.<>) 'c'",
            &[&TEST_SCHEMA],
        )
        .unwrap()
    {
        code.push((format!("body of {}", row.get::<_, String>(0)), row.get(1)));
    }
    assert!(code.len() >= 10, "found only {} SQL and PL/pgSQL functions in the extension", code.len());

    // The statements the Rust code prepares: sql/<idea>.<statement>.sql.
    let mut statements = 0;
    for entry in std::fs::read_dir(repo_path("sql")).expect("the repository's sql/ directory") {
        let path = entry.unwrap().path();
        let file = path.file_name().unwrap().to_string_lossy().into_owned();
        if file.ends_with(".sql") && !file.starts_with("raquel--") && file.trim_end_matches(".sql").contains('.') {
            code.push((format!("sql/{file}"), std::fs::read_to_string(&path).unwrap()));
            statements += 1;
        }
    }
    assert!(statements > 0, "no sql/<idea>.<statement>.sql file found");

    // The SQL in the Rust code: every string of the background worker, and
    // the strings of the other files that hold a statement.
    let mut worker_strings = 0;
    for (file, path) in rust_sources() {
        if file == "pg_tests.rs" {
            continue;
        }
        for literal in rust_string_literals(&std::fs::read_to_string(&path).unwrap()) {
            let statement = ["SELECT ", "INSERT ", "UPDATE ", "DELETE ", "WITH "].iter().any(|k| literal.contains(k));
            if file == "worker.rs" || statement {
                if file == "worker.rs" {
                    worker_strings += 1;
                }
                code.push((format!("a string in src/{file}"), literal));
            }
        }
    }
    assert!(worker_strings > 0, "no string found in src/worker.rs");
    code
}

// ---------------------------------------------------------------------------
// The look-alikes.

struct Overload {
    name: String,
    aggregate: bool,
    nargs: usize,
    ndefaults: usize,
    variadic: u32,
    argtypes: Vec<u32>,
    argnames: Vec<String>,
    defaults: Vec<Option<String>>,
}

struct Types {
    palette: Vec<u32>,
    names: HashMap<u32, (String, String, bool)>, // oid → (SQL name, typtype, is an array)
    implicit: HashSet<(u32, u32)>,
    by_name: HashMap<String, u32>,
}

impl Types {
    fn oid(&self, name: &str) -> u32 {
        self.by_name[name]
    }
    fn name(&self, oid: u32) -> &str {
        &self.names[&oid].0
    }
    fn is_array(&self, oid: u32) -> bool {
        self.names.get(&oid).is_some_and(|t| t.2)
    }
    fn is_composite(&self, oid: u32) -> bool {
        self.names.get(&oid).is_some_and(|t| t.1 == "c")
    }
    fn is_pseudo(&self, oid: u32) -> bool {
        self.names.get(&oid).is_none_or(|t| t.1 == "p")
    }

    /// The palette types a call site may pass where the built-in takes `b`:
    /// `b` itself and what converts to it implicitly; for a polymorphic
    /// parameter, every type it accepts.
    fn passable_as(&self, b: u32) -> Vec<u32> {
        let p = |n: &str| self.oid(n);
        let all = self.palette.iter().copied();
        if [p("\"any\""), p("anyelement"), p("anycompatible")].contains(&b) {
            all.collect()
        } else if [p("anynonarray"), p("anycompatiblenonarray")].contains(&b) {
            all.filter(|&t| !self.is_array(t)).collect()
        } else if [p("anyarray"), p("anycompatiblearray")].contains(&b) {
            all.filter(|&t| self.is_array(t)).collect()
        } else if b == p("record") {
            all.filter(|&t| self.is_composite(t)).collect()
        } else if self.is_pseudo(b) {
            Vec::new()
        } else {
            all.filter(|&t| t == b || self.implicit.contains(&(t, b))).collect()
        }
    }

    /// The type a position takes when another position is the one varied.
    fn usual(&self, b: u32) -> Option<u32> {
        let p = |n: &str| self.oid(n);
        if [p("\"any\""), p("anyelement"), p("anycompatible"), p("anynonarray"), p("anycompatiblenonarray")].contains(&b) {
            Some(p("text"))
        } else if [p("anyarray"), p("anycompatiblearray")].contains(&b) {
            Some(p("text[]"))
        } else if b == p("record") {
            Some(self.palette.iter().copied().find(|&t| self.is_composite(t)).unwrap())
        } else if self.is_pseudo(b) {
            None
        } else {
            Some(b)
        }
    }

    fn learn(&mut self, c: &mut Client, oids: impl IntoIterator<Item = u32>) {
        let unknown: Vec<u32> = oids.into_iter().filter(|o| !self.names.contains_key(o)).collect();
        if unknown.is_empty() {
            return;
        }
        for row in c
            .query(
                "SELECT t.oid, pg_catalog.format_type(t.oid, NULL), t.typtype::pg_catalog.text,
                        t.typcategory OPERATOR(pg_catalog.=) 'A'
                 FROM pg_catalog.pg_type t WHERE t.oid OPERATOR(pg_catalog.=) ANY ($1)",
                &[&unknown],
            )
            .unwrap()
        {
            self.names.insert(row.get(0), (row.get(1), row.get(2), row.get(3)));
        }
    }
}

/// A planted function or aggregate: `name(params)`.
#[derive(Clone)]
struct PlantedFunction {
    name: String,
    aggregate: bool,
    params: Vec<(Option<String>, u32, Option<String>)>, // name, type, default
    retset: bool,
}

#[derive(Clone)]
struct PlantedOperator {
    name: String,
    left: Option<u32>,
    right: u32,
}

struct Plants {
    functions: Vec<(PlantedFunction, u32)>, // with the built-in's result type for these arguments
    operators: Vec<(PlantedOperator, u32)>,
    types: Types,
    uses: CodeUses,
    builtin_functions: BTreeSet<String>,
    builtin_operators: BTreeSet<String>,
}

/// `(a integer DEFAULT 0, VARIADIC b text[])` → the default of each parameter.
fn parameter_defaults(arguments: &str, nargs: usize) -> Vec<Option<String>> {
    let mut parts = Vec::new();
    let (mut depth, mut quoted, mut start) = (0, false, 0);
    let chars: Vec<char> = arguments.chars().collect();
    for (i, &c) in chars.iter().enumerate() {
        match c {
            '\'' => quoted = !quoted,
            '(' | '[' if !quoted => depth += 1,
            ')' | ']' if !quoted => depth -= 1,
            ',' if !quoted && depth == 0 => {
                parts.push(chars[start..i].iter().collect::<String>());
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(chars[start..].iter().collect::<String>());
    let mut defaults: Vec<Option<String>> =
        parts.iter().map(|p| p.find(" DEFAULT ").map(|at| p[at + " DEFAULT ".len()..].trim().to_string())).collect();
    defaults.resize(nargs, None);
    defaults
}

/// The argument-type combinations to plant for one built-in overload and one
/// call shape; None when the overload cannot serve that call.
fn variants(o: &Overload, shape: &CallShape, types: &Types) -> Option<Vec<Vec<u32>>> {
    let n = o.nargs;
    let k = shape.arity;
    let variadic = o.variadic != 0;
    if k < n - o.ndefaults || (!variadic && k > n) || (variadic && k < n) {
        return None;
    }
    if shape.named.iter().any(|name| !o.argnames.contains(name)) {
        return None;
    }
    let m = if variadic { k } else { n };
    let declared: Vec<u32> = (0..m).map(|i| if variadic && i >= n - 1 { o.variadic } else { o.argtypes[i] }).collect();
    // the positions a call of this shape fills: the positional ones, then the named ones
    let mut filled: Vec<usize> = (0..k - shape.named.len()).collect();
    filled.extend(shape.named.iter().map(|name| o.argnames.iter().position(|a| a == name).unwrap()));
    let mut usual = Vec::with_capacity(m);
    for (i, &b) in declared.iter().enumerate() {
        match types.usual(b) {
            Some(t) => usual.push(t),
            None if filled.contains(&i) => usual.push(0),
            None => return None,
        }
    }
    let options: Vec<Vec<u32>> = filled.iter().map(|&i| types.passable_as(declared[i])).collect();
    if options.iter().any(Vec::is_empty) {
        return None;
    }
    let mut out: Vec<Vec<u32>> = Vec::new();
    let product: usize = options.iter().map(Vec::len).product();
    if product <= FULL_PRODUCT_LIMIT {
        let mut combos: Vec<Vec<u32>> = vec![usual.clone()];
        for (slot, &i) in filled.iter().enumerate() {
            combos = combos
                .into_iter()
                .flat_map(|c| options[slot].iter().map(move |&t| {
                    let mut c = c.clone();
                    c[i] = t;
                    c
                }))
                .collect();
        }
        out.extend(combos);
    } else {
        // one position at a time, the others as usual
        if usual.contains(&0) {
            return None;
        }
        for (slot, &i) in filled.iter().enumerate() {
            for &t in &options[slot] {
                let mut c = usual.clone();
                c[i] = t;
                out.push(c);
            }
        }
        // key/value builders (jsonb_build_object('op', TG_OP, 'old', …)):
        // text keys, text or jsonb values
        let text = types.oid("text");
        let jsonb = types.oid("jsonb");
        if variadic && k >= 4 && k / 2 <= 6 && options.iter().all(|o| o.contains(&text) && o.contains(&jsonb)) {
            for mask in 0..(1u32 << (k / 2)) {
                let c = (0..k).map(|i| if i % 2 == 1 && mask & (1 << (i / 2)) != 0 { jsonb } else { text }).collect();
                out.push(c);
            }
        }
    }
    Some(out)
}

fn derive_plants(observer: &mut Client) -> Plants {
    let mut uses = CodeUses::default();
    for (_, sql) in extension_code(observer) {
        note_sql(&sql, &mut uses);
    }

    // The palette, the implicit casts, the polymorphic pseudo-types.
    let schema: String = observer
        .query_one(
            "SELECT pg_catalog.quote_ident(n.nspname::pg_catalog.text) FROM pg_catalog.pg_extension e
             JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) e.extnamespace
             WHERE e.extname OPERATOR(pg_catalog.=) 'raquel'",
            &[],
        )
        .unwrap()
        .get(0);
    let mut types =
        Types { palette: Vec::new(), names: HashMap::new(), implicit: HashSet::new(), by_name: HashMap::new() };
    let pseudo = ["\"any\"", "anyelement", "anycompatible", "anynonarray", "anycompatiblenonarray", "anyarray", "anycompatiblearray", "record"];
    for name in PALETTE.iter().map(|t| t.replace("@jobs@", &format!("{schema}.jobs"))).chain(pseudo.iter().map(|p| p.to_string())) {
        let oid: Option<u32> = observer
            .query_one("SELECT pg_catalog.to_regtype($1)::pg_catalog.oid", &[&name])
            .unwrap()
            .get(0);
        let oid = oid.unwrap_or_else(|| panic!("no type {name}"));
        types.by_name.insert(name.clone(), oid);
        if !pseudo.contains(&name.as_str()) {
            types.palette.push(oid);
        }
    }
    for row in observer
        .query("SELECT c.castsource, c.casttarget FROM pg_catalog.pg_cast c WHERE c.castcontext OPERATOR(pg_catalog.=) 'i'", &[])
        .unwrap()
    {
        types.implicit.insert((row.get(0), row.get(1)));
    }
    let all: Vec<u32> = types.by_name.values().copied().collect();
    types.learn(observer, all);

    // pg_catalog's functions and aggregates of the names the code calls
    let called: Vec<String> = uses.calls.keys().cloned().collect();
    let mut overloads: Vec<Overload> = Vec::new();
    for row in observer
        .query(
            "SELECT p.proname::pg_catalog.text, p.prokind OPERATOR(pg_catalog.=) 'a', p.pronargs::pg_catalog.int4,
                    p.pronargdefaults::pg_catalog.int4, p.provariadic, p.proargtypes::pg_catalog.oid[],
                    COALESCE(p.proargnames, '{}'), pg_catalog.pg_get_function_arguments(p.oid),
                    COALESCE(p.proargmodes::pg_catalog.text, '') OPERATOR(pg_catalog.~) '[obt]'
             FROM pg_catalog.pg_proc p
             WHERE p.pronamespace OPERATOR(pg_catalog.=) 'pg_catalog'::pg_catalog.regnamespace
               AND p.proname OPERATOR(pg_catalog.=) ANY ($1::pg_catalog.name[])
               AND p.prokind OPERATOR(pg_catalog.=) ANY ('{f,a}')",
            &[&called],
        )
        .unwrap()
    {
        let has_out_parameters: bool = row.get(8);
        if has_out_parameters {
            continue; // returns a record: no call site can use it as a value
        }
        let nargs: i32 = row.get(2);
        overloads.push(Overload {
            name: row.get(0),
            aggregate: row.get(1),
            nargs: nargs as usize,
            ndefaults: row.get::<_, i32>(3) as usize,
            variadic: row.get(4),
            argtypes: row.get(5),
            argnames: row.get(6),
            defaults: parameter_defaults(&row.get::<_, String>(7), nargs as usize),
        });
    }
    let builtin_functions: BTreeSet<String> = overloads.iter().map(|o| o.name.clone()).collect();
    let mut builtin_signatures: HashSet<(String, Vec<u32>)> = HashSet::new();
    for row in observer
        .query(
            "SELECT p.proname::pg_catalog.text, p.proargtypes::pg_catalog.oid[] FROM pg_catalog.pg_proc p
             WHERE p.pronamespace OPERATOR(pg_catalog.=) 'pg_catalog'::pg_catalog.regnamespace
               AND p.proname OPERATOR(pg_catalog.=) ANY ($1::pg_catalog.name[])",
            &[&called],
        )
        .unwrap()
    {
        builtin_signatures.insert((row.get(0), row.get(1)));
    }

    let mut candidates: Vec<PlantedFunction> = Vec::new();
    let mut seen: HashSet<(String, Vec<u32>)> = HashSet::new();
    for o in &overloads {
        for shape in &uses.calls[&o.name] {
            let Some(combos) = variants(o, shape, &types) else { continue };
            for combo in combos {
                // pg_catalog comes first in every search_path: the same signature there wins
                if builtin_signatures.contains(&(o.name.clone(), combo.clone())) || !seen.insert((o.name.clone(), combo.clone())) {
                    continue;
                }
                if o.aggregate && (combo.len() != 1 || types.is_array(combo[0])) {
                    continue; // planted aggregates collect one non-array argument
                }
                let params = combo
                    .iter()
                    .enumerate()
                    .map(|(i, &t)| {
                        let name = o.argnames.get(i).filter(|n| !n.is_empty()).cloned();
                        let default = o.defaults.get(i).cloned().flatten().map(|d| {
                            if o.argtypes.get(i) == Some(&t) { d } else { format!("({d})::{}", types.name(t)) }
                        });
                        (name, t, default)
                    })
                    .collect();
                candidates.push(PlantedFunction { name: o.name.clone(), aggregate: o.aggregate, params, retset: false });
            }
        }
    }

    // Keep those that a call with these argument types resolves to a
    // built-in (the others fit no call site), with the built-in's result type.
    let mut functions = Vec::new();
    let retset: HashMap<String, bool> = observer
        .query(
            "SELECT DISTINCT p.proname::pg_catalog.text, p.proretset FROM pg_catalog.pg_proc p
             WHERE p.pronamespace OPERATOR(pg_catalog.=) 'pg_catalog'::pg_catalog.regnamespace
               AND p.proname OPERATOR(pg_catalog.=) ANY ($1::pg_catalog.name[]) AND p.proretset",
            &[&called],
        )
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    for mut f in candidates {
        let args: Vec<String> =
            f.params.iter().enumerate().map(|(i, (_, t, _))| format!("${}::{}", i + 1, types.name(*t))).collect();
        let Ok(statement) = observer.prepare(&format!("SELECT pg_catalog.\"{}\"({})", f.name, args.join(", "))) else {
            continue;
        };
        let result = statement.columns()[0].type_().oid();
        types.learn(observer, [result]);
        if types.is_pseudo(result) && types.name(result) != "void" {
            continue;
        }
        f.retset = retset.contains_key(&f.name);
        functions.push((f, result));
    }

    // pg_catalog's operators of the names the code uses
    let used_operators: Vec<String> = uses.operators.iter().cloned().collect();
    let mut by_name: BTreeMap<String, Vec<(Option<u32>, u32)>> = BTreeMap::new();
    for row in observer
        .query(
            "SELECT o.oprname::pg_catalog.text, o.oprleft, o.oprright FROM pg_catalog.pg_operator o
             WHERE o.oprnamespace OPERATOR(pg_catalog.=) 'pg_catalog'::pg_catalog.regnamespace
               AND o.oprname OPERATOR(pg_catalog.=) ANY ($1::pg_catalog.name[])
               AND o.oprkind OPERATOR(pg_catalog.=) ANY ('{b,l}')",
            &[&used_operators],
        )
        .unwrap()
    {
        let left: u32 = row.get(1);
        by_name.entry(row.get(0)).or_default().push((if left == 0 { None } else { Some(left) }, row.get(2)));
    }
    let builtin_operators: BTreeSet<String> = by_name.keys().cloned().collect();
    let all_oprs: Vec<u32> = by_name.values().flatten().flat_map(|(l, r)| l.iter().copied().chain([*r])).collect();
    types.learn(observer, all_oprs);
    let mut operators = Vec::new();
    for (name, overloads) in &by_name {
        let existing: HashSet<(Option<u32>, u32)> = overloads.iter().copied().collect();
        let mut pairs: BTreeSet<(Option<u32>, u32)> = BTreeSet::new();
        for &(left, right) in overloads {
            let rights = types.passable_as(right);
            match left {
                None => pairs.extend(rights.iter().map(|&r| (None, r))),
                Some(l) => {
                    for lt in types.passable_as(l) {
                        pairs.extend(rights.iter().map(|&r| (Some(lt), r)));
                    }
                }
            }
        }
        for (left, right) in pairs {
            if existing.contains(&(left, right)) {
                continue;
            }
            let sql = match left {
                Some(l) => format!("SELECT $1::{} OPERATOR(pg_catalog.{name}) $2::{}", types.name(l), types.name(right)),
                None => format!("SELECT OPERATOR(pg_catalog.{name}) $1::{}", types.name(right)),
            };
            let Ok(statement) = observer.prepare(&sql) else { continue };
            let result = statement.columns()[0].type_().oid();
            types.learn(observer, [result]);
            if types.is_pseudo(result) {
                continue;
            }
            operators.push((PlantedOperator { name: name.clone(), left, right }, result));
        }
    }

    Plants { functions, operators, types, uses, builtin_functions, builtin_operators }
}

fn quote_literal(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}

/// The first statement of every planted body: the evidence.
fn evidence(what: &str) -> String {
    format!(
        "RAISE WARNING 'planted % ran as % in database % (%)', {}, current_user, pg_catalog.current_database(),
            (SELECT a.backend_type FROM pg_catalog.pg_stat_activity a
             WHERE a.pid OPERATOR(pg_catalog.=) pg_catalog.pg_backend_pid());",
        quote_literal(what)
    )
}

/// The statements that plant everything, each on its own.
fn plant_statements(plants: &Plants) -> Vec<String> {
    let t = |oid: u32| plants.types.name(oid).to_string();
    let mut out = Vec::new();
    for (n, (f, result)) in plants.functions.iter().enumerate() {
        let sig = format!("public.{}({})", f.name, f.params.iter().map(|p| t(p.1)).collect::<Vec<_>>().join(", "));
        let args: Vec<String> = (1..=f.params.len()).map(|i| format!("${i}")).collect();
        let call = format!("pg_catalog.\"{}\"({})", f.name, args.join(", "));
        if f.aggregate {
            let arg = t(f.params[0].1);
            out.push(format!(
                "CREATE FUNCTION public.rqh_step_{n}(state {arg}[], value {arg}) RETURNS {arg}[] LANGUAGE plpgsql AS $rqh$
                 BEGIN {} RETURN pg_catalog.array_append(state, value); END $rqh$;
                 CREATE FUNCTION public.rqh_final_{n}(state {arg}[]) RETURNS {} LANGUAGE sql AS $rqh$
                 SELECT pg_catalog.\"{}\"(v) FROM pg_catalog.unnest(state) AS v $rqh$;
                 CREATE AGGREGATE public.\"{}\"({arg}) (SFUNC = public.rqh_step_{n}, STYPE = {arg}[], FINALFUNC = public.rqh_final_{n})",
                evidence(&format!("aggregate {sig}")),
                t(*result),
                f.name,
                f.name
            ));
            continue;
        }
        let params: Vec<String> = f
            .params
            .iter()
            .map(|(name, ty, default)| {
                let mut p = name.as_ref().map(|n| format!("\"{n}\" ")).unwrap_or_default();
                p.push_str(&t(*ty));
                if let Some(d) = default {
                    p.push_str(&format!(" DEFAULT {d}"));
                }
                p
            })
            .collect();
        let (returns, body) = if f.retset {
            (format!("SETOF {}", t(*result)), format!("RETURN QUERY SELECT * FROM {call};"))
        } else if t(*result) == "void" {
            ("void".to_string(), format!("PERFORM {call};"))
        } else {
            (t(*result), format!("RETURN {call};"))
        };
        out.push(format!(
            "CREATE FUNCTION public.\"{}\"({}) RETURNS {returns} LANGUAGE plpgsql AS $rqh$ BEGIN {} {body} END $rqh$",
            f.name,
            params.join(", "),
            evidence(&sig)
        ));
    }
    for (n, (o, result)) in plants.operators.iter().enumerate() {
        let (sig, params, body, args) = match o.left {
            Some(l) => (
                format!("operator public.{}({}, {})", o.name, t(l), t(o.right)),
                format!("{}, {}", t(l), t(o.right)),
                format!("RETURN $1 OPERATOR(pg_catalog.{}) $2;", o.name),
                format!("LEFTARG = {}, RIGHTARG = {}", t(l), t(o.right)),
            ),
            None => (
                format!("operator public.{}({})", o.name, t(o.right)),
                t(o.right),
                format!("RETURN OPERATOR(pg_catalog.{}) $1;", o.name),
                format!("RIGHTARG = {}", t(o.right)),
            ),
        };
        out.push(format!(
            "CREATE FUNCTION public.rqh_operator_{n}({params}) RETURNS {} LANGUAGE plpgsql AS $rqh$ BEGIN {} {body} END $rqh$;
             CREATE OPERATOR public.{} ({args}, FUNCTION = public.rqh_operator_{n})",
            t(*result),
            evidence(&sig),
            o.name
        ));
    }
    out
}

/// The hostile role plants every look-alike in `public` of `db`; returns
/// how many it planted.
fn plant(db: &str, planter: &str, plants: &Plants) -> usize {
    let (planted, _) = plant_all(db, planter, &plant_statements(plants), 20);
    planted
}

/// Runs each of `statements` (a look-alike's CREATE) as `planter` in `db`,
/// each in a transaction of its own; asserts that at most one in
/// `refused_at_most` could not be made (a look-alike that could not be made
/// is a hole in the net: it says which). Returns how many were planted, and
/// the planter's session.
fn plant_all(db: &str, planter: &str, statements: &[String], refused_at_most: usize) -> (usize, Session) {
    let mut hostile = pinned_session(db, planter);
    let mut planted = 0;
    let mut refused = Vec::new();
    for statement in statements {
        match hostile.client.batch_execute(&format!("BEGIN; {statement}; COMMIT")) {
            Ok(()) => planted += 1,
            Err(e) => {
                hostile.client.batch_execute("ROLLBACK").unwrap();
                refused.push(format!("{e}: {}", statement.lines().next().unwrap_or("")));
            }
        }
    }
    assert!(
        refused.len() * refused_at_most <= statements.len(),
        "{} of {} look-alikes could not be planted, e.g.:\n{}",
        refused.len(),
        statements.len(),
        refused.iter().take(10).cloned().collect::<Vec<_>>().join("\n")
    );
    for r in refused.iter().take(5) {
        eprintln!("hostile: could not plant: {r}");
    }
    (planted, hostile)
}

// ---------------------------------------------------------------------------
// Victims: sessions that run the extension's verbs, and what they saw.

#[derive(Default)]
struct Findings {
    /// Each planted object that ran: the evidence, and who ran what.
    fired: BTreeMap<String, usize>,
    /// Verbs that did not end as the test expects (the test's own footing).
    unexpected: Vec<String>,
    /// Every statement the victims ran, to check that every function of the
    /// extension was called.
    statements: Vec<String>,
}

struct Victim<'f> {
    s: Session,
    findings: &'f Mutex<Findings>,
}

/// An id no job has.
const UNKNOWN_ID: &str = "00000000-0000-7000-8000-000000000000";

impl Victim<'_> {
    /// Runs `sql` and checks that it ends with SQLSTATE `expect` ("00000":
    /// succeeds; "*": either way); returns its rows as text.
    fn run(&mut self, sql: &str, expect: &str) -> Vec<Vec<Option<String>>> {
        let result = self.s.client.simple_query(sql);
        let mut findings = self.findings.lock().unwrap();
        findings.statements.push(sql.to_string());
        for notice in self.s.notices.lock().unwrap().drain(..) {
            if notice.message.starts_with("planted ") {
                let key = format!(
                    "{} — from `{}`; in: {}",
                    notice.message,
                    shortened(sql),
                    frames(&notice.context.split(" / ").map(str::to_string).collect::<Vec<_>>())
                );
                *findings.fired.entry(key).or_default() += 1;
            }
        }
        let (state, rows) = match result {
            Ok(messages) => (
                "00000".to_string(),
                messages
                    .iter()
                    .filter_map(|m| match m {
                        SimpleQueryMessage::Row(row) => {
                            Some((0..row.len()).map(|i| row.get(i).map(str::to_string)).collect())
                        }
                        _ => None,
                    })
                    .collect(),
            ),
            Err(e) => (e.code().map_or_else(|| format!("no SQLSTATE ({e})"), |c| c.code().to_string()), Vec::new()),
        };
        if expect != "*" && state != expect {
            findings.unexpected.push(format!("`{sql}` as {}: expected SQLSTATE {expect}, got {state}", self.s.role));
        }
        rows
    }

    fn ok(&mut self, sql: &str) -> Vec<Vec<Option<String>>> {
        self.run(sql, "00000")
    }

    /// The first column of the first row, which the test needs to go on.
    fn one(&mut self, sql: &str) -> String {
        let rows = self.ok(sql);
        match rows.first().and_then(|r| r.first()).cloned().flatten() {
            Some(value) => value,
            None => panic!("`{sql}` as {} returned no value; so far:\n{}", self.s.role, report(&self.findings.lock().unwrap())),
        }
    }

    fn enqueue(&mut self, queue: &str) -> String {
        self.one(&format!("SELECT id FROM rq_enqueue('{queue}', 'for {queue}')"))
    }

    /// Claims the one job of `queue`: (id, attempt).
    fn claim(&mut self, queue: &str, lease: &str) -> (String, String) {
        let rows = self.ok(&format!(
            "SELECT id, attempts FROM rq_claim(ARRAY['{queue}'], worker => 'w-{}', lease => '{lease}')",
            self.s.role
        ));
        match rows.first() {
            Some(row) => (row[0].clone().unwrap(), row[1].clone().unwrap()),
            None => panic!("nothing to claim in {queue} as {}", self.s.role),
        }
    }
}

/// A statement on one line, its ids elided, at most 110 characters.
fn shortened(sql: &str) -> String {
    let mut one_line = sql.split_whitespace().collect::<Vec<_>>().join(" ");
    // ids: 8-4-4-4-12 hex digits
    let mut out = String::new();
    while let Some(at) = one_line.find(|c: char| c.is_ascii_hexdigit()) {
        let candidate: String = one_line[at..].chars().take(36).collect();
        let is_id = candidate.len() == 36
            && candidate.char_indices().all(|(i, c)| if [8, 13, 18, 23].contains(&i) { c == '-' } else { c.is_ascii_hexdigit() });
        let before_is_word = at > 0 && one_line[..at].chars().last().is_some_and(|c| c.is_alphanumeric() || c == '_');
        if is_id && !before_is_word {
            out.push_str(&one_line[..at]);
            out.push_str("<id>");
            one_line = one_line[at + 36..].to_string();
        } else {
            let step = at + one_line[at..].chars().next().unwrap().len_utf8();
            out.push_str(&one_line[..step]);
            one_line = one_line[step..].to_string();
        }
    }
    out.push_str(&one_line);
    if out.chars().count() > 110 {
        out = out.chars().take(107).collect::<String>() + "...";
    }
    out
}

/// The callers in an error context, innermost first, without the planted
/// object's own frame: the extension's function (and line) that called it.
fn frames(context: &[String]) -> String {
    let frames: Vec<String> = context
        .iter()
        .map(|f| f.trim())
        .filter(|f| f.starts_with("PL/pgSQL function") || f.starts_with("SQL function") || f.starts_with("SQL statement"))
        .skip(1)
        .map(|f| if f.chars().count() > 90 { f.chars().take(87).collect::<String>() + "...\"" } else { f.to_string() })
        .collect();
    if frames.is_empty() { "(no caller in the context)".into() } else { frames.join(" ← ") }
}

fn report(f: &Findings) -> String {
    let mut out = String::new();
    if !f.fired.is_empty() {
        out.push_str(&format!("planted look-alikes ran ({} distinct):\n", f.fired.len()));
        for (what, times) in &f.fired {
            out.push_str(&format!("  {what} [{times}×]\n"));
        }
    }
    if !f.unexpected.is_empty() {
        out.push_str("verbs that did not end as expected:\n");
        for u in &f.unexpected {
            out.push_str(&format!("  {u}\n"));
        }
    }
    out
}

/// The planted objects that ran in `db` according to the server log since
/// `offset`, with their context; the background worker's are its only
/// record, a client's are also in that client's notices.
fn fired_in_log(offset: u64, db: &str) -> Vec<String> {
    let log = server_log_since(offset);
    let lines: Vec<&str> = log.lines().collect();
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let Some(at) = line.find("planted ") else { continue };
        if !line.contains("WARNING") || !line.contains(&format!(" in database {db} (")) {
            continue;
        }
        let mut context = Vec::new();
        for next in &lines[i + 1..] {
            if next.starts_with('\t') {
                context.push(next.trim().to_string());
            } else if next.contains("CONTEXT:") {
                context.push(next[next.find("CONTEXT:").unwrap() + 8..].trim().to_string());
            } else {
                break;
            }
        }
        out.push(format!("{} — in: {}", &line[at..], frames(&context)));
    }
    out
}

/// Adds to `findings` the planted objects that ran outside a client (the
/// background worker's): a client's are in its notices already.
fn add_from_log(findings: &mut Findings, from_log: &[String]) {
    for line in from_log {
        if !line.contains("(client backend)") {
            *findings.fired.entry(format!("{line} (server log)")).or_default() += 1;
        }
    }
}

/// Keeps the background worker out of every database until dropped, so that
/// the duties the test calls find their rows; undone even when a test fails.
struct WorkerKeptAway;

impl WorkerKeptAway {
    fn new() -> Self {
        set_server(&[("raquel.databases", "rq_hostile_no_such_database")]);
        WorkerKeptAway
    }
}

impl Drop for WorkerKeptAway {
    fn drop(&mut self) {
        reset_server(&["raquel.databases"]);
    }
}

fn new_database(name: &str) {
    let mut admin = connect("postgres");
    admin.batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)")).unwrap();
    admin.batch_execute(&format!("CREATE DATABASE {name}")).unwrap();
}

fn drop_database_and_roles(db: &str, roles: &[&str]) {
    let mut admin = connect("postgres");
    admin.batch_execute(&format!("DROP DATABASE IF EXISTS {db} WITH (FORCE)")).unwrap();
    for role in roles {
        admin.batch_execute(&format!("DROP ROLE IF EXISTS {role}")).unwrap();
    }
}

/// A role that may create objects in `public` and temporary tables.
fn hostile_role(observer: &mut Client, db: &str, role: &str) {
    observer
        .batch_execute(&format!(
            "DROP ROLE IF EXISTS {role}; CREATE ROLE {role} LOGIN;
             GRANT CREATE ON SCHEMA public TO {role}; GRANT TEMPORARY ON DATABASE {db} TO {role}"
        ))
        .unwrap();
}

/// Functions of the extension in the database, by identity (as regprocedure
/// with the extension's schema on the path): identity, language, symbol (a C
/// function's prosrc), proconfig.
fn extension_functions(observer: &mut Client) -> Vec<(String, String, String, Option<Vec<String>>)> {
    observer
        .query(
            "SELECT p.oid::pg_catalog.regprocedure::pg_catalog.text, l.lanname::pg_catalog.text,
                    p.prosrc, p.proconfig
             FROM pg_catalog.pg_depend d
             JOIN pg_catalog.pg_proc p ON p.oid OPERATOR(pg_catalog.=) d.objid
             JOIN pg_catalog.pg_language l ON l.oid OPERATOR(pg_catalog.=) p.prolang
             JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) p.pronamespace
             WHERE d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_proc'::pg_catalog.regclass
               AND d.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_extension'::pg_catalog.regclass
               AND d.refobjid OPERATOR(pg_catalog.=) (SELECT e.oid FROM pg_catalog.pg_extension e
                                                     WHERE e.extname OPERATOR(pg_catalog.=) 'raquel')
               AND d.deptype OPERATOR(pg_catalog.=) 'e'
               AND n.nspname OPERATOR(pg_catalog.<>) $1
             ORDER BY 1",
            &[&TEST_SCHEMA],
        )
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2), r.get(3)))
        .collect()
}

/// `rq_claim` of `public.rq_claim(text[],…)`.
fn function_name(signature: &str) -> &str {
    signature.split('(').next().unwrap().rsplit('.').next().unwrap()
}

/// The C symbols defined in the Rust files that run SQL (through
/// src/statements.rs or pgrx's Spi): the C functions that resolve names.
/// The other C functions are arithmetic and checks with nothing to look up,
/// and stay unpinned on purpose: some run for every job (the table's column
/// defaults, its row trigger), where a SET would cost each call.
fn symbols_of_files_that_run_sql() -> BTreeSet<String> {
    let mut symbols = BTreeSet::new();
    for (_, path) in rust_sources() {
        let source = std::fs::read_to_string(path).unwrap();
        if !(source.contains("statements::connect()") || source.contains("Spi::")) {
            continue;
        }
        let lines: Vec<&str> = source.lines().collect();
        for (i, line) in lines.iter().enumerate() {
            if let Some(rest) = line.split("extern \"C-unwind\" fn ").nth(1) {
                symbols.insert(rest.split('(').next().unwrap().to_string());
            }
            if line.trim_start().starts_with("#[pg_extern") {
                let declaration = lines[i..].iter().find(|l| l.trim_start().starts_with("fn ")).unwrap();
                let name = declaration.trim_start()[3..].split('(').next().unwrap();
                symbols.insert(format!("{name}_wrapper"));
            }
        }
    }
    symbols
}

// ---------------------------------------------------------------------------
// The tests.

#[test]
fn every_function_of_the_extension_pins_its_search_path() {
    let db = "rq_hostile_pins";
    new_database(db);
    let mut observer = pinned_session(db, "postgres");
    observer.client.batch_execute("CREATE EXTENSION raquel SCHEMA public").unwrap();
    let functions = extension_functions(&mut observer.client);
    assert!(functions.len() >= 30, "found only {} functions in the extension", functions.len());
    let runs_sql = symbols_of_files_that_run_sql();
    assert!(runs_sql.contains("rq_claim_c") && runs_sql.contains("rq_raise_cannot_wrapper"), "{runs_sql:?}");
    let unpinned: Vec<String> = functions
        .iter()
        .filter(|(_, language, symbol, _)| language != "c" || runs_sql.contains(symbol))
        .filter(|(_, _, _, config)| !config.as_ref().is_some_and(|c| c.iter().any(|s| s == PINNED)))
        .map(|(f, _, _, config)| format!("{f} (proconfig {config:?})"))
        .collect();
    drop(observer);
    drop_database_and_roles(db, &[]);
    assert!(
        unpinned.is_empty(),
        "{} of {} functions of the extension run with their caller's search_path (want proconfig to hold {PINNED:?}):\n  {}",
        unpinned.len(),
        functions.len(),
        unpinned.join("\n  ")
    );
}

#[test]
fn the_look_alikes_run_under_the_released_0_1_0() {
    // Derived from this version's code, planted into an install of 0.1.0,
    // whose functions run with the caller's search_path: if none of them
    // ran there, they would prove nothing here.
    let (reference, db, planter) = ("rq_hostile_reference", "rq_hostile_old", "rq_hostile_old_planter");
    new_database(reference);
    let plants = {
        let mut observer = pinned_session(reference, "postgres");
        observer.client.batch_execute("CREATE EXTENSION raquel SCHEMA public").unwrap();
        derive_plants(&mut observer.client)
    };
    drop_database_and_roles(reference, &[]);

    new_database(db);
    let mut observer = pinned_session(db, "postgres");
    observer.client.batch_execute("CREATE EXTENSION raquel VERSION '0.1.0' SCHEMA public").unwrap();
    hostile_role(&mut observer.client, db, planter);
    let planted = plant(db, planter, &plants);

    let findings = Mutex::new(Findings::default());
    let mut su = Victim { s: session(db, "postgres"), findings: &findings };
    su.enqueue("old");
    su.enqueue("old");
    let ids: Vec<String> = su
        .ok("SELECT id, attempts FROM rq_claim(ARRAY['old'], worker => 'w', batch => 2)")
        .into_iter()
        .map(|r| r[0].clone().unwrap())
        .collect();
    su.ok(&format!("SELECT id FROM rq_complete_batch(ARRAY['{}']::uuid[])", ids.join("', '")));
    su.ok("SELECT * FROM rq_stats()");
    su.ok(&format!("SELECT rq_grant_worker('{planter}')"));
    su.enqueue("old-rescue");
    su.claim("old-rescue", "1 millisecond");
    std::thread::sleep(Duration::from_millis(20));
    su.ok("SELECT rq_rescue()");
    drop(su);
    drop(observer);
    drop_database_and_roles(db, &[planter]);

    let findings = findings.into_inner().unwrap();
    eprintln!("hostile: {planted} look-alikes planted in 0.1.0; {}", report(&findings));
    assert!(
        !findings.fired.is_empty(),
        "none of the {planted} look-alikes ran in 0.1.0, whose functions run with the caller's search_path: \
         the look-alikes are too weak to prove anything"
    );
}

#[test]
fn no_look_alike_runs_for_any_verb_of_any_role_nor_for_the_background_worker() {
    let (db, planter, producer, worker) =
        ("rq_hostile", "rq_hostile_planter", "rq_hostile_producer", "rq_hostile_worker");
    let log_start = server_log_len();
    let kept_away = WorkerKeptAway::new();
    new_database(db);
    let mut observer = pinned_session(db, "postgres");
    observer.client.batch_execute("CREATE EXTENSION raquel SCHEMA public").unwrap();
    hostile_role(&mut observer.client, db, planter);
    observer
        .client
        .batch_execute(&format!(
            "DROP ROLE IF EXISTS {producer}; DROP ROLE IF EXISTS {worker};
             CREATE ROLE {producer} LOGIN; CREATE ROLE {worker} LOGIN;
             CREATE TABLE public.signups (id integer, email text);
             CREATE TRIGGER signups_enqueue AFTER INSERT OR UPDATE OR DELETE ON public.signups
                 FOR EACH ROW EXECUTE FUNCTION public.rq_enqueue_trigger('signups');
             GRANT SELECT, INSERT, UPDATE, DELETE ON public.signups TO {producer}"
        ))
        .unwrap();

    let plants = derive_plants(&mut observer.client);
    let planted = plant(db, planter, &plants);
    eprintln!(
        "hostile: {planted} look-alikes planted ({} functions and aggregates, {} operators)",
        plants.functions.len(),
        plants.operators.len()
    );
    assert!(planted >= 100, "only {planted} look-alikes planted: the derivation found too little");
    // The names whose look-alikes must be among them (a sanity check of the
    // derivation, which reads the code; the test does not depend on them).
    for name in ["format", "cardinality", "unnest", "array_agg", "quote_ident", "make_interval"] {
        if plants.uses.calls.contains_key(name) {
            assert!(plants.functions.iter().any(|(f, _)| f.name == name), "no look-alike of {name}");
        }
    }

    let findings = Mutex::new(Findings::default());
    let mut su = Victim { s: session(db, "postgres"), findings: &findings };
    let mut prod = Victim { s: session(db, producer), findings: &findings };
    let mut work = Victim { s: session(db, worker), findings: &findings };

    // --- the superuser: every verb, helper and duty ---------------------
    su.ok(&format!("SELECT rq_grant_producer('{producer}')"));
    su.ok(&format!("SELECT rq_grant_worker('{worker}')"));
    for (who, v) in [("superuser", &mut su), ("producer", &mut prod)] {
        // enqueue: text and jsonb, every option, a key taken and a key held
        v.one("SELECT id FROM rq_enqueue('hq', 'plain')");
        v.one("SELECT id FROM rq_enqueue('hq', '{\"a\": 1}'::jsonb)");
        v.one(&format!(
            "SELECT id FROM rq_enqueue(queue => 'hq', payload => 'every option', at => '2020-01-01 00:00:00+00',
                 delay => '1 millisecond', max_age => '36500 days', max_retry_count => 3,
                 min_retry_delay => '1 second', max_retry_delay => '1 minute', backoff_base => '2 seconds',
                 priority => 5, key => 'k-text-{who}')"
        ));
        v.one(&format!(
            "SELECT id FROM rq_enqueue(queue => 'hq', payload => '{{\"every\": \"option\"}}'::jsonb,
                 at => '2020-01-01 00:00:00+00', delay => '1 millisecond', max_age => '36500 days',
                 max_retry_count => 0, min_retry_delay => '0 seconds', max_retry_delay => '1 hour',
                 backoff_base => '1 second', priority => -1, key => 'k-jsonb-{who}')"
        ));
        v.one(&format!("SELECT id FROM rq_enqueue('hq', 'again', key => 'k-text-{who}')"));
        v.one(&format!("SELECT id FROM rq_enqueue('hq', '{{\"again\": true}}'::jsonb, key => 'k-jsonb-{who}')"));
        // batches: text[] and jsonb[], with and without keys, every option
        v.ok("SELECT id FROM rq_enqueue_batch('hq', ARRAY['b1', 'b2', NULL])");
        v.ok("SELECT id FROM rq_enqueue_batch('hq', ARRAY['{\"n\": 1}', '{\"n\": 2}']::jsonb[])");
        for _ in 0..2 {
            v.ok(&format!(
                "SELECT id FROM rq_enqueue_batch(queue => 'hq', payloads => ARRAY['kb1', 'kb2', 'kb3'],
                     at => '2020-01-01 00:00:00+00', delay => '1 millisecond', max_age => '1 day',
                     max_retry_count => 2, min_retry_delay => '1 second', max_retry_delay => '2 seconds',
                     backoff_base => '1 second', priority => 2, keys => ARRAY['kb1-{who}', 'kb2-{who}', NULL])"
            ));
            v.ok(&format!(
                "SELECT id FROM rq_enqueue_batch('hq', ARRAY['{{\"k\": 1}}', '{{\"k\": 2}}']::jsonb[],
                     keys => ARRAY['kj1-{who}', 'kj2-{who}'])"
            ));
        }
        // refusals
        v.run("SELECT id FROM rq_enqueue('', 'x')", "22023");
        v.run("SELECT id FROM rq_enqueue('hq', 'x', min_retry_delay => '2 seconds', max_retry_delay => '1 second')", "22023");
        v.run("SELECT id FROM rq_enqueue_batch('hq', NULL::text[])", "22023");
        v.run("SELECT id FROM rq_enqueue_batch('hq', ARRAY['a', 'b'], keys => ARRAY['only one'])", "22023");
        // the row trigger, as the role that changes the table
        v.ok("INSERT INTO signups VALUES (1, 'a@b.c')");
        v.ok("UPDATE signups SET email = 'c@d.e'");
        v.ok("DELETE FROM signups");
    }

    // jobs for the worker role, which cannot enqueue
    for queue in ["wq-one", "wq-a", "wq-b", "wq-any", "wq-wait", "wq-complete", "wq-complete2", "wq-fail",
        "wq-fail-stale", "wq-resched", "wq-resched-at", "wq-resched-none", "wq-reject", "wq-extend", "wq-batch",
        "wq-batch", "wq-cancel", "wq-retry", "wq-loop", "wq-loop", "wq-loop", "wq-take", "wq-take", "wq-take", "wq-take"]
    {
        su.enqueue(queue);
    }
    su.one("SELECT id FROM rq_enqueue('wq-later', 'later', delay => '1 hour')");
    su.one("SELECT id FROM rq_enqueue('later', 'later', delay => '1 hour')");
    // flow control: a limited, rate-limited queue with fair groups for each,
    // and a paused one (sql/flow.sql)
    for p in ["su", "wq"] {
        su.ok(&format!("SELECT rq_set_limits('{p}-flow', max_claimed => 5, rate => 100, per => '1 second', group_max_claimed => 1)"));
        su.one(&format!("SELECT id FROM rq_enqueue('{p}-flow', 'plain')"));
        su.one(&format!("SELECT id FROM rq_enqueue('{p}-flow', 'g1', group_key => 'g1')"));
        su.one(&format!("SELECT id FROM rq_enqueue_batch('{p}-flow', ARRAY['g2', 'g3'], group_keys => ARRAY['g2', 'g3'])"));
        su.ok(&format!("SELECT rq_pause('{p}-paused')"));
        // a key held for a period after its job ends
        su.one(&format!("SELECT id FROM rq_enqueue('{p}-period', 'p', key => 'k', key_period => '1 hour')"));
        // a queue without history: its jobs are deleted as they succeed
        su.ok(&format!("SELECT rq_set_history('{p}-gone', false)"));
        su.ok(&format!("SELECT id FROM rq_enqueue_batch('{p}-gone', ARRAY['1', '2', '3', '4', '5', '6', '7'])"));
        // a job whose steps are recorded and whose result is awaited
        su.one(&format!("SELECT id FROM rq_enqueue('{p}-durable', 'd')"));
        // jobs put to sleep and parked for an event
        su.ok(&format!("SELECT id FROM rq_enqueue_batch('{p}-park', ARRAY['sleep', 'wait'])"));
        // a workflow: a parent, and a child that runs after it
        let parent = su.one(&format!("SELECT id FROM rq_enqueue('{p}-parent', 'parent')"));
        su.one(&format!("SELECT id FROM rq_enqueue('{p}-child', 'child', after => ARRAY['{parent}']::uuid[])"));
        su.one(&format!("SELECT id FROM rq_enqueue_batch('{p}-child', ARRAY['c2'], after => ARRAY['{parent}']::uuid[])"));
    }

    // claims and everything after, as the superuser and as the worker role
    for (p, v) in [("su", &mut su), ("wq", &mut work)] {
        let enqueue_for = |v: &mut Victim<'_>, queue: &str| {
            if p == "su" {
                v.enqueue(queue);
            }
        };
        // one queue, several, any, a batch, waiting (with and without a job)
        enqueue_for(v, &format!("{p}-one"));
        v.claim(&format!("{p}-one"), "1 minute");
        enqueue_for(v, &format!("{p}-a"));
        enqueue_for(v, &format!("{p}-b"));
        v.ok(&format!("SELECT id FROM rq_claim(ARRAY['{p}-a', '{p}-b'], worker => 'w', batch => 5, lease => '5 minutes')"));
        v.ok("SELECT id FROM rq_claim(NULL, 'w', 2)");
        v.ok("SELECT id FROM rq_claim()");
        enqueue_for(v, &format!("{p}-wait"));
        v.ok(&format!("SELECT id FROM rq_claim(ARRAY['{p}-wait'], worker => 'w', wait => '1 second')"));
        v.ok(&format!("SELECT id FROM rq_claim(ARRAY['{p}-nothing'], wait => '200 milliseconds')"));
        v.ok(&format!("SELECT id FROM rq_claim(ARRAY['{p}-later', 'later'], batch => 3, wait => '200 milliseconds')"));
        // a job with a key_period ends: its key is held
        v.ok(&format!("SELECT d.id FROM rq_claim(ARRAY['{p}-period'], worker => 'w') c, rq_complete(c.id, c.attempts) d"));
        // jobs taken for a transaction (src/take.rs): completed, failed and
        // completed in a batch in it; taken and completed in one statement
        for _ in 0..4 {
            enqueue_for(v, &format!("{p}-take"));
        }
        v.ok("BEGIN");
        let taken: Vec<(String, String)> = v
            .ok(&format!("SELECT id, attempts FROM rq_take(ARRAY['{p}-take'], 'w', 3)"))
            .into_iter()
            .map(|row| (row[0].clone().unwrap(), row[1].clone().unwrap()))
            .collect();
        v.ok(&format!("SELECT id FROM rq_complete('{}', {})", taken[0].0, taken[0].1));
        v.ok(&format!("SELECT id FROM rq_fail('{}', {}, 'boom')", taken[1].0, taken[1].1));
        v.ok(&format!("SELECT id FROM rq_complete_batch(ARRAY['{}']::uuid[], ARRAY[{}])", taken[2].0, taken[2].1));
        v.ok("COMMIT");
        v.ok(&format!("SELECT id FROM rq_take(ARRAY['{p}-take'], 'w', 1, true)"));
        // a queue without history (sql/history.sql): each verb that completes deletes
        v.ok(&format!("SELECT d.id FROM rq_claim(ARRAY['{p}-gone'], worker => 'w') c, rq_complete(c.id, c.attempts) d"));
        v.ok(&format!(
            "WITH c AS (SELECT id, attempts FROM rq_claim(ARRAY['{p}-gone'], worker => 'w')) \
             SELECT id FROM rq_complete_batch(ARRAY(SELECT id FROM c ORDER BY id), ARRAY(SELECT attempts FROM c ORDER BY id))"
        ));
        v.ok(&format!(
            "WITH c AS (SELECT id, attempts FROM rq_claim(ARRAY['{p}-gone'], worker => 'w')) \
             SELECT id FROM rq_complete_batch_and_claim(ARRAY(SELECT id FROM c ORDER BY id), ARRAY(SELECT attempts FROM c ORDER BY id), \
             ARRAY['{p}-gone'], 'w', 2)"
        ));
        v.ok(&format!("SELECT id FROM rq_take(ARRAY['{p}-gone'], 'w', 1, true)"));
        v.ok("BEGIN");
        v.ok(&format!("SELECT d.id FROM rq_take(ARRAY['{p}-gone'], 'w') c, rq_complete(c.id, c.attempts) d"));
        v.ok("COMMIT");
        // a worker's loop in one round trip: claim, then complete and claim, fail and claim
        enqueue_for(v, &format!("{p}-loop"));
        enqueue_for(v, &format!("{p}-loop"));
        enqueue_for(v, &format!("{p}-loop"));
        let (first, attempt) = v.claim(&format!("{p}-loop"), "1 minute");
        let next = v.ok(&format!(
            "SELECT id, attempts FROM rq_complete_and_claim('{first}', {attempt}, ARRAY['{p}-loop'], 'w', lease => '1 minute')"
        ));
        if let Some(row) = next.first() {
            let (id, attempt) = (row[0].clone().unwrap(), row[1].clone().unwrap());
            v.ok(&format!("SELECT id FROM rq_fail_and_claim('{id}', {attempt}, 'boom', NULL, ARRAY['{p}-loop'], 'w')"));
        }
        // results and steps (sql/results.sql, sql/steps.sql): a step recorded,
        // a job completed with a result, its end awaited
        let (job, attempt) = v.claim(&format!("{p}-durable"), "1 minute");
        v.ok(&format!("SELECT name FROM rq_step('{job}', {attempt}, 'first', '{{\"n\": 1}}')"));
        v.run(&format!("SELECT name FROM rq_step('{job}', {attempt}, 'first', NULL)"), "23505");
        v.ok(&format!("SELECT id FROM rq_complete('{job}', {attempt}, '[1, 2]')"));
        v.ok(&format!("SELECT status FROM rq_await('{job}', '1 second')"));
        // durable sleep and events (sql/waits.sql): a job put to sleep, one
        // parked for an event, the event emitted (by the owner: a worker
        // may not emit)
        let (job, attempt) = v.claim(&format!("{p}-park"), "1 minute");
        v.ok(&format!("SELECT rq_sleep('{job}', {attempt}, 'nap', delay => '1 hour')"));
        let (job, attempt) = v.claim(&format!("{p}-park"), "1 minute");
        v.ok(&format!("SELECT parked FROM rq_wait_event('{job}', {attempt}, 'w', '{p}-go')"));
        if p == "su" {
            v.ok(&format!("SELECT rq_emit('{p}-go', '1')"));
        } else {
            v.run(&format!("SELECT rq_emit('{p}-go', '1')"), "42501");
        }
        // a parent's completion releases its children
        v.ok(&format!("SELECT d.id FROM rq_claim(ARRAY['{p}-parent'], worker => 'w') c, rq_complete(c.id, c.attempts) d"));
        v.ok(&format!("SELECT id FROM rq_claim(ARRAY['{p}-child'], worker => 'w', batch => 2)"));
        // through the flow settings: the plain job, then the groups, one each
        v.ok(&format!("SELECT id FROM rq_claim(ARRAY['{p}-flow'], worker => 'w', batch => 2)"));
        v.ok(&format!("SELECT id FROM rq_claim(ARRAY['{p}-flow', '{p}-paused'], worker => 'w', wait => '200 milliseconds')"));
        v.ok(&format!("SELECT id FROM rq_claim(ARRAY['{p}-paused'], worker => 'w', wait => '100 milliseconds')"));
        v.run("SELECT id FROM rq_claim(ARRAY['hq'], lease => '-1 minute')", "22023");
        v.run("SELECT id FROM rq_claim(ARRAY['hq'], batch => 0)", "22023");

        // complete, with and without the token; completing twice; unknown
        enqueue_for(v, &format!("{p}-complete"));
        let (done, attempt) = v.claim(&format!("{p}-complete"), "1 minute");
        v.ok(&format!("SELECT id FROM rq_complete('{done}', attempt => {attempt})"));
        v.run(&format!("SELECT id FROM rq_complete('{done}', {attempt})"), "55000");
        v.run(&format!("SELECT id FROM rq_complete('{UNKNOWN_ID}', 1)"), "P0002");
        v.run("SELECT id FROM rq_complete(NULL, 1)", "22023");
        enqueue_for(v, &format!("{p}-complete2"));
        let (other, attempt) = v.claim(&format!("{p}-complete2"), "1 minute");
        v.run(&format!("SELECT id FROM rq_complete('{other}', NULL)"), "22004");
        v.ok(&format!("SELECT id FROM rq_complete('{other}', {attempt})"));
        // fail, with every argument; stale token; unknown; then retry it
        enqueue_for(v, &format!("{p}-fail"));
        let (failed, attempt) = v.claim(&format!("{p}-fail"), "1 minute");
        v.ok(&format!("SELECT id FROM rq_fail('{failed}', {attempt}, 'boom', 'trace')"));
        v.run(&format!("SELECT id FROM rq_fail('{UNKNOWN_ID}', 1, 'boom')"), "P0002");
        enqueue_for(v, &format!("{p}-fail-stale"));
        let (stale, attempt) = v.claim(&format!("{p}-fail-stale"), "1 minute");
        let late: i64 = attempt.parse::<i64>().unwrap() + 1;
        v.run(&format!("SELECT id FROM rq_fail('{stale}', {late}, 'late')"), "55000");
        v.ok(&format!("SELECT id FROM rq_fail('{stale}', {attempt})"));
        // reschedule: by delay, by instant, by neither
        for (queue, args) in [("resched", ", delay => '0 seconds'"), ("resched-at", ", at => '2020-01-01 00:00:00+00'"), ("resched-none", "")] {
            enqueue_for(v, &format!("{p}-{queue}"));
            let (id, attempt) = v.claim(&format!("{p}-{queue}"), "1 minute");
            v.ok(&format!("SELECT id FROM rq_reschedule('{id}', {attempt}{args})"));
        }
        v.run(&format!("SELECT id FROM rq_reschedule('{UNKNOWN_ID}', 1)"), "P0002");
        // reject; extend; extend a finished job; reject unknown
        enqueue_for(v, &format!("{p}-reject"));
        let (rejected, attempt) = v.claim(&format!("{p}-reject"), "1 minute");
        v.ok(&format!("SELECT id FROM rq_reject('{rejected}', attempt => {attempt})"));
        v.run(&format!("SELECT id FROM rq_reject('{UNKNOWN_ID}', 1)"), "P0002");
        enqueue_for(v, &format!("{p}-extend"));
        let (extended, attempt) = v.claim(&format!("{p}-extend"), "1 minute");
        v.ok(&format!("SELECT id FROM rq_extend('{extended}', {attempt}, lease => '10 minutes')"));
        v.ok(&format!("SELECT id FROM rq_extend('{extended}', {attempt})"));
        v.run(&format!("SELECT id FROM rq_extend('{done}', 1)"), "55000");
        v.run(&format!("SELECT id FROM rq_extend('{extended}', {attempt}, lease => '0 seconds')"), "22023");
        // complete a batch, with and without tokens; all or nothing
        enqueue_for(v, &format!("{p}-batch"));
        enqueue_for(v, &format!("{p}-batch"));
        let batch: Vec<(String, String)> = v
            .ok(&format!("SELECT id, attempts FROM rq_claim(ARRAY['{p}-batch'], worker => 'w', batch => 2)"))
            .into_iter()
            .map(|r| (r[0].clone().unwrap(), r[1].clone().unwrap()))
            .collect();
        assert_eq!(batch.len(), 2, "two jobs to complete in a batch as {p}");
        v.run(&format!("SELECT id FROM rq_complete_batch(ARRAY['{}', '{UNKNOWN_ID}']::uuid[], ARRAY[{}, 1])", batch[0].0, batch[0].1), "P0002");
        v.run(&format!("SELECT id FROM rq_complete_batch(ARRAY['{}']::uuid[], ARRAY[1, 2])", batch[0].0), "22023");
        v.run("SELECT id FROM rq_complete_batch(NULL, NULL)", "22023");
        v.ok(&format!(
            "SELECT id FROM rq_complete_batch(ARRAY['{}', '{}']::uuid[], ARRAY[{}, {}])",
            batch[0].0, batch[1].0, batch[0].1, batch[1].1
        ));
        v.run(&format!("SELECT id FROM rq_complete_batch(ARRAY['{}']::uuid[], ARRAY[{}])", batch[0].0, batch[0].1), "55000");
        // cancel an unfinished and a finished job; retry failed and
        // cancelled jobs; retry a queued one. (Whether a worker role may
        // cancel or retry is the privilege test's business: either way here.)
        let may = if p == "su" { "00000" } else { "*" };
        enqueue_for(v, &format!("{p}-cancel"));
        let (cancelled, _) = v.claim(&format!("{p}-cancel"), "1 minute");
        v.run(&format!("SELECT id FROM rq_cancel('{cancelled}')"), may);
        v.run(&format!("SELECT id FROM rq_cancel('{done}')"), if p == "su" { "55000" } else { "*" });
        v.run(&format!("SELECT id FROM rq_cancel('{UNKNOWN_ID}')"), if p == "su" { "P0002" } else { "*" });
        v.run(&format!("SELECT id FROM rq_retry('{failed}')"), may);
        v.run(&format!("SELECT id FROM rq_retry('{cancelled}')"), may);
        v.run(&format!("SELECT id FROM rq_retry('{failed}')"), if p == "su" { "55000" } else { "*" });
        // looking at the queue
        let may = if p == "su" { "00000" } else { "*" };
        v.run("SELECT * FROM rq_stats()", may);
        v.run("SELECT * FROM rq_queues()", may);
        v.run("SELECT rq_count()", may);
        v.run("SELECT rq_count('hq', ARRAY['queued', 'failed'])", may);
        v.run("SELECT * FROM rq_jobs", may);
    }

    // the helpers, and the functions a verb calls, called directly (those
    // this build has: the coverage check below names any left out)
    let names: Vec<String> =
        extension_functions(&mut observer.client).into_iter().map(|f| function_name(&f.0).to_string()).collect();
    for (name, sql, expect) in [
        ("rq_backoff", "SELECT rq_backoff(3, 1000, 1000, 60000)", "00000"),
        ("rq_now_ms", "SELECT rq_now_ms()", "00000"),
        ("rq_uuid7", "SELECT rq_uuid7()", "00000"),
        ("rq_channel", "SELECT rq_channel('hq')", "00000"),
        ("rq_channel", "SELECT rq_channel('a queue name longer than sixty bytes, whose channel is therefore an md5')", "00000"),
        ("rq_interval_ms", "SELECT raquel_internal.rq_interval_ms('1 second', 'value', 0, 10000)", "00000"),
        ("rq_check_status", "SELECT raquel_internal.rq_check_status('queued')", "00000"),
        ("rq_check_status", "SELECT raquel_internal.rq_check_status('done')", "23514"),
        ("rq_check_nonnegative", "SELECT raquel_internal.rq_check_nonnegative(-1)", "23514"),
        ("rq_check_delay_ms", "SELECT raquel_internal.rq_check_delay_ms(-1)", "23514"),
        ("rq_check_max_age_ms", "SELECT raquel_internal.rq_check_max_age_ms(0)", "23514"),
        ("rq_interval_ms", "SELECT raquel_internal.rq_interval_ms('1 day', 'value', 0, 10000)", "22023"),
        ("rq_timestamp_ms", "SELECT raquel_internal.rq_timestamp_ms('2020-01-01 00:00:00+00', 'at')", "00000"),
        ("rq_timestamp_ms", "SELECT raquel_internal.rq_timestamp_ms('infinity', 'at')", "22023"),
        ("rq_delay_ms", "SELECT raquel_internal.rq_delay_ms('1 second', 'delay')", "00000"),
        ("rq_retention_ms", "SELECT raquel_internal.rq_retention_ms(NULL)", "00000"),
        ("rq_retention_ms", "SELECT raquel_internal.rq_retention_ms('1 day')", "00000"),
        ("rq_ms_to_interval", "SELECT rq_ms_to_interval(1000)", "00000"),
        ("rq_ms_to_timestamptz", "SELECT rq_ms_to_timestamptz(0)", "00000"),
        ("rq_default_lease", "SELECT raquel_internal.rq_default_lease()", "00000"),
        ("rq_default_lease_ms", "SELECT raquel_internal.rq_default_lease_ms()", "00000"),
        ("rq_default_min_retry_delay", "SELECT raquel_internal.rq_default_min_retry_delay()", "00000"),
        ("rq_default_max_retry_delay", "SELECT raquel_internal.rq_default_max_retry_delay()", "00000"),
        ("rq_default_backoff_base", "SELECT raquel_internal.rq_default_backoff_base()", "00000"),
        ("rq_check_batch", "SELECT raquel_internal.rq_check_batch(5)", "00000"),
        ("rq_check_batch", "SELECT raquel_internal.rq_check_batch(0)", "22023"),
        ("rq_check_arrays", "SELECT raquel_internal.rq_check_arrays(ARRAY['payloads', 'keys'], ARRAY[1, 1], ARRAY['k'])", "00000"),
        ("rq_job_options", "SELECT * FROM raquel_internal.rq_job_options('hq', NULL, '1 second', '1 day', 3, NULL, NULL, NULL)", "00000"),
        ("rq_refuse", "SELECT raquel_internal.rq_refuse('ids_null', '{}')", "22023"),
        ("rq_raise_cannot", "SELECT raquel_internal.rq_raise_cannot('00000000-0000-7000-8000-000000000000', NULL, 'complete', '{claimed}')", "P0002"),
        ("rq_caller_may_read", "SELECT raquel_internal.rq_caller_may_read('jobs'::regclass)", "00000"),
        ("rq_ended", "SELECT raquel_internal.rq_ended(ARRAY['00000000-0000-7000-8000-000000000000']::uuid[], ARRAY['hq'], 'cancelled', true, NULL)", "00000"),
        ("rq_ended", "SELECT raquel_internal.rq_ended(ARRAY['00000000-0000-7000-8000-000000000000']::uuid[], ARRAY['hq'], 'lost', true, NULL)", "22023"),
        ("rq_kept_plans", "SELECT * FROM raquel_internal.rq_kept_plans()", "00000"),
        ("rq_kept_statements", "SELECT * FROM raquel_internal.rq_kept_statements()", "00000"),
        ("rq_rate_bucket_counts", "SELECT * FROM raquel_internal.rq_rate_bucket_counts()", "00000"),
        ("rq_claim_slot_counts", "SELECT * FROM raquel_internal.rq_claim_slot_counts()", "00000"),
        ("rq_cursor_counts", "SELECT * FROM raquel_internal.rq_cursor_counts()", "00000"),
        ("rq_cursor_state", "SELECT raquel_internal.rq_cursor_state('jobs'::regclass::oid, 'q')", "00000"),
        ("rq_next_duty_ms", "SELECT raquel_internal.rq_next_duty_ms('1 day')", "00000"),
        ("rq_job_events", "SELECT raquel_internal.rq_job_events()", "*"),
        ("rq_job_values", "SELECT raquel_internal.rq_job_values()", "*"),
        ("rq_drop_started", "SELECT raquel_internal.rq_drop_started()", "*"),
        ("rq_job_ready_again", "SELECT raquel_internal.rq_job_ready_again('hq', 0, NULL)", "*"),
        ("rq_check_limits", "SELECT raquel_internal.rq_check_limits('hq', 1, 5, '1 second', 1)", "00000"),
        ("rq_check_limits", "SELECT raquel_internal.rq_check_limits('hq', 0, NULL, NULL, NULL)", "22023"),
        ("rq_set_limits", "SELECT rq_set_limits('hq-limits', 2, 10, '1 second', 1)", "00000"),
        ("rq_pause", "SELECT rq_pause('hq-limits')", "00000"),
        ("rq_resume", "SELECT rq_resume('hq-limits')", "00000"),
        ("rq_tidy_queue_limits", "SELECT raquel_internal.rq_tidy_queue_limits('hq-none', NULL)", "00000"),
        ("rq_note_new_queue", "SELECT raquel_internal.rq_note_new_queue('hq-none', 'rq_pause')", "00000"),
        ("rq_set_history", "SELECT rq_set_history('hq-gone', false)", "00000"),
        ("rq_set_history", "SELECT rq_set_history('hq-gone', true)", "00000"),
        ("rq_wake_claims", "SELECT raquel_internal.rq_wake_claims('hq-limits')", "00000"),
        // the flow claim's parts run only inside rq_claim (the claims of
        // the '-flow' queues above run them); called directly, they refuse
        ("rq_flow_lock", "SELECT * FROM raquel_internal.rq_flow_lock(ARRAY['hq-limits'])", "42501"),
        ("rq_flow_took", "SELECT raquel_internal.rq_flow_took('hq-limits', '{}', 1, 0)", "42501"),
        ("rq_require_flow_claim", "SELECT raquel_internal.rq_require_flow_claim('x')", "42501"),
        ("rq_queue_limits_changed", "SELECT raquel_internal.rq_queue_limits_changed()", "*"),
        ("rq_job_turn", "SELECT raquel_internal.rq_job_turn()", "*"),
        ("rq_settle_workflows", "SELECT rq_settle_workflows()", "00000"),
        ("rq_parents", "SELECT id FROM rq_parents('00000000-0000-7000-8000-000000000000')", "P0002"),
        ("rq_history", "SELECT attempt FROM rq_history('00000000-0000-7000-8000-000000000000')", "P0002"),
        // durable sleep and events (sql/waits.sql)
        ("rq_check_step_name", "SELECT raquel_internal.rq_check_step_name(NULL, 's', 'park')", "00000"),
        ("rq_check_step_name", "SELECT raquel_internal.rq_check_step_name(NULL, '', 'park')", "22023"),
        ("rq_check_event_name", "SELECT raquel_internal.rq_check_event_name('e', 'rq_emit')", "00000"),
        ("rq_check_event_name", "SELECT raquel_internal.rq_check_event_name('', 'rq_emit')", "22023"),
        ("rq_hold", "SELECT raquel_internal.rq_hold('00000000-0000-7000-8000-000000000000', 1, 'sleep')", "P0002"),
        ("rq_wait_job", "SELECT parked FROM rq_wait_job('00000000-0000-7000-8000-000000000000', 1, 's', '00000000-0000-7000-8000-000000000001')", "P0002"),
        ("rq_deliver_job_end", "SELECT raquel_internal.rq_deliver_job_end('00000000-0000-7000-8000-000000000000')", "00000"),
        ("rq_resume_waiter", "SELECT raquel_internal.rq_resume_waiter(w, '{}', 'event', 0) FROM job_waits w", "00000"),
        ("rq_end_wait", "SELECT raquel_internal.rq_end_wait(w.job_id, w.name, '{}', 1, 0, 'event') FROM job_waits w", "00000"),
        ("rq_park", "SELECT raquel_internal.rq_park('00000000-0000-7000-8000-000000000000', 1, 's', 'e', 0, 1)", "P0002"),
        ("rq_require_attempt", "SELECT raquel_internal.rq_require_attempt('00000000-0000-7000-8000-000000000000', 1, 'complete')", "00000"),
        ("rq_require_attempt", "SELECT raquel_internal.rq_require_attempt('00000000-0000-7000-8000-000000000000', NULL, 'complete')", "22004"),
        ("rq_check_event_payload", "SELECT raquel_internal.rq_check_event_payload('e', 10)", "00000"),
        ("rq_caller", "SELECT raquel_internal.rq_caller()", "00000"),
        ("rq_event_keep_ms", "SELECT raquel_internal.rq_event_keep_ms('1 minute')", "00000"),
        ("rq_event_retention_ms", "SELECT raquel_internal.rq_event_retention_ms()", "00000"),
        ("rq_max_event_wait_ms", "SELECT raquel_internal.rq_max_event_wait_ms()", "00000"),
        ("rq_step_instance", "SELECT * FROM raquel_internal.rq_step_instance('00000000-0000-7000-8000-000000000000', 's', 'sleep', 1)", "00000"),
        ("rq_event_keep_ms", "SELECT raquel_internal.rq_event_keep_ms('2 days')", "22023"),
        ("rq_check_emit_scope", "SELECT raquel_internal.rq_check_emit_scope('e')", "00000"),
        ("rq_grant_emitter", "SELECT rq_grant_emitter('pg_monitor', 'hq-events:')", "00000"),
        ("rq_check_event_payload", "SELECT raquel_internal.rq_check_event_payload('e', 2000000000)", "54000"),
        ("rq_due_within_ms", "SELECT raquel_internal.rq_due_within_ms(NULL, '1 second', 'rq_sleep')", "00000"),
        ("rq_due_within_ms", "SELECT raquel_internal.rq_due_within_ms('294276-01-01', NULL, 'rq_sleep')", "22023"),
        ("rq_event_turn", "SELECT raquel_internal.rq_event_turn('hq-event', true)", "00000"),
        ("rq_event_turn", "SELECT raquel_internal.rq_event_turn('hq-event', false)", "00000"),
        ("rq_forever_ms", "SELECT raquel_internal.rq_forever_ms()", "00000"),
        ("rq_look_in_at_commit", "SELECT raquel_internal.rq_look_in_at_commit()", "00000"),
        ("rq_deliver", "SELECT raquel_internal.rq_deliver(e) FROM emitted_events e", "00000"),
        ("rq_settle_waits", "SELECT raquel_internal.rq_settle_waits(10)", "00000"),
        ("rq_waiting_by_queue", "SELECT * FROM raquel_internal.rq_waiting_by_queue()", "00000"),
        // the distributed mode (sql/distributed.sql), on a server without Citus
        ("rq_distributed", "SELECT rq_distributed()", "00000"),
        ("rq_refuse_distributed", "SELECT raquel_internal.rq_refuse_distributed('x')", "00000"),
        ("rq_distribute", "SELECT rq_distribute()", "55000"),
        ("rq_lapsed", "SELECT * FROM raquel_internal.rq_lapsed(1, 0)", "00000"),
        ("rq_expire_distributed", "SELECT raquel_internal.rq_expire_distributed(1, 0)", "*"),
        ("rq_lapsed_distributed", "SELECT * FROM raquel_internal.rq_lapsed_distributed(1, 0)", "*"),
        ("rq_prune_distributed", "SELECT raquel_internal.rq_prune_distributed(1, 0)", "*"),
        // metrics (sql/metrics.sql)
        ("rq_note_metric", "SELECT raquel_internal.rq_note_metric('hq', 'claimed', 5)", "00000"),
        ("rq_take_metrics", "SELECT * FROM raquel_internal.rq_take_metrics()", "00000"),
        ("rq_record_metrics", "SELECT raquel_internal.rq_record_metrics()", "00000"),
        ("rq_metrics", "SELECT * FROM rq_metrics()", "00000"),
        ("rq_prometheus", "SELECT rq_prometheus()", "00000"),
        ("rq_metrics_lost", "SELECT rq_metrics_lost()", "00000"),
        ("rq_warnings", "SELECT * FROM rq_warnings()", "00000"),
        ("rq_help", "SELECT * FROM rq_help()", "00000"),
        ("rq_help", "SELECT * FROM rq_help('claim')", "00000"),
        ("rq_warnings", "SELECT * FROM raquel_internal.rq_warnings()", "00000"),
        ("rq_schema_writers", "SELECT * FROM raquel_internal.rq_schema_writers()", "00000"),
        ("rq_prometheus_label", "SELECT raquel_internal.rq_prometheus_label('a\"b')", "00000"),
        ("rq_histogram_percentile", "SELECT raquel_internal.rq_histogram_percentile('{0,1}', 0.5)", "00000"),
        ("rq_histogram_add", "SELECT raquel_internal.rq_histogram_add('{1}', '{2,3}')", "00000"),
        ("rq_job_ended", "SELECT raquel_internal.rq_job_ended('00000000-0000-7000-8000-000000000000')", "00000"),
        ("rq_cron_next", "SELECT raquel_internal.rq_cron_next('*/5 * * * * *', 'Europe/Berlin', 0)", "00000"),
        ("rq_schedule_slots", "SELECT raquel_internal.rq_schedule_slots('@hourly', 'UTC', 0, 7200000, 'all')", "00000"),
        ("rq_check_schedule_options", "SELECT raquel_internal.rq_check_schedule_options('s', 'all', 'hq', 'p')", "00000"),
        ("rq_schedule_due", "SELECT raquel_internal.rq_schedule_due(0)", "00000"),
        ("rq_schedule", "SELECT rq_schedule('hq-schedule', '* * * * * *', 'hq-scheduled', 'p', max_age => '1 hour')", "00000"),
        ("rq_schedule", "SELECT rq_schedule('hq-schedule-json', '@hourly', 'hq-scheduled', '{}'::jsonb)", "00000"),
        ("rq_pause_schedule", "SELECT rq_pause_schedule('hq-schedule-json')", "00000"),
        ("rq_resume_schedule", "SELECT rq_resume_schedule('hq-schedule-json')", "00000"),
        ("rq_unschedule", "SELECT rq_unschedule('hq-schedule-json')", "00000"),
        ("rq_fire_schedules", "SELECT pg_sleep(1.1), rq_fire_schedules()", "00000"),
        // no schedule left firing on the shared server
        ("rq_pause_schedule", "SELECT rq_pause_schedule('hq-schedule')", "00000"),
        ("rq_hold_for_parents", "SELECT raquel_internal.rq_hold_for_parents('{}', '{}')", "00000"),
        ("rq_enqueue_batch_planned", "SELECT id FROM raquel_internal.rq_enqueue_batch_planned('hq', ARRAY['p1', 'p2'], keys => ARRAY['pk1', 'pk2'])", "00000"),
        ("rq_check_parents", "SELECT raquel_internal.rq_check_parents(1, ARRAY['00000000-0000-7000-8000-000000000000']::uuid[])", "00000"),
        ("rq_has_children", "SELECT raquel_internal.rq_has_children('00000000-0000-7000-8000-000000000000')", "00000"),
        ("rq_parent_ended", "SELECT raquel_internal.rq_parent_ended('00000000-0000-7000-8000-000000000000')", "00000"),
        ("rq_enqueue_trigger", "SELECT rq_enqueue_trigger()", "*"),
    ] {
        if names.iter().any(|n| n == name) {
            su.run(sql, expect);
        }
    }

    // the duties, each with a row to act on
    su.one("SELECT id FROM rq_enqueue('su-expire', 'x', at => '2000-01-01 00:00:00+00', max_age => '1 second')");
    su.enqueue("su-rescue");
    su.claim("su-rescue", "1 millisecond");
    su.enqueue("su-prune");
    let (pruned, attempt) = su.claim("su-prune", "1 minute");
    su.ok(&format!("SELECT id FROM rq_complete('{pruned}', {attempt})"));
    backdate_finished(&mut observer.client, &pruned);
    std::thread::sleep(Duration::from_millis(20));
    for duty in ["rq_expire()", "rq_rescue()", "rq_prune()"] {
        let changed = su.one(&format!("SELECT {duty}"));
        if changed == "0" {
            findings.lock().unwrap().unexpected.push(format!("{duty} changed no job: it ran on no real row"));
        }
    }
    su.ok("SELECT rq_expire(5)");
    su.ok("SELECT rq_rescue(5)");
    su.ok("SELECT rq_prune(10, '1 millisecond')");
    su.run("SELECT rq_prune(0)", "22023");

    // --- the background worker, as the bootstrap superuser --------------
    // A job to expire, a lease to rescue, a finished job to prune.
    let to_expire = su.one("SELECT id FROM rq_enqueue('bg-expire', 'x', at => '2000-01-01 00:00:00+00', max_age => '1 second')");
    su.enqueue("bg-rescue");
    let (to_rescue, _) = su.claim("bg-rescue", "1 millisecond");
    su.enqueue("bg-prune");
    let (to_prune, attempt) = su.claim("bg-prune", "1 minute");
    su.ok(&format!("SELECT id FROM rq_complete('{to_prune}', {attempt})"));
    backdate_finished(&mut observer.client, &to_prune);
    drop(kept_away);
    let wakes = su.one("SELECT rq_worker_wake()");
    assert_eq!(wakes, "t", "no background worker runs: the test needs shared_preload_libraries = 'raquel'");
    let worked = eventually(30, || {
        let row = observer
            .client
            .query_one(
                "SELECT (SELECT j.status FROM public.jobs j WHERE j.id OPERATOR(pg_catalog.=) $1::pg_catalog.text::pg_catalog.uuid),
                        (SELECT j.status FROM public.jobs j WHERE j.id OPERATOR(pg_catalog.=) $2::pg_catalog.text::pg_catalog.uuid),
                        (SELECT pg_catalog.count(*) FROM public.jobs j WHERE j.id OPERATOR(pg_catalog.=) $3::pg_catalog.text::pg_catalog.uuid)",
                &[&to_expire, &to_rescue, &to_prune],
            )
            .unwrap();
        let (expired, rescued, left): (Option<String>, Option<String>, i64) = (row.get(0), row.get(1), row.get(2));
        expired.as_deref() == Some("expired") && rescued.as_deref() == Some("failed") && left == 0
    });
    // one more round with nothing to do
    std::thread::sleep(Duration::from_millis(2500));

    let statements = findings.lock().unwrap().statements.join("\n");
    let functions = extension_functions(&mut observer.client);
    drop((su, prod, work, observer));
    let from_log = fired_in_log(log_start, db);
    drop_database_and_roles(db, &[planter, producer, worker]);

    let mut findings = findings.into_inner().unwrap();
    if !worked {
        findings.unexpected.push(
            "the background worker did not expire, rescue and prune its three jobs within 30 seconds".into(),
        );
    }
    // every function of the extension was called, so that each was looked at
    for (signature, _, _, _) in &functions {
        let name = function_name(signature);
        if !statements.contains(&format!("{name}(")) {
            findings.unexpected.push(format!("{signature} was never called: add it to this test's verbs"));
        }
    }
    // the log has every planted object that ran, the worker's included
    let from_clients: usize = findings.fired.values().sum();
    add_from_log(&mut findings, &from_log);
    eprintln!(
        "hostile: derived from the code: functions {:?}; operators {:?}",
        plants.builtin_functions, plants.builtin_operators
    );
    assert!(
        findings.fired.is_empty() && from_log.is_empty() && findings.unexpected.is_empty(),
        "{}\n({} planted objects ran for clients, {} entries in the server log)",
        report(&findings),
        from_clients,
        from_log.len()
    );
}

/// Moves a finished job's finished_at 30 days back, past any retention the
/// worker uses by default (7 days).
fn backdate_finished(observer: &mut Client, id: &str) {
    let n = observer
        .execute(
            "UPDATE public.jobs j SET finished_at = j.finished_at OPERATOR(pg_catalog.-) 2592000000::pg_catalog.int8
             WHERE j.id OPERATOR(pg_catalog.=) $1::pg_catalog.text::pg_catalog.uuid",
            &[&id],
        )
        .unwrap();
    assert_eq!(n, 1, "backdating job {id}");
}

// ---------------------------------------------------------------------------
// Look-alikes of raquel's own functions (0.6.0).
//
// A role that may create in the extension's schema (public here) plants
// functions named like raquel's own, public and internal: for every call
// the code makes of one of them (qualified or not), an overload whose
// argument types fit that call exactly where raquel's function needs a
// cast (`rq_ms_to_interval(integer)` for a call passing an integer column
// to `rq_ms_to_interval(bigint)`); and for every function, one with the
// same arguments and one more with a default, which makes any call of the
// name in that schema ambiguous (42725). Under 0.5.0, whose code called
// its public helpers by their names in the extension's schema, the first
// kind ran as the superuser from a duty; raquel now calls its own
// functions only in raquel_internal, where nobody but the owner creates.
//
// The look-alikes take no parameter names: a call in named notation (the
// victims' own calls below) cannot reach them, so what the test sees is
// what raquel's code calls, not what the test itself types. (A user's own
// call by name in a schema others may create in is the hazard PostgreSQL
// documents; raquel warns about such a schema: docs/src/guides/operations.md.)

/// A function of raquel's, as the catalog has it.
struct OwnFunction {
    overload: Overload,
    /// `pg_get_function_result`: `bigint`, `SETOF jobs`, `TABLE(…)`, `record`, `trigger`
    result: String,
    /// its OUT parameters, as `OUT name type` (for a result of `record`)
    out_params: Vec<String>,
}

fn own_functions(observer: &mut Client) -> Vec<OwnFunction> {
    observer
        .query(
            "SELECT p.proname::pg_catalog.text, p.pronargs::pg_catalog.int4, p.pronargdefaults::pg_catalog.int4,
                    p.provariadic, p.proargtypes::pg_catalog.oid[], COALESCE(p.proargnames, '{}'),
                    pg_catalog.pg_get_function_arguments(p.oid), pg_catalog.pg_get_function_result(p.oid)
             FROM pg_catalog.pg_depend d
             JOIN pg_catalog.pg_proc p ON p.oid OPERATOR(pg_catalog.=) d.objid
             JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) p.pronamespace
             WHERE d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_proc'::pg_catalog.regclass
               AND d.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_extension'::pg_catalog.regclass
               AND d.refobjid OPERATOR(pg_catalog.=) (SELECT e.oid FROM pg_catalog.pg_extension e
                                                     WHERE e.extname OPERATOR(pg_catalog.=) 'raquel')
               AND d.deptype OPERATOR(pg_catalog.=) 'e'
               AND n.nspname OPERATOR(pg_catalog.<>) $1
               AND p.prokind OPERATOR(pg_catalog.=) 'f'
             ORDER BY 1",
            &[&TEST_SCHEMA],
        )
        .unwrap()
        .iter()
        .map(|row| {
            let nargs: i32 = row.get(1);
            let arguments: String = row.get(6);
            OwnFunction {
                overload: Overload {
                    name: row.get(0),
                    aggregate: false,
                    nargs: nargs as usize,
                    ndefaults: row.get::<_, i32>(2) as usize,
                    variadic: row.get(3),
                    argtypes: row.get(4),
                    argnames: row.get(5),
                    defaults: parameter_defaults(&arguments, nargs as usize),
                },
                result: row.get(7),
                out_params: arguments
                    .split(", ")
                    .filter(|a| a.starts_with("OUT "))
                    .map(str::to_string)
                    .collect(),
            }
        })
        .collect()
}

/// Every call of a function named in `names`, qualified or not, in the
/// code: name → the shapes of its calls.
fn own_calls(code: &[(String, String)], names: &BTreeSet<String>) -> BTreeMap<String, BTreeSet<CallShape>> {
    let mut calls: BTreeMap<String, BTreeSet<CallShape>> = BTreeMap::new();
    for (_, sql) in code {
        let t = sql_tokens(&without_placeholders(sql));
        for (i, tok) in t.iter().enumerate() {
            if let Tok::Word(w) = tok {
                if names.contains(w) && t.get(i + 1) == Some(&Tok::Open('(')) {
                    calls.entry(w.clone()).or_default().insert(call_shape(&t, i + 1));
                }
            }
        }
    }
    calls
}

/// The statements that plant the look-alikes of raquel's own functions in
/// `public`: exact-type overloads for the positional calls of the code
/// (and every function's call with all its arguments), and one overload
/// with a defaulted argument more for every function. Each leaves its
/// evidence and returns nothing.
fn own_plant_statements(observer: &mut Client, exact: bool, ambiguous: bool) -> Vec<String> {
    let mut types = derive_plants(observer).types;
    let functions = own_functions(observer);
    let names: BTreeSet<String> = functions.iter().map(|f| f.overload.name.clone()).collect();
    let code = extension_code(observer);
    let calls = own_calls(&code, &names);
    let all_types: Vec<u32> = functions.iter().flat_map(|f| f.overload.argtypes.clone()).collect();
    types.learn(observer, all_types);
    let existing: HashSet<(String, Vec<u32>)> =
        functions.iter().map(|f| (f.overload.name.clone(), f.overload.argtypes.clone())).collect();

    let mut out = Vec::new();
    let mut seen: HashSet<(String, Vec<u32>)> = HashSet::new();
    for (n, f) in functions.iter().enumerate() {
        let o = &f.overload;
        if f.result == "trigger" || f.result == "event_trigger" {
            continue; // called by OID, never by name
        }
        let body = if f.result.starts_with("SETOF ") || f.result.starts_with("TABLE(") || f.result == "record" || f.result == "void" {
            "RETURN;"
        } else {
            "RETURN NULL;"
        };
        let plant = |params: Vec<String>, tag: &str| {
            let mut all = params.clone();
            all.extend(f.out_params.iter().cloned());
            format!(
                "CREATE FUNCTION public.\"{}\"({}) RETURNS {} LANGUAGE plpgsql AS $rqh$ BEGIN {} {body} END $rqh$",
                o.name,
                all.join(", "),
                f.result,
                evidence(&format!("{tag} public.{}({}) #{n}", o.name, params.join(", ")))
            )
        };
        // exact types for the code's positional calls, and the call with every argument
        let mut shapes: BTreeSet<CallShape> =
            calls.get(&o.name).map(|s| s.iter().filter(|c| c.named.is_empty()).cloned().collect()).unwrap_or_default();
        shapes.insert(CallShape { arity: o.nargs, named: Vec::new() });
        if exact && f.out_params.is_empty() {
            for shape in &shapes {
                let Some(combos) = variants(o, shape, &types) else { continue };
                for combo in combos {
                    let combo: Vec<u32> = combo.into_iter().take(shape.arity).collect();
                    if combo.contains(&0)
                        || existing.contains(&(o.name.clone(), combo.clone()))
                        || !seen.insert((o.name.clone(), combo.clone()))
                    {
                        continue;
                    }
                    out.push(plant(combo.iter().map(|&t| types.name(t).to_string()).collect(), "exact-type look-alike"));
                }
            }
        }
        // one defaulted argument more: every call of the name is ambiguous
        let mut with_more = o.argtypes.clone();
        with_more.push(types.oid("integer"));
        if ambiguous && o.variadic == 0 && !existing.contains(&(o.name.clone(), with_more.clone())) && seen.insert((o.name.clone(), with_more)) {
            let mut params: Vec<String> = o.argtypes.iter().map(|&t| types.name(t).to_string()).collect();
            params.push("integer DEFAULT 0".into());
            out.push(plant(params, "ambiguous look-alike"));
        }
    }
    out
}

/// Claims the one job of `queue` in named notation: (id, attempt).
fn claim(v: &mut Victim, queue: &str, lease: &str) -> (String, String) {
    let rows =
        v.ok(&format!("SELECT id, attempts FROM rq_claim(queues => ARRAY['{queue}'], worker => 'w', lease => '{lease}')"));
    let row = rows.first().unwrap_or_else(|| panic!("nothing to claim in {queue}"));
    (row[0].clone().unwrap(), row[1].clone().unwrap())
}

/// Plants `statements` (look-alikes of raquel's functions) as `planter` in
/// `db`, and checks that the planter may create nothing in raquel_internal;
/// returns how many it planted.
fn plant_own(db: &str, planter: &str, statements: &[String]) -> usize {
    let (planted, mut hostile) = plant_all(db, planter, statements, 10);
    // and nothing in raquel_internal, whatever the role tries
    let refused_there = hostile
        .client
        .batch_execute(
            "CREATE FUNCTION raquel_internal.rq_now_ms(integer) RETURNS bigint LANGUAGE sql AS $rqh$ SELECT 0::bigint $rqh$",
        )
        .err()
        .and_then(|e| e.code().map(|c| c.code().to_string()));
    assert_eq!(refused_there.as_deref(), Some("42501"), "a role other than the owner created in raquel_internal");
    planted
}

/// Every planted object that ran, from the victims' notices and the
/// server log (the background worker's only record), and every statement
/// that failed with an ambiguity (42725) or otherwise.
fn own_findings(findings: Findings, log_start: u64, db: &str) -> (Findings, Vec<String>) {
    let mut findings = findings;
    add_from_log(&mut findings, &fired_in_log(log_start, db));
    let log = server_log_since(log_start);
    let ambiguous: Vec<String> = log
        .lines()
        .filter(|l| l.contains("42725") || l.contains("is not unique"))
        .map(|l| l.to_string())
        .collect();
    (findings, ambiguous)
}

#[test]
fn look_alikes_of_raquels_own_functions_never_run_and_every_duty_still_works() {
    let (db, planter, producer, worker) =
        ("rq_hostile_own", "rq_hostile_own_planter", "rq_hostile_own_producer", "rq_hostile_own_worker");
    let kept_away = WorkerKeptAway::new();
    new_database(db);
    let mut observer = pinned_session(db, "postgres");
    observer.client.batch_execute("CREATE EXTENSION raquel SCHEMA public").unwrap();
    hostile_role(&mut observer.client, db, planter);
    observer
        .client
        .batch_execute(&format!(
            "DROP ROLE IF EXISTS {producer}; DROP ROLE IF EXISTS {worker};
             CREATE ROLE {producer} LOGIN; CREATE ROLE {worker} LOGIN;
             SELECT public.rq_grant_producer('{producer}');
             SELECT public.rq_grant_worker('{worker}');
             CREATE TABLE public.signups (id integer, email text);
             CREATE TRIGGER signups_enqueue AFTER INSERT ON public.signups
                 FOR EACH ROW EXECUTE FUNCTION public.rq_enqueue_trigger('own-signups');
             GRANT SELECT, INSERT ON public.signups TO {producer}"
        ))
        .unwrap();

    // Work for the duties, made before anything is planted: a job to
    // expire, a finished job to prune.
    let expire_id: String = observer
        .client
        .query_one(
            "SELECT (public.rq_enqueue(queue => 'own-expire', payload => 'x', at => '2000-01-01 00:00:00+00',
                                       max_age => '1 second')).id::pg_catalog.text",
            &[],
        )
        .unwrap()
        .get(0);

    let statements = own_plant_statements(&mut observer.client, true, true);
    let planted = plant_own(db, planter, &statements);
    eprintln!("hostile: {planted} look-alikes of raquel's own functions planted");
    assert!(planted >= 100, "only {planted} look-alikes of raquel's functions planted: the derivation found too little");
    let log_start = server_log_len();

    let findings = Mutex::new(Findings::default());
    let mut su = Victim { s: session(db, "postgres"), findings: &findings };
    let mut prod = Victim { s: session(db, producer), findings: &findings };
    let mut work = Victim { s: session(db, worker), findings: &findings };

    // Every call below names an argument: the look-alikes cannot match it.
    for v in [&mut su, &mut prod] {
        v.one("SELECT id FROM rq_enqueue(queue => 'own-q', payload => 'text')");
        v.one("SELECT id FROM rq_enqueue(queue => 'own-q', payload => '{\"a\": 1}'::jsonb)");
        v.ok("SELECT id FROM rq_enqueue_batch(queue => 'own-q', payloads => ARRAY['b1', 'b2'])");
        v.ok("SELECT id FROM rq_enqueue_batch(queue => 'own-q', payloads => ARRAY['{\"n\": 1}']::jsonb[])");
    }
    prod.ok("INSERT INTO signups VALUES (1, 'a@b.c')");
    for queue in ["own-complete", "own-fail", "own-resched", "own-sleep", "own-wait", "own-cancel", "own-rescue"] {
        su.one(&format!("SELECT id FROM rq_enqueue(queue => '{queue}', payload => 'x')"));
    }
    let (id, at) = claim(&mut work, "own-complete", "1 minute");
    work.ok(&format!("SELECT rq_step(id => '{id}', attempt => {at}, name => 'first', result => '1')"));
    work.ok(&format!("SELECT id FROM rq_extend(id => '{id}', lease => '2 minutes', attempt => {at})"));
    work.ok(&format!("SELECT id FROM rq_complete(id => '{id}', attempt => {at}, result => '{{\"done\": true}}')"));
    let (id, at) = claim(&mut work, "own-fail", "1 minute");
    work.ok(&format!("SELECT id FROM rq_fail(id => '{id}', error => 'boom', attempt => {at})"));
    let (id, at) = claim(&mut work, "own-resched", "1 minute");
    work.ok(&format!("SELECT id FROM rq_reschedule(id => '{id}', delay => '1 hour', attempt => {at})"));
    let (sleeper, at) = claim(&mut work, "own-sleep", "1 minute");
    work.ok(&format!("SELECT rq_sleep(id => '{sleeper}', name => 'nap', delay => '1 second', attempt => {at})"));
    let (waiter, at) = claim(&mut work, "own-wait", "1 minute");
    work.ok(&format!(
        "SELECT parked FROM rq_wait_event(id => '{waiter}', name => 'w', event => 'own-never', timeout => '1 second', attempt => {at})"
    ));
    su.ok("SELECT rq_emit(event => 'own-other', payload => '{}')");
    let cancelled = su.one("SELECT id FROM rq_enqueue(queue => 'own-cancel2', payload => 'x')");
    su.ok(&format!("SELECT id FROM rq_cancel(id => '{cancelled}')"));
    su.ok(&format!("SELECT id FROM rq_retry(id => '{cancelled}')"));
    su.ok("SELECT queue FROM rq_pause(queue => 'own-q')");
    su.ok("SELECT queue FROM rq_resume(queue => 'own-q')");
    su.ok("SELECT name FROM rq_schedule(name => 'own-every-second', cron => '* * * * * *', queue => 'own-scheduled', payload => 'p')");
    su.ok("SELECT name FROM rq_schedule(name => 'own-json', cron => '@hourly', queue => 'own-scheduled', payload => '{}'::jsonb)");
    su.ok("SELECT count(*) FROM rq_jobs");
    su.ok("SELECT count(*) FROM rq_schedules");
    su.ok("SELECT rq_count(queue => 'own-q')");
    su.ok("SELECT rq_prometheus(max_queues => 10)");
    su.ok("SELECT count(*) FROM rq_metrics(queue => 'own-q')");
    // the duties by hand, with a lapsed lease to rescue
    claim(&mut work, "own-rescue", "1 millisecond");
    std::thread::sleep(Duration::from_millis(20));
    for duty in ["rq_expire(batch => 10)", "rq_rescue(batch => 10)", "rq_prune(batch => 10)",
        "rq_fire_schedules(batch => 10)", "rq_settle_workflows(batch => 10)"]
    {
        su.ok(&format!("SELECT {duty}"));
    }

    // The background worker, as the bootstrap superuser: a schedule fires,
    // a lapsed lease is rescued; and a sleeper and a wait that timed out
    // are claimable again.
    su.one("SELECT id FROM rq_enqueue(queue => 'own-bg-rescue', payload => 'x')");
    let (bg_rescue, _) = claim(&mut work, "own-bg-rescue", "1 millisecond");
    let fired_before: i64 = observer
        .client
        .query_one("SELECT pg_catalog.count(*) FROM public.jobs j WHERE j.queue OPERATOR(pg_catalog.=) 'own-scheduled'", &[])
        .unwrap()
        .get(0);
    drop(kept_away);
    let worked = eventually(30, || {
        let row = observer
            .client
            .query_one(
                "SELECT (SELECT pg_catalog.count(*) FROM public.jobs j WHERE j.queue OPERATOR(pg_catalog.=) 'own-scheduled'),
                        (SELECT j.status::pg_catalog.text FROM public.jobs j WHERE j.id OPERATOR(pg_catalog.=) $1::pg_catalog.text::pg_catalog.uuid),
                        (SELECT j.status::pg_catalog.text FROM public.jobs j WHERE j.id OPERATOR(pg_catalog.=) $2::pg_catalog.text::pg_catalog.uuid)",
                &[&bg_rescue, &expire_id],
            )
            .unwrap();
        let (fired, rescued, expired): (i64, Option<String>, Option<String>) = (row.get(0), row.get(1), row.get(2));
        fired > fired_before && rescued.as_deref() == Some("failed") && expired.as_deref() == Some("expired")
    });
    // the sleeper and the wait that timed out are due again: a claim takes each
    let mut claimed: HashSet<String> = HashSet::new();
    let woke = eventually(10, || {
        let rows = work.ok("SELECT id FROM rq_claim(queues => ARRAY['own-sleep', 'own-wait'], worker => 'w', batch => 2)");
        claimed.extend(rows.into_iter().filter_map(|r| r[0].clone()));
        claimed.contains(&sleeper) && claimed.contains(&waiter)
    });
    std::thread::sleep(Duration::from_millis(1500));
    su.ok("SELECT rq_pause_schedule(name => 'own-every-second')");
    drop((su, prod, work, observer));
    let (mut findings, ambiguous) = own_findings(findings.into_inner().unwrap(), log_start, db);
    drop_database_and_roles(db, &[planter, producer, worker]);
    if !worked {
        findings.unexpected.push(
            "within 30 seconds the background worker did not fire the schedule, rescue the lapsed lease, \
             end the wait and expire the job"
                .into(),
        );
    }
    if !woke {
        findings.unexpected.push("the sleeper and the timed-out wait were not claimable 10 seconds after their second".into());
    }
    assert!(
        findings.fired.is_empty() && findings.unexpected.is_empty() && ambiguous.is_empty(),
        "{}\nambiguous calls in the server log:\n  {}",
        report(&findings),
        ambiguous.join("\n  ")
    );
}

#[test]
fn look_alikes_of_raquels_own_functions_run_as_the_superuser_or_stop_duties_under_0_5_0() {
    // The same look-alikes, derived from 0.5.0's code, planted into
    // installs of 0.5.0, each kind in a database of its own: the exact-type
    // ones run when the superuser runs the schedule duty, and the
    // ambiguous ones make it fail. If not, they would prove nothing above.
    for (kind, exact, ambiguous) in [("exact", true, false), ("ambiguous", false, true)] {
        let (db, planter) = (format!("rq_hostile_own_old_{kind}"), format!("rq_hostile_own_old_{kind}_planter"));
        new_database(&db);
        let mut observer = pinned_session(&db, "postgres");
        observer.client.batch_execute("CREATE EXTENSION raquel VERSION '0.5.0' SCHEMA public").unwrap();
        hostile_role(&mut observer.client, &db, &planter);
        observer
            .client
            .batch_execute(
                "SELECT public.rq_schedule(name => 'old-every-second', cron => '* * * * * *', queue => 'old-scheduled',
                                           payload => 'p', min_retry_delay => '1 second')",
            )
            .unwrap();
        let statements = own_plant_statements(&mut observer.client, exact, ambiguous);
        let planted = plant_own(&db, &planter, &statements);
        std::thread::sleep(Duration::from_millis(1100));
        let log_start = server_log_len();
        let findings = Mutex::new(Findings::default());
        let mut su = Victim { s: session(&db, "postgres"), findings: &findings };
        su.run("SELECT rq_fire_schedules(batch => 10)", "*");
        drop((su, observer));
        let (findings, ambiguities) = own_findings(findings.into_inner().unwrap(), log_start, &db);
        drop_database_and_roles(&db, &[&planter]);
        eprintln!("hostile: {planted} {kind} look-alikes planted in 0.5.0; {}", report(&findings));
        if exact {
            assert!(
                findings.fired.keys().any(|f| f.contains(" as postgres ")),
                "none of the {planted} exact-type look-alikes ran as the superuser in 0.5.0's schedule duty: \
                 they are too weak to prove anything"
            );
        } else {
            assert!(
                !ambiguities.is_empty(),
                "none of the {planted} ambiguous look-alikes stopped 0.5.0's schedule duty: they are too weak to prove anything"
            );
        }
    }
}

#[test]
fn raquel_calls_its_own_functions_only_in_raquel_internal() {
    // What the test above shows by planting, read from the code: every call
    // of a raquel function, in every function body, every statement the
    // Rust code prepares and every SQL string of the Rust code, names it in
    // raquel_internal (in the Rust code's format strings, `{internal}`).
    let db = "rq_hostile_own_calls";
    new_database(db);
    let mut observer = pinned_session(db, "postgres");
    observer.client.batch_execute("CREATE EXTENSION raquel SCHEMA public").unwrap();
    // (a trigger function is called by OID, never by name)
    let names: BTreeSet<String> = own_functions(&mut observer.client)
        .into_iter()
        .filter(|f| f.result != "trigger")
        .map(|f| f.overload.name)
        .collect();
    let code = extension_code(&mut observer.client);
    drop(observer);
    drop_database_and_roles(db, &[]);
    let mut unqualified = Vec::new();
    for (origin, sql) in &code {
        let t = sql_tokens(&without_placeholders(sql));
        for (i, tok) in t.iter().enumerate() {
            let Tok::Word(w) = tok else { continue };
            if !names.contains(w) || t.get(i + 1) != Some(&Tok::Open('(')) {
                continue;
            }
            let internal = i >= 2
                && t[i - 1] == Tok::Dot
                && (t[i - 2] == Tok::Word("raquel_internal".into())
                    || (i >= 3 && t[i - 2] == Tok::Other && t[i - 3] == Tok::Word("internal".into())));
            if !internal {
                unqualified.push(format!("{w}(…) in {origin}"));
            }
        }
    }
    assert!(
        unqualified.is_empty(),
        "raquel calls its own functions by a name outside raquel_internal, where a role that may create in the \
         extension's schema can plant a look-alike (sql/privileges.sql):\n  {}",
        unqualified.join("\n  ")
    );
}

#[test]
fn raquel_says_when_roles_other_than_its_owner_may_create_in_its_schema() {
    let (db, role) = ("rq_hostile_writable", "rq_hostile_writer");
    new_database(db);
    let mut owner = session(db, "postgres");
    owner
        .client
        .batch_execute(&format!("DROP ROLE IF EXISTS {role}; CREATE ROLE {role}; GRANT CREATE ON SCHEMA public TO {role}"))
        .unwrap();
    let log_start = server_log_len();
    owner.client.batch_execute("CREATE EXTENSION raquel SCHEMA public").unwrap();
    // at CREATE EXTENSION: a WARNING naming the role, with a HINT
    let said: Vec<Notice> = owner.notices.lock().unwrap().drain(..).collect();
    assert!(
        said.iter().any(|n| n.message.contains("may create in its schema public") && n.message.contains(role)),
        "no warning at CREATE EXTENSION: {:?}",
        said.iter().map(|n| &n.message).collect::<Vec<_>>()
    );
    // rq_warnings() says it too, with what to do
    let rows = owner.client.query("SELECT warning, hint FROM rq_warnings()", &[]).unwrap();
    assert_eq!(rows.len(), 1);
    let (warning, hint): (String, String) = (rows[0].get(0), rows[0].get(1));
    assert!(warning.contains(role) && hint.contains("CREATE EXTENSION raquel SCHEMA raquel"), "{warning} / {hint}");
    // and the background worker's round puts it in the server log, once
    owner.client.batch_execute("SELECT rq_worker_wake()").unwrap();
    let line = format!("raquel: in database \"{db}\", roles other than raquel's owner may create in its schema public: {role}");
    let logged = eventually(30, || server_log_since(log_start).contains(&line));
    assert!(logged, "the background worker did not log the warning within 30 s");
    std::thread::sleep(Duration::from_millis(1200));
    owner.client.batch_execute("SELECT rq_worker_wake()").unwrap();
    std::thread::sleep(Duration::from_millis(2500));
    assert_eq!(server_log_since(log_start).matches(&line).count(), 1, "the warning reached the log more than once an hour");
    // once only the owner may create there, nothing to say
    owner.client.batch_execute(&format!("REVOKE CREATE ON SCHEMA public FROM {role}")).unwrap();
    assert_eq!(owner.client.query("SELECT warning FROM rq_warnings()", &[]).unwrap().len(), 0);
    drop(owner);
    drop_database_and_roles(db, &[role]);
}
