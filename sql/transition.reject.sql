-- The statement rq_reject (src/job_verbs.rs) prepares once per backend; not
-- part of the install script. Parameters and placeholders as
-- sql/transition.reschedule.sql's.
-- A claimed job goes back to queued at once, for another worker, its claim
-- forgotten; a handed-back claim uses up no retry (requeues). The row comes
-- back whole, with what wakes a waiting claim. The attempt is appended to
-- the job's history as 'rejected', its worker and claim time as they were.
UPDATE @jobs@ j
SET status = 'queued', claimed_by = NULL, claimed_at = NULL,
    requeues = j.requeues + 1, lease_expires_at = NULL@history_set@
WHERE j.id = $1 @same_queue@
  AND j.status = 'claimed'
  AND j.attempts = $2
RETURNING @row@, j.queue, j.scheduled_at, j.max_age, j.priority
