-- rq_enqueue's INSERT of one job (src/enqueue.rs), prepared once per backend
-- for each payload type, with and without a key; not part of the install
-- script.
--   $1 queue, $2 payload (text, or jsonb stored as its text), $3 max_age,
--   $4 max_retry_count, $5 min_retry_delay, $6 max_retry_delay,
--   $7 backoff_base, $8 now, $9 due (all ms), $10 priority, $11 key, $12 group_key, $13 key_period (ms)
--   @jobs@             the jobs table, schema-qualified
--   @payload_as_text@  `::pg_catalog.text` for a jsonb payload
--   @group_key@, @group_key_value@  the group_key and key_period columns
--                      and $12, $13, or
--                      nothing for the rq_enqueue of a database not yet
--                      updated to 0.3.0 (11 arguments, no such column)
--   @row@              the new row whole: `j`, or `ROW(j.*)::jobs` on Citus
--                      (src/distributed.rs)
--   @keyed_only@       nothing for a job with a key, `--` (the line is left
--                      out) for one without: ON CONFLICT costs a speculative
--                      insertion that a job without a key does not need
-- The options come checked and converted by src/enqueue.rs. With a key, a
-- job already holding it makes this insert nothing: ON CONFLICT waits for a
-- concurrent enqueue of the same key to commit or roll back, so two sessions
-- never both insert one, and rq_enqueue then returns the holder
-- (sql/enqueue.key_holder.sql).
INSERT INTO @jobs@ AS j (queue, payload, max_age, max_retry_count, min_retry_delay,
                         max_retry_delay, backoff_base, enqueued_at, scheduled_at, priority, key@group_key@)
VALUES ($1, $2@payload_as_text@, $3, $4, $5, $6, $7, $8, $9, $10, $11@group_key_value@)
@keyed_only@ON CONFLICT (queue, key) WHERE key IS NOT NULL AND status IN ('queued', 'claimed', 'failed') DO NOTHING
RETURNING @row@, j.id
