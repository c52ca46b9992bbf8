-- The statement rq_cancel (src/job_verbs.rs) prepares once per backend; not
-- part of the install script. Parameters and placeholders as
-- sql/transition.reschedule.sql's, and
--   @sets_off@  whether the job's end sets something off (src/finish.rs
--           sets_off: children waiting, a key held for a period)
-- Any unfinished job (queued, claimed, failed, blocked) becomes cancelled,
-- for good. A worker still working on it finds out when it completes it
-- (55000: the job is no longer claimed). The row comes back whole, with its
-- queue; what its end owes follows (src/ended.rs).
UPDATE @jobs@ j
SET status = 'cancelled', finished_at = $3, lease_expires_at = NULL
WHERE j.id = $1 @same_queue@
  AND j.status IN ('queued', 'claimed', 'failed', 'blocked')
RETURNING @row@, j.queue@sets_off@
