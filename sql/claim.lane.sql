-- sql/claim.lanes.sql for a queue of one lane (one priority), the common
-- case: the same walk without the function scan and the join over the
-- lanes, which a claim of one lane need not pay. Parameters as there.
WITH ready AS (
    SELECT j.@ready@ FROM @jobs@ j
    WHERE j.status IN ('queued', 'failed') @ungrouped@ AND j.queue = $1[1]
      AND j.priority = $6[1]
      AND (j.scheduled_at, j.id) >= ($7[1], $8[1])
      AND j.scheduled_at <= $3
      AND (j.max_age IS NULL OR j.scheduled_at + j.max_age > $3)
    ORDER BY j.scheduled_at, j.id
    LIMIT @batch@
    FOR UPDATE SKIP LOCKED
), @claimed@
SELECT * FROM claimed c @order_by@
