-- The statement rq_complete (src/finish.rs) prepares once per backend; it
-- is not part of the install script.
--   $1 id uuid, $2 attempt integer (the fencing token, or null), $3 now (ms)
--   @jobs@  the jobs table, schema-qualified
-- The row comes back whole (`RETURNING j`), as the function's result, and
-- its queue, for flow control (src/flow.rs). When nothing matches,
-- rq_raise_cannot says why.
UPDATE @jobs@ j
SET status = 'success', finished_at = $3, lease_expires_at = NULL
WHERE j.id = $1
  AND j.status = 'claimed'
  AND ($2 IS NULL OR j.attempts = $2)
RETURNING j, j.queue
