-- The claim statement rq_claim (src/claim.rs) prepares once per backend for
-- one queue, or any queue, and each batch size; it is not part of the
-- install script. (Several queues: sql/claim.ready_several.sql.)
--   $1 queues text[], $2 worker text, $3 now (ms), $4 lease (ms)
--   @jobs@          the jobs table, schema-qualified
--   @ungrouped@     `AND j.group_key IS NULL`: the plain claim leaves grouped
--                   jobs to sql/flow.sql (nothing on a jobs table older than
--                   0.3.0, which has no groups)
--   @queue_filter@  `AND j.queue = $1[1]`, or for any queue the condition
--                   that only its statements state, so that they and no
--                   other walk jobs_ready_idx (sql/schema.sql)
--   (and the priorities, where the statement says so: sql/claim.priorities.sql)
--   @batch@         the LIMIT, a constant: with a parameter instead, the
--                   generic plan would assume a tenth of the table and sort it
--   @order_by@      the claim order for a batch, nothing for one job
--   (ready)         what the walk reads of a ready job: `id`, or `*` for a
--                   take, which writes nothing (src/claim.rs Mode)
--   (claimed)       what becomes of the ready jobs, the CTE `claimed` (and
--                   any it needs): claimed (sql/transition.claim.sql), taken
--                   (sql/claim.take.sql), or taken and completed
--                   (sql/transition.take_complete.sql; sql/transition.take_deleting.sql
--                   where some queue keeps no history, $5 those queues)
--   (the two are written between at signs below; src/claim.rs fills them)
--
-- Bounded by the claim's own queue (or for any queue, every queue's) ready
-- jobs and priorities. A ready index
-- (sql/schema.sql) lists a queue's jobs by priority, then scheduled time: a
-- scan in that order would step over every job of a priority that is due
-- later before reaching a ready one of the next priority, and over a
-- million of them when nothing is ready at all. So `priorities` skips along
-- the index, one probe per priority present (highest first,
-- sql/claim.priorities.sql), and `ready`
-- takes each priority's due jobs from where they start, in claim order. The
-- executor pulls both lazily: a claim of one job from a queue with one
-- priority makes two probes. SKIP LOCKED lets concurrent claimers pass
-- each other's rows instead of queueing behind them, and locks only the
-- rows taken.
WITH RECURSIVE @priorities@, ready AS (
    SELECT r.@ready@ FROM priorities p
    CROSS JOIN LATERAL (
        SELECT j.@ready@ FROM @jobs@ j
        WHERE j.status IN ('queued', 'failed') @ungrouped@ @queue_filter@
          AND j.priority = p.priority
          AND j.scheduled_at <= $3
          AND (j.max_age IS NULL OR j.scheduled_at + j.max_age > $3)
        ORDER BY j.scheduled_at, j.id
        LIMIT @batch@
        FOR UPDATE SKIP LOCKED
    ) r
    WHERE p.priority IS NOT NULL
    LIMIT @batch@
), @claimed@
SELECT * FROM claimed c @order_by@
