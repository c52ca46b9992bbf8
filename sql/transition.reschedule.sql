-- The statement rq_reschedule (src/job_verbs.rs) prepares once per backend;
-- not part of the install script. The parameters of it and of
-- sql/transition.reject.sql, sql/job_verbs.extend.sql,
-- sql/transition.cancel.sql and sql/transition.retry.sql (each reads the
-- ones it needs):
--   $1 id uuid, $2 attempt integer (the claim's fencing token), $3 now
--   (ms), $4 a time the verb computed (ms: when the job is due again, or
--   when its lease ends), $5 the job's queue (on Citus)
--   @jobs@  the jobs table, schema-qualified
--   @row@   the row whole: `j`, or `ROW(j.*)::jobs` on Citus
--   @same_queue@  on Citus, `AND j.queue = $5`, so that the UPDATE runs in
--           one shard (src/distributed.rs); otherwise nothing
--   @history_set@  the attempt this verb ends appended to the job's
--           history, past_attempts (src/transitions.rs past_attempts_set;
--           nothing on a table older than 0.6.0): here as 'rescheduled',
--           by rq_reject as 'rejected', by rq_retry the end it resets
-- A claimed job goes back to queued, due at $4 (the call's at plus delay)
-- or, without them, after its min_retry_delay; claimed_by and claimed_at
-- stay, as in the Python library, so that rescheduled jobs can be found.
-- The row comes back whole, with what wakes a waiting claim when it is due
-- (src/events.rs). When nothing matches, rq_raise_cannot says why.
UPDATE @jobs@ j
SET status = 'queued',
    scheduled_at = coalesce($4, $3 + coalesce(j.min_retry_delay, @default_min_retry_delay@)),
    requeues = j.requeues + 1,
    lease_expires_at = NULL,
    finished_at = NULL@history_set@
WHERE j.id = $1 @same_queue@
  AND j.status = 'claimed'
  AND j.attempts = $2
RETURNING @row@, j.queue, j.scheduled_at, j.max_age, j.priority
