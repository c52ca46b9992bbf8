-- The attempt that recorded step $2 of job $1, for rq_step's refusal of a
-- second record (src/steps.rs).
SELECT s.attempt FROM @job_steps@ s WHERE s.job_id = $1 AND s.name = $2
