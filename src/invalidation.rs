//! What a backend keeps in memory about a table (flow settings, whether the
//! jobs table is distributed) is forgotten the way PostgreSQL forgets its own
//! caches: when the table's relcache entry is invalidated. One callback,
//! registered once per backend, calls each keeper's `forget`.

use pgrx::prelude::*;
use std::cell::{Cell, RefCell};

/// A keeper (by name), the relations it watches, and what it forgets.
type Watch = (&'static str, Vec<pg_sys::Oid>, fn());

thread_local! {
    static WATCHES: RefCell<Vec<Watch>> = const { RefCell::new(Vec::new()) };
    static CALLBACK_REGISTERED: Cell<bool> = const { Cell::new(false) };
}

/// From now on in this backend, calls `forget` when `table` (or every
/// relation) is invalidated. A keeper's later call replaces its table.
pub fn forget_when_changed(keeper: &'static str, table: pg_sys::Oid, forget: fn()) {
    forget_when_any_changed(keeper, vec![table], forget)
}

/// The same for several relations (a table and its indexes): `forget` is
/// called when any of them is invalidated.
pub fn forget_when_any_changed(keeper: &'static str, relations: Vec<pg_sys::Oid>, forget: fn()) {
    if !CALLBACK_REGISTERED.replace(true) {
        // SAFETY: registers a callback that lives as long as the backend.
        unsafe { pg_sys::CacheRegisterRelcacheCallback(Some(relation_invalidated), pg_sys::Datum::from(0)) };
    }
    WATCHES.with_borrow_mut(|watches| match watches.iter_mut().find(|(name, ..)| *name == keeper) {
        Some(watch) => (watch.1, watch.2) = (relations, forget),
        None => watches.push((keeper, relations, forget)),
    });
}

/// Runs while invalidations are processed: the keepers only forget.
#[pg_guard]
unsafe extern "C-unwind" fn relation_invalidated(_arg: pg_sys::Datum, relation: pg_sys::Oid) {
    WATCHES.with_borrow(|watches| {
        for (_, relations, forget) in watches {
            if relation == pg_sys::InvalidOid || relations.contains(&relation) {
                forget();
            }
        }
    });
}
