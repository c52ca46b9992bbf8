-- The statement rq_complete (src/finish.rs) prepares once per backend for a
-- claimed job and for a job this transaction took (src/take.rs); it is not
-- part of the install script. The parameters of both (and of
-- sql/transition.fail.sql):
--   $1 id uuid, $2 attempt integer (the fencing token of a claim, or null),
--   $3 now (ms), $4 a taken job's attempt, $5 its worker, $6 when it was
--   taken, $7 error, $8 error_trace (for a failure), $9 the job's queue (on
--   Citus)
--   @jobs@  the jobs table, schema-qualified
--   @row@   the row whole: `j`, or `ROW(j.*)::jobs` on Citus
--   @same_queue@  on Citus, `AND j.queue = $9`, so that the UPDATE runs in
--           one shard (src/distributed.rs); otherwise nothing
--   @was@   what the job must be: claimed (with the token, if any), or, a
--           taken job, still as the take found it
--   @taken_set@  for a taken job, its attempt, worker and time: the claim
--           it never wrote
--   @result_set@  with a result ($11 jsonb), `, result = $11`; otherwise
--           nothing (and no $10 or $11: the plan of a complete without a
--           result is as it was before results)
-- The row comes back whole (`RETURNING j`), as the function's result, with
-- its queue, for flow control (src/flow.rs), when it was claimed, for the
-- run time (src/metrics.rs), and whether its end sets something off
-- (rq_job_ended, sql/finish.sql: children waiting, a key held for a
-- period; @sets_off@ is nothing on a table not yet updated to 0.3.0). When
-- nothing matches, rq_raise_cannot says why.
UPDATE @jobs@ j
SET status = 'success', finished_at = $3, lease_expires_at = NULL@taken_set@@result_set@
WHERE j.id = $1 @same_queue@
  AND @was@
RETURNING @row@, j.queue, j.claimed_at@sets_off@
