-- The claim statement of one queue whose lanes are known (src/cursors.rs):
-- rq_claim (src/claim.rs) prepares it once per backend for each batch size;
-- not part of the install script.
--   $1 queues text[] (one), $2 worker text, $3 now (ms), $4 lease (ms),
--   $5 the queues without history (a take that completes), and the lanes,
--   highest priority first: $6 their priorities integer[], and where each
--   one's ready jobs start, $7 scheduled_at bigint[] and $8 id uuid[]
--   @jobs@, @ungrouped@, @batch@, @order_by@, (ready), (claimed): as in
--   sql/claim.ready.sql
--
--
-- (One lane: sql/claim.lane.sql.)
-- As sql/claim.ready.sql, without the walk that finds the priorities: each
-- lane's due jobs are taken from its cursor on, in claim order, so the walk
-- steps over none of the index entries that jobs claimed before left behind
-- (which a snapshot held open keeps from vacuum).
WITH ready AS (
    SELECT r.@ready@ FROM unnest($6::integer[], $7::bigint[], $8::uuid[]) AS l (priority, due, id)
    CROSS JOIN LATERAL (
        SELECT j.@ready@ FROM @jobs@ j
        WHERE j.status IN ('queued', 'failed') @ungrouped@ AND j.queue = $1[1]
          AND j.priority = l.priority
          AND (j.scheduled_at, j.id) >= (l.due, l.id)
          AND j.scheduled_at <= $3
          AND (j.max_age IS NULL OR j.scheduled_at + j.max_age > $3)
        ORDER BY j.scheduled_at, j.id
        LIMIT @batch@
        FOR UPDATE SKIP LOCKED
    ) r
    LIMIT @batch@
), @claimed@
SELECT * FROM claimed c @order_by@
