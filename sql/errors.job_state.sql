-- A job's status and attempt, read to explain why a verb matched no row
-- (src/errors.rs); not part of the install script.
--   $1 id
--   @jobs@  the jobs table, schema-qualified
SELECT j.status, j.attempts FROM @jobs@ j WHERE j.id = $1
