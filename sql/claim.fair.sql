-- The fair claim of one grouped queue (sql/flow.sql says what fair groups
-- are), which rq_claim (src/fair.rs) prepares once per backend and batch
-- size when the queue has no group_max_claimed: up to @batch@ of its
-- grouped jobs in the fair order, priority, then turn (so the groups take
-- turns), then scheduled time and id, along jobs_ready_fair_idx. Its
-- ungrouped jobs go first, by the plain claim (sql/claim.ready.sql).
--   $1 queue text, $2 worker text, $3 now (ms), $4 lease (ms)
--   @jobs@      the jobs table, schema-qualified
--   @batch@     the LIMIT, a constant (as the plain claim's)
--   @order_by@  the fair order for a batch, nothing for one job
--   (claimed)   sql/transition.claim.sql, written between at signs below
WITH ready AS (
    SELECT j.id FROM @jobs@ j
    WHERE j.queue = $1 AND j.group_key IS NOT NULL AND j.status IN ('queued', 'failed')
      AND j.scheduled_at <= $3 AND (j.max_age IS NULL OR j.scheduled_at + j.max_age > $3)
    ORDER BY j.priority DESC, j.turn, j.scheduled_at, j.id
    LIMIT @batch@
    FOR UPDATE SKIP LOCKED
), @claimed@
SELECT * FROM claimed c @order_by@
