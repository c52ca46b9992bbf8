-- The statement rq_retry (src/job_verbs.rs) prepares once per backend; not
-- part of the install script. Parameters and placeholders as
-- sql/transition.reschedule.sql's.
-- An operator puts a failed, exhausted, expired or cancelled job back to
-- queued, due now, with its whole retry budget again: the attempts so far
-- stay counted (history, and fencing tokens never repeat) but no longer use
-- up retries. An ended job's key may have been taken meanwhile by a newer
-- job that is unfinished: the unique index refuses it (23505), which the
-- verb explains. The row comes back whole, with what wakes a waiting claim.
-- The end it resets goes to the job's history first: an exhausted,
-- cancelled or expired job's attempt with its end (finished_at, the
-- status, an exhausted job's error); a failed job's attempt is there
-- already (rq_fail appended it).
UPDATE @jobs@ j
SET status = 'queued', scheduled_at = $3, finished_at = NULL,
    lease_expires_at = NULL, requeues = j.attempts@history_set@
WHERE j.id = $1 @same_queue@
  AND j.status IN ('failed', 'exhausted', 'expired', 'cancelled')
RETURNING @row@, j.queue, j.scheduled_at, j.max_age, j.priority
