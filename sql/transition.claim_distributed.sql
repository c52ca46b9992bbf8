-- The claim of one queue's jobs on a distributed jobs table (src/distributed.rs),
-- prepared once per backend for each batch size; not part of the install
-- script.
--   $1 queue text, $2 worker text, $3 now (ms), $4 lease (ms)
--   @jobs@   the jobs table, schema-qualified
--   @batch@  the LIMIT, a constant
-- Every condition names the queue, so Citus runs the whole statement in the
-- queue's shard, on the node that holds it, where FOR UPDATE SKIP LOCKED
-- hands each job to one claimer as on one server. The jobs to take are a
-- CTE, which runs once: a subquery in the UPDATE's FROM may be run again
-- for each row it is joined with, and each run would lock another job.
-- Unlike sql/claim.ready.sql it does not skip from priority to priority:
-- the queue's ready index is read in claim order, past any jobs of a
-- higher priority that are due later.
WITH ready AS (
    SELECT r.id FROM @jobs@ r
    WHERE r.queue = $1 AND r.status IN ('queued', 'failed') AND r.group_key IS NULL
      AND r.scheduled_at <= $3
      AND (r.max_age IS NULL OR r.scheduled_at + r.max_age > $3)
    ORDER BY r.priority DESC, r.scheduled_at, r.id
    LIMIT @batch@
    FOR UPDATE SKIP LOCKED
), claimed AS (
    UPDATE @jobs@ j
    SET status = 'claimed', attempts = j.attempts + 1, claimed_by = $2,
        claimed_at = $3, lease_expires_at = $3 + $4, finished_at = NULL
    FROM ready WHERE j.queue = $1 AND j.id = ready.id
    RETURNING j.*
)
SELECT * FROM claimed c ORDER BY c.priority DESC, c.scheduled_at, c.id
