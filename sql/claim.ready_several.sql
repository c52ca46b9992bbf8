-- The claim statement for several queues (or any queue of a table without
-- jobs_ready_idx; src/claim.rs),
-- prepared once per backend for each batch size; not part of the install
-- script.
--   @in_queues@ `AND j.queue = ANY ($1)`, nothing for any queue
--   $1 queues text[], $2 worker text, $3 now (ms), $4 lease (ms)
--   @jobs@     the jobs table, schema-qualified
--   @ungrouped@     `AND j.group_key IS NULL`: the plain claim leaves grouped
--                   jobs to sql/flow.sql (nothing on a jobs table older than
--                   0.3.0, which has no groups)
--   @batch@    the LIMIT, a constant
--   @window@   how many due jobs of each queue and priority are candidates
--   (ready) and (claimed): as in sql/claim.ready.sql
--   (and the priorities, where the statement says so:
--   sql/claim.priorities_several.sql)
--
-- As sql/claim.ready.sql, for each queue: skip along the ready index from
-- priority to priority, and take each one's due jobs from where they start.
-- The queues' jobs must then be merged into one claim order, so each queue
-- and priority offers its first @window@ due jobs, unlocked; of those, in
-- claim order, the first @batch@ that no other claimer holds are locked
-- (SKIP LOCKED, each found again by its id) and claimed. (A walk of the
-- queues' whole ready index, filtered by the candidates, cost a claim its
-- queues' backlog: a generic plan that joined the candidates to it spent
-- 1.2 s on 2000 ready jobs.) A claim costs its queues' priorities times
-- the window, whatever else the table holds; under heavy contention it may
-- take fewer than @batch@ jobs (never one another claimer holds), and the
-- next call takes the rest.
WITH RECURSIVE @priorities@, candidates AS (
    SELECT c.id, c.priority, c.scheduled_at FROM priorities p
    CROSS JOIN LATERAL (
        SELECT j.id, j.priority, j.scheduled_at FROM @jobs@ j
        WHERE j.status IN ('queued', 'failed') @ungrouped@ AND j.queue = p.queue
          AND j.priority = p.priority
          AND j.scheduled_at <= $3
          AND (j.max_age IS NULL OR j.scheduled_at + j.max_age > $3)
        ORDER BY j.scheduled_at, j.id
        LIMIT @window@
    ) c
), ready AS (
    SELECT r.@ready@ FROM (
        SELECT c.id FROM candidates c ORDER BY c.priority DESC, c.scheduled_at, c.id
    ) c
    CROSS JOIN LATERAL (
        SELECT j.@ready@ FROM @jobs@ j
        WHERE j.id = c.id
          AND j.status IN ('queued', 'failed') @ungrouped@ @in_queues@
          AND j.scheduled_at <= $3
          AND (j.max_age IS NULL OR j.scheduled_at + j.max_age > $3)
        FOR UPDATE SKIP LOCKED
    ) r
    LIMIT @batch@
), @claimed@
SELECT * FROM claimed c @order_by@
