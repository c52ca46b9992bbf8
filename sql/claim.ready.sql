-- The claim statement rq_claim (src/claim.rs) prepares once per backend
-- for each queue filter and batch size; it is not part of the install script.
--   $1 queues text[], $2 worker text, $3 now (ms), $4 lease (ms)
--   @jobs@          the jobs table, schema-qualified
--   @queue_filter@  `AND j.queue = $1[1]`, `AND j.queue = ANY ($1)` or nothing
--   @batch@         the LIMIT, a constant: with a parameter instead, the
--                   generic plan would assume a tenth of the table and sort it
--   @order_by@      the claim order for a batch, nothing for one job
-- SKIP LOCKED lets concurrent claimers pass each other's rows instead of
-- queueing behind them; the partial ready indexes (sql/schema.sql) give the
-- rows in claim order.
WITH ready AS (
    SELECT j.id FROM @jobs@ j
    WHERE j.status IN ('queued', 'failed')
      @queue_filter@
      AND j.scheduled_at <= $3
      AND (j.max_age IS NULL OR j.scheduled_at + j.max_age > $3)
    ORDER BY j.priority DESC, j.scheduled_at, j.id
    LIMIT @batch@
    FOR UPDATE SKIP LOCKED
), claimed AS (
    UPDATE @jobs@ j
    SET status = 'claimed', attempts = j.attempts + 1, claimed_by = $2,
        claimed_at = $3, lease_expires_at = $3 + $4, finished_at = NULL
    FROM ready WHERE j.id = ready.id
    RETURNING j.*
)
SELECT * FROM claimed c @order_by@
