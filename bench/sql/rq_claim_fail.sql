-- A failed attempt with a retry left (bench/run's history rows): the job
-- goes back to wait for its retry, and its attempt to the job's history
-- (past_attempts) when the table has it.
BEGIN;
SELECT id, attempts FROM rq_claim(ARRAY['bench'], worker => 'bench') \gset
SELECT rq_fail(:id, :attempts, 'bench: the attempt failed', 'a trace of a few lines\n  at bench\n  at pgbench');
COMMIT;
