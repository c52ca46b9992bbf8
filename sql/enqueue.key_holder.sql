-- The unfinished job that holds a key (src/enqueue.rs), read after the
-- keyed INSERT (sql/transition.enqueue.sql) inserted nothing. A new statement
-- has a new snapshot, so it sees a holder that a concurrent session
-- committed while the INSERT waited for it.
--   $1 queue, $2 key
--   @jobs@   the jobs table, schema-qualified
--   @shown@  the whole row (`j`, or `ROW(j.*)::jobs` on Citus), for a
--            caller who may read the table;
--            otherwise a row of only its id, queue and key
SELECT @shown@ FROM @jobs@ j
WHERE j.queue = $1 AND j.key = $2 AND j.status IN ('queued', 'claimed', 'failed', 'blocked')
