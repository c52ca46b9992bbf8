-- When the next job of a waiting claim's queues that is scheduled for later
-- becomes due (src/claim.rs), so that the claim wakes for it; prepared once
-- per backend for each queue filter, not part of the install script.
--   $1 queues text[], $2 now (ms)
--   @jobs@          the jobs table, schema-qualified
--   @queue_filter@  `AND j.queue = $1[1]`, `AND j.queue = ANY ($1)` or nothing
SELECT min(j.scheduled_at) FROM @jobs@ j
WHERE j.status IN ('queued', 'failed') AND j.scheduled_at > $2
  @queue_filter@
