//! Finding jobs: the jobs list's filters (queue exact or by prefix, status,
//! a time range of enqueued_at, text in the payload or error, JSON
//! containment in the payload), the bounded count of matches, and the SQL
//! that the bulk actions (src/bulk.rs) share with the list, so that an
//! action touches what its confirmation page counted.
//!
//! The text and JSON filters have no index to use: the jobs table has none
//! on payload or error (a substring of `text` needs pg_trgm, which may not be
//! installed), nor on enqueued_at. So they look only at a window: the newest
//! SEARCH_WINDOW jobs that match the other filters, walked backwards along the
//! primary key (ids are UUIDv7, in enqueue order), and the page says so. Every
//! statement also runs under STATEMENT_TIMEOUT, a second guard: a filter of
//! the window that matches few jobs (a rare status over millions) can still
//! walk far, and is then stopped with a message that says how to narrow it.

use crate::db::{utc, Conn, Failure, PAGE};
use serde::Serialize;
use tokio_postgres::types::ToSql;

/// The jobs the text filter looks at, at most: the newest that match the
/// other filters (docs/src/guides/dashboard.md gives the figures measured
/// over 1,000,000 jobs, and why these sizes).
pub const SEARCH_WINDOW: i64 = 100_000;
/// The same for the JSON filter, which costs more a job: each payload that
/// may be an object is cast in a subtransaction of its own (15 to 20 µs a
/// payload here, against 2 µs for the text filter).
pub const JSON_WINDOW: i64 = 20_000;

/// The list counts its matches up to this many, and says "more than" beyond.
pub const COUNT_BOUND: i64 = 10_000;

/// The longest any statement of a search (or of a bulk batch) may run.
pub const STATEMENT_TIMEOUT: &str = "5s";

/// A search's own failure: the filter is not valid (400), or the database
/// failed (its SQLSTATE).
pub enum FindError {
    Invalid(String),
    Db(Failure),
}

impl From<Failure> for FindError {
    fn from(f: Failure) -> FindError {
        FindError::Db(f)
    }
}

impl From<tokio_postgres::Error> for FindError {
    fn from(e: tokio_postgres::Error) -> FindError {
        FindError::Db(timeout_explained(Failure::from(e)))
    }
}

/// A statement stopped by STATEMENT_TIMEOUT says how to search instead.
pub fn timeout_explained(mut f: Failure) -> Failure {
    if f.is("57014") {
        f.message = format!(
            "The search ran longer than {STATEMENT_TIMEOUT} and was stopped ({}). Narrow it: a queue, a status or a \
             shorter time range (enqueued from / to).",
            f.message
        );
    }
    f
}

/// The query string of /jobs (and of the bulk actions' pages), as sent.
#[derive(serde::Deserialize, Default, Clone)]
pub struct FindQuery {
    pub queue: Option<String>,
    /// "prefix": the queue names starting with `queue`; otherwise exact
    pub queue_match: Option<String>,
    pub status: Option<String>,
    /// a preset: hour, day or week (enqueued within the last one)
    pub since: Option<String>,
    /// enqueued at or after, as <input type="datetime-local"> sends it (UTC)
    pub from: Option<String>,
    /// enqueued before, likewise
    pub to: Option<String>,
    /// text in the payload or the error (a substring, any case)
    pub q: Option<String>,
    /// a JSON object the payload must contain (jsonb's @>)
    pub json: Option<String>,
    /// the last row of the page before: ENQUEUED_AT_ID
    pub before: Option<String>,
}

/// The filters, checked.
#[derive(Default, Clone)]
pub struct Filter {
    pub queue: Option<String>,
    pub prefix: bool,
    pub status: Option<String>,
    pub since: Option<String>,
    pub from_text: Option<String>,
    pub to_text: Option<String>,
    pub from_ms: Option<i64>,
    pub to_ms: Option<i64>,
    pub text: Option<String>,
    pub json: Option<String>,
    pub before: Option<(i64, uuid::Uuid)>,
}

fn non_empty(s: &Option<String>) -> Option<String> {
    s.as_ref().filter(|s| !s.trim().is_empty()).cloned()
}

/// A datetime-local value (YYYY-MM-DDTHH:MM, seconds optional), read as UTC
/// (every time the dashboard shows is UTC), in ms since the epoch.
fn instant(name: &str, value: &str) -> Result<i64, String> {
    let value = value.trim();
    for format in ["%Y-%m-%dT%H:%M", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%dT%H:%M:%S%.f", "%Y-%m-%d %H:%M", "%Y-%m-%d %H:%M:%S"] {
        if let Ok(t) = chrono::NaiveDateTime::parse_from_str(value, format) {
            return Ok(t.and_utc().timestamp_millis());
        }
    }
    Err(format!("{name}: {value:?} is not a date and time; write YYYY-MM-DDTHH:MM (UTC), e.g. 2026-12-07T09:30"))
}

impl Filter {
    /// The filters of a query string, or a message that names the bad value.
    pub fn parse(q: &FindQuery, now_ms: i64) -> Result<Filter, String> {
        let mut f = Filter { queue: non_empty(&q.queue), ..Filter::default() };
        f.prefix = match q.queue_match.as_deref().map(str::trim) {
            None | Some("") | Some("exact") => false,
            Some("prefix") => true,
            Some(other) => return Err(format!("queue_match: {other:?} is neither \"exact\" nor \"prefix\"")),
        };
        if let Some(status) = non_empty(&q.status) {
            if !crate::db::STATUSES.contains(&status.as_str()) {
                return Err(format!("status: {status:?} is not a status; one of {}", crate::db::STATUSES.join(", ")));
            }
            f.status = Some(status);
        }
        if let Some(since) = non_empty(&q.since) {
            let span = match since.as_str() {
                "hour" => 3_600_000,
                "day" => 86_400_000,
                "week" => 7 * 86_400_000,
                other => return Err(format!("since: {other:?} is not one of hour, day, week")),
            };
            f.from_ms = Some(now_ms - span);
            f.since = Some(since);
        }
        if let Some(from) = non_empty(&q.from) {
            let ms = instant("from", &from)?;
            // with a preset too, the later of the two starts
            f.from_ms = Some(f.from_ms.map_or(ms, |m| m.max(ms)));
            f.from_text = Some(from);
        }
        if let Some(to) = non_empty(&q.to) {
            f.to_ms = Some(instant("to", &to)?);
            f.to_text = Some(to);
        }
        f.text = non_empty(&q.q);
        if let Some(json) = non_empty(&q.json) {
            match serde_json::from_str::<serde_json::Value>(&json) {
                Ok(serde_json::Value::Object(_)) => f.json = Some(json),
                Ok(_) => return Err(format!("json: {json:?} is JSON but not an object; write one such as {{\"customer\": 42}}")),
                Err(e) => return Err(format!("json: {json:?} is not valid JSON ({e}); write an object such as {{\"customer\": 42}}")),
            }
        }
        if let Some(before) = non_empty(&q.before) {
            let parsed = before.split_once('_').and_then(|(at, id)| Some((at.parse().ok()?, id.parse().ok()?)));
            f.before = Some(parsed.ok_or_else(|| format!("before: {before:?} is not a page's start (ENQUEUED_AT_ID)"))?);
        }
        Ok(f)
    }

    /// Whether the text or JSON filter is on: the search then looks at the
    /// window of the newest SEARCH_WINDOW jobs only.
    pub fn windowed(&self) -> bool {
        self.text.is_some() || self.json.is_some()
    }

    /// How many of the newest jobs the text and JSON filters look at.
    pub fn window(&self) -> i64 {
        if self.json.is_some() {
            JSON_WINDOW
        } else {
            SEARCH_WINDOW
        }
    }

    /// Whether any filter is on (a bulk action needs one).
    pub fn any(&self) -> bool {
        self.queue.is_some() || self.status.is_some() || self.from_ms.is_some() || self.to_ms.is_some() || self.windowed()
    }

    /// The filters as a query string (without the page's start), to link
    /// the next page and the bulk actions with the same filters.
    pub fn query(&self) -> String {
        let mut parts = Vec::new();
        let mut put = |name: &str, value: &Option<String>| {
            if let Some(v) = value {
                parts.push(format!("{name}={}", crate::pages::url_part(v)));
            }
        };
        put("queue", &self.queue);
        put("queue_match", &self.prefix.then(|| "prefix".to_string()));
        put("status", &self.status);
        put("since", &self.since);
        put("from", &self.from_text);
        put("to", &self.to_text);
        put("q", &self.text);
        put("json", &self.json);
        parts.join("&")
    }

    /// The filters in words, for the confirmation and progress pages.
    pub fn describe(&self) -> String {
        let mut words = Vec::new();
        if let Some(q) = &self.queue {
            words.push(if self.prefix { format!("queue starts with {q:?}") } else { format!("queue = {q:?}") });
        }
        if let Some(s) = &self.status {
            words.push(format!("status = {s}"));
        }
        if let Some(from) = self.from_ms {
            words.push(format!("enqueued from {}", utc(Some(from))));
        }
        if let Some(to) = self.to_ms {
            words.push(format!("enqueued before {}", utc(Some(to))));
        }
        if let Some(t) = &self.text {
            words.push(format!("payload or error contains {t:?}"));
        }
        if let Some(j) = &self.json {
            words.push(format!("payload contains {j}"));
        }
        if words.is_empty() {
            "every job".into()
        } else {
            words.join(", ")
        }
    }
}

/// A statement being built: its text and its parameters, each bound once
/// with an explicit type (src/db.rs says why every value is cast).
pub struct Sql {
    pub text: String,
    params: Vec<Box<dyn ToSql + Sync + Send>>,
}

impl Sql {
    pub fn new() -> Sql {
        Sql { text: String::new(), params: Vec::new() }
    }

    /// `$n::TYPE` for a new parameter.
    pub fn bind<T: ToSql + Sync + Send + 'static>(&mut self, value: T, sql_type: &str) -> String {
        self.params.push(Box::new(value));
        format!("${}::{sql_type}", self.params.len())
    }

    pub fn params(&self) -> Vec<&(dyn ToSql + Sync)> {
        self.params.iter().map(|p| p.as_ref() as &(dyn ToSql + Sync)).collect()
    }
}

/// The name of the session's own function that reads a payload as jsonb, or
/// NULL when it is not a JSON object (a payload that is not JSON simply does
/// not match). In pg_temp, which only this session can write, and always
/// called with its schema; PostgreSQL 15 has no `IS JSON` to do it inline.
/// Only a payload that may be an object pays for the inner block (a
/// subtransaction each).
pub const TRY_JSONB: &str = "pg_temp.rq_dashboard_try_jsonb";

const TRY_JSONB_DEFINITION: &str = "CREATE OR REPLACE FUNCTION pg_temp.rq_dashboard_try_jsonb(payload pg_catalog.text)
RETURNS pg_catalog.jsonb LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $f$
BEGIN
    IF pg_catalog.left(pg_catalog.ltrim(payload, E' \\t\\r\\n'::pg_catalog.text), 1) IS DISTINCT FROM '{'::pg_catalog.text THEN
        RETURN NULL;
    END IF;
    BEGIN
        RETURN payload::pg_catalog.jsonb;
    EXCEPTION WHEN others THEN
        RETURN NULL;
    END;
END
$f$";

impl Filter {
    /// The conditions on a job `j` of the filters that are not text: queue,
    /// status, time range.
    pub fn plain_conditions(&self, sql: &mut Sql) -> Vec<String> {
        let mut c = Vec::new();
        if let Some(q) = &self.queue {
            if self.prefix {
                let p = sql.bind(q.clone(), "text");
                c.push(format!("pg_catalog.starts_with(j.queue, {p})"));
            } else {
                let p = sql.bind(q.clone(), "text");
                c.push(format!("j.queue = {p}"));
            }
        }
        if let Some(s) = &self.status {
            let p = sql.bind(s.clone(), "text");
            c.push(format!("j.status = {p}"));
        }
        if let Some(from) = self.from_ms {
            let p = sql.bind(from, "bigint");
            c.push(format!("j.enqueued_at >= {p}"));
        }
        if let Some(to) = self.to_ms {
            let p = sql.bind(to, "bigint");
            c.push(format!("j.enqueued_at < {p}"));
        }
        c
    }

    /// The conditions of the text and JSON filters on a job `j`.
    pub fn text_conditions(&self, sql: &mut Sql) -> Vec<String> {
        let mut c = Vec::new();
        if let Some(text) = &self.text {
            // a substring, not a pattern: the pattern's own characters escaped
            let escaped = text.replace('\\', "\\\\").replace('%', "\\%").replace('_', "\\_");
            let p = sql.bind(format!("%{escaped}%"), "text");
            c.push(format!("(j.payload ILIKE {p} OR j.error ILIKE {p})"));
        }
        if let Some(json) = &self.json {
            // First, cheaply, without changing what is found: a payload that
            // contains the object holds each of its keys, as JSON writes it
            // ("customer") or spelt with an escape (a backslash somewhere).
            if let Ok(serde_json::Value::Object(object)) = serde_json::from_str::<serde_json::Value>(json) {
                for key in object.keys() {
                    let written = serde_json::Value::String(key.clone()).to_string();
                    let k = sql.bind(written, "text");
                    c.push(format!(
                        "(pg_catalog.strpos(j.payload, {k}) > 0::integer OR pg_catalog.strpos(j.payload, '\\'::text) > 0::integer)"
                    ));
                }
            }
            let p = sql.bind(json.clone(), "text");
            c.push(format!("{TRY_JSONB}(j.payload) OPERATOR(pg_catalog.@>) {p}::pg_catalog.jsonb"));
        }
        c
    }

    /// The jobs the filters look at, as a FROM item `j` with the columns
    /// `columns`: the table with the plain conditions, or, with a text
    /// filter, the window of the newest SEARCH_WINDOW of those; then the
    /// conditions still to apply to `j` (the text ones).
    pub fn source(&self, s: &str, sql: &mut Sql, columns: &str) -> (String, Vec<String>) {
        let plain = self.plain_conditions(sql);
        let plain_where = if plain.is_empty() { String::new() } else { format!("WHERE {}", plain.join(" AND ")) };
        if self.windowed() {
            let n = sql.bind(self.window(), "bigint");
            let from = format!("(SELECT {columns} FROM {s}.jobs j {plain_where} ORDER BY j.id DESC LIMIT {n}) j");
            (from, self.text_conditions(sql))
        } else {
            (format!("{s}.jobs j"), plain)
        }
    }
}

/// What the list shows of a job.
#[derive(Serialize)]
pub struct JobRow {
    pub id: String,
    pub queue: String,
    pub status: String,
    pub priority: i32,
    pub attempts: i32,
    pub enqueued_at: i64,
    pub enqueued: String,
    pub error: Option<String>,
}

/// How many jobs match, as the list says it.
#[derive(Serialize)]
pub struct Count {
    /// the matches counted (at most COUNT_BOUND + 1 without a text filter)
    pub matched: i64,
    /// more than COUNT_BOUND match
    pub more: bool,
    /// with a text filter: the jobs searched (the window's), and whether the
    /// window was full (older jobs were not searched)
    pub searched: Option<i64>,
    pub window_full: bool,
    pub window: i64,
    pub window_text: String,
    /// the sentence the page shows
    pub text: String,
}

/// 10000 as "10,000".
pub fn thousands(n: i64) -> String {
    let digits = n.abs().to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    if n < 0 {
        out.insert(0, '-');
    }
    out
}

impl Count {
    fn new(matched: i64, more: bool, searched: Option<i64>, window: i64) -> Count {
        let jobs = |n: i64| if n == 1 { "1 job matches".to_string() } else { format!("{} jobs match", thousands(n)) };
        let mut text = if more { format!("More than {} jobs match", thousands(COUNT_BOUND)) } else { jobs(matched) };
        if let Some(searched) = searched {
            text.push_str(&format!(" among the newest {} searched", thousands(searched)));
        }
        text.push('.');
        Count {
            matched,
            more,
            searched,
            window_full: searched.is_some_and(|n| n >= window),
            window,
            window_text: thousands(window),
            text,
        }
    }
}

const LIST_COLUMNS: &str = "j.id, j.queue, j.status, j.priority, j.attempts, j.enqueued_at, j.error, j.payload";

impl Conn {
    /// Runs `f` in a read-only transaction under STATEMENT_TIMEOUT, with the
    /// session's try-jsonb function when the filter needs it.
    async fn searching(&mut self, filter: &Filter) -> Result<deadpool_postgres::Transaction<'_>, FindError> {
        let t = self.client.transaction().await?;
        t.batch_execute(&format!("SET LOCAL statement_timeout = '{STATEMENT_TIMEOUT}'")).await?;
        if filter.json.is_some() {
            define_try_jsonb(&t).await?;
        }
        Ok(t)
    }

    /// A page of jobs, newest first, and how many match.
    pub async fn find(&mut self, filter: &Filter) -> Result<(Vec<JobRow>, Count), FindError> {
        let s = self.s.clone();
        let t = self.searching(filter).await?;
        let mut sql = Sql::new();
        let (from, mut conditions) = filter.source(&s, &mut sql, LIST_COLUMNS);
        let mut keyset = Vec::new();
        if let Some((at, id)) = filter.before {
            let (a, i) = (sql.bind(at, "bigint"), sql.bind(id.to_string(), "text"));
            keyset.push(format!("(j.enqueued_at, j.id) < ({a}, {i}::uuid)"));
        }
        let limit = sql.bind(PAGE as i64 + 1, "bigint");
        let row_of = |r: &tokio_postgres::Row| {
            let at: i64 = r.get(5);
            JobRow {
                id: r.get(0),
                queue: r.get(1),
                status: r.get(2),
                priority: r.get(3),
                attempts: r.get(4),
                enqueued_at: at,
                enqueued: utc(Some(at)),
                error: r.get(6),
            }
        };
        if filter.windowed() {
            // One pass over the window: each job's text and JSON conditions
            // evaluated once (the JSON one costs a subtransaction a payload),
            // for the page and both counts. The count's row comes back even
            // when no job matches (p.id NULL then).
            let hit = conditions.join(" AND ");
            keyset.insert(0, "w.hit".into());
            sql.text = format!(
                "WITH w AS MATERIALIZED (
                     SELECT j.id, j.queue, j.status, j.priority, j.attempts, j.enqueued_at,
                            pg_catalog.left(j.error, 200::integer) AS error, ({hit}) AS hit
                     FROM {from}
                 ), page AS (
                     SELECT j.* FROM w j WHERE {} ORDER BY j.enqueued_at DESC, j.id DESC LIMIT {limit}
                 )
                 SELECT p.id::text, p.queue, p.status, p.priority, p.attempts, p.enqueued_at, p.error, c.searched, c.matched
                 FROM (SELECT pg_catalog.count(*) AS searched, pg_catalog.count(*) FILTER (WHERE w.hit) AS matched FROM w) c
                 LEFT JOIN page p ON true
                 ORDER BY p.enqueued_at DESC, p.id DESC",
                keyset.join(" AND ").replace("w.hit", "j.hit")
            );
            let found = t.query(&sql.text, &sql.params()).await?;
            t.commit().await?;
            let (searched, matched): (i64, i64) = found.first().map_or((0, 0), |r| (r.get(7), r.get(8)));
            let rows = found.iter().filter(|r| r.get::<_, Option<String>>(0).is_some()).map(row_of).collect();
            return Ok((rows, Count::new(matched, false, Some(searched), filter.window())));
        }
        conditions.extend(keyset);
        sql.text = format!(
            "SELECT j.id::text, j.queue, j.status, j.priority, j.attempts, j.enqueued_at, pg_catalog.left(j.error, 200::integer)
             FROM {from} {}
             ORDER BY j.enqueued_at DESC, j.id DESC LIMIT {limit}",
            where_of(&conditions)
        );
        let rows = t.query(&sql.text, &sql.params()).await?.iter().map(row_of).collect();
        // the count, of every page's matches (the page's start aside), bounded
        let mut sql = Sql::new();
        let (from, conditions) = filter.source(&s, &mut sql, "j.id");
        let bound = sql.bind(COUNT_BOUND + 1, "bigint");
        sql.text = format!("SELECT pg_catalog.count(*) FROM (SELECT 1 FROM {from} {} LIMIT {bound}) m", where_of(&conditions));
        let matched: i64 = t.query_one(&sql.text, &sql.params()).await?.get(0);
        t.commit().await?;
        Ok((rows, Count::new(matched.min(COUNT_BOUND), matched > COUNT_BOUND, None, filter.window())))
    }
}

/// `WHERE a AND b`, or nothing.
pub fn where_of(conditions: &[String]) -> String {
    if conditions.is_empty() {
        String::new()
    } else {
        format!("WHERE {}", conditions.join(" AND "))
    }
}

pub async fn define_try_jsonb(t: &tokio_postgres::Transaction<'_>) -> Result<(), FindError> {
    t.batch_execute(TRY_JSONB_DEFINITION).await.map_err(|e| {
        let f = Failure::from(e);
        if f.is("42501") {
            FindError::Db(Failure {
                sqlstate: f.sqlstate,
                message: format!(
                    "The JSON filter needs a temporary function, and this role may not create temporary objects ({}): \
                     GRANT TEMPORARY ON DATABASE to the dashboard's role, or search the payload's text instead.",
                    f.message
                ),
            })
        } else {
            FindError::Db(f)
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(pairs: &[(&str, &str)]) -> Result<Filter, String> {
        let mut q = FindQuery::default();
        for (k, v) in pairs {
            let v = Some(v.to_string());
            match *k {
                "queue" => q.queue = v,
                "queue_match" => q.queue_match = v,
                "status" => q.status = v,
                "since" => q.since = v,
                "from" => q.from = v,
                "to" => q.to = v,
                "q" => q.q = v,
                "json" => q.json = v,
                "before" => q.before = v,
                _ => unreachable!(),
            }
        }
        Filter::parse(&q, 1_000_000_000_000)
    }

    #[test]
    fn bad_values_are_named() {
        assert!(parse(&[("json", "{customer: 42}")]).err().unwrap().contains("{customer: 42}"));
        assert!(parse(&[("json", "[1]")]).err().unwrap().contains("not an object"));
        assert!(parse(&[("from", "yesterday")]).err().unwrap().contains("\"yesterday\""));
        assert!(parse(&[("status", "done")]).err().unwrap().contains("\"done\""));
        assert!(parse(&[("since", "year")]).err().unwrap().contains("\"year\""));
    }

    #[test]
    fn filters_round_trip_through_the_query_string() {
        let f = parse(&[("queue", "a b"), ("queue_match", "prefix"), ("since", "day"), ("json", "{\"c\": 1}")]).unwrap();
        assert_eq!(f.query(), "queue=a%20b&queue_match=prefix&since=day&json=%7B%22c%22%3A%201%7D");
        assert_eq!(f.from_ms, Some(1_000_000_000_000 - 86_400_000));
        assert!(f.windowed() && f.any());
        assert_eq!(parse(&[("from", "2026-12-07T09:30")]).unwrap().from_ms, Some(1_796_635_800_000));
        assert!(!parse(&[]).unwrap().any());
    }

    #[test]
    fn counts_read_as_sentences() {
        assert_eq!(thousands(10_000), "10,000");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1_234_567), "1,234,567");
        assert_eq!(Count::new(1, false, None, SEARCH_WINDOW).text, "1 job matches.");
        assert_eq!(Count::new(10_000, true, None, SEARCH_WINDOW).text, "More than 10,000 jobs match.");
        assert_eq!(Count::new(3, false, Some(200_000), SEARCH_WINDOW).text, "3 jobs match among the newest 200,000 searched.");
        assert!(Count::new(3, false, Some(JSON_WINDOW), JSON_WINDOW).window_full);
        assert!(!Count::new(3, false, Some(JSON_WINDOW), SEARCH_WINDOW).window_full);
    }
}
