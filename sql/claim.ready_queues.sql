-- The queues without flow settings that a claim on any queue whose queues
-- have some claims from by the plain claim (src/claim/flow_claim.rs): those
-- with ready jobs without a group, found by skipping along the ready index
-- from queue to queue, one probe for each, less the queues with settings
-- ($1).
--   @queues@    the recursive walk of sql/claim.queues_any.sql
--   @ungrouped@ `AND j.group_key IS NULL` (nothing on a table without groups)
--   @jobs@      the jobs table, schema-qualified
WITH RECURSIVE queues (name) AS (
    @queues@
)
SELECT q.name FROM queues q WHERE q.name IS NOT NULL AND q.name <> ALL ($1)
