//! No privilege escalation through look-alikes planted for the dashboard.
//!
//! A role that may create objects in a schema on the dashboard's
//! search_path (here: CREATE on `public`, where raquel is installed) can
//! plant functions, aggregates and operators named like the built-ins the
//! dashboard's SQL calls, with argument types that fit a call better than
//! pg_catalog's own (`public.||(text, integer)` beats `pg_catalog.||(text,
//! anynonarray)`, `public.*(numeric, integer)` beats the built-in that needs
//! a cast, `public.row_to_json(public.jobs)` beats `row_to_json(record)`).
//! A dashboard connected as a superuser that resolves its calls through the
//! search_path then runs them as the superuser (security review of 0.4.0).
//!
//! The look-alikes are derived from the code, as tests/client/tests/
//! hostile.rs does for the extension: every identifier followed by `(`
//! (unqualified, or qualified with pg_catalog) and every operator in the
//! SQL strings of dashboard/src/db.rs, with the operators that IN, ANY,
//! LIKE and ILIKE imply, intersected with pg_catalog's functions and
//! operators. For each built-in overload, look-alikes are planted whose
//! argument types are the types the dashboard's SQL handles (PALETTE) and
//! that pg_catalog's overload accepts (exactly, by an implicit cast, or as
//! a polymorphic type), unless pg_catalog has that very signature (which
//! comes first on every search_path). Each look-alike calls the built-in,
//! so that the pages keep working, after it leaves its evidence: a row in
//! public.rqh_fired (which look-alike, as whom) and a value taken from the
//! sequence public.rqh_ran (which no rollback undoes), and it tries
//! `ALTER ROLE <planter> SUPERUSER`, which succeeds when a superuser runs it.
//!
//! Then a read-write dashboard connected as the server's superuser serves
//! every page and action; the test asserts that each answered as it should
//! (so that it cannot pass by failing early), that no look-alike ran, and
//! that the planting role is not a superuser.

mod common;

use common::*;
use postgres::Client;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

/// The types the dashboard's SQL handles: its columns' and parameters'
/// types, what its casts and built-ins return, the table's row type
/// (`@jobs@`, qualified) and the arrays it passes.
const PALETTE: &[&str] = &[
    "text",
    "name",
    "integer",
    "bigint",
    "numeric",
    "double precision",
    "boolean",
    "uuid",
    "interval",
    "timestamp with time zone",
    "json",
    "oid",
    "text[]",
    "@jobs@",
];

/// Up to this many argument-type combinations per call are planted (every
/// combination of the types each position may take); beyond it, one
/// position at a time is varied.
const FULL_PRODUCT_LIMIT: usize = 256;

const PLANTER: &str = "rq_dash_planter";

// ---------------------------------------------------------------------------
// What the dashboard's SQL calls.

#[derive(Clone, Debug, PartialEq)]
enum Tok {
    Word(String),
    Op(String),
    Open,
    Close,
    Comma,
    Dot,
    Other,
}

const OP_CHARS: &str = "+-*/<>=~!@#%^&|`?";

/// PostgreSQL's lexical rules, as far as they decide what is a name, a call
/// or an operator (the dashboard's SQL has no comments, dollar quotes or
/// quoted names).
fn sql_tokens(sql: &str) -> Vec<Tok> {
    let s: Vec<char> = sql.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < s.len() {
        let c = s[i];
        if c == '\'' {
            i += 1;
            while i < s.len() && !(s[i] == '\'' && s.get(i + 1) != Some(&'\'')) {
                i += if s[i] == '\'' { 2 } else { 1 };
            }
            i += 1;
            out.push(Tok::Other);
        } else if c.is_alphabetic() || c == '_' {
            let start = i;
            while i < s.len() && (s[i].is_alphanumeric() || s[i] == '_') {
                i += 1;
            }
            out.push(Tok::Word(s[start..i].iter().collect::<String>().to_lowercase()));
        } else if c == '$' || c.is_ascii_digit() {
            i += 1;
            while i < s.len() && (s[i].is_ascii_alphanumeric() || s[i] == '.') {
                i += 1;
            }
            out.push(Tok::Other);
        } else if c == ':' {
            i += if s.get(i + 1) == Some(&':') { 2 } else { 1 };
            out.push(Tok::Other);
        } else if OP_CHARS.contains(c) {
            let start = i;
            while i < s.len() && OP_CHARS.contains(s[i]) {
                i += 1;
            }
            let op: String = s[start..i].iter().collect();
            out.push(Tok::Op(if op == "!=" { "<>".into() } else { op }));
        } else {
            out.push(match c {
                '(' | '[' => Tok::Open,
                ')' | ']' => Tok::Close,
                ',' => Tok::Comma,
                '.' => Tok::Dot,
                _ => Tok::Other,
            });
            i += 1;
        }
    }
    out
}

/// The number of arguments of the call whose `(` is at `open`.
fn arity(t: &[Tok], open: usize) -> usize {
    let (mut depth, mut commas, mut anything) = (0, 0, false);
    for (j, tok) in t.iter().enumerate().skip(open + 1) {
        match tok {
            Tok::Open => depth += 1,
            Tok::Close if depth == 0 => break,
            Tok::Close => depth -= 1,
            Tok::Comma if depth == 0 => commas += 1,
            _ => {}
        }
        // count(*) has no argument
        if !(depth == 0 && *tok == Tok::Op("*".into()) && t.get(j + 1) == Some(&Tok::Close)) {
            anything = true;
        }
    }
    if anything { commas + 1 } else { 0 }
}

#[derive(Default, Debug)]
struct Uses {
    calls: BTreeMap<String, BTreeSet<usize>>,
    operators: BTreeSet<String>,
}

fn note_sql(sql: &str, uses: &mut Uses) {
    let t = sql_tokens(sql);
    for (i, tok) in t.iter().enumerate() {
        match tok {
            Tok::Word(w) => {
                // unqualified, or pg_catalog's: a built-in (a name qualified
                // otherwise is raquel's, in its schema)
                let qualifier = if i >= 2 && t[i - 1] == Tok::Dot { Some(&t[i - 2]) } else { None };
                let builtin = qualifier.is_none_or(|q| *q == Tok::Word("pg_catalog".into()));
                if t.get(i + 1) == Some(&Tok::Open) && builtin {
                    uses.calls.entry(w.clone()).or_default().insert(arity(&t, i + 1));
                }
                let implied: &[&str] = match w.as_str() {
                    "in" | "any" => &["="],
                    "like" => &["~~"],
                    "ilike" => &["~~*"],
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

/// The string literals of a Rust source file that hold a statement, with
/// `\` line continuations joined.
fn sql_strings(src: &str) -> Vec<String> {
    let s: Vec<char> = src.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < s.len() {
        match s[i] {
            '/' if s.get(i + 1) == Some(&'/') => {
                while i < s.len() && s[i] != '\n' {
                    i += 1;
                }
            }
            // a char literal ('"', '\'') or a lifetime
            '\'' if s.get(i + 1) == Some(&'\\') => i += 4,
            '\'' if s.get(i + 2) == Some(&'\'') => i += 3,
            '"' => {
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
                // (and the pieces src/find.rs puts statements together from)
                if ["SELECT ", "INSERT ", "UPDATE ", "DELETE ", "WITH ", "pg_catalog.", " ILIKE "].iter().any(|k| text.contains(k)) {
                    out.push(text);
                }
            }
            _ => i += 1,
        }
    }
    out
}

fn dashboard_uses() -> Uses {
    let mut strings = Vec::new();
    for file in ["src/db.rs", "src/find.rs", "src/bulk.rs"] {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(file);
        let found = sql_strings(&std::fs::read_to_string(&path).unwrap());
        assert!(found.len() >= 5, "found only {} statements in {}", found.len(), path.display());
        strings.extend(found);
    }
    let mut uses = Uses::default();
    for sql in &strings {
        note_sql(sql, &mut uses);
    }
    uses
}

// ---------------------------------------------------------------------------
// The look-alikes.

struct Types {
    palette: Vec<u32>,
    /// oid → (SQL name, typtype, is an array)
    names: HashMap<u32, (String, String, bool)>,
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

    /// The palette types a call may pass where the built-in takes `b`.
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

    /// The type a position takes while another one is varied.
    fn usual(&self, b: u32) -> Option<u32> {
        let p = |n: &str| self.oid(n);
        if [p("\"any\""), p("anyelement"), p("anycompatible"), p("anynonarray"), p("anycompatiblenonarray")].contains(&b) {
            Some(p("text"))
        } else if [p("anyarray"), p("anycompatiblearray")].contains(&b) {
            Some(p("text[]"))
        } else if b == p("record") {
            self.palette.iter().copied().find(|&t| self.is_composite(t))
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

/// One look-alike: `CREATE` statements and what it is, e.g.
/// "function public.left(text, bigint)".
struct Plant {
    what: String,
    sql: String,
}

/// The first statements of every look-alike's body: its evidence.
fn evidence(what: &str) -> String {
    let what = what.replace('\'', "''");
    format!(
        "PERFORM pg_catalog.nextval('public.rqh_ran'::pg_catalog.regclass);
         INSERT INTO public.rqh_fired (plant, ran_as) VALUES ('{what}', current_user);
         BEGIN ALTER ROLE {PLANTER} SUPERUSER; EXCEPTION WHEN insufficient_privilege THEN NULL; END;"
    )
}

/// Every look-alike of what `uses` names, for the database `c` is in.
fn derive_plants(c: &mut Client, uses: &Uses) -> Vec<Plant> {
    // the palette, the implicit casts, the polymorphic pseudo-types
    let schema: String = c
        .query_one(
            "SELECT pg_catalog.quote_ident(n.nspname::pg_catalog.text) FROM pg_catalog.pg_extension e
             JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) e.extnamespace
             WHERE e.extname OPERATOR(pg_catalog.=) 'raquel'",
            &[],
        )
        .unwrap()
        .get(0);
    let mut types = Types { palette: Vec::new(), names: HashMap::new(), implicit: HashSet::new(), by_name: HashMap::new() };
    let pseudo = ["\"any\"", "anyelement", "anycompatible", "anynonarray", "anycompatiblenonarray", "anyarray", "anycompatiblearray", "record"];
    for name in PALETTE.iter().map(|t| t.replace("@jobs@", &format!("{schema}.jobs"))).chain(pseudo.iter().map(|p| p.to_string())) {
        let oid: Option<u32> = c.query_one("SELECT pg_catalog.to_regtype($1)::pg_catalog.oid", &[&name]).unwrap().get(0);
        let oid = oid.unwrap_or_else(|| panic!("no type {name}"));
        types.by_name.insert(name.clone(), oid);
        if !pseudo.contains(&name.as_str()) {
            types.palette.push(oid);
        }
    }
    for row in c.query("SELECT c.castsource, c.casttarget FROM pg_catalog.pg_cast c WHERE c.castcontext OPERATOR(pg_catalog.=) 'i'", &[]).unwrap() {
        types.implicit.insert((row.get(0), row.get(1)));
    }
    let all: Vec<u32> = types.by_name.values().copied().collect();
    types.learn(c, all);

    let mut plants = Vec::new();
    let mut n = 0;

    // functions and aggregates
    let called: Vec<String> = uses.calls.keys().cloned().collect();
    let mut builtin: HashSet<(String, Vec<u32>)> = HashSet::new();
    let mut overloads = Vec::new();
    for row in c
        .query(
            "SELECT p.proname::pg_catalog.text, p.prokind::pg_catalog.text, p.pronargs::pg_catalog.int4,
                    p.pronargdefaults::pg_catalog.int4, p.provariadic, p.proargtypes::pg_catalog.oid[],
                    COALESCE(p.proargmodes::pg_catalog.text, '') OPERATOR(pg_catalog.~) '[obt]', p.proretset
             FROM pg_catalog.pg_proc p
             WHERE p.pronamespace OPERATOR(pg_catalog.=) 'pg_catalog'::pg_catalog.regnamespace
               AND p.proname OPERATOR(pg_catalog.=) ANY ($1::pg_catalog.name[])",
            &[&called],
        )
        .unwrap()
    {
        let (name, argtypes): (String, Vec<u32>) = (row.get(0), row.get(5));
        builtin.insert((name.clone(), argtypes.clone()));
        let (kind, out_parameters): (String, bool) = (row.get(1), row.get(6));
        if !(kind == "f" || kind == "a") || out_parameters {
            continue; // a procedure or window function; or a record of OUT columns, which no call here uses as a value
        }
        let (nargs, ndefaults, variadic, retset): (i32, i32, u32, bool) = (row.get(2), row.get(3), row.get(4), row.get(7));
        overloads.push((name, kind == "a", nargs as usize, ndefaults as usize, variadic, argtypes, retset));
    }
    let mut seen: HashSet<(String, Vec<u32>)> = HashSet::new();
    for (name, aggregate, nargs, ndefaults, variadic, argtypes, retset) in &overloads {
        for &k in &uses.calls[name] {
            let is_variadic = *variadic != 0;
            if k < nargs - ndefaults || (!is_variadic && k > *nargs) || (is_variadic && k < *nargs) || k == 0 {
                continue;
            }
            let declared: Vec<u32> = (0..k).map(|i| if is_variadic && i >= nargs - 1 { *variadic } else { argtypes[i] }).collect();
            let options: Vec<Vec<u32>> = declared.iter().map(|&b| types.passable_as(b)).collect();
            if options.iter().any(Vec::is_empty) {
                continue;
            }
            let mut combos: Vec<Vec<u32>> = Vec::new();
            if options.iter().map(Vec::len).product::<usize>() <= FULL_PRODUCT_LIMIT {
                combos.push(Vec::new());
                for option in &options {
                    combos = combos.into_iter().flat_map(|c| option.iter().map(move |&t| [c.clone(), vec![t]].concat())).collect();
                }
            } else {
                let Some(usual) = declared.iter().map(|&b| types.usual(b)).collect::<Option<Vec<u32>>>() else { continue };
                for (i, option) in options.iter().enumerate() {
                    for &t in option {
                        let mut c = usual.clone();
                        c[i] = t;
                        combos.push(c);
                    }
                }
            }
            for combo in combos {
                // pg_catalog comes first in every search_path: its own signature wins
                if builtin.contains(&(name.clone(), combo.clone())) || !seen.insert((name.clone(), combo.clone())) {
                    continue;
                }
                if *aggregate && (combo.len() != 1 || types.is_array(combo[0])) {
                    continue; // planted aggregates collect one non-array argument
                }
                let args: Vec<String> = combo.iter().enumerate().map(|(i, &t)| format!("${}::{}", i + 1, types.name(t))).collect();
                let Ok(statement) = c.prepare(&format!("SELECT pg_catalog.\"{name}\"({})", args.join(", "))) else { continue };
                let result = statement.columns()[0].type_().oid();
                types.learn(c, [result]);
                if types.is_pseudo(result) {
                    continue;
                }
                let t = |oid: u32| types.name(oid).to_string();
                let params: Vec<String> = combo.iter().map(|&o| t(o)).collect();
                let what = format!("{} public.{name}({})", if *aggregate { "aggregate" } else { "function" }, params.join(", "));
                let sql = if *aggregate {
                    let arg = t(combo[0]);
                    format!(
                        "CREATE FUNCTION public.rqh_step_{n}(state {arg}[], value {arg}) RETURNS {arg}[] LANGUAGE plpgsql AS $rqh$
                         BEGIN {} RETURN pg_catalog.array_append(state, value); END $rqh$;
                         CREATE FUNCTION public.rqh_final_{n}(state {arg}[]) RETURNS {} LANGUAGE sql AS $rqh$
                         SELECT pg_catalog.\"{name}\"(v) FROM pg_catalog.unnest(state) AS v $rqh$;
                         CREATE AGGREGATE public.\"{name}\"({arg}) (SFUNC = public.rqh_step_{n}, STYPE = {arg}[], FINALFUNC = public.rqh_final_{n})",
                        evidence(&what),
                        t(result)
                    )
                } else {
                    let call = format!("pg_catalog.\"{name}\"({})", (1..=combo.len()).map(|i| format!("${i}")).collect::<Vec<_>>().join(", "));
                    let (returns, body) = if *retset {
                        (format!("SETOF {}", t(result)), format!("RETURN QUERY SELECT * FROM {call};"))
                    } else {
                        (t(result), format!("RETURN {call};"))
                    };
                    format!(
                        "CREATE FUNCTION public.\"{name}\"({}) RETURNS {returns} LANGUAGE plpgsql AS $rqh$ BEGIN {} {body} END $rqh$",
                        params.join(", "),
                        evidence(&what)
                    )
                };
                plants.push(Plant { what, sql });
                n += 1;
            }
        }
    }

    // operators
    let used: Vec<String> = uses.operators.iter().cloned().collect();
    let mut by_name: BTreeMap<String, Vec<(Option<u32>, u32)>> = BTreeMap::new();
    for row in c
        .query(
            "SELECT o.oprname::pg_catalog.text, o.oprleft, o.oprright FROM pg_catalog.pg_operator o
             WHERE o.oprnamespace OPERATOR(pg_catalog.=) 'pg_catalog'::pg_catalog.regnamespace
               AND o.oprname OPERATOR(pg_catalog.=) ANY ($1::pg_catalog.name[])
               AND o.oprkind OPERATOR(pg_catalog.=) ANY ('{b,l}')",
            &[&used],
        )
        .unwrap()
    {
        let left: u32 = row.get(1);
        by_name.entry(row.get(0)).or_default().push((if left == 0 { None } else { Some(left) }, row.get(2)));
    }
    let all: Vec<u32> = by_name.values().flatten().flat_map(|(l, r)| l.iter().copied().chain([*r])).collect();
    types.learn(c, all);
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
            let probe = match left {
                Some(l) => format!("SELECT $1::{} OPERATOR(pg_catalog.{name}) $2::{}", types.name(l), types.name(right)),
                None => format!("SELECT OPERATOR(pg_catalog.{name}) $1::{}", types.name(right)),
            };
            let Ok(statement) = c.prepare(&probe) else { continue };
            let result = statement.columns()[0].type_().oid();
            types.learn(c, [result]);
            if types.is_pseudo(result) {
                continue;
            }
            let t = |oid: u32| types.name(oid).to_string();
            let (what, params, body, args) = match left {
                Some(l) => (
                    format!("operator public.{name}({}, {})", t(l), t(right)),
                    format!("{}, {}", t(l), t(right)),
                    format!("RETURN $1 OPERATOR(pg_catalog.{name}) $2;"),
                    format!("LEFTARG = {}, RIGHTARG = {}", t(l), t(right)),
                ),
                None => (
                    format!("operator public.{name}({})", t(right)),
                    t(right),
                    format!("RETURN OPERATOR(pg_catalog.{name}) $1;"),
                    format!("RIGHTARG = {}", t(right)),
                ),
            };
            let sql = format!(
                "CREATE FUNCTION public.rqh_operator_{n}({params}) RETURNS {} LANGUAGE plpgsql AS $rqh$ BEGIN {} {body} END $rqh$;
                 CREATE OPERATOR public.{name} ({args}, FUNCTION = public.rqh_operator_{n})",
                t(result),
                evidence(&what)
            );
            plants.push(Plant { what, sql });
            n += 1;
        }
    }
    plants
}

/// For every function of raquel's (public or in raquel_internal) named in
/// the dashboard's SQL, a look-alike in `public` with the same argument
/// types and one more defaulted: (what, its CREATE statement).
fn own_look_alikes(c: &mut Client) -> Vec<(String, String)> {
    // every rq_…( in the source: its SQL strings and the calls they are
    // put together from (the actions' "rq_retry($1::text::uuid)")
    let mut names: BTreeSet<String> = BTreeSet::new();
    let source = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/src/db.rs")).unwrap();
    let mut rest = source.as_str();
    while let Some(at) = rest.find("rq_") {
        let name: String = rest[at..].chars().take_while(|ch| ch.is_ascii_alphanumeric() || *ch == '_').collect();
        rest = &rest[at + name.len()..];
        if rest.starts_with('(') {
            names.insert(name);
        }
    }
    let names: Vec<String> = names.into_iter().collect();
    c.query(
        "SELECT DISTINCT p.proname::pg_catalog.text, pg_catalog.oidvectortypes(p.proargtypes),
                pg_catalog.pg_get_function_result(p.oid)
         FROM pg_catalog.pg_proc p JOIN pg_catalog.pg_depend d ON d.objid OPERATOR(pg_catalog.=) p.oid
         JOIN pg_catalog.pg_extension e ON e.oid OPERATOR(pg_catalog.=) d.refobjid
         WHERE e.extname OPERATOR(pg_catalog.=) 'raquel' AND d.deptype OPERATOR(pg_catalog.=) 'e'
           AND p.proname OPERATOR(pg_catalog.=) ANY ($1::pg_catalog.text[]::pg_catalog.name[])",
        &[&names],
    )
    .unwrap()
    .iter()
    .map(|r| {
        let (name, args, result): (String, String, String) = (r.get(0), r.get(1), r.get(2));
        let what = format!("function public.{name}({args}{}integer DEFAULT 0)", if args.is_empty() { "" } else { ", " });
        let body = if result.starts_with("SETOF ") || result.starts_with("TABLE(") || result == "void" { "RETURN;" } else { "RETURN NULL;" };
        let sql = format!(
            "CREATE FUNCTION public.\"{name}\"({args}{}integer DEFAULT 0) RETURNS {result} LANGUAGE plpgsql AS $rqh$ BEGIN {} {body} END $rqh$",
            if args.is_empty() { "" } else { ", " },
            evidence(&what)
        );
        (what, sql)
    })
    .collect()
}

/// A session whose own statements can never resolve to a look-alike.
fn pinned(db: &str, role: &str) -> Client {
    let mut c = postgres::Client::connect(&format!("{} dbname={db} user={role}", server_dsn()), postgres::NoTls).unwrap();
    c.batch_execute("SET search_path = pg_catalog, pg_temp").unwrap();
    c
}

/// The jobs the pages and actions are about.
struct Ids {
    exhausted: String,
    failed: String,
    queued: String,
    blocked: String,
    parent: String,
    newest: String,
}

/// Every page, then (on a read-write dashboard) every action, each with the
/// session and token of its confirmation page, served by `dashboard`.
/// What answered otherwise than expected: a page 200, or for a role that
/// may not read jobs (`reads` false) 200 or 403 (the page that says the
/// database said no); an action (only when `acts`) 303.
fn serve_everything(dashboard: &Started, ids: &Ids, reads: bool, acts: bool) -> Vec<String> {
    let base = dashboard.base.clone();
    let mut unexpected: Vec<String> = Vec::new();
    let Ids { exhausted, failed, queued, blocked, parent, newest } = ids;
    runtime().block_on(async {
        let pages = [
            "/".to_string(),
            "/?range=day".into(),
            "/?prefix=m".into(),
            "/?after=limited".into(),
            "/?before=xss".into(),
            "/jobs".into(),
            "/jobs?queue=mail&status=failed&q=boom".into(),
            "/jobs?queue=ma&queue_match=prefix&since=week&from=2020-01-01T00:00&to=2100-01-01T00:00&json=%7B%22a%22%3A1%7D".into(),
            "/jobs?status=success".into(),
            format!("/jobs?before={newest}"),
            format!("/jobs/{failed}"),
            format!("/jobs/{blocked}"),
            format!("/jobs/{parent}"),
            "/schedules".into(),
            "/schedules?after=a".into(),
            "/workflows".into(),
            format!("/workflows?after={blocked}_{parent}"),
            format!("/workflows/{blocked}"),
            "/?refresh=5".into(),
            format!("/jobs/{failed}?refresh=5"),
        ];
        let actions = [
            format!("/jobs/{exhausted}/retry"),
            format!("/jobs/{queued}/cancel"),
            "/queues/pause?queue=mail".to_string(),
            "/queues/resume?queue=mail".to_string(),
            "/schedules/pause?schedule=nightly".to_string(),
            "/schedules/resume?schedule=nightly".to_string(),
            "/schedules/run?schedule=nightly".to_string(),
            // a bulk action's count, its start and its batches (src/bulk.rs),
            // with every kind of filter; it matches no job
            "/bulk/retry?queue=nothing-here&queue_match=prefix&since=week&q=x&json=%7B%22a%22%3A1%7D".to_string(),
        ];
        for path in pages.iter().chain(if acts { actions.iter() } else { [].iter() }) {
            let response = get(&format!("{base}{path}")).await;
            if response.status() != 200 && (reads || response.status() != 403) {
                unexpected.push(format!("GET {path}: {}: {}", response.status(), response.text().await.unwrap()));
            }
        }
        if !acts {
            return;
        }
        for path in &actions {
            let (Some(cookie), Some(token)) = session_and_token_of(get(&format!("{base}{path}")).await).await else {
                unexpected.push(format!("GET {path}: no session or token"));
                continue;
            };
            let response = post_confirmed(&base, path, &cookie, &token).await;
            let status = response.status();
            if status != 303 {
                let body = response.text().await.unwrap();
                unexpected.push(format!("POST {path}: {status}: {body}"));
            }
        }
    });
    unexpected
}

/// The roles of the privilege matrix (docs/src/reliability.md) that a
/// dashboard may connect as, each made by what the book says grants it
/// (docs/src/guides/dashboard.md for the viewer and the operator), with
/// whether it may read jobs and whether its dashboard is read-write and acts.
const MATRIX: [(&str, &str, bool, bool); 6] = [
    ("rqh_viewer", "GRANT SELECT ON public.jobs, public.queue_limits, public.schedules, public.job_dependencies, public.metrics TO rqh_viewer", true, false),
    ("rqh_operator", "SELECT public.rq_grant_worker('rqh_operator'); SELECT public.rq_grant_producer('rqh_operator'); GRANT SELECT, UPDATE ON public.schedules TO rqh_operator; GRANT INSERT, UPDATE, DELETE ON public.queue_limits TO rqh_operator; GRANT DELETE ON public.jobs, public.job_steps, public.job_parents TO rqh_operator", true, true),
    ("rqh_worker", "SELECT public.rq_grant_worker('rqh_worker')", true, false),
    ("rqh_producer", "SELECT public.rq_grant_producer('rqh_producer')", false, false),
    ("rqh_emitter", "SELECT public.rq_grant_emitter('rqh_emitter', 'orders.')", false, false),
    ("rqh_nobody", "SELECT 1", false, false),
];

#[test]
fn nothing_planted_runs_when_a_dashboard_serves_every_page_as_the_superuser_and_each_role() {
    let db = fill("rq_dashboard_hostile");
    let mut admin = pinned(&db, "postgres");
    // more rows for the pages to show, before anything is planted: an
    // exhausted job to retry, one to cancel, a failed one and a schedule
    // page; and the operator's own job to retry and one to cancel
    let job = |admin: &mut Client, sql: &str| -> String { admin.query_one(sql, &[]).unwrap().get(0) };
    let ids = |admin: &mut Client, exhausted: String, queued: String| Ids {
        exhausted,
        queued,
        failed: job(admin, "SELECT id::text FROM public.jobs WHERE status = 'failed' LIMIT 1"),
        blocked: job(admin, "SELECT id::text FROM public.jobs WHERE status = 'blocked' LIMIT 1"),
        parent: job(admin, "SELECT parent_id::text FROM public.job_dependencies LIMIT 1"),
        newest: job(admin, "SELECT enqueued_at::text || '_' || id::text FROM public.jobs ORDER BY enqueued_at DESC, id DESC LIMIT 1"),
    };
    let exhausted = job(&mut admin, "SELECT id::text FROM public.jobs WHERE status = 'exhausted' LIMIT 1");
    let queued = job(&mut admin, "SELECT id::text FROM public.jobs WHERE status = 'queued' AND queue = 'mail' LIMIT 1");
    let superuser_ids = ids(&mut admin, exhausted, queued);
    admin
        .batch_execute(
            "SELECT public.rq_enqueue('operated', 'to exhaust', max_retry_count => 0);
             SELECT public.rq_fail(id, attempts, 'no retry left') FROM public.rq_claim(ARRAY['operated']) j;
             SELECT public.rq_enqueue('operated', 'to cancel');",
        )
        .unwrap();
    let exhausted = job(&mut admin, "SELECT id::text FROM public.jobs WHERE queue = 'operated' AND status = 'exhausted'");
    let queued = job(&mut admin, "SELECT id::text FROM public.jobs WHERE queue = 'operated' AND status = 'queued'");
    let operator_ids = ids(&mut admin, exhausted, queued);
    for (role, grants, _, _) in MATRIX {
        admin.batch_execute(&format!("DROP ROLE IF EXISTS {role}; CREATE ROLE {role} LOGIN; {grants}")).unwrap();
    }

    // the hostile role: CREATE on public, where raquel lives
    admin
        .batch_execute(&format!(
            "DROP ROLE IF EXISTS {PLANTER}; CREATE ROLE {PLANTER} LOGIN; GRANT CREATE ON SCHEMA public TO {PLANTER};"
        ))
        .unwrap();
    let mut hostile = pinned(&db, PLANTER);
    hostile
        .batch_execute(
            "CREATE TABLE public.rqh_fired (plant text, ran_as text); GRANT INSERT ON public.rqh_fired TO PUBLIC;
             CREATE SEQUENCE public.rqh_ran; GRANT USAGE ON SEQUENCE public.rqh_ran TO PUBLIC;",
        )
        .unwrap();
    let uses = dashboard_uses();
    let plants = derive_plants(&mut hostile, &uses);
    let mut refused = Vec::new();
    for plant in &plants {
        if let Err(e) = hostile.batch_execute(&format!("BEGIN; {}; COMMIT", plant.sql)) {
            hostile.batch_execute("ROLLBACK").unwrap();
            refused.push(format!("{}: {e}", plant.what));
        }
    }
    let planted: BTreeSet<&str> = plants.iter().map(|p| p.what.as_str()).collect();
    eprintln!(
        "hostile: {} look-alikes planted ({} refused) for {} functions and {} operators of the dashboard's SQL",
        plants.len() - refused.len(),
        refused.len(),
        uses.calls.len(),
        uses.operators.len()
    );
    assert!(refused.len() * 20 <= plants.len(), "{} look-alikes could not be planted:\n{}", refused.len(), refused.join("\n"));
    // the look-alikes the review found at work, among them
    for must in ["operator public.||(text, integer)", "operator public.*(numeric, integer)", "function public.row_to_json(public.jobs)"] {
        assert!(planted.contains(must), "{must} was not planted; planted: {planted:?}");
    }
    // Look-alikes of raquel's own functions that the dashboard calls (the
    // third review): for each, one with a defaulted argument more, which
    // makes any call of the name in raquel's schema ambiguous, or runs in
    // its stead where its argument types fit better. The dashboard calls
    // raquel_internal's, where nobody but the owner creates (0.6.0).
    let own = own_look_alikes(&mut hostile);
    for must in ["rq_retry", "rq_cancel", "rq_pause", "rq_resume", "rq_now_ms", "rq_warnings", "rq_pause_schedule", "rq_resume_schedule", "rq_enqueue"] {
        assert!(own.iter().any(|(what, _)| what.contains(&format!(".{must}("))), "no look-alike of {must}: {own:?}");
    }
    for (what, sql) in &own {
        if let Err(e) = hostile.batch_execute(&format!("BEGIN; {sql}; COMMIT")) {
            panic!("{what} could not be planted: {e}");
        }
    }

    // A dashboard as the server's superuser, read-write: every page, then
    // every action; then one as each role of the privilege matrix.
    let mut unexpected = serve_everything(&Dashboard::on(&db).read_write().start(), &superuser_ids, true, true);
    for (role, _, reads, acts) in MATRIX {
        let dashboard = if acts { Dashboard::on(&db).user(role).read_write() } else { Dashboard::on(&db).user(role) };
        let ids = if acts { &operator_ids } else { &superuser_ids };
        unexpected.extend(serve_everything(&dashboard.start(), ids, reads, acts).into_iter().map(|u| format!("as {role}: {u}")));
    }

    // what ran, read without the search_path
    let mut admin = pinned(&db, "postgres");
    let fired: Vec<(String, String)> = admin
        .query("SELECT plant, ran_as FROM public.rqh_fired ORDER BY 1", &[])
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    let ran: Option<i64> = admin.query_one("SELECT pg_catalog.pg_sequence_last_value('public.rqh_ran')", &[]).unwrap().get(0);
    let superuser: bool = admin.query_one("SELECT rolsuper FROM pg_catalog.pg_roles WHERE rolname = $1", &[&PLANTER]).unwrap().get(0);
    let statuses: Vec<String> = [&superuser_ids.exhausted, &superuser_ids.queued, &operator_ids.exhausted, &operator_ids.queued]
        .iter()
        .map(|id| admin.query_one("SELECT status FROM public.jobs WHERE id = $1::text::uuid", &[id]).unwrap().get(0))
        .collect();
    drop(admin);
    drop(hostile);
    let mut cleanup = sql("postgres");
    cleanup.batch_execute(&format!("DROP DATABASE IF EXISTS {db} WITH (FORCE)")).unwrap();
    cleanup.batch_execute(&format!("DROP ROLE IF EXISTS {PLANTER}")).unwrap();
    for (role, _, _, _) in MATRIX {
        cleanup.batch_execute(&format!("DROP ROLE IF EXISTS {role}")).unwrap();
    }

    let mut distinct: BTreeMap<String, usize> = BTreeMap::new();
    for (plant, who) in &fired {
        *distinct.entry(format!("{plant} as {who}")).or_default() += 1;
    }
    assert!(
        fired.is_empty() && ran.is_none() && !superuser,
        "planted look-alikes ran {} times ({} distinct), the planter is {}a superuser:\n  {}",
        ran.unwrap_or(0),
        distinct.len(),
        if superuser { "" } else { "not " },
        distinct.iter().map(|(k, v)| format!("{k} [{v}×]")).collect::<Vec<_>>().join("\n  ")
    );
    assert!(unexpected.is_empty(), "pages and actions that did not answer as they should:\n{}", unexpected.join("\n"));
    assert_eq!(statuses, ["queued", "cancelled", "queued", "cancelled"], "the actions did their work, the superuser's and the operator's");
}
