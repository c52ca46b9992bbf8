-- The walk of a fair claim under group_max_claimed (src/fair.rs): the next
-- @walk@ due grouped jobs of one queue in the fair order (as
-- sql/claim.fair.sql's), unlocked, with their groups; src/fair.rs takes
-- each candidate's group's lock, and sql/claim.fair_group.sql claims.
--   $1 queue text, $2 now (ms)
--   @jobs@  the jobs table, schema-qualified
--   @walk@  the LIMIT, a constant
SELECT j.id, j.group_key FROM @jobs@ j
WHERE j.queue = $1 AND j.group_key IS NOT NULL AND j.status IN ('queued', 'failed')
  AND j.scheduled_at <= $2 AND (j.max_age IS NULL OR j.scheduled_at + j.max_age > $2)
ORDER BY j.priority DESC, j.turn, j.scheduled_at, j.id
LIMIT @walk@
