-- The (queue, priority) pairs that a claim on several queues ($1), or on
-- any queue of a table without jobs_ready_idx, looks at: for each queue, its priorities found by skipping
-- along the ready index, one probe per priority present. A part of
-- sql/claim.ready_several.sql and sql/claim.next_due.sql (src/claim.rs
-- fills it in).
--   (queues)        the queues, written between at signs below (several
--                   lines, which here would end this comment): $1's names,
--                   or for any queue those with jobs in the ready index
--                   (sql/claim.queues_any.sql, a table without jobs_ready_idx)
--   @ungrouped@     `AND j.group_key IS NULL`: the plain claim leaves grouped
--                   jobs to sql/flow.sql (nothing on a jobs table older than
--                   0.3.0, which has no groups)
--   @jobs@  the jobs table, schema-qualified
queues AS (
    @queues@
), priorities AS (
    SELECT q.name AS queue, f.priority FROM queues q
    CROSS JOIN LATERAL (
        SELECT j.priority FROM @jobs@ j
        WHERE j.status IN ('queued', 'failed') @ungrouped@ AND j.queue = q.name
        ORDER BY j.priority DESC
        LIMIT 1
    ) f
    UNION ALL
    SELECT p.queue, n.priority FROM priorities p
    CROSS JOIN LATERAL (
        SELECT j.priority FROM @jobs@ j
        WHERE j.status IN ('queued', 'failed') @ungrouped@ AND j.queue = p.queue AND j.priority < p.priority
        ORDER BY j.priority DESC
        LIMIT 1
    ) n
)
