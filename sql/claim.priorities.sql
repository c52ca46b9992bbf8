-- The priorities that a claim on one queue ($1[1]), or on any queue, looks at, highest
-- first, found by skipping along a ready index: one probe per
-- priority present, however many jobs each holds. A part of
-- sql/claim.ready.sql and sql/claim.next_due.sql (src/claim.rs fills it in).
--   @jobs@          the jobs table, schema-qualified
--   @ungrouped@     `AND j.group_key IS NULL`: the plain claim leaves grouped
--                   jobs to sql/flow.sql (nothing on a jobs table older than
--                   0.3.0, which has no groups)
--   @queue_filter@  `AND j.queue = $1[1]`
priorities AS (
    (SELECT j.priority FROM @jobs@ j
     WHERE j.status IN ('queued', 'failed') @ungrouped@ @queue_filter@
     ORDER BY j.priority DESC
     LIMIT 1)
    UNION ALL
    SELECT (SELECT j.priority FROM @jobs@ j
            WHERE j.status IN ('queued', 'failed') @ungrouped@ @queue_filter@ AND j.priority < p.priority
            ORDER BY j.priority DESC
            LIMIT 1)
    FROM priorities p
    WHERE p.priority IS NOT NULL
)
