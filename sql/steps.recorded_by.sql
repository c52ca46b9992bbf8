-- The attempt that recorded step $2 of job $1, when (as text) and as what
-- kind of step, for rq_step's refusal of a second record (src/steps.rs).
-- (The kind read from the row as JSON: a table of 0.5.0's, not yet
-- updated, has no kind, and every step of it is read as rq_step's.)
SELECT s.attempt, @ms_to_timestamptz@(s.recorded_at)::text, to_jsonb(s) ->> 'kind'
FROM @job_steps@ s WHERE s.job_id = $1 AND s.name = $2
