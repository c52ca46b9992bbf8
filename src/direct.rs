//! The direct path: a hot verb writes the jobs table without a statement:
//! rq_enqueue and rq_enqueue_batch their new rows (`insert`,
//! `insert_batch`), rq_claim and rq_take of one queue their claims (`claim`,
//! walking jobs_ready_by_queue_idx with index scans), rq_complete and
//! rq_fail a claimed job's end (`end`), and rq_step the step of a job it
//! holds (`step::record`: a row of job_steps).
//!
//! Why: a verb that runs a kept plan through SPI pays the executor's set-up
//! of that plan on every call (docs/src/design/hot-path.md: ExecutorStart
//! and the plan's nodes cost more than the row the verb writes). Here the
//! row is written the way PostgreSQL's logical-replication apply writes one
//! (execReplication.c): the table opened, a small executor state, the tuple
//! formed from the verb's checked values, `simple_table_tuple_insert` (heap
//! WAL, statistics, logical decoding as for any INSERT), the index entries
//! by `ExecInsertIndexTuples` (every index, a user's too, with its
//! predicate), and what raquel's row triggers would do, called here.
//!
//! Only while the table is as raquel made it: a plain heap table (not a
//! partition), no row security or rule, no CHECK constraint or generated column of a user, no trigger
//! but raquel's own three (enabled, as they are made), no deferred or
//! exclusion constraint among its indexes, and the columns raquel made with
//! their base types. Otherwise, or with `raquel.direct_writes` off, under
//! `session_replication_role = replica`, for a distributed table, or when
//! the role the verb runs as may not insert (for a complete or a claim:
//! read and update), and for a claim also when its ready index is not as
//! raquel made it or the transaction is in REPEATABLE READ or SERIALIZABLE,
//! the verb runs its planned statement, which does all of that as
//! PostgreSQL does for any INSERT or UPDATE. (raquel's own triggers have
//! nothing to do for the rows these verbs write: see `insert`; a claim
//! raises attempts, which rq_job_values checks against requeues and the
//! retry delays, and raising it keeps both checks true.)
//! What the table is like is read once per backend, and forgotten when its
//! relcache entry is invalidated (CREATE TRIGGER, CREATE INDEX, ALTER TABLE,
//! CREATE POLICY all invalidate it: src/invalidation.rs).
//!
//! The values are the verb's, checked before (src/enqueue.rs): a domain's
//! CHECK of the table's columns (rq_max_age_ms, rq_delay_ms, rq_nonnegative)
//! holds by those checks, and rq_job_values's (min_retry_delay <=
//! max_retry_delay, requeues <= attempts) too.

use pgrx::prelude::*;
use std::cell::{Cell, RefCell};

pub mod step;

/// The jobs table's columns that raquel made, with their base types.
const COLUMNS: [(&str, pg_sys::Oid); 27] = [
    ("id", pg_sys::UUIDOID),
    ("queue", pg_sys::TEXTOID),
    ("payload", pg_sys::TEXTOID),
    ("status", pg_sys::TEXTOID),
    ("max_age", pg_sys::INT8OID),
    ("max_retry_count", pg_sys::INT4OID),
    ("min_retry_delay", pg_sys::INT4OID),
    ("max_retry_delay", pg_sys::INT4OID),
    ("backoff_base", pg_sys::INT4OID),
    ("enqueued_at", pg_sys::INT8OID),
    ("scheduled_at", pg_sys::INT8OID),
    ("attempts", pg_sys::INT4OID),
    ("error", pg_sys::TEXTOID),
    ("error_trace", pg_sys::TEXTOID),
    ("claimed_by", pg_sys::TEXTOID),
    ("claimed_at", pg_sys::INT8OID),
    ("finished_at", pg_sys::INT8OID),
    ("priority", pg_sys::INT4OID),
    ("lease_expires_at", pg_sys::INT8OID),
    ("requeues", pg_sys::INT4OID),
    ("key", pg_sys::TEXTOID),
    ("group_key", pg_sys::TEXTOID),
    ("turn", pg_sys::INT8OID),
    ("blocked_by", pg_sys::INT4OID),
    ("key_period", pg_sys::INT8OID),
    ("result", pg_sys::JSONBOID),
    // 0.6.0 on; a table not yet updated has none (OPTIONAL)
    ("past_attempts", pg_sys::JSONBOID),
];

/// Column indexes into COLUMNS.
#[derive(Clone, Copy)]
#[repr(usize)]
enum Col {
    Id = 0,
    Queue = 1,
    Payload = 2,
    Status = 3,
    MaxAge = 4,
    MaxRetryCount = 5,
    MinRetryDelay = 6,
    MaxRetryDelay = 7,
    BackoffBase = 8,
    EnqueuedAt = 9,
    ScheduledAt = 10,
    Attempts = 11,
    Error = 12,
    ErrorTrace = 13,
    ClaimedBy = 14,
    ClaimedAt = 15,
    FinishedAt = 16,
    Priority = 17,
    LeaseExpiresAt = 18,
    Requeues = 19,
    GroupKey = 21,
    Turn = 22,
    BlockedBy = 23,
    KeyPeriod = 24,
    Result = 25,
    PastAttempts = 26,
}

/// The columns a table of an older version (its update not run yet) may
/// lack: a direct write leaves out what it would write there.
const OPTIONAL: [Col; 1] = [Col::PastAttempts];

/// The columns NOT NULL in raquel's table: a direct write sets each.
const NOT_NULL: [Col; 9] =
    [Col::Id, Col::Queue, Col::Status, Col::EnqueuedAt, Col::ScheduledAt, Col::Attempts, Col::Priority, Col::Requeues, Col::BlockedBy];

/// raquel's row triggers on the jobs table, by name and function.
const TRIGGERS: [(&str, &str); 3] =
    [("jobs_values", "rq_job_values"), ("jobs_grouped", "rq_job_turn"), ("jobs_enqueued", "rq_job_events")];

/// Where each of COLUMNS is in the table's rows (attribute number - 1),
/// and the primary key on id, for finding a job (None: the table has no
/// such key, and no verb finds a job directly).
#[derive(Clone, Copy)]
struct Layout {
    at: [usize; COLUMNS.len()],
    id_key: Option<pg_sys::Oid>,
    /// jobs_ready_by_queue_idx as raquel made it (sql/schema.sql), for a
    /// direct claim's walk (None: claims run their statements).
    ready_by_queue: Option<pg_sys::Oid>,
    /// jobs_ready_fair_idx as raquel made it, for a direct fair claim's
    /// walk (src/fair.rs; None: it runs its statement).
    ready_fair: Option<pg_sys::Oid>,
    /// jobs_group_idx as raquel made it, for counting a group's claimed
    /// jobs under group_max_claimed.
    group: Option<pg_sys::Oid>,
}

/// What jobs_ready_by_queue_idx's definition ends with, as PostgreSQL
/// prints it (pg_get_indexdef) from sql/schema.sql: its columns, their
/// order, operator classes, collations and predicate.
const READY_BY_QUEUE: &str = " USING btree (queue, priority DESC, scheduled_at, id) \
    WHERE (((status)::text = ANY (ARRAY['queued'::text, 'failed'::text])) AND (group_key IS NULL))";

/// What a backend keeps of a jobs table for its direct writes.
struct Known {
    table: pg_sys::Oid,
    /// None: not as raquel made it.
    layout: Option<Layout>,
    /// Its indexes, each with its IndexInfo: built once, with the
    /// predicate and expressions prepared (in `memory`), where an INSERT's
    /// executor builds and prepares them again for every statement (a
    /// third of what a direct insert cost, callgrind).
    indexes: Vec<(pg_sys::Oid, *mut pg_sys::IndexInfo)>,
    memory: pg_sys::MemoryContext,
}

thread_local! {
    static KNOWN: RefCell<Option<Known>> = const { RefCell::new(None) };
    /// Bumped whenever KNOWN is forgotten: a look that began before does
    /// not keep what it found.
    static GENERATION: Cell<u64> = const { Cell::new(0) };
    /// Memory of what was forgotten, with the start of the transaction that
    /// forgot it: freed by a look at the table in a later transaction,
    /// never while a write may still use it (an invalidation can come in
    /// the middle of one, when a lock is taken: an index opened as the
    /// write goes, `Writer::index`), and no write spans transactions.
    static STALE: RefCell<Vec<(pg_sys::MemoryContext, pg_sys::TimestampTz)>> = const { RefCell::new(Vec::new()) };
}

fn forget() {
    if let Some(known) = KNOWN.take() {
        set_aside(known.memory);
    }
    GENERATION.set(GENERATION.get() + 1);
}

/// Puts forgotten `memory` (if any) in STALE, stamped with this
/// transaction's start.
fn set_aside(memory: pg_sys::MemoryContext) {
    if !memory.is_null() {
        // SAFETY: a backend global.
        let now = unsafe { pg_sys::GetCurrentTransactionStartTimestamp() };
        STALE.with_borrow_mut(|stale| stale.push((memory, now)));
    }
}

/// Frees the memory forgotten before this transaction began.
fn free_stale() {
    // SAFETY: a backend global.
    let now = unsafe { pg_sys::GetCurrentTransactionStartTimestamp() };
    STALE.with_borrow_mut(|stale| {
        stale.retain(|&(memory, forgotten)| {
            if forgotten >= now {
                return true;
            }
            // SAFETY: a context this module made, referenced by no write:
            // each write reads the table in its own transaction.
            unsafe { pg_sys::MemoryContextDelete(memory) };
            false
        })
    });
}

/// What an insert needs of the table, read once (see the module's comment).
type Read = (Layout, Vec<(pg_sys::Oid, *mut pg_sys::IndexInfo)>);

/// # Safety
/// `rel` is open.
unsafe fn read(rel: pg_sys::Relation) -> Option<Read> {
    // SAFETY: `rel` is open.
    let table = unsafe { (*rel).rd_id };
    // (what an invalidation in an earlier transaction forgot: most come in
    // as the table is opened, and the read after is in the same transaction)
    free_stale();
    let known = KNOWN.with_borrow(|k| {
        k.as_ref().filter(|k| k.table == table).map(|k| k.layout.map(|layout| (layout, k.indexes.clone())))
    });
    let found = match known {
        Some(found) => found,
        None => {
            let before = GENERATION.get();
            // SAFETY: `rel` is open.
            let known = unsafe { look_at(rel) };
            if GENERATION.get() != before {
                // invalidated while it looked (it opens the indexes): again next call
                set_aside(known.memory);
                return None;
            }
            let mut relations = vec![table];
            relations.extend(known.indexes.iter().map(|(oid, _)| *oid));
            crate::invalidation::forget_when_any_changed("direct", relations, forget);
            let found = known.layout.map(|layout| (layout, known.indexes.clone()));
            KNOWN.set(Some(known));
            found
        }
    };
    found
}

/// Reads what the table is like, and builds its indexes' IndexInfos.
///
/// # Safety
/// `rel` is open.
unsafe fn look_at(rel: pg_sys::Relation) -> Known {
    // SAFETY: `rel` is open.
    let table = unsafe { (*rel).rd_id };
    let not_as_made = Known { table, layout: None, indexes: Vec::new(), memory: std::ptr::null_mut() };
    // SAFETY: `rel` is open.
    let Some(mut layout) = (unsafe { read_layout(rel) }) else { return not_as_made };
    // SAFETY: a catalog read of an open relation's indexes; each is opened
    // and closed keeping its lock, as the executor does; the infos and
    // their prepared expressions are made in a context of their own, under
    // CacheMemoryContext, freed when forgotten.
    unsafe {
        let memory = pg_sys::AllocSetContextCreateExtended(
            pg_sys::CacheMemoryContext,
            c"raquel direct writes".as_ptr(),
            pg_sys::ALLOCSET_SMALL_MINSIZE as usize,
            pg_sys::ALLOCSET_SMALL_INITSIZE as usize,
            pg_sys::ALLOCSET_SMALL_MAXSIZE as usize,
        );
        let old = pg_sys::MemoryContextSwitchTo(memory);
        let list = pg_sys::RelationGetIndexList(rel);
        let count = if list.is_null() { 0 } else { (*list).length as usize };
        let mut indexes = Vec::with_capacity(count);
        let mut as_made = true;
        for i in 0..count {
            let oid = (*(*list).elements.add(i)).oid_value;
            let index = pg_sys::index_open(oid, pg_sys::RowExclusiveLock as pg_sys::LOCKMODE);
            let form = (*index).rd_index;
            // a B-tree index, checked at once (no deferred unique, no
            // exclusion): other access methods keep state of their own
            // between inserts (ii_AmCache)
            if (*(*index).rd_rel).relam != pg_sys::BTREE_AM_OID || !(*form).indimmediate || (*form).indisexclusion {
                as_made = false;
            } else {
                let info = pg_sys::BuildIndexInfo(index);
                if !(*info).ii_Predicate.is_null() {
                    let predicate = pg_sys::expression_planner((*info).ii_Predicate.cast()).cast::<pg_sys::List>();
                    (*info).ii_PredicateState = pg_sys::ExecInitQual(predicate, std::ptr::null_mut());
                }
                let expressions = (*info).ii_Expressions;
                if !expressions.is_null() {
                    let mut states: *mut pg_sys::List = std::ptr::null_mut();
                    for e in 0..(*expressions).length as usize {
                        let expression = (*(*expressions).elements.add(e)).ptr_value.cast::<pg_sys::Expr>();
                        let state = pg_sys::ExecInitExpr(pg_sys::expression_planner(expression), std::ptr::null_mut());
                        states = pg_sys::lappend(states, state.cast());
                    }
                    (*info).ii_ExpressionsState = states;
                }
                // a valid index (not a REINDEX CONCURRENTLY's copy being
                // built, nor one a failed build left), the first found
                if (*form).indisvalid && (*form).indisready && (*form).indislive
                    && layout.ready_by_queue.is_none()
                    && is_index_as_made(oid, info, &layout, &READY_BY_QUEUE_COLUMNS, READY_BY_QUEUE)
                {
                    layout.ready_by_queue = Some(oid);
                }
                if (*form).indisvalid && (*form).indisready && (*form).indislive
                    && layout.ready_fair.is_none()
                    && is_index_as_made(oid, info, &layout, &READY_FAIR_COLUMNS, READY_FAIR)
                {
                    layout.ready_fair = Some(oid);
                }
                if (*form).indisvalid && (*form).indisready && (*form).indislive
                    && layout.group.is_none()
                    && is_index_as_made(oid, info, &layout, &GROUP_COLUMNS, GROUP)
                {
                    layout.group = Some(oid);
                }
                // the primary key on id alone (rd_pkindex is set by RelationGetIndexList)
                if oid == (*rel).rd_pkindex
                    && (*info).ii_NumIndexAttrs == 1
                    && usize::try_from((*info).ii_IndexAttrNumbers[0]).is_ok_and(|n| n == layout.at[Col::Id as usize] + 1)
                {
                    layout.id_key = Some(oid);
                }
                indexes.push((oid, info));
            }
            pg_sys::index_close(index, pg_sys::NoLock as pg_sys::LOCKMODE);
        }
        pg_sys::MemoryContextSwitchTo(old);
        if !as_made {
            pg_sys::MemoryContextDelete(memory);
            return not_as_made;
        }
        Known { table, layout: Some(layout), indexes, memory }
    }
}

/// # Safety
/// `rel` is open.
unsafe fn read_layout(rel: pg_sys::Relation) -> Option<Layout> {
    // SAFETY: the relation's cache entry, its descriptor and trigger
    // descriptor are valid while it is open; catalog lookups by OID.
    unsafe {
        if !plain_heap(rel) {
            return None;
        }
        let desc = (*rel).rd_att;
        // the columns: raquel's, each once, with its base type
        let mut at = [usize::MAX; COLUMNS.len()];
        let attributes = pgrx::PgTupleDesc::from_pg_unchecked(desc);
        for (i, attr) in attributes.iter().enumerate() {
            if attr.attisdropped {
                continue;
            }
            let name = std::ffi::CStr::from_ptr(attr.attname.data.as_ptr()).to_str().ok()?;
            let c = COLUMNS.iter().position(|(n, _)| *n == name)?;
            if at[c] != usize::MAX || pg_sys::getBaseType(attr.atttypid) != COLUMNS[c].1 {
                return None;
            }
            if attr.attnotnull && !NOT_NULL.iter().any(|&n| n as usize == c) {
                return None;
            }
            at[c] = i;
        }
        if at.iter().enumerate().any(|(c, &i)| i == usize::MAX && !OPTIONAL.iter().any(|&o| o as usize == c)) {
            return None;
        }
        // the triggers: raquel's three, enabled as made
        let triggers = (*rel).trigdesc;
        let count = if triggers.is_null() { 0 } else { (*triggers).numtriggers as usize };
        if count != TRIGGERS.len() {
            return None;
        }
        let internal = raquel_internal()?;
        for i in 0..count {
            let trigger = (*triggers).triggers.add(i);
            let name = std::ffi::CStr::from_ptr((*trigger).tgname).to_str().ok()?;
            let function = pg_sys::get_func_name((*trigger).tgfoid);
            if function.is_null() || (*trigger).tgenabled != pg_sys::TRIGGER_FIRES_ON_ORIGIN as std::ffi::c_char {
                return None;
            }
            let function = std::ffi::CStr::from_ptr(function).to_str().ok()?;
            if !TRIGGERS.contains(&(name, function)) || pg_sys::get_func_namespace((*trigger).tgfoid) != internal {
                return None;
            }
        }
        Some(Layout { at, id_key: None, ready_by_queue: None, ready_fair: None, group: None })
    }
}

/// Whether `rel` is a plain heap table, as raquel makes its tables: not a
/// partition, without row security, rules, CHECK constraints or generated
/// columns (a direct write would pass each of them by).
///
/// # Safety
/// `rel` is open.
unsafe fn plain_heap(rel: pg_sys::Relation) -> bool {
    // SAFETY: the relation's cache entry and descriptor, while it is open.
    unsafe {
        let form = (*rel).rd_rel;
        let constr = (*(*rel).rd_att).constr;
        (*form).relkind == pg_sys::RELKIND_RELATION as std::ffi::c_char
            && (*form).relam == pg_sys::HEAP_TABLE_AM_OID
            && !(*form).relrowsecurity
            && (*rel).rd_rules.is_null()
            && !(*form).relispartition
            && (constr.is_null() || ((*constr).num_check == 0 && !(*constr).has_generated_stored))
    }
}

const READY_BY_QUEUE_COLUMNS: [Col; 4] = [Col::Queue, Col::Priority, Col::ScheduledAt, Col::Id];

/// What jobs_ready_fair_idx's definition ends with (as READY_BY_QUEUE).
const READY_FAIR: &str = " USING btree (queue, priority DESC, turn, scheduled_at, id) \
    WHERE ((group_key IS NOT NULL) AND ((status)::text = ANY (ARRAY['queued'::text, 'failed'::text])))";
const READY_FAIR_COLUMNS: [Col; 5] = [Col::Queue, Col::Priority, Col::Turn, Col::ScheduledAt, Col::Id];

/// What jobs_group_idx's definition ends with (as READY_BY_QUEUE).
const GROUP: &str = " USING btree (queue, group_key, status, turn) \
    WHERE ((group_key IS NOT NULL) AND ((status)::text = ANY (ARRAY['queued'::text, 'failed'::text, 'claimed'::text])))";
const GROUP_COLUMNS: [Col; 4] = [Col::Queue, Col::GroupKey, Col::Status, Col::Turn];

/// Whether index `oid` (its `info` built) is one raquel made: its key
/// `columns`, then its whole definition as printed, ending with `definition`.
///
/// # Safety
/// The index is open.
unsafe fn is_index_as_made(oid: pg_sys::Oid, info: *const pg_sys::IndexInfo, layout: &Layout, columns: &[Col], definition: &str) -> bool {
    let columns: Vec<pg_sys::AttrNumber> = columns.iter().map(|&c| (layout.at[c as usize] + 1) as pg_sys::AttrNumber).collect();
    let n = columns.len();
    // SAFETY: per the contract above; the definition is printed from the catalogs.
    unsafe {
        if (*info).ii_NumIndexAttrs as usize != n || (&(*info).ii_IndexAttrNumbers)[..n] != columns[..] || (*info).ii_Predicate.is_null() {
            return false;
        }
        let printed = std::ffi::CStr::from_ptr(pg_sys::pg_get_indexdef_string(oid));
        printed.to_str().is_ok_and(|d| d.ends_with(definition))
    }
}

/// The raquel_internal schema.
fn raquel_internal() -> Option<pg_sys::Oid> {
    // SAFETY: a catalog lookup by name.
    let oid = unsafe { pg_sys::get_namespace_oid(c"raquel_internal".as_ptr(), true) };
    (oid != pg_sys::InvalidOid).then_some(oid)
}

/// A new job, as rq_enqueue checked it (src/enqueue.rs).
pub struct NewJob {
    /// text, not null
    pub queue: pg_sys::Datum,
    /// text or None
    pub payload: Option<pg_sys::Datum>,
    pub options: JobValues,
}

/// What a new job stores beside its queue and payload, checked
/// (src/enqueue.rs): the same for every job of a batch.
#[derive(Clone, Copy)]
pub struct JobValues {
    pub max_age_ms: Option<i64>,
    pub max_retry_count: Option<i32>,
    pub min_retry_delay_ms: i32,
    pub max_retry_delay_ms: i32,
    pub backoff_base_ms: i32,
    pub now_ms: i64,
    pub due_ms: i64,
    pub priority: i32,
}

/// Whether the direct path may be tried at all in this call: not in a
/// READ ONLY transaction (nor on a standby), whose refusal (25006) the
/// statement raises.
fn allowed() -> bool {
    // SAFETY: backend globals.
    crate::settings::direct_writes()
        && unsafe { pg_sys::SessionReplicationRole } != pg_sys::SESSION_REPLICATION_ROLE_REPLICA as i32
        && !unsafe { pg_sys::XactReadOnly }
}

/// The jobs table opened for direct writes, with a small executor state (as
/// execReplication.c sets one up). Its indexes are opened (and locked) only
/// when a row gets an entry in them: a job's row is in 2 or 3 of the
/// table's 9 (each partial index holds one status or two), and opening and
/// locking the other 6 or 7 cost each write about 3,000 instructions apiece.
/// The table's lock (RowExclusiveLock, taken first, as the executor does)
/// keeps each of them from being dropped or rebuilt (REINDEX, and their
/// CONCURRENTLY forms, wait for the table's lockers) meanwhile; an index
/// being built concurrently is the kept infos' to include, as the
/// executor's index list is fixed when its statement starts. (An index's
/// own DDL that locks only the index, `ALTER INDEX … SET TABLESPACE`, is
/// waited for when the index is opened, as a statement waits for it.)
struct Writer {
    rel: pg_sys::Relation,
    /// the kept infos of the table's indexes (`read`)
    indexes: Vec<(pg_sys::Oid, *mut pg_sys::IndexInfo)>,
    /// each index of `indexes`, once opened (null before)
    opened: RefCell<Vec<pg_sys::Relation>>,
    layout: Layout,
    estate: *mut pg_sys::EState,
    info: *mut pg_sys::ResultRelInfo,
    caller_context: pg_sys::MemoryContext,
}

impl Writer {
    /// Opens `table` for direct writes, or None when they may not be tried
    /// (see the module's comment): the caller runs its statement instead.
    /// Leaves the executor state's memory current.
    ///
    /// # Safety
    /// Inside a transaction, in a function call. An error anywhere after is
    /// a PostgreSQL ERROR whose abort releases the relations, their locks,
    /// buffer pins and the executor state's memory (a child of the caller's).
    unsafe fn open(table: pg_sys::Oid, rights: &[u32]) -> Option<Writer> {
        if !allowed() || table == pg_sys::InvalidOid {
            return None;
        }
        // SAFETY: per the contract above.
        unsafe {
            // the rights its statement would need, of the role the verb runs
            // as (the owner, in a SECURITY DEFINER verb), each on the whole table
            if rights.iter().any(|&right| {
                pg_sys::pg_class_aclcheck(table, pg_sys::GetUserId(), right as pg_sys::AclMode) != pg_sys::AclResult::ACLCHECK_OK
            }) {
                return None;
            }
            let rel = pg_sys::table_open(table, pg_sys::RowExclusiveLock as pg_sys::LOCKMODE);
            let Some((layout, indexes)) = read(rel) else {
                pg_sys::table_close(rel, pg_sys::NoLock as pg_sys::LOCKMODE);
                return None;
            };
            // (what was read stays in memory to the end of this transaction,
            // even if an invalidation taken in by a lock, an index's opened
            // as the write goes, forgets it meanwhile: see STALE)
            let opened = RefCell::new(vec![std::ptr::null_mut(); indexes.len()]);
            let caller_context = pg_sys::CurrentMemoryContext;
            let writer = Writer { rel, indexes, opened, layout, estate: std::ptr::null_mut(), info: std::ptr::null_mut(), caller_context };
            let estate = pg_sys::CreateExecutorState();
            pg_sys::MemoryContextSwitchTo((*estate).es_query_cxt);
            let info = pg_sys::palloc0(std::mem::size_of::<pg_sys::ResultRelInfo>()) as *mut pg_sys::ResultRelInfo;
            (*info).type_ = pg_sys::NodeTag::T_ResultRelInfo;
            pg_sys::InitResultRelInfo(info, rel, 1, std::ptr::null_mut(), 0);
            (*estate).es_output_cid = pg_sys::GetCurrentCommandId(true);
            // room for the indexes as ExecOpenIndices would set them, filled
            // for each row with those it has entries in (index_entries)
            let n = writer.indexes.len();
            (*info).ri_NumIndices = 0;
            (*info).ri_IndexRelationDescs = pg_sys::palloc(n.max(1) * std::mem::size_of::<pg_sys::Relation>()) as *mut pg_sys::Relation;
            (*info).ri_IndexRelationInfo =
                pg_sys::palloc(n.max(1) * std::mem::size_of::<*mut pg_sys::IndexInfo>()) as *mut *mut pg_sys::IndexInfo;
            Some(Writer { estate, info, ..writer })
        }
    }

    /// The index `oid` of the table, opened (RowExclusiveLock, as the
    /// executor opens an index it writes) the first time it is asked for.
    ///
    /// # Safety
    /// Open; `oid` is one of `indexes`.
    unsafe fn index(&self, oid: pg_sys::Oid) -> Option<pg_sys::Relation> {
        let at = self.indexes.iter().position(|(o, _)| *o == oid)?;
        // SAFETY: per the contract above.
        Some(unsafe { self.index_at(at) })
    }

    /// The index at `at` of `indexes`, opened the first time (see `index`).
    ///
    /// # Safety
    /// Open; `at` < `indexes.len()`.
    unsafe fn index_at(&self, at: usize) -> pg_sys::Relation {
        let mut opened = self.opened.borrow_mut();
        if opened[at].is_null() {
            // SAFETY: per the contract above.
            opened[at] = unsafe { pg_sys::index_open(self.indexes[at].0, pg_sys::RowExclusiveLock as pg_sys::LOCKMODE) };
        }
        opened[at]
    }

    /// A scan of `index` (open) with `keys` keys, under `snapshot`.
    ///
    /// # Safety
    /// Open; `snapshot` registered for as long as the scan lives.
    unsafe fn begin_scan(&self, index: pg_sys::Relation, snapshot: pg_sys::Snapshot, keys: i32) -> pg_sys::IndexScanDesc {
        // SAFETY: per the contract above.
        unsafe {
            #[cfg(not(feature = "pg18"))]
            let scan = pg_sys::index_beginscan(self.rel, index, snapshot, keys, 0);
            #[cfg(feature = "pg18")]
            let scan = pg_sys::index_beginscan(self.rel, index, snapshot, std::ptr::null_mut(), keys, 0);
            scan
        }
    }

    /// A slot of the table's rows, in the executor state.
    ///
    /// # Safety
    /// Open.
    unsafe fn slot(&self) -> *mut pg_sys::TupleTableSlot {
        // SAFETY: per the contract above.
        unsafe { pg_sys::table_slot_create(self.rel, &mut (*self.estate).es_tupleTable) }
    }

    /// Stores in `slot` the new job of `queue` with `payload` and `values`:
    /// queued, its id made here.
    ///
    /// # Safety
    /// `slot` is this writer's; `queue` and `payload` are text datums.
    unsafe fn fill(&self, slot: *mut pg_sys::TupleTableSlot, queue: pg_sys::Datum, payload: Option<pg_sys::Datum>, job: &JobValues) -> pgrx::Uuid {
        // SAFETY: per the contract above: the slot has natts values.
        unsafe {
            pg_sys::ExecClearTuple(slot);
            let natts = (*(*self.rel).rd_att).natts as usize;
            let values = std::slice::from_raw_parts_mut((*slot).tts_values, natts);
            let nulls = std::slice::from_raw_parts_mut((*slot).tts_isnull, natts);
            nulls.fill(true);
            let mut set = |c: Col, value: Option<pg_sys::Datum>| {
                let i = self.layout.at[c as usize];
                (values[i], nulls[i]) = match value {
                    Some(v) => (v, false),
                    None => (pg_sys::Datum::from(0), true),
                };
            };
            let id = crate::ids::new_id();
            set(Col::Id, id.into_datum());
            set(Col::Queue, Some(queue));
            set(Col::Payload, payload);
            set(Col::Status, Some(QUEUED.with(|q| *q)));
            set(Col::MaxAge, job.max_age_ms.into_datum());
            set(Col::MaxRetryCount, job.max_retry_count.into_datum());
            set(Col::MinRetryDelay, job.min_retry_delay_ms.into_datum());
            set(Col::MaxRetryDelay, job.max_retry_delay_ms.into_datum());
            set(Col::BackoffBase, job.backoff_base_ms.into_datum());
            set(Col::EnqueuedAt, job.now_ms.into_datum());
            set(Col::ScheduledAt, job.due_ms.into_datum());
            set(Col::Attempts, 0i32.into_datum());
            set(Col::Priority, job.priority.into_datum());
            set(Col::Requeues, 0i32.into_datum());
            set(Col::BlockedBy, 0i32.into_datum());
            pg_sys::ExecStoreVirtualTuple(slot);
            id
        }
    }

    /// The index entries of the row just written from `slot` (its tid set).
    ///
    /// # Safety
    /// Open; the slot's row was written.
    unsafe fn insert_index_entries(&self, slot: *mut pg_sys::TupleTableSlot) {
        // SAFETY: per the contract above.
        unsafe { self.index_entries(slot, false, false) }
    }

    /// The index entries of the row in `slot`, new or (`update`) the new
    /// version of an updated row; `only_summarizing`, of the summarizing
    /// indexes only (PostgreSQL 16 on, after a HOT update).
    ///
    /// # Safety
    /// Open; the slot's row was written.
    unsafe fn index_entries(&self, slot: *mut pg_sys::TupleTableSlot, update: bool, only_summarizing: bool) {
        // SAFETY: per the contract above.
        unsafe {
            // the indexes the row has an entry in: ready for inserts, and
            // whose predicate (a partial index's) it meets, each opened now
            let econtext = match (*self.estate).es_per_tuple_exprcontext {
                e if e.is_null() => pg_sys::MakePerTupleExprContext(self.estate),
                e => e,
            };
            (*econtext).ecxt_scantuple = slot;
            let mut n = 0;
            for (at, &(_, index_info)) in self.indexes.iter().enumerate() {
                if !(*index_info).ii_ReadyForInserts || !predicate_holds((*index_info).ii_PredicateState, econtext) {
                    continue;
                }
                let index = self.index_at(at);
                // (whether an update left the index's columns as they were
                // is the update's to say, not the kept info's first answer)
                if update {
                    (*index_info).ii_CheckedUnchanged = false;
                }
                *(*self.info).ri_IndexRelationDescs.add(n) = index;
                *(*self.info).ri_IndexRelationInfo.add(n) = index_info;
                n += 1;
            }
            (*self.info).ri_NumIndices = n as i32;
            #[cfg(feature = "pg15")]
            let recheck = {
                let _ = only_summarizing;
                pg_sys::ExecInsertIndexTuples(self.info, slot, self.estate, update, false, std::ptr::null_mut(), std::ptr::null_mut())
            };
            #[cfg(not(feature = "pg15"))]
            let recheck = pg_sys::ExecInsertIndexTuples(
                self.info,
                slot,
                self.estate,
                update,
                false,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                only_summarizing,
            );
            pg_sys::list_free(recheck);
            // what the predicates and expressions used, per row (as COPY does)
            let econtext = (*self.estate).es_per_tuple_exprcontext;
            if !econtext.is_null() {
                pg_sys::MemoryContextReset((*econtext).ecxt_per_tuple_memory);
            }
        }
    }

    /// What follows each new row (raquel's insert trigger's work: its BEFORE
    /// triggers have nothing to do for such a row, see the module's
    /// comment), from the values written.
    fn inserted(&self, queue: &str, payload: Option<pg_sys::Datum>, id: pgrx::Uuid, job: &JobValues) {
        // SAFETY: the relation is open.
        let table = unsafe { (*self.rel).rd_id };
        crate::events::ready_job(
            table,
            &crate::events::NewReady {
                queue,
                payload,
                id: Some(id),
                lane_priority: Some(job.priority),
                scheduled_at: Some(job.due_ms),
                max_age: job.max_age_ms,
            },
        );
    }

    /// Frees the executor state, closes the relations (keeping their locks
    /// to the end of the transaction) and makes what was written visible to
    /// the transaction's later statements, as SPI does after a statement
    /// that wrote. The caller's memory is current again.
    ///
    /// # Safety
    /// Open; nothing of the executor state's memory is used after.
    unsafe fn close(self) {
        // SAFETY: per the contract above.
        unsafe {
            pg_sys::MemoryContextSwitchTo(self.caller_context);
            if !self.estate.is_null() {
                pg_sys::ExecResetTupleTable((*self.estate).es_tupleTable, false);
                pg_sys::FreeExecutorState(self.estate);
            }
            for index in self.opened.borrow().iter().filter(|i| !i.is_null()) {
                pg_sys::index_close(*index, pg_sys::NoLock as pg_sys::LOCKMODE);
            }
            pg_sys::table_close(self.rel, pg_sys::NoLock as pg_sys::LOCKMODE);
            if !self.estate.is_null() {
                pg_sys::CommandCounterIncrement();
            }
        }
    }
}

/// Whether the row in `econtext`'s scan tuple meets a partial index's
/// prepared predicate (`state`; none: every row does), as ExecQual says
/// (an inline function of the executor's header, not callable).
///
/// # Safety
/// `state` prepared by ExecInitQual; the scan tuple set.
unsafe fn predicate_holds(state: *mut pg_sys::ExprState, econtext: *mut pg_sys::ExprContext) -> bool {
    if state.is_null() {
        return true;
    }
    // SAFETY: per the contract above: the expression's own function, in
    // the per-tuple memory (reset after each row's entries).
    unsafe {
        let Some(evaluate) = (*state).evalfunc else { return true };
        let old = pg_sys::MemoryContextSwitchTo((*econtext).ecxt_per_tuple_memory);
        let mut is_null = false;
        let value = evaluate(state, econtext, &mut is_null);
        pg_sys::MemoryContextSwitchTo(old);
        !is_null && bool::from_datum(value, false).unwrap_or(false)
    }
}

/// `text` as a text datum in memory that lives as long as the backend
/// (TopMemoryContext): for the statuses the direct writes store.
fn lasting_text(text: &std::ffi::CStr) -> pg_sys::Datum {
    // SAFETY: a text made in TopMemoryContext, never freed.
    unsafe {
        let old = pg_sys::MemoryContextSwitchTo(pg_sys::TopMemoryContext);
        let text = pg_sys::cstring_to_text(text.as_ptr());
        pg_sys::MemoryContextSwitchTo(old);
        pg_sys::Datum::from(text)
    }
}

thread_local! {
    /// The statuses the direct writes store, made once per backend.
    static QUEUED: pg_sys::Datum = lasting_text(c"queued");
    static CLAIMED: pg_sys::Datum = lasting_text(c"claimed");
    static SUCCESS: pg_sys::Datum = lasting_text(c"success");
    static FAILED: pg_sys::Datum = lasting_text(c"failed");
    static EXHAUSTED: pg_sys::Datum = lasting_text(c"exhausted");
}

/// Inserts `job` into the jobs table `table` and returns its row (a
/// composite datum in the current memory context), or None when the table
/// is not as raquel made it: the caller runs its statement instead.
pub fn insert(table: pg_sys::Oid, job: &NewJob) -> Option<pg_sys::Datum> {
    // SAFETY: inside a transaction, in a function call: see Writer::open.
    unsafe {
        let writer = Writer::open(table, &[pg_sys::ACL_INSERT])?;
        let slot = writer.slot();
        let id = writer.fill(slot, job.queue, job.payload, &job.options);
        pg_sys::simple_table_tuple_insert(writer.rel, slot);
        writer.insert_index_entries(slot);
        let mut free = false;
        let tuple = pg_sys::ExecFetchSlotHeapTuple(slot, false, &mut free);
        let row = {
            let old = pg_sys::MemoryContextSwitchTo(writer.caller_context);
            let row = pg_sys::heap_copy_tuple_as_datum(tuple, (*writer.rel).rd_att);
            pg_sys::MemoryContextSwitchTo(old);
            row
        };
        let queue = <&str>::from_datum(job.queue, false).unwrap_or_default();
        writer.inserted(queue, job.payload, id, &job.options);
        writer.close();
        Some(row)
    }
}

/// How many rows a batch hands table_multi_insert at a time, and at most
/// how many bytes of payloads (COPY's buffer flushes at 64 kB too). Fewer
/// slots than COPY's 1000: each pins the table's descriptor in the
/// resource owner, whose release searches them (1000 slots cost each row
/// about 10 000 instructions to make and free; 64, a few hundred).
const MULTI_INSERT_ROWS: usize = 64;
const MULTI_INSERT_BYTES: usize = 65_536;

/// Inserts a job of `queue` for each of `payloads` (text datums or None),
/// in their order, with `values`, and hands each row to `emit` as it is
/// written (a tuple of the table's row type, valid during the call).
/// Returns false, having written nothing, when the table is not as raquel
/// made it: the caller runs its statement instead.
pub fn insert_batch(
    table: pg_sys::Oid,
    queue: pg_sys::Datum,
    payloads: &[Option<pg_sys::Datum>],
    values: &JobValues,
    mut emit: impl FnMut(pg_sys::HeapTuple),
) -> bool {
    // SAFETY: inside a transaction, in a function call: see Writer::open.
    unsafe {
        let Some(writer) = Writer::open(table, &[pg_sys::ACL_INSERT]) else { return false };
        let queue_name = <&str>::from_datum(queue, false).unwrap_or_default();
        let chunk = payloads.len().min(MULTI_INSERT_ROWS);
        let slots: Vec<*mut pg_sys::TupleTableSlot> = (0..chunk).map(|_| writer.slot()).collect();
        let mut ids = Vec::with_capacity(chunk);
        let mut rest = payloads;
        while !rest.is_empty() {
            // as many rows as fit the buffer
            let (mut n, mut bytes) = (0, 0);
            ids.clear();
            while n < rest.len() && n < chunk && (n == 0 || bytes < MULTI_INSERT_BYTES) {
                let payload = rest[n];
                bytes += payload.map_or(0, |p| pg_sys::toast_raw_datum_size(p));
                ids.push(writer.fill(slots[n], queue, payload, values));
                n += 1;
            }
            pg_sys::table_multi_insert(
                writer.rel,
                slots.as_ptr().cast_mut(),
                n as i32,
                (*writer.estate).es_output_cid,
                0,
                std::ptr::null_mut(),
            );
            for (i, &slot) in slots[..n].iter().enumerate() {
                writer.insert_index_entries(slot);
                let mut free = false;
                let tuple = pg_sys::ExecFetchSlotHeapTuple(slot, false, &mut free);
                emit(tuple);
                writer.inserted(queue_name, rest[i], ids[i], values);
            }
            rest = &rest[n..];
        }
        writer.close();
        true
    }
}

/// How a claimed job ends directly: completed with its result (jsonb)
/// when given, or failed with its error and trace (texts), then retried
/// after its backoff or, with no retry left, exhausted (sql/transition.fail.sql).
#[derive(Clone, Copy)]
pub enum End {
    Complete { result: Option<pg_sys::Datum> },
    Fail { error: Option<pg_sys::Datum>, trace: Option<pg_sys::Datum> },
}

/// A job ended directly: its row (in the caller's memory) and what
/// follows its end needs of it (src/ended.rs, src/finish.rs).
pub struct EndedRow {
    pub row: pg_sys::Datum,
    pub queue: String,
    pub claimed_at: Option<i64>,
    /// Its end sets something off: it has a key_period, or jobs wait for it.
    pub sets_off: bool,
    /// A failed job to be retried: when it is due, its max_age and
    /// priority (for the waiting claims' wake-up); None when it ended.
    pub retry: Option<Retry>,
}

/// When a failed job is to be tried again (`EndedRow`).
pub struct Retry {
    pub due: i64,
    pub max_age: Option<i64>,
    pub priority: Option<i32>,
}

/// Ends job `id`, claimed as attempt `attempt`, at `now_ms`, as `end`
/// says, in the jobs table `table` whose dependencies table
/// (sql/workflows.sql) is `dependencies`: the UPDATE of
/// sql/transition.complete.sql or sql/transition.fail.sql, written directly. None,
/// having written nothing, when a complete's queue does not
/// `keeps_history` (the statement deletes the job), when it may not be
/// done directly (see the module's comment; and the role must be allowed
/// to read and update both tables as the statement reads and updates
/// them), when the job is not claimed as that attempt, or when another
/// transaction changed the row since this statement's snapshot (after
/// waiting for it, as the UPDATE would): the caller runs its statement,
/// which then does what an UPDATE does in each case (looks at the row
/// again, or says why it cannot).
#[allow(clippy::too_many_arguments)]
pub fn end(
    table: pg_sys::Oid,
    dependencies: pg_sys::Oid,
    id: pgrx::Uuid,
    attempt: i32,
    now_ms: i64,
    end: End,
    keeps_history: impl Fn(&str) -> bool,
) -> Option<EndedRow> {
    // SAFETY: inside a transaction, in a function call: see Writer::open.
    unsafe {
        let children = Dependencies::open(dependencies)?;
        // as SPI runs a statement that writes: what this transaction did
        // before is seen, and written rows get the command's id
        pg_sys::CommandCounterIncrement();
        let done = Writer::open(table, &[pg_sys::ACL_SELECT, pg_sys::ACL_UPDATE]).and_then(|writer| {
            let done = writer.layout.id_key.and_then(|id_key| {
                // the statement's snapshot: a new one in READ COMMITTED, the
                // transaction's otherwise
                let snapshot = pg_sys::RegisterSnapshot(pg_sys::GetTransactionSnapshot());
                let done = writer.end_found(id_key, snapshot, id, attempt, now_ms, end, keeps_history).map(|mut ended| {
                    // (a failure to be retried has not ended: nothing follows it)
                    ended.sets_off = ended.retry.is_none() && (ended.sets_off || children.has_children(snapshot, id));
                    ended
                });
                pg_sys::UnregisterSnapshot(snapshot);
                done
            });
            writer.close();
            done
        });
        children.close();
        done
    }
}

impl Writer {
    /// Gives the executor state a range table of the jobs table alone, as
    /// logical replication's apply does, with `columns` as what an UPDATE
    /// sets: ExecInsertIndexTuples reads it after an update that is not
    /// HOT, to tell each index whether its key changed (the B-tree's
    /// bottom-up deletion of versions of unchanged keys).
    ///
    /// # Safety
    /// Open, the executor state's memory current.
    unsafe fn note_updated(&self, columns: &[Col]) {
        // SAFETY: per the contract above: nodes made as makeNode makes them.
        unsafe {
            let rte = pg_sys::palloc0(std::mem::size_of::<pg_sys::RangeTblEntry>()) as *mut pg_sys::RangeTblEntry;
            (*rte).type_ = pg_sys::NodeTag::T_RangeTblEntry;
            (*rte).rtekind = pg_sys::RTEKind::RTE_RELATION;
            (*rte).relid = (*self.rel).rd_id;
            (*rte).relkind = (*(*self.rel).rd_rel).relkind;
            (*rte).rellockmode = pg_sys::RowExclusiveLock as i32;
            let mut updated: *mut pg_sys::Bitmapset = std::ptr::null_mut();
            for &c in columns {
                let attno = (self.layout.at[c as usize] + 1) as i32;
                updated = pg_sys::bms_add_member(updated, attno - pg_sys::FirstLowInvalidHeapAttributeNumber);
            }
            let range_table = pg_sys::lappend(std::ptr::null_mut(), rte.cast());
            #[cfg(feature = "pg15")]
            {
                (*rte).updatedCols = updated;
                pg_sys::ExecInitRangeTable(self.estate, range_table);
            }
            #[cfg(not(feature = "pg15"))]
            {
                let mut permissions: *mut pg_sys::List = std::ptr::null_mut();
                let permission = pg_sys::addRTEPermissionInfo(&mut permissions, rte);
                (*permission).updatedCols = updated;
                #[cfg(any(feature = "pg16", feature = "pg17"))]
                pg_sys::ExecInitRangeTable(self.estate, range_table, permissions);
                #[cfg(feature = "pg18")]
                pg_sys::ExecInitRangeTable(self.estate, range_table, permissions, pg_sys::bms_make_singleton(1));
            }
        }
    }

    /// The job with `id` as `snapshot` sees it, through the primary key
    /// `id_key`: when it is claimed as `attempt`, updated as `end` says;
    /// its new row (in the caller's memory) and what its end needs (with
    /// `sets_off` from its key_period alone). None when it is not, or the
    /// update finds the row changed by another transaction (having waited
    /// for it).
    ///
    /// # Safety
    /// Open; `snapshot` registered; `end`'s datums are of the columns' types.
    #[allow(clippy::too_many_arguments)]
    unsafe fn end_found(
        &self,
        id_key: pg_sys::Oid,
        snapshot: pg_sys::Snapshot,
        id: pgrx::Uuid,
        attempt: i32,
        now_ms: i64,
        end: End,
        keeps_history: impl Fn(&str) -> bool,
    ) -> Option<EndedRow> {
        // SAFETY: per the contract above; the found row is copied before its
        // scan ends, and its values read as the table's column types.
        unsafe {
            let at = |c: Col| self.layout.at[c as usize];
            let set: &[Col] = match end {
                End::Complete { result: Some(_) } => &[Col::Status, Col::FinishedAt, Col::LeaseExpiresAt, Col::Result],
                End::Complete { result: None } => &[Col::Status, Col::FinishedAt, Col::LeaseExpiresAt],
                End::Fail { .. } if self.layout.at[Col::PastAttempts as usize] != usize::MAX => &[
                    Col::Status,
                    Col::FinishedAt,
                    Col::ScheduledAt,
                    Col::Error,
                    Col::ErrorTrace,
                    Col::LeaseExpiresAt,
                    Col::PastAttempts,
                ],
                End::Fail { .. } => {
                    &[Col::Status, Col::FinishedAt, Col::ScheduledAt, Col::Error, Col::ErrorTrace, Col::LeaseExpiresAt]
                }
            };
            self.note_updated(set);
            let found = find(self.rel, id_key, (at(Col::Id) + 1) as pg_sys::AttrNumber, snapshot, id)?;
            let slot = self.slot();
            pg_sys::ExecClearTuple(slot);
            let desc = (*self.rel).rd_att;
            let natts = (*desc).natts as usize;
            let values = std::slice::from_raw_parts_mut((*slot).tts_values, natts);
            let nulls = std::slice::from_raw_parts_mut((*slot).tts_isnull, natts);
            pg_sys::heap_deform_tuple(found, desc, values.as_mut_ptr(), nulls.as_mut_ptr());
            let text = |c: Col| (!nulls[at(c)]).then(|| String::from_datum(values[at(c)], false)).flatten();
            let int4 = |c: Col| (!nulls[at(c)]).then(|| i32::from_datum(values[at(c)], false)).flatten();
            let int8 = |c: Col| (!nulls[at(c)]).then(|| i64::from_datum(values[at(c)], false)).flatten();
            if text(Col::Status).as_deref() != Some("claimed") || int4(Col::Attempts) != Some(attempt) {
                return None;
            }
            let (queue, claimed_at, key_period) = (text(Col::Queue).unwrap_or_default(), int8(Col::ClaimedAt), !nulls[at(Col::KeyPeriod)]);
            // what a failure's retry is computed from
            let (requeues, max_retry_count, max_age, priority) =
                (int4(Col::Requeues), int4(Col::MaxRetryCount), int8(Col::MaxAge), int4(Col::Priority));
            let delays = [Col::BackoffBase, Col::MinRetryDelay, Col::MaxRetryDelay].map(int4);
            // a failure's attempt for the job's history (past_attempts,
            // when the table has it), appended below if a retry is left
            let past_at = at(Col::PastAttempts);
            let history = match end {
                End::Fail { error, trace } if past_at != usize::MAX => {
                    let string = |d: Option<pg_sys::Datum>| d.and_then(|d| String::from_datum(d, false));
                    let entry = PastAttempt {
                        attempt,
                        worker: text(Col::ClaimedBy),
                        claimed_at,
                        ended_at: now_ms,
                        outcome: "failed",
                        error: string(error),
                        trace: string(trace),
                    };
                    Some(((!nulls[past_at]).then(|| values[past_at]), entry))
                }
                _ => None,
            };
            let mut put = |c: Col, value: Option<pg_sys::Datum>| {
                (values[at(c)], nulls[at(c)]) = match value {
                    Some(v) => (v, false),
                    None => (pg_sys::Datum::from(0), true),
                }
            };
            let mut retry = None;
            match end {
                End::Complete { result } => {
                    if !keeps_history(&queue) {
                        // a queue without history: the statement deletes the job
                        return None;
                    }
                    put(Col::Status, Some(SUCCESS.with(|s| *s)));
                    put(Col::FinishedAt, Some(pg_sys::Datum::from(now_ms)));
                    if let Some(result) = result {
                        put(Col::Result, Some(result));
                    }
                }
                End::Fail { error, trace } => {
                    // n = the attempts that were not handed back; with no
                    // retry left (n > max_retry_count), exhausted for good
                    let n = attempt.saturating_sub(requeues.unwrap_or(0));
                    if max_retry_count.is_some_and(|most| n > most) {
                        put(Col::Status, Some(EXHAUSTED.with(|s| *s)));
                        put(Col::FinishedAt, Some(pg_sys::Datum::from(now_ms)));
                    } else {
                        let delay = crate::backoff::backoff_ms(
                            n,
                            delays[0].unwrap_or(crate::limits::DEFAULT_BACKOFF_BASE_MS),
                            delays[1].unwrap_or(crate::limits::DEFAULT_MIN_RETRY_DELAY_MS),
                            delays[2].unwrap_or(crate::limits::DEFAULT_MAX_RETRY_DELAY_MS),
                        );
                        let due = now_ms.saturating_add(delay);
                        put(Col::Status, Some(FAILED.with(|s| *s)));
                        put(Col::FinishedAt, None);
                        put(Col::ScheduledAt, Some(pg_sys::Datum::from(due)));
                        if let Some((past, entry)) = &history {
                            put(Col::PastAttempts, Some(entry.appended_to(*past)));
                        }
                        retry = Some(Retry { due, max_age, priority });
                    }
                    put(Col::Error, error);
                    put(Col::ErrorTrace, trace);
                }
            }
            put(Col::LeaseExpiresAt, None);
            pg_sys::ExecStoreVirtualTuple(slot);
            if !self.update(&mut (*found).t_self, slot, snapshot) {
                return None;
            }
            let mut free = false;
            let tuple = pg_sys::ExecFetchSlotHeapTuple(slot, false, &mut free);
            let old = pg_sys::MemoryContextSwitchTo(self.caller_context);
            let row = pg_sys::heap_copy_tuple_as_datum(tuple, desc);
            pg_sys::MemoryContextSwitchTo(old);
            Some(EndedRow { row, queue, claimed_at, sets_off: key_period, retry })
        }
    }
}

/// An attempt a direct fail appends to a job's history (past_attempts),
/// as the statements do (src/transitions.rs `past_attempts_set`).
struct PastAttempt {
    attempt: i32,
    worker: Option<String>,
    claimed_at: Option<i64>,
    ended_at: i64,
    outcome: &'static str,
    error: Option<String>,
    trace: Option<String>,
}

impl PastAttempt {
    /// The entry as JSON text, its strings escaped as JSON requires.
    fn json(&self) -> String {
        fn string(s: Option<&str>) -> String {
            let Some(s) = s else { return "null".into() };
            let mut out = String::with_capacity(s.len() + 2);
            out.push('"');
            for c in s.chars() {
                match c {
                    '"' => out.push_str("\\\""),
                    '\\' => out.push_str("\\\\"),
                    c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
                    c => out.push(c),
                }
            }
            out.push('"');
            out
        }
        let number = |n: Option<i64>| n.map_or("null".to_string(), |n| n.to_string());
        format!(
            "[{{\"attempt\": {}, \"worker\": {}, \"claimed_at\": {}, \"ended_at\": {}, \"outcome\": {}, \"error\": {}, \"trace\": {}}}]",
            self.attempt,
            string(self.worker.as_deref()),
            number(self.claimed_at),
            self.ended_at,
            string(Some(self.outcome)),
            string(self.error.as_deref()),
            string(self.trace.as_deref()),
        )
    }

    /// `past` (a jsonb array, or None) with this entry appended, the oldest
    /// dropped first when it holds PAST_ATTEMPTS_KEPT: a jsonb datum in the
    /// current memory context.
    fn appended_to(&self, past: Option<pg_sys::Datum>) -> pg_sys::Datum {
        let text = std::ffi::CString::new(self.json()).expect("no NUL in a text value");
        // SAFETY: jsonb's own input, length, delete and concatenation
        // functions, called with a cstring and jsonb datums.
        unsafe {
            let entry = pgrx::direct_function_call_as_datum(pg_sys::jsonb_in, &[Some(pg_sys::Datum::from(text.as_ptr()))])
                .expect("jsonb_in returns a value");
            let Some(mut past) = past else { return entry };
            let kept = pgrx::direct_function_call::<i32>(pg_sys::jsonb_array_length, &[Some(past)]).unwrap_or(0);
            if kept as usize >= crate::transitions::PAST_ATTEMPTS_KEPT {
                past = pgrx::direct_function_call_as_datum(pg_sys::jsonb_delete_idx, &[Some(past), 0i32.into_datum()])
                    .expect("jsonb - integer returns a value");
            }
            pgrx::direct_function_call_as_datum(pg_sys::jsonb_concat, &[Some(past), Some(entry)]).expect("jsonb || jsonb returns a value")
        }
    }
}

/// What a direct claim asks for (src/claim.rs): up to `batch` of one
/// queue's ready jobs, from its lanes' cursors when they are known
/// (src/cursors.rs), each claimed by `worker` (a text datum, or None), and
/// what becomes of each.
pub struct ClaimRequest<'a> {
    pub queue: &'a str,
    /// Highest priority first; None: the claim finds the priorities.
    pub lanes: Option<&'a [crate::cursors::Lane]>,
    pub batch: usize,
    pub now_ms: i64,
    pub worker: Option<pg_sys::Datum>,
    pub action: Action,
}

/// What a direct claim does with each job it locks (src/claim.rs Mode).
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// rq_claim: claimed, an attempt under a lease of this many ms.
    Lease(i64),
    /// rq_take: nothing written; the row comes back as a claim would make
    /// it (src/take.rs), and this transaction finishes it.
    Take,
    /// rq_take(complete => true): completed in the same write; deleted
    /// instead when the queue keeps no history (`keeps_history` false) and
    /// its end sets nothing off, and then comes back as it ended.
    TakeAndComplete { keeps_history: bool },
}

/// A job claimed directly: its row as the caller returns it (a tuple in the
/// caller's memory), its id and attempt, its place in its lane, how long it
/// waited from due to claimed (ms), and (a take that completes) whether its
/// end sets something off (src/ended.rs).
pub struct ClaimedJob {
    pub row: pg_sys::HeapTuple,
    pub id: pgrx::Uuid,
    pub attempt: i32,
    pub priority: i32,
    pub key: crate::cursors::Key,
    pub waited_ms: i64,
    pub sets_off: bool,
}

/// Claims as `request` asks in the jobs table `table`, whose dependencies
/// table (sql/workflows.sql) is `dependencies`: the statements of
/// sql/claim.ready.sql, sql/claim.lane.sql and sql/claim.lanes.sql (with
/// sql/transition.claim.sql, sql/claim.take.sql, sql/transition.take_complete.sql or
/// sql/transition.take_deleting.sql), written directly. The walk is theirs: along
/// jobs_ready_by_queue_idx, one probe per priority present (or from each
/// known lane's cursor), each priority's due jobs in claim order. Each job
/// is locked as FOR NO KEY UPDATE SKIP LOCKED would lock it, and a row
/// another transaction changed after this statement's snapshot is passed
/// over, as a row locked by one is: another claimer has it, or it is no
/// longer what the snapshot saw. (The planned claim's SKIP LOCKED would
/// look at such a row's newest version again; a claim that passes one
/// returns fewer jobs, never a job twice.) The rows come back in claim
/// order. None, having written nothing, when it may not be done directly
/// (the module's comment; the index not as raquel made it; a transaction
/// in REPEATABLE READ or SERIALIZABLE, whose snapshot and conflicts the
/// planned claim keeps): the caller runs its statement.
pub fn claim(table: pg_sys::Oid, dependencies: pg_sys::Oid, request: &ClaimRequest) -> Option<Vec<ClaimedJob>> {
    // SAFETY: a backend global.
    if unsafe { pg_sys::XactIsoLevel } >= pg_sys::XACT_REPEATABLE_READ as i32 {
        return None;
    }
    let rights: &[u32] = match request.action {
        Action::TakeAndComplete { keeps_history: false } => &[pg_sys::ACL_SELECT, pg_sys::ACL_UPDATE, pg_sys::ACL_DELETE],
        _ => &[pg_sys::ACL_SELECT, pg_sys::ACL_UPDATE],
    };
    // SAFETY: inside a transaction, in a function call: see Writer::open.
    unsafe {
        // whether jobs wait for a job a take completes (its end sets them off)
        let children = match request.action {
            Action::TakeAndComplete { .. } => Some(Dependencies::open(dependencies)?),
            _ => None,
        };
        // as SPI runs a statement that writes (see `complete`)
        pg_sys::CommandCounterIncrement();
        let claimed = Writer::open(table, rights).and_then(|writer| {
            let index = writer.layout.ready_by_queue.and_then(|oid| writer.index(oid));
            let claimed = index.map(|index| {
                let snapshot = pg_sys::RegisterSnapshot(pg_sys::GetTransactionSnapshot());
                let claimed = writer.claim_ready(index, snapshot, children.as_ref(), request);
                pg_sys::UnregisterSnapshot(snapshot);
                claimed
            });
            writer.close();
            claimed
        });
        if let Some(children) = children {
            children.close();
        }
        claimed
    }
}

/// A fair claim's group_max_claimed (src/fair.rs): `max` claimed jobs a
/// group; `lock`, which takes a group's lock for the rest of the
/// transaction, or says another claim holds it; and the most index entries
/// a walk reads (`walk`), so that a claim passing over a large group at its
/// limit stops, as the walk's statement does.
pub struct GroupLimit<'a> {
    pub max: i32,
    pub lock: &'a dyn Fn(&str) -> bool,
    pub walk: usize,
}

/// The fair claim of one queue's grouped jobs (sql/claim.fair.sql, with
/// sql/transition.claim.sql), written directly: the walk along
/// jobs_ready_fair_idx from the queue's start, in the fair order, each due
/// job locked and claimed as `claim` does (a row another transaction holds
/// or changed is passed over). Under a `group_limit`, as
/// sql/claim.fair_walk.sql and sql/claim.fair_group.sql: one job a group a
/// walk, its group's lock taken first and its claimed jobs counted
/// (jobs_group_idx) with a snapshot newer than the lock; walks again while
/// a walk claimed some and the batch is not full. For a claim under a
/// lease only; None, having written nothing, when it may not be done
/// directly (as `claim`; the group index not as raquel made it).
pub fn claim_fair(table: pg_sys::Oid, request: &ClaimRequest, group_limit: Option<&GroupLimit>) -> Option<Vec<ClaimedJob>> {
    // SAFETY: a backend global.
    if unsafe { pg_sys::XactIsoLevel } >= pg_sys::XACT_REPEATABLE_READ as i32 || !matches!(request.action, Action::Lease(_)) {
        return None;
    }
    // SAFETY: inside a transaction, in a function call: see Writer::open.
    unsafe {
        // as SPI runs a statement that writes (see `complete`)
        pg_sys::CommandCounterIncrement();
        Writer::open(table, &[pg_sys::ACL_SELECT, pg_sys::ACL_UPDATE]).and_then(|writer| {
            let index = writer.layout.ready_fair.and_then(|oid| writer.index(oid));
            let group_index = match group_limit {
                Some(_) => writer.layout.group.and_then(|oid| writer.index(oid)).map(Some),
                None => Some(None),
            };
            let claimed = index.zip(group_index).map(|(index, group_index)| {
                let limit = group_limit.zip(group_index);
                let mut claimed = Vec::new();
                loop {
                    let snapshot = pg_sys::RegisterSnapshot(pg_sys::GetTransactionSnapshot());
                    let before = claimed.len();
                    writer.claim_fair_walk(index, snapshot, request, limit, &mut claimed);
                    pg_sys::UnregisterSnapshot(snapshot);
                    if limit.is_none() || claimed.len() == before || claimed.len() >= request.batch {
                        break;
                    }
                    // the next walk, and its counts, see this one's claims
                    pg_sys::CommandCounterIncrement();
                }
                claimed
            });
            writer.close();
            claimed
        })
    }
}

/// An index scan's key: `column` of the index compared by `procedure` (a
/// B-tree strategy's function) with `argument`, in `collation`.
fn scan_key(column: pg_sys::AttrNumber, strategy: u32, procedure: u32, collation: pg_sys::Oid, argument: pg_sys::Datum) -> pg_sys::ScanKeyData {
    // SAFETY: a plain struct, filled in by ScanKeyEntryInitialize.
    unsafe {
        let mut key: pg_sys::ScanKeyData = std::mem::zeroed();
        pg_sys::ScanKeyEntryInitialize(
            &mut key,
            0,
            column,
            strategy as pg_sys::StrategyNumber,
            pg_sys::InvalidOid,
            collation,
            procedure.into(),
            argument,
        );
        key
    }
}

/// An integer result out of range: the error the planned statement's
/// arithmetic raises, naming the job.
fn out_of_range(what: &str, id: &pgrx::Uuid) -> ! {
    crate::errors::Refusal::new(
        PgSqlErrorCode::ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE,
        format!("the claim of job {id} would take its {what} out of range"),
    )
    .raise()
}

impl Writer {
    /// The walk of `claim` along `index` (jobs_ready_by_queue_idx, open),
    /// as `snapshot` sees the jobs.
    ///
    /// # Safety
    /// Open; `snapshot` registered.
    unsafe fn claim_ready(
        &self,
        index: pg_sys::Relation,
        snapshot: pg_sys::Snapshot,
        children: Option<&Dependencies>,
        request: &ClaimRequest,
    ) -> Vec<ClaimedJob> {
        // SAFETY: per the contract above; slots of this writer's executor
        // state; values read as the table's column types.
        unsafe {
            let at = |c: Col| self.layout.at[c as usize];
            if request.action != Action::Take {
                self.note_updated(&[Col::Status, Col::Attempts, Col::ClaimedBy, Col::ClaimedAt, Col::LeaseExpiresAt, Col::FinishedAt]);
            }
            // two scans, as a rescan keeps the number of keys a scan began
            // with: the probe for a priority (queue, priority) and the walk
            // of one (queue, priority, and two more)
            let (probe, scan) = (self.begin_scan(index, snapshot, 2), self.begin_scan(index, snapshot, 4));
            let (found, locked, new) = (self.slot(), self.slot(), self.slot());
            let natts = (*(*self.rel).rd_att).natts as usize;
            // the queue as its index column compares it
            let collation = *(*index).rd_indcollation;
            let queue = request.queue.into_datum().unwrap_or(pg_sys::Datum::from(0));
            let queue_key = scan_key(1, pg_sys::BTEqualStrategyNumber, pg_sys::F_TEXTEQ, collation, queue);
            let mut claimed = Vec::with_capacity(request.batch.min(1000));
            // Finds the highest priority present below `below` (any: None).
            let highest = |below: Option<i32>| -> Option<i32> {
                let priority = match below {
                    Some(below) => scan_key(2, pg_sys::BTLessStrategyNumber, pg_sys::F_INT4LT, pg_sys::InvalidOid, below.into()),
                    None => scan_key(2, pg_sys::BTLessEqualStrategyNumber, pg_sys::F_INT4LE, pg_sys::InvalidOid, i32::MAX.into()),
                };
                let mut keys = [queue_key, priority];
                pg_sys::index_rescan(probe, keys.as_mut_ptr(), 2, std::ptr::null_mut(), 0);
                if !pg_sys::index_getnext_slot(probe, pg_sys::ScanDirection::ForwardScanDirection, found) {
                    return None;
                }
                let mut null = false;
                let priority = pg_sys::slot_getattr(found, (at(Col::Priority) + 1) as i32, &mut null);
                (!null).then(|| priority.value() as i32)
            };
            // Claims the due jobs of `priority` in claim order, from `from`
            // on: from a cursor, the jobs due when it is (from its id on),
            // then those due after, each part a scan positioned where it
            // starts (a key on scheduled_at alone would start at the first
            // job due in that millisecond, and step over every claimed
            // job's entry of it that vacuum has not removed)
            let walk = |priority: i32, from: crate::cursors::Key, claimed: &mut Vec<ClaimedJob>| {
                let priority_key = scan_key(2, pg_sys::BTEqualStrategyNumber, pg_sys::F_INT4EQ, pg_sys::InvalidOid, priority.into());
                let due_by_now = scan_key(3, pg_sys::BTLessEqualStrategyNumber, pg_sys::F_INT8LE, pg_sys::InvalidOid, request.now_ms.into());
                let mut parts = Vec::with_capacity(2);
                if from == crate::cursors::START {
                    let any = scan_key(3, pg_sys::BTGreaterEqualStrategyNumber, pg_sys::F_INT8GE, pg_sys::InvalidOid, i64::MIN.into());
                    parts.push([queue_key, priority_key, any, due_by_now]);
                } else {
                    if from.0 <= request.now_ms {
                        let id = pgrx::Uuid::from_bytes(from.1).into_datum().unwrap_or(pg_sys::Datum::from(0));
                        parts.push([
                            queue_key,
                            priority_key,
                            scan_key(3, pg_sys::BTEqualStrategyNumber, pg_sys::F_INT8EQ, pg_sys::InvalidOid, from.0.into()),
                            scan_key(4, pg_sys::BTGreaterEqualStrategyNumber, pg_sys::F_UUID_GE, pg_sys::InvalidOid, id),
                        ]);
                    }
                    let after = scan_key(3, pg_sys::BTGreaterStrategyNumber, pg_sys::F_INT8GT, pg_sys::InvalidOid, from.0.into());
                    parts.push([queue_key, priority_key, after, due_by_now]);
                }
                for mut keys in parts {
                    if claimed.len() >= request.batch {
                        break;
                    }
                    pg_sys::index_rescan(scan, keys.as_mut_ptr(), 4, std::ptr::null_mut(), 0);
                    while claimed.len() < request.batch
                        && pg_sys::index_getnext_slot(scan, pg_sys::ScanDirection::ForwardScanDirection, found)
                    {
                        if let Some(job) = self.claim_found(found, locked, new, natts, snapshot, children, priority, from, request, false) {
                            claimed.push(job);
                        }
                    }
                }
            };
            match request.lanes {
                Some(lanes) => {
                    for lane in lanes {
                        if claimed.len() >= request.batch {
                            break;
                        }
                        walk(lane.priority, lane.cursor, &mut claimed);
                    }
                }
                None => {
                    let mut below = None;
                    while claimed.len() < request.batch {
                        let Some(priority) = highest(below) else { break };
                        walk(priority, crate::cursors::START, &mut claimed);
                        below = Some(priority);
                    }
                }
            }
            pg_sys::index_endscan(probe);
            pg_sys::index_endscan(scan);
            claimed
        }
    }

    /// A walk of `claim_fair` along `index` (jobs_ready_fair_idx, open),
    /// as `snapshot` sees the jobs, adding to `claimed`; under a group
    /// limit (with jobs_group_idx, open), one job a group.
    ///
    /// # Safety
    /// Open; `snapshot` registered.
    unsafe fn claim_fair_walk(
        &self,
        index: pg_sys::Relation,
        snapshot: pg_sys::Snapshot,
        request: &ClaimRequest,
        limit: Option<(&GroupLimit, pg_sys::Relation)>,
        claimed: &mut Vec<ClaimedJob>,
    ) {
        // SAFETY: per the contract above; slots of this writer's executor
        // state; values read as the table's column types.
        unsafe {
            self.note_updated(&[Col::Status, Col::Attempts, Col::ClaimedBy, Col::ClaimedAt, Col::LeaseExpiresAt, Col::FinishedAt]);
            let scan = self.begin_scan(index, snapshot, 1);
            let (found, locked, new) = (self.slot(), self.slot(), self.slot());
            let natts = (*(*self.rel).rd_att).natts as usize;
            // the queue as its index column compares it
            let collation = *(*index).rd_indcollation;
            let queue = request.queue.into_datum().unwrap_or(pg_sys::Datum::from(0));
            let mut keys = [scan_key(1, pg_sys::BTEqualStrategyNumber, pg_sys::F_TEXTEQ, collation, queue)];
            pg_sys::index_rescan(scan, keys.as_mut_ptr(), 1, std::ptr::null_mut(), 0);
            let priority_at = (self.layout.at[Col::Priority as usize] + 1) as i32;
            let group_at = (self.layout.at[Col::GroupKey as usize] + 1) as i32;
            let scheduled_at = (self.layout.at[Col::ScheduledAt as usize] + 1) as i32;
            let max_age_at = (self.layout.at[Col::MaxAge as usize] + 1) as i32;
            let mut tried: Vec<String> = Vec::new();
            let counted = if limit.is_some() { self.slot() } else { std::ptr::null_mut() };
            let mut read = 0;
            while claimed.len() < request.batch && pg_sys::index_getnext_slot(scan, pg_sys::ScanDirection::ForwardScanDirection, found) {
                read += 1;
                if limit.is_some_and(|(limit, _)| read > limit.walk) {
                    break;
                }
                let mut null = false;
                let priority = pg_sys::slot_getattr(found, priority_at, &mut null).value() as i32;
                if null {
                    continue;
                }
                if let Some((limit, group_index)) = limit {
                    // only a due job's group is locked, as the walk's
                    // statement names due jobs only (sql/claim.fair_walk.sql)
                    let due = pg_sys::slot_getattr(found, scheduled_at, &mut null).value() as i64;
                    if null || due > request.now_ms {
                        continue;
                    }
                    let age = pg_sys::slot_getattr(found, max_age_at, &mut null).value() as i64;
                    if !null && due.saturating_add(age) <= request.now_ms {
                        continue;
                    }
                    let group = pg_sys::slot_getattr(found, group_at, &mut null);
                    let Some(group) = <&str>::from_datum(group, null) else { continue };
                    if tried.iter().any(|g| g == group) {
                        continue;
                    }
                    tried.push(group.to_owned());
                    if !(limit.lock)(group) || self.claimed_in_group(group_index, counted, request.queue, group, limit.max) >= limit.max {
                        continue;
                    }
                }
                let start = crate::cursors::START;
                if let Some(job) = self.claim_found(found, locked, new, natts, snapshot, None, priority, start, request, true) {
                    claimed.push(job);
                }
            }
            pg_sys::index_endscan(scan);
        }
    }

    /// How many jobs of `group` of `queue` are claimed (up to `max`), as a
    /// snapshot taken now sees them, along `index` (jobs_group_idx, open),
    /// each read into `row`. (A claimed job's entry there is the row's:
    /// an update that changes its status is never HOT.)
    ///
    /// # Safety
    /// Open; `row` a slot of this writer's.
    unsafe fn claimed_in_group(&self, index: pg_sys::Relation, row: *mut pg_sys::TupleTableSlot, queue: &str, group: &str, max: i32) -> i32 {
        // SAFETY: per the contract above.
        unsafe {
            let snapshot = pg_sys::RegisterSnapshot(pg_sys::GetLatestSnapshot());
            let scan = self.begin_scan(index, snapshot, 3);
            let collations = std::slice::from_raw_parts((*index).rd_indcollation, 3);
            let text = |value: &str| value.into_datum().unwrap_or(pg_sys::Datum::from(0));
            let mut keys = [
                scan_key(1, pg_sys::BTEqualStrategyNumber, pg_sys::F_TEXTEQ, collations[0], text(queue)),
                scan_key(2, pg_sys::BTEqualStrategyNumber, pg_sys::F_TEXTEQ, collations[1], text(group)),
                scan_key(3, pg_sys::BTEqualStrategyNumber, pg_sys::F_TEXTEQ, collations[2], text("claimed")),
            ];
            pg_sys::index_rescan(scan, keys.as_mut_ptr(), 3, std::ptr::null_mut(), 0);
            let mut count = 0;
            while count < max && pg_sys::index_getnext_slot(scan, pg_sys::ScanDirection::ForwardScanDirection, row) {
                count += 1;
            }
            pg_sys::index_endscan(scan);
            pg_sys::UnregisterSnapshot(snapshot);
            count
        }
    }

    /// The job in `found` (a ready index entry's row, as the snapshot sees
    /// it): when it is due, not past its age and at or after `from`,
    /// locked (skipping a row another transaction holds or changed) and
    /// claimed, taken or completed as `request.action` says. `locked` and
    /// `new` are slots of this writer's for the locked row and the new one;
    /// `children` (a take that completes), where its dependents are.
    ///
    /// # Safety
    /// Open; the slots are this writer's; `snapshot` registered.
    #[allow(clippy::too_many_arguments)]
    unsafe fn claim_found(
        &self,
        found: *mut pg_sys::TupleTableSlot,
        locked: *mut pg_sys::TupleTableSlot,
        new: *mut pg_sys::TupleTableSlot,
        natts: usize,
        snapshot: pg_sys::Snapshot,
        children: Option<&Dependencies>,
        priority: i32,
        from: crate::cursors::Key,
        request: &ClaimRequest,
        grouped: bool,
    ) -> Option<ClaimedJob> {
        // SAFETY: per the contract above.
        unsafe {
            let at = |c: Col| self.layout.at[c as usize];
            pg_sys::slot_getallattrs(found);
            let values = std::slice::from_raw_parts((*found).tts_values, natts);
            let nulls = std::slice::from_raw_parts((*found).tts_isnull, natts);
            let int8 = |c: Col| (!nulls[at(c)]).then(|| values[at(c)].value() as i64);
            // the index's predicate and the statement's conditions, of the row
            let status = (!nulls[at(Col::Status)]).then(|| <&str>::from_datum(values[at(Col::Status)], false)).flatten();
            if !matches!(status, Some("queued" | "failed")) || nulls[at(Col::GroupKey)] == grouped {
                return None;
            }
            let due = int8(Col::ScheduledAt)?;
            let id = pgrx::Uuid::from_datum(values[at(Col::Id)], nulls[at(Col::Id)])?;
            let key = (due, crate::cursors::id_bytes(&id));
            if key < from || due > request.now_ms {
                return None;
            }
            if int8(Col::MaxAge).is_some_and(|age| due.saturating_add(age) <= request.now_ms) {
                return None;
            }
            let mut tid = (*found).tts_tid;
            let mut failure: pg_sys::TM_FailureData = std::mem::zeroed();
            let lock = pg_sys::table_tuple_lock(
                self.rel,
                &mut tid,
                snapshot,
                locked,
                (*self.estate).es_output_cid,
                pg_sys::LockTupleMode::LockTupleNoKeyExclusive,
                pg_sys::LockWaitPolicy::LockWaitSkip,
                0,
                &mut failure,
            );
            if lock != pg_sys::TM_Result::TM_Ok {
                // held by another transaction (a claimer), or changed since the snapshot
                return None;
            }
            // the row as locked: the version the snapshot saw
            pg_sys::slot_getallattrs(locked);
            pg_sys::ExecClearTuple(new);
            let values = std::slice::from_raw_parts_mut((*new).tts_values, natts);
            let nulls = std::slice::from_raw_parts_mut((*new).tts_isnull, natts);
            values.copy_from_slice(std::slice::from_raw_parts((*locked).tts_values, natts));
            nulls.copy_from_slice(std::slice::from_raw_parts((*locked).tts_isnull, natts));
            let attempts = (!nulls[at(Col::Attempts)]).then(|| values[at(Col::Attempts)].value() as i32).unwrap_or(0);
            // (a take writes nothing: its statement returns the attempt at
            // the largest integer rather than refuse the job)
            let attempt = match request.action {
                Action::Take => attempts.saturating_add(1),
                _ => attempts.checked_add(1).unwrap_or_else(|| out_of_range("attempts", &id)),
            };
            let (status, lease_expires_at, finished_at) = match request.action {
                Action::Lease(lease_ms) => {
                    let lease_expires_at = request.now_ms.checked_add(lease_ms).unwrap_or_else(|| out_of_range("lease", &id));
                    (CLAIMED.with(|c| *c), Some(pg_sys::Datum::from(lease_expires_at)), None)
                }
                Action::Take => (CLAIMED.with(|c| *c), None, None),
                Action::TakeAndComplete { .. } => (SUCCESS.with(|s| *s), None, Some(pg_sys::Datum::from(request.now_ms))),
            };
            let sets_off = match request.action {
                Action::TakeAndComplete { .. } => !nulls[at(Col::KeyPeriod)] || children.is_some_and(|c| c.has_children(snapshot, id)),
                _ => false,
            };
            let mut set = |c: Col, value: Option<pg_sys::Datum>| {
                (values[at(c)], nulls[at(c)]) = (value.unwrap_or(pg_sys::Datum::from(0)), value.is_none());
            };
            set(Col::Status, Some(status));
            set(Col::Attempts, Some(pg_sys::Datum::from(attempt)));
            set(Col::ClaimedBy, request.worker);
            set(Col::ClaimedAt, Some(pg_sys::Datum::from(request.now_ms)));
            set(Col::LeaseExpiresAt, lease_expires_at);
            set(Col::FinishedAt, finished_at);
            pg_sys::ExecStoreVirtualTuple(new);
            let write = match request.action {
                // a take writes nothing: the row lock is its lease
                Action::Take => Write::Nothing,
                Action::TakeAndComplete { keeps_history: false } if !sets_off => Write::Delete,
                _ => Write::Update,
            };
            if write == Write::Delete {
                // the row comes back with its large values of its own, not
                // pointing to what the delete removes (as the statement's
                // whole-row value)
                let attributes = pgrx::PgTupleDesc::from_pg_unchecked((*self.rel).rd_att);
                for (i, attribute) in attributes.iter().enumerate() {
                    if !nulls[i] && attribute.attlen == -1 {
                        values[i] = pg_sys::Datum::from(pg_sys::pg_detoast_datum_packed(values[i].cast_mut_ptr()));
                    }
                }
            }
            // the row is locked by this transaction: the write does not wait,
            // and cannot be refused
            if !self.write_locked(&mut tid, new, snapshot, write) {
                pgrx::error!("raquel: the claim of job {id} could not write the row it had locked");
            }
            let old = pg_sys::MemoryContextSwitchTo(self.caller_context);
            let row = pg_sys::ExecCopySlotHeapTuple(new);
            pg_sys::MemoryContextSwitchTo(old);
            Some(ClaimedJob { row, id, attempt, priority, key, waited_ms: request.now_ms - due, sets_off })
        }
    }
}

/// What a direct claim writes of a row it locked.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Write {
    Nothing,
    Update,
    Delete,
}

impl Writer {
    /// Writes the row at `tid`, which this transaction has locked, as
    /// `write` says: its new version from `new` (and that version's index
    /// entries when the update is not HOT), or its deletion. False when the
    /// table refuses (never, for a row this transaction holds).
    ///
    /// # Safety
    /// Open; `new` is this writer's slot, stored; `snapshot` registered.
    unsafe fn write_locked(&self, tid: &mut pg_sys::ItemPointerData, new: *mut pg_sys::TupleTableSlot, snapshot: pg_sys::Snapshot, write: Write) -> bool {
        // SAFETY: per the contract above.
        unsafe {
            match write {
                Write::Nothing => true,
                Write::Delete => {
                    let mut failure: pg_sys::TM_FailureData = std::mem::zeroed();
                    let cid = (*self.estate).es_output_cid;
                    pg_sys::table_tuple_delete(self.rel, tid, cid, snapshot, std::ptr::null_mut(), true, &mut failure, false)
                        == pg_sys::TM_Result::TM_Ok
                }
                Write::Update => self.update(tid, new, snapshot),
            }
        }
    }

    /// Updates the row at `tid` to the new version in `slot` (waiting for a
    /// transaction that holds the row, as an UPDATE does), with that
    /// version's index entries when the update is not HOT. False when the
    /// row was changed or deleted by another transaction meanwhile.
    ///
    /// # Safety
    /// Open; `slot` is this writer's, stored; `snapshot` registered.
    unsafe fn update(&self, tid: &mut pg_sys::ItemPointerData, slot: *mut pg_sys::TupleTableSlot, snapshot: pg_sys::Snapshot) -> bool {
        // SAFETY: per the contract above.
        unsafe {
            let mut failure: pg_sys::TM_FailureData = std::mem::zeroed();
            let mut lock_mode: pg_sys::LockTupleMode::Type = 0;
            #[cfg(feature = "pg15")]
            let mut update_indexes = false;
            #[cfg(not(feature = "pg15"))]
            let mut update_indexes = pg_sys::TU_UpdateIndexes::TU_None;
            let outcome = pg_sys::table_tuple_update(
                self.rel,
                tid,
                slot,
                (*self.estate).es_output_cid,
                snapshot,
                std::ptr::null_mut(),
                true,
                &mut failure,
                &mut lock_mode,
                &mut update_indexes,
            );
            if outcome != pg_sys::TM_Result::TM_Ok {
                return false;
            }
            #[cfg(feature = "pg15")]
            if update_indexes {
                self.index_entries(slot, true, false);
            }
            #[cfg(not(feature = "pg15"))]
            if update_indexes != pg_sys::TU_UpdateIndexes::TU_None {
                self.index_entries(slot, true, update_indexes == pg_sys::TU_UpdateIndexes::TU_Summarizing);
            }
            true
        }
    }
}

/// The row of `rel` whose column `attno` (a uuid) is `id`, as `snapshot`
/// sees it, through the unique index `index`: a copy, its t_self set.
///
/// # Safety
/// `rel` is open; `snapshot` registered.
unsafe fn find(
    rel: pg_sys::Relation,
    index: pg_sys::Oid,
    attno: pg_sys::AttrNumber,
    snapshot: pg_sys::Snapshot,
    id: pgrx::Uuid,
) -> Option<pg_sys::HeapTuple> {
    // SAFETY: per the contract above.
    unsafe {
        let mut key: pg_sys::ScanKeyData = std::mem::zeroed();
        let id = id.into_datum()?;
        pg_sys::ScanKeyInit(&mut key, attno, pg_sys::BTEqualStrategyNumber as pg_sys::StrategyNumber, pg_sys::F_UUID_EQ.into(), id);
        let scan = pg_sys::systable_beginscan(rel, index, true, snapshot, 1, &mut key);
        let tuple = pg_sys::systable_getnext(scan);
        let found = (!tuple.is_null()).then(|| pg_sys::heap_copytuple(tuple));
        pg_sys::systable_endscan(scan);
        found
    }
}

/// The dependencies table (sql/workflows.sql), open, and how to find the
/// jobs waiting for a job in it: its primary key (parent_id, child_id) and
/// parent_id's attribute number.
struct Dependencies {
    rel: pg_sys::Relation,
    key: pg_sys::Oid,
    parent: pg_sys::AttrNumber,
}

impl Dependencies {
    /// Opens the dependencies table `dependencies`; None when the role may
    /// not read it as the statement would, or its rows are behind row
    /// security.
    ///
    /// # Safety
    /// Inside a transaction.
    unsafe fn open(dependencies: pg_sys::Oid) -> Option<Dependencies> {
        if dependencies == pg_sys::InvalidOid {
            return None;
        }
        // SAFETY: per the contract above; the relation's index list is
        // read as the executor does.
        unsafe {
            if pg_sys::pg_class_aclcheck(dependencies, pg_sys::GetUserId(), pg_sys::ACL_SELECT as pg_sys::AclMode)
                != pg_sys::AclResult::ACLCHECK_OK
            {
                return None;
            }
            let rel = pg_sys::table_open(dependencies, pg_sys::AccessShareLock as pg_sys::LOCKMODE);
            pg_sys::list_free(pg_sys::RelationGetIndexList(rel));
            let found = Dependencies { rel, key: (*rel).rd_pkindex, parent: pg_sys::get_attnum(dependencies, c"parent_id".as_ptr()) };
            if (*(*rel).rd_rel).relrowsecurity || found.key == pg_sys::InvalidOid || found.parent <= 0 {
                found.close();
                return None;
            }
            Some(found)
        }
    }

    /// Whether some job waits for job `id`: a row with it as parent, as
    /// `snapshot` sees it.
    ///
    /// # Safety
    /// `snapshot` registered.
    unsafe fn has_children(&self, snapshot: pg_sys::Snapshot, id: pgrx::Uuid) -> bool {
        // SAFETY: per the contract above; the relation is open.
        unsafe { find(self.rel, self.key, self.parent, snapshot, id) }.is_some()
    }

    /// Closes the table, keeping its lock to the end of the transaction.
    ///
    /// # Safety
    /// Open.
    unsafe fn close(self) {
        // SAFETY: per the contract above.
        unsafe { pg_sys::table_close(self.rel, pg_sys::NoLock as pg_sys::LOCKMODE) }
    }
}
