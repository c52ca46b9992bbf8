-- The statement rq_complete (src/finish.rs) prepares once per backend; it
-- is not part of the install script.
--   $1 id uuid, $2 attempt integer (the fencing token, or null), $3 now (ms)
--   @jobs@  the jobs table, schema-qualified
--   @row@   the row whole: `j`, or `ROW(j.*)::jobs` on Citus
--   @same_queue@  on Citus, `AND j.queue = $4`, the job's queue, so that the
--           UPDATE runs in one shard (src/distributed.rs); otherwise nothing
-- The row comes back whole (`RETURNING j`), as the function's result, with
-- its queue, for flow control (src/flow.rs), when it was claimed, for the
-- run time (src/metrics.rs), and whether its end sets
-- something off (rq_job_ended, sql/finish.sql: children waiting, a key held
-- for a period; @sets_off@ is nothing on a table not yet updated to 0.3.0). When nothing matches,
-- rq_raise_cannot says why.
UPDATE @jobs@ j
SET status = 'success', finished_at = $3, lease_expires_at = NULL
WHERE j.id = $1 @same_queue@
  AND j.status = 'claimed'
  AND ($2 IS NULL OR j.attempts = $2)
RETURNING @row@, j.queue, j.claimed_at@sets_off@
