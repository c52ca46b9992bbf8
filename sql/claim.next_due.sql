-- When the next job of a waiting claim's queues that is scheduled for later
-- becomes due (src/claim.rs), so that the claim wakes for it; prepared once
-- per backend for each queue filter, not part of the install script.
--   $1 queues text[], $2 now (ms)
--   @jobs@        the jobs table, schema-qualified
--   (the priorities, where the statement says so: sql/claim.priorities.sql,
--   or sql/claim.priorities_several.sql for several queues)
--   @ungrouped@     `AND j.group_key IS NULL`: the plain claim leaves grouped
--                   jobs to sql/flow.sql (nothing on a jobs table older than
--                   0.3.0, which has no groups)
--   @same_queue@  `AND j.queue = $1[1]` (one queue), `AND j.queue = p.queue`
--                 (several or any)
-- Each priority's first job due after now is where its later jobs start
-- in the ready index: one probe per queue and priority, not a scan of every
-- job scheduled for later.
WITH RECURSIVE @priorities@
SELECT min(n.scheduled_at) FROM priorities p
CROSS JOIN LATERAL (
    SELECT j.scheduled_at FROM @jobs@ j
    WHERE j.status IN ('queued', 'failed') @ungrouped@ @same_queue@
      AND j.priority = p.priority
      AND j.scheduled_at > $2
    ORDER BY j.scheduled_at
    LIMIT 1
) n
WHERE p.priority IS NOT NULL
