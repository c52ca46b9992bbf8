-- The attempt that recorded step $2 of job $1, and when (as text), for
-- rq_step's refusal of a second record (src/steps.rs).
SELECT s.attempt, @ms_to_timestamptz@(s.recorded_at)::text FROM @job_steps@ s WHERE s.job_id = $1 AND s.name = $2
