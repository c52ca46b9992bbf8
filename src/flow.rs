//! Flow control (declared in sql/flow.sql): paused queues, concurrency and
//! rate limits, and fair groups, all obeyed inside `rq_claim`.
//!
//! A queue has flow control when it has a row in the `queue_limits` table.
//! Every claim must know whether its queues do, and most never will, so each
//! backend keeps the table's settings in memory: a queue without a row then
//! costs a claim one hash lookup, and its claim is the plain claim statement
//! (src/claim.rs). A change to the settings invalidates every backend's copy
//! at commit, the way PostgreSQL invalidates its own caches: the table's
//! statement trigger sends a relcache invalidation for the table, and the
//! callback registered here drops the copy. The state a limit keeps is not
//! in the copy but in shared memory: the places claimed under max_claimed
//! (src/claim_slots.rs) and a rate's tokens (src/rate_buckets.rs); a queue
//! that cannot have them there keeps them in its row, read under its lock
//! (src/claim/flow_claim.rs).

use crate::errors::Refusal;
use crate::invalidation;
use crate::limits;
use crate::privileges;
use crate::statements::{self, Shape, Statement};
use crate::waiters;
use pgrx::prelude::*;
use std::cell::RefCell;
use std::collections::HashMap;

/// What a claim needs to know of one queue's settings.
#[derive(Clone, Copy, Debug)]
pub struct Settings {
    /// max_claimed or group_max_claimed: a job that ends frees a slot, and a
    /// waiting claim must hear of it.
    pub counts_claims: bool,
    /// With a rate: how often a token comes (ms), so how long a claim that
    /// found none waits before it looks again.
    pub token_every_ms: Option<i64>,
    /// The queue has fair groups, whose jobs scheduled for later the plain
    /// claim's next-due statement does not see.
    pub grouped: bool,
    /// The queue is paused.
    pub paused: bool,
    /// Its rate: so many claims (.0) every so many ms (.1).
    pub rate: Option<(i32, i64)>,
    /// Its max_claimed.
    pub max_claimed: Option<i32>,
    /// Its group_max_claimed.
    pub group_max_claimed: Option<i32>,
}

thread_local! {
    /// The settings of each queue with a row, or None until (re)loaded.
    static SETTINGS: RefCell<Option<HashMap<String, Settings>>> = const { RefCell::new(None) };
}

/// Calls `f` with the settings of every queue that has any, read from the
/// table in the schema of `function` when the copy was dropped. Connected to
/// SPI. A database whose raquel predates the table (one not yet updated)
/// has no settings, and is asked again next time.
/// Drops this backend's copy of the settings: the next look reads the
/// table. For a waiting claim woken by rq_resume or rq_set_limits, which
/// wake it at their commit before their invalidation messages are sent
/// (PostgreSQL runs the commit callbacks first): the copy may not yet know
/// of the change that woke it.
pub fn forget_settings() {
    SETTINGS.with(|s| s.borrow_mut().take());
}

fn with_settings<T>(function: pg_sys::Oid, f: impl FnOnce(&HashMap<String, Settings>) -> T) -> T {
    let loaded = SETTINGS.with(|s| s.borrow().is_some());
    if !loaded {
        let (table, settings) = load(function);
        if table == pg_sys::InvalidOid {
            return f(&settings);
        }
        // the table's invalidations drop the copy (src/invalidation.rs)
        invalidation::forget_when_changed("flow settings", table, forget_settings);
        SETTINGS.with(|s| *s.borrow_mut() = Some(settings));
    }
    SETTINGS.with(|s| f(s.borrow().as_ref().expect("loaded above")))
}

fn load(function: pg_sys::Oid) -> (pg_sys::Oid, HashMap<String, Settings>) {
    let table_name = statements::in_schema_of(function, "queue_limits");
    // SAFETY: to_regclass takes a text and returns a regclass or NULL.
    let table = unsafe {
        pgrx::direct_function_call::<pg_sys::Oid>(pg_sys::to_regclass, &[table_name.as_str().into_datum()])
    };
    let Some(table) = table else { return (pg_sys::InvalidOid, HashMap::new()) };
    let text = || {
        statements::fill(
            "SELECT l.queue, l.max_claimed IS NOT NULL OR l.group_max_claimed IS NOT NULL,
                    (extract(epoch FROM l.per) * 1000 / l.rate)::bigint, l.grouped,
                    l.paused, l.rate, (extract(epoch FROM l.per) * 1000)::bigint,
                    l.max_claimed, l.group_max_claimed
             FROM @queue_limits@ l",
            &[("@queue_limits@", &table_name)],
        )
    };
    let statement = Statement { shape: Shape { name: "queue_limits", variant: 0 }, text: &text, types: &[] };
    let rows = statements::run_once(&statement, &[]);
    let mut settings = HashMap::with_capacity(rows as usize);
    for row in 0..rows as usize {
        // SAFETY: the query returned `rows` rows of these nine columns.
        let (queue, counts_claims, token_every_ms, grouped, paused, rate, per_ms, max_claimed, group_max_claimed) = unsafe {
            (
                statements::value::<String>(row, 1).unwrap_or_default(),
                statements::value::<bool>(row, 2).unwrap_or(false),
                statements::value::<i64>(row, 3),
                statements::value::<bool>(row, 4).unwrap_or(false),
                statements::value::<bool>(row, 5).unwrap_or(false),
                statements::value::<i32>(row, 6),
                statements::value::<i64>(row, 7),
                statements::value::<i32>(row, 8),
                statements::value::<i32>(row, 9),
            )
        };
        let rate = rate.zip(per_ms).map(|(rate, per_ms)| (rate, per_ms.max(1)));
        let token_every_ms = token_every_ms.map(|ms| ms.max(1));
        settings.insert(queue, Settings { counts_claims, token_every_ms, grouped, paused, rate, max_claimed, group_max_claimed });
    }
    statements::free_result();
    (table, settings)
}

/// The flow settings that bear on a claim of `queues` (None: any queue), or
/// None when none of its queues has any: the plain claim serves it.
/// `poll_ms` is how long a waiting claim may sleep before it looks again
/// without a wake-up: until the next token of a rate, or a second when a
/// slot that a finish outside raquel's verbs frees, or a grouped job
/// scheduled for later, would not wake it.
pub fn for_claim<S: AsRef<str>>(function: pg_sys::Oid, queues: Option<&[Option<S>]>) -> Option<ClaimFlow> {
    with_settings(function, |settings| {
        if settings.is_empty() {
            return None;
        }
        let mut flow = ClaimFlow { poll_ms: None, one_queue: None };
        let mut any = false;
        let mut consider = |s: &Settings| {
            any = true;
            let poll = match (s.token_every_ms, s.counts_claims || s.grouped) {
                (Some(ms), _) => Some(ms.min(LOOK_AGAIN_MS)),
                (None, true) => Some(LOOK_AGAIN_MS),
                (None, false) => None,
            };
            flow.poll_ms = match (flow.poll_ms, poll) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
        };
        match queues {
            None => settings.values().for_each(&mut consider),
            Some(queues) => queues.iter().flatten().filter_map(|q| settings.get(q.as_ref())).for_each(&mut consider),
        }
        if let Some([Some(queue)]) = queues {
            let s = settings.get(queue.as_ref());
            if let Some(s) = s.filter(|s| !s.paused) {
                flow.one_queue = Some(OneQueue::of(queue.as_ref(), s));
            }
        }
        any.then_some(flow)
    })
}

/// The queues of a claim of `queues` (None: any queue) that have settings
/// (for any queue, every queue that has), with them, in name order (several
/// queues' rows are locked in that order: src/claim/flow_claim.rs). Asked
/// only by the flow claim, not by every claim (`for_claim`). Connected to
/// SPI.
pub fn queues_with_settings<S: AsRef<str>>(function: pg_sys::Oid, queues: Option<&[Option<S>]>) -> Vec<(String, Settings)> {
    with_settings(function, |settings| {
        let mut found: Vec<(String, Settings)> = match queues {
            None => settings.iter().map(|(q, s)| (q.clone(), *s)).collect(),
            Some(queues) => queues
                .iter()
                .flatten()
                .filter_map(|q| settings.get_key_value(q.as_ref()))
                .map(|(q, s)| (q.clone(), *s))
                .collect(),
        };
        found.sort_by(|a, b| a.0.cmp(&b.0));
        found.dedup_by(|a, b| a.0 == b.0);
        found
    })
}

/// A waiting claim on a queue with a concurrency limit or fair groups looks
/// again this often even when nothing wakes it: a job finished by the Python
/// library or a hand-written UPDATE frees a slot without raquel's verbs
/// hearing of it, and a grouped job scheduled for later is not among the
/// plain claim's next-due jobs (sql/claim.next_due.sql).
const LOOK_AGAIN_MS: i64 = 1000;

pub struct ClaimFlow {
    pub poll_ms: Option<i64>,
    /// A claim of one queue that is not paused: it reserves places under
    /// its max_claimed (src/claim_slots.rs) and takes tokens of its rate
    /// (src/rate_buckets.rs), then claims as the plain claim does
    /// (src/claim.rs) and, when the queue has groups, fairly among them
    /// (src/fair.rs), with no statement of flow's.
    pub one_queue: Option<OneQueue>,
}

#[derive(Clone)]
pub struct OneQueue {
    pub queue: String,
    /// so many claims (.0) every so many ms (.1)
    pub rate: Option<(i32, i64)>,
    pub max_claimed: Option<i32>,
    /// The queue has had grouped jobs.
    pub grouped: bool,
    pub group_max_claimed: Option<i32>,
}

/// Whether the limits of `queue` keep their state in its row for every
/// claim: a limit that shared memory cannot serve (no preload, a
/// max_claimed above what a slot holds, a name longer than a slot's or a
/// bucket's; a claim may also find every slot or bucket in use).
pub fn kept_in_row(queue: &str, s: &Settings) -> bool {
    s.max_claimed.is_some_and(|max| !crate::claim_slots::may_serve(queue, max))
        || (s.rate.is_some() && !crate::rate_buckets::may_serve(queue))
}

impl OneQueue {
    pub fn of(queue: &str, s: &Settings) -> OneQueue {
        OneQueue {
            queue: queue.to_owned(),
            rate: s.rate,
            max_claimed: s.max_claimed,
            grouped: s.grouped,
            group_max_claimed: s.group_max_claimed,
        }
    }
}

/// Whether any queue limits claims: only then must a finish look at its
/// job's queue. Connected to SPI.
pub fn some_queue_counts_claims(function: pg_sys::Oid) -> bool {
    with_settings(function, |s| s.values().any(|s| s.counts_claims))
}

/// A job of `queue` stopped being claimed: when the queue limits claims,
/// a waiting claim of it is woken at commit to take the freed slot. Looks
/// only at the settings in memory (it runs no statement, which would
/// replace the caller's SPI result); had they just been dropped, the
/// waiting claim finds the slot when it looks again (`LOOK_AGAIN_MS`).
pub fn claim_ended(queue: &str) {
    let counts = SETTINGS.with(|s| s.borrow().as_ref().and_then(|s| s.get(queue)).is_some_and(|s| s.counts_claims));
    if counts {
        waiters::note_ready(queue, 1);
    }
}

/// Wakes, at commit, every waiting claim of `queue`: rq_resume's, and
/// rq_set_limits' when it raises or removes a limit.
#[pg_extern(volatile, parallel_unsafe, schema = "raquel_internal")]
#[search_path(pg_catalog, pg_temp)]
fn rq_wake_claims(queue: Option<&str>, fcinfo: pg_sys::FunctionCallInfo) {
    // SAFETY: fcinfo is this call's own.
    privileges::require_update(unsafe { statements::called_function(fcinfo) }, "rq_wake_claims");
    if let Some(queue) = queue {
        waiters::note_ready(queue, i64::from(i32::MAX));
    }
}

thread_local! {
    /// How deep this backend is inside rq_claim's flow claim
    /// (src/claim/flow_claim.rs), the one caller of the helpers that lock
    /// and write a limit's state kept in a row.
    static INSIDE_FLOW_CLAIM: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

/// Marks this backend as inside rq_claim's flow claim while it lives: its
/// Drop runs when the claim returns and when an error unwinds through it.
pub struct InsideFlowClaim;

impl InsideFlowClaim {
    pub fn enter() -> InsideFlowClaim {
        INSIDE_FLOW_CLAIM.set(INSIDE_FLOW_CLAIM.get() + 1);
        InsideFlowClaim
    }
}

impl Drop for InsideFlowClaim {
    fn drop(&mut self) {
        INSIDE_FLOW_CLAIM.set(INSIDE_FLOW_CLAIM.get().saturating_sub(1));
    }
}

/// Refuses (42501) `name` outside rq_claim's flow claim: a limit's state
/// is for the claims that obey it, so no role may call its helpers
/// directly to empty a queue's claimed list or refill a rate.
pub fn require_flow_claim(name: &str) {
    if INSIDE_FLOW_CLAIM.get() == 0 {
        Refusal::new(PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE, format!("{name} runs only inside rq_claim"))
            .hint("Claim with rq_claim (or rq_complete_and_claim), which obeys the queues' flow settings.")
            .raise()
    }
}

/// require_flow_claim for the PL/pgSQL helpers rq_flow_lock and
/// rq_flow_took (sql/flow.sql).
#[pg_extern(volatile, parallel_unsafe, schema = "raquel_internal")]
#[search_path(pg_catalog, pg_temp)]
fn rq_require_flow_claim(name: &str) {
    require_flow_claim(name);
}

/// The longest `per` of a rate: a day.
const MAX_PER_MS: i64 = 86_400_000;

/// Checks rq_set_limits' arguments (22023 naming the bad one); returns
/// `per` in ms. Called before anything changes.
#[pg_extern(immutable, parallel_safe, schema = "raquel_internal")]
#[search_path(pg_catalog, pg_temp)]
fn rq_check_limits(
    queue: Option<&str>,
    max_claimed: Option<i32>,
    rate: Option<i32>,
    per: Option<Interval>,
    group_max_claimed: Option<i32>,
) -> Option<i64> {
    limits::check_queue(queue);
    for (name, value) in [("max_claimed", max_claimed), ("rate", rate), ("group_max_claimed", group_max_claimed)] {
        if let Some(value) = value.filter(|v| *v < 1) {
            Refusal::invalid_parameter(format!("{name} must be at least 1, got {value}"))
                .hint(format!("Pass NULL to remove the limit, or pause the queue with rq_pause('{}').", queue.unwrap_or_default()))
                .raise()
        }
    }
    let per_ms = per.map(|per| crate::durations::interval_ms_within(per, "per", 1, MAX_PER_MS));
    if rate.is_some() && per_ms.is_none() {
        Refusal::invalid_parameter("per must not be null when a rate is given")
            .hint("A rate is so many claims per interval, for example rate => 50, per => '1 second'.")
            .raise()
    }
    per_ms
}

// rq_queue_limits_changed() RETURNS trigger: the statement trigger of the
// queue_limits table (sql/flow.sql) and of queues_without_history
// (sql/history.sql), for any change to the settings.
function_info_v1!(pg_finfo_rq_queue_limits_changed);

/// # Safety
/// Called by the function manager, as a trigger or (by mistake) by hand.
#[pg_guard]
#[unsafe(no_mangle)]
pub unsafe extern "C-unwind" fn rq_queue_limits_changed(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    // SAFETY: the context is checked to be TriggerData before it is used as
    // one; its relation is valid for this call.
    unsafe {
        let context = (*fcinfo).context;
        if context.is_null() || (*context).type_ != pg_sys::NodeTag::T_TriggerData {
            Refusal::new(
                PgSqlErrorCode::ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED,
                "rq_queue_limits_changed() runs only as the trigger of a table of queue settings",
            )
            .raise()
        }
        let trigger = context as *mut pg_sys::TriggerData;
        // Sent to every backend (this one too) when the transaction commits.
        pg_sys::CacheInvalidateRelcacheByRelid((*(*trigger).tg_relation).rd_id);
    }
    pg_sys::Datum::from(0)
}
