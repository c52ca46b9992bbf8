-- rq_step's one statement (src/steps.rs): the step's row, for a job
-- claimed on attempt $4 (NULL, any attempt, only for 0.5.0's declaration
-- of rq_step until its update: src/compat_0_5.rs), whose row stays locked against a
-- rescue until this transaction ends (which writes nothing when this
-- transaction claimed it). $1 id, $2 name, $3 result, $4 attempt, $5 now
-- in ms. No row when the job is not claimed on that attempt or the step is
-- recorded already.
INSERT INTO @job_steps@ AS s (job_id, name, result, attempt, recorded_at)
SELECT $1, $2, $3, j.attempts, $5 FROM @jobs@ j
WHERE j.id = $1 AND j.status = 'claimed' AND ($4::integer IS NULL OR j.attempts = $4)
FOR SHARE OF j
ON CONFLICT ON CONSTRAINT job_steps_pkey DO NOTHING
RETURNING s
