-- The statement rq_enqueue (src/hot_path.rs) prepares once per backend, for a
-- job without a key; it is not part of the install script.
--   $1 queue, $2 payload (text, or jsonb stored as its text), $3 max_age,
--   $4 max_retry_count, $5 min_retry_delay, $6 max_retry_delay,
--   $7 backoff_base, $8 now, $9 due (all ms), $10 priority
--   @jobs@             the jobs table, schema-qualified
--   @payload_as_text@  `::pg_catalog.text` for a jsonb payload
-- The options come checked and converted by src/job_options.rs.
INSERT INTO @jobs@ AS j (queue, payload, max_age, max_retry_count, min_retry_delay,
                         max_retry_delay, backoff_base, enqueued_at, scheduled_at, priority)
VALUES ($1, $2@payload_as_text@, $3, $4, $5, $6, $7, $8, $9, $10)
RETURNING j
