//! rq_step on the direct path: the statement of sql/steps.record.sql (the
//! job's row locked FOR SHARE while it is claimed as the attempt, then the
//! step's row inserted unless it is there) written as src/direct.rs writes
//! the jobs table. A step is recorded once per step of every durable job,
//! beside the step's own effect: its statement's executor set-up cost more
//! than the effect's INSERT (docs/src/design/hot-path.md).
//!
//! It declines, having written nothing, and the statement runs, which says
//! why or does what an INSERT does: when the direct path may not be tried
//! (src/direct.rs), the jobs table is not as raquel made it, job_steps is
//! not (a trigger, a rule, row security, a CHECK, a column or an index that
//! is not raquel's kind, a partition), the job is not claimed as the
//! attempt, its row changed
//! since this statement's snapshot, or the step is recorded already. The
//! job's row is locked before the step is looked for, as the statement
//! locks it: a declined step may leave it locked FOR SHARE, which the
//! statement then takes again (nothing more is written).
//!
//! One difference from the statement: two sessions recording the same
//! step of the same claim at the same instant (only the claim's own worker
//! can) both pass the look for the step; the later insert then fails with
//! PostgreSQL's unique violation (23505, naming the key), where the
//! statement's `ON CONFLICT DO NOTHING` leads to raquel's "already
//! recorded" (23505 too).

use super::{allowed, find, plain_heap, read, Col, Layout};
use pgrx::prelude::*;

/// A step to record (rq_step, src/steps.rs): step `name` (a text datum)
/// of job `id` claimed as `attempt`, with `result` (a jsonb datum, or
/// None), at `now_ms`.
pub struct NewStep {
    pub id: pgrx::Uuid,
    pub attempt: i32,
    pub name: pg_sys::Datum,
    pub result: Option<pg_sys::Datum>,
    pub now_ms: i64,
}

/// job_steps's columns as sql/steps.sql makes them (name, type, NOT
/// NULL, required), in the order a new step's values are given (`insert`).
/// kind and passed_by came with 0.6.0: a table of 0.5.0's not yet updated
/// has neither.
const STEP_COLUMNS: [(&str, pg_sys::Oid, bool, bool); 7] = [
    ("job_id", pg_sys::UUIDOID, true, true),
    ("name", pg_sys::TEXTOID, true, true),
    ("result", pg_sys::JSONBOID, false, true),
    ("attempt", pg_sys::INT4OID, true, true),
    ("recorded_at", pg_sys::INT8OID, true, true),
    ("kind", pg_sys::TEXTOID, true, false),
    ("passed_by", pg_sys::INT4OID, false, false),
];

thread_local! {
    /// The kind of a step rq_step records (sql/steps.sql), made once per backend.
    static STEP: pg_sys::Datum = super::lasting_text(c"step");
}

/// Records `step` in the table `steps` (job_steps) of the job in `table`
/// (jobs), and returns its row (a composite datum of job_steps's type in
/// the current memory context); None, having written no step, where the
/// statement is to run (see the module's comment).
pub fn record(table: pg_sys::Oid, steps: pg_sys::Oid, step: &NewStep) -> Option<pg_sys::Datum> {
    if !allowed() || table == pg_sys::InvalidOid || steps == pg_sys::InvalidOid {
        return None;
    }
    // SAFETY: inside a transaction, in a function call; an error anywhere
    // after is an ERROR whose abort releases the relations, locks, pins,
    // snapshot and the executor state's memory.
    unsafe {
        // the rights the statement needs, of the role the verb runs as: to
        // lock a job's row (FOR SHARE) and to insert and return a step
        let user = pg_sys::GetUserId();
        let may = |relation: pg_sys::Oid, right: u32| {
            pg_sys::pg_class_aclcheck(relation, user, right as pg_sys::AclMode) == pg_sys::AclResult::ACLCHECK_OK
        };
        if !(may(table, pg_sys::ACL_SELECT) && may(table, pg_sys::ACL_UPDATE) && may(steps, pg_sys::ACL_INSERT) && may(steps, pg_sys::ACL_SELECT)) {
            return None;
        }
        // as SPI runs a statement that writes: what this transaction did
        // before is seen, and the written row gets the command's id
        pg_sys::CommandCounterIncrement();
        let jobs = pg_sys::table_open(table, pg_sys::RowShareLock as pg_sys::LOCKMODE);
        // (the first read of the table in a backend opens each of its
        // indexes, with RowExclusiveLock, to build their infos: once)
        let layout = read(jobs).map(|(layout, _)| layout);
        let row = layout.and_then(|layout| {
            let id_key = layout.id_key?;
            // the statement's snapshot: a new one in READ COMMITTED, the
            // transaction's otherwise
            let snapshot = pg_sys::RegisterSnapshot(pg_sys::GetTransactionSnapshot());
            let cid = pg_sys::GetCurrentCommandId(true);
            let row = lock_claimed(jobs, &layout, id_key, snapshot, cid, step)
                .then(|| insert(steps, cid, step))
                .flatten();
            pg_sys::UnregisterSnapshot(snapshot);
            row
        });
        pg_sys::table_close(jobs, pg_sys::NoLock as pg_sys::LOCKMODE);
        if row.is_some() {
            pg_sys::CommandCounterIncrement();
        }
        row
    }
}

/// Whether the job of `step`, as `snapshot` sees it through the primary
/// key `id_key`, is claimed as the step's attempt, and is now locked FOR
/// SHARE (waiting for a transaction that holds it, as the statement does):
/// false when it is not, or changed after the snapshot.
///
/// # Safety
/// `jobs` is open; `snapshot` registered.
unsafe fn lock_claimed(
    jobs: pg_sys::Relation,
    layout: &Layout,
    id_key: pg_sys::Oid,
    snapshot: pg_sys::Snapshot,
    cid: pg_sys::CommandId,
    step: &NewStep,
) -> bool {
    let at = |c: Col| layout.at[c as usize];
    // SAFETY: per the contract above; the found row is read as the table's
    // column types (Layout), and locked through its own slot.
    unsafe {
        let Some(found) = find(jobs, id_key, (at(Col::Id) + 1) as pg_sys::AttrNumber, snapshot, step.id) else {
            return false;
        };
        let desc = (*jobs).rd_att;
        let natts = (*desc).natts as usize;
        let (mut values, mut nulls) = (vec![pg_sys::Datum::from(0); natts], vec![true; natts]);
        pg_sys::heap_deform_tuple(found, desc, values.as_mut_ptr(), nulls.as_mut_ptr());
        let claimed = !nulls[at(Col::Status)] && <&str>::from_datum(values[at(Col::Status)], false) == Some("claimed");
        let attempts = (!nulls[at(Col::Attempts)]).then(|| values[at(Col::Attempts)].value() as i32);
        if !claimed || attempts != Some(step.attempt) {
            return false;
        }
        let slot = pg_sys::table_slot_create(jobs, std::ptr::null_mut());
        let mut tid = (*found).t_self;
        let mut failure: pg_sys::TM_FailureData = std::mem::zeroed();
        let lock = pg_sys::table_tuple_lock(
            jobs,
            &mut tid,
            snapshot,
            slot,
            cid,
            pg_sys::LockTupleMode::LockTupleShare,
            pg_sys::LockWaitPolicy::LockWaitBlock,
            0,
            &mut failure,
        );
        pg_sys::ExecDropSingleTupleTableSlot(slot);
        lock == pg_sys::TM_Result::TM_Ok
    }
}

/// Where each of STEP_COLUMNS is in `rel`'s rows (attribute number - 1;
/// usize::MAX for a column it need not have and has not), or None when
/// job_steps is not as raquel made it: a plain heap table
/// (not a partition) without row security, rules, triggers, CHECK
/// constraints or generated columns, with those columns alone, each of
/// its type (no domain) and NOT NULL as made.
///
/// # Safety
/// `rel` is open.
unsafe fn step_layout(rel: pg_sys::Relation) -> Option<[usize; STEP_COLUMNS.len()]> {
    // SAFETY: the relation's cache entry and descriptors, while it is open.
    unsafe {
        if !plain_heap(rel) || !(*rel).trigdesc.is_null() {
            return None;
        }
        let desc = (*rel).rd_att;
        let mut at = [usize::MAX; STEP_COLUMNS.len()];
        for (i, attr) in pgrx::PgTupleDesc::from_pg_unchecked(desc).iter().enumerate() {
            if attr.attisdropped {
                continue;
            }
            let name = std::ffi::CStr::from_ptr(attr.attname.data.as_ptr()).to_str().ok()?;
            let c = STEP_COLUMNS.iter().position(|(n, ..)| *n == name)?;
            let (_, type_oid, not_null, _) = STEP_COLUMNS[c];
            if at[c] != usize::MAX || attr.atttypid != type_oid || attr.attnotnull != not_null {
                return None;
            }
            at[c] = i;
        }
        STEP_COLUMNS.iter().zip(at).all(|((.., required), a)| !required || a != usize::MAX).then_some(at)
    }
}

/// Inserts `step` into job_steps (`steps`) unless it is recorded already,
/// with its index entries, as an INSERT would; its row, in the caller's
/// memory, or None, having written nothing, where the statement is to run.
///
/// # Safety
/// Inside a transaction; the job's row is locked.
unsafe fn insert(steps: pg_sys::Oid, cid: pg_sys::CommandId, step: &NewStep) -> Option<pg_sys::Datum> {
    // SAFETY: per the contract above; the executor state is set up as
    // execReplication.c's apply sets one up, and freed here.
    unsafe {
        let rel = pg_sys::table_open(steps, pg_sys::RowExclusiveLock as pg_sys::LOCKMODE);
        let Some(at) = step_layout(rel) else {
            pg_sys::table_close(rel, pg_sys::NoLock as pg_sys::LOCKMODE);
            return None;
        };
        let caller = pg_sys::CurrentMemoryContext;
        let estate = pg_sys::CreateExecutorState();
        pg_sys::MemoryContextSwitchTo((*estate).es_query_cxt);
        (*estate).es_output_cid = cid;
        let info = pg_sys::palloc0(std::mem::size_of::<pg_sys::ResultRelInfo>()) as *mut pg_sys::ResultRelInfo;
        (*info).type_ = pg_sys::NodeTag::T_ResultRelInfo;
        pg_sys::InitResultRelInfo(info, rel, 1, std::ptr::null_mut(), 0);
        // speculative: the unique indexes' operators for the look below
        pg_sys::ExecOpenIndices(info, true);
        // B-tree indexes checked at once (no deferred unique, no exclusion)
        let indexes_as_made = (0..(*info).ri_NumIndices as usize).all(|i| {
            let index = *(*info).ri_IndexRelationDescs.add(i);
            let form = (*index).rd_index;
            (*(*index).rd_rel).relam == pg_sys::BTREE_AM_OID && (*form).indimmediate && !(*form).indisexclusion
        });
        let slot = pg_sys::table_slot_create(rel, &mut (*estate).es_tupleTable);
        let row = indexes_as_made
            .then(|| {
                pg_sys::ExecClearTuple(slot);
                let natts = (*(*rel).rd_att).natts as usize;
                let values = std::slice::from_raw_parts_mut((*slot).tts_values, natts);
                let nulls = std::slice::from_raw_parts_mut((*slot).tts_isnull, natts);
                nulls.fill(true);
                let given = [
                    step.id.into_datum(),
                    Some(step.name),
                    step.result,
                    step.attempt.into_datum(),
                    step.now_ms.into_datum(),
                    Some(STEP.with(|k| *k)),
                    None,
                ];
                for (c, value) in given.into_iter().enumerate() {
                    if at[c] == usize::MAX {
                        continue;
                    }
                    if let Some(value) = value {
                        (values[at[c]], nulls[at[c]]) = (value, false);
                    }
                }
                pg_sys::ExecStoreVirtualTuple(slot);
                // recorded already (committed, or by a transaction it waits
                // for): the statement says by which attempt
                let mut conflict: pg_sys::ItemPointerData = std::mem::zeroed();
                #[cfg(not(feature = "pg18"))]
                let free = pg_sys::ExecCheckIndexConstraints(info, slot, estate, &mut conflict, std::ptr::null_mut());
                #[cfg(feature = "pg18")]
                let free =
                    pg_sys::ExecCheckIndexConstraints(info, slot, estate, &mut conflict, std::ptr::null_mut(), std::ptr::null_mut());
                if !free {
                    return None;
                }
                pg_sys::simple_table_tuple_insert(rel, slot);
                #[cfg(feature = "pg15")]
                let recheck =
                    pg_sys::ExecInsertIndexTuples(info, slot, estate, false, false, std::ptr::null_mut(), std::ptr::null_mut());
                #[cfg(not(feature = "pg15"))]
                let recheck = pg_sys::ExecInsertIndexTuples(
                    info,
                    slot,
                    estate,
                    false,
                    false,
                    std::ptr::null_mut(),
                    std::ptr::null_mut(),
                    false,
                );
                pg_sys::list_free(recheck);
                let mut free_tuple = false;
                let tuple = pg_sys::ExecFetchSlotHeapTuple(slot, false, &mut free_tuple);
                let old = pg_sys::MemoryContextSwitchTo(caller);
                let row = pg_sys::heap_copy_tuple_as_datum(tuple, (*rel).rd_att);
                pg_sys::MemoryContextSwitchTo(old);
                Some(row)
            })
            .flatten();
        pg_sys::ExecCloseIndices(info);
        pg_sys::MemoryContextSwitchTo(caller);
        pg_sys::ExecResetTupleTable((*estate).es_tupleTable, false);
        pg_sys::FreeExecutorState(estate);
        pg_sys::table_close(rel, pg_sys::NoLock as pg_sys::LOCKMODE);
        row
    }
}
