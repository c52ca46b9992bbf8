-- The statement rq_extend (src/job_verbs.rs) prepares once per backend; not
-- part of the install script. Parameters and placeholders as
-- sql/transition.reschedule.sql's; $4 is when the lease now ends.
-- The worker still holding the claim pushes its lease out (a heartbeat). A
-- lease that ran out but was not rescued yet can be extended.
UPDATE @jobs@ j
SET lease_expires_at = $4
WHERE j.id = $1 @same_queue@
  AND j.status = 'claimed'
  AND j.attempts = $2
RETURNING @row@
