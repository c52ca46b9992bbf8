-- The statement rq_fail (src/finish.rs) prepares once per backend for a
-- claimed job and for a job this transaction took; not part of the install
-- script. Parameters and placeholders as sql/transition.complete.sql's, and
--   @attempt@  the attempt that failed: j.attempts, or a taken job's $4
--   @backoff@  raquel's rq_backoff, schema-qualified, and @default_*@ the
--              retry delays of a row that has none (src/limits.rs)
--   @history_set@  a failure with a retry left appends the attempt (its
--              worker, claim, now, 'failed', the error and trace given) to
--              the job's history, past_attempts (src/transitions.rs
--              past_attempts_set; nothing on a table older than 0.6.0);
--              an exhausted job's end stays in the row
-- A failed attempt is retried after rq_backoff(n, …) ms, or, with no retry
-- left (n > max_retry_count), exhausted for good; n = attempt - requeues,
-- the attempts that were not handed back. The row comes back whole, with
-- its queue, claim time, new status, due time and max_age (for the wake-up
-- of a retry), and whether its end sets something off.
UPDATE @jobs@ j
SET status = CASE WHEN @attempt@ - j.requeues > j.max_retry_count THEN 'exhausted' ELSE 'failed' END,
    finished_at = CASE WHEN @attempt@ - j.requeues > j.max_retry_count THEN $3 END,
    scheduled_at = CASE WHEN @attempt@ - j.requeues > j.max_retry_count THEN j.scheduled_at
                        ELSE $3 + @backoff@(@attempt@ - j.requeues,
                                            coalesce(j.backoff_base, @default_backoff_base@),
                                            coalesce(j.min_retry_delay, @default_min_retry_delay@),
                                            coalesce(j.max_retry_delay, @default_max_retry_delay@))
                   END,
    error = $7, error_trace = $8, lease_expires_at = NULL@taken_set@@history_set@
WHERE j.id = $1 @same_queue@
  AND @was@
RETURNING @row@, j.queue, j.claimed_at, j.status, j.scheduled_at, j.max_age, j.priority@sets_off@
