-- The floor under rq_step (bench/run's steps rows): the ten effects of
-- bench/sql/rq_claim_10_effects_complete.sql, each statement also writing
-- the step's row with a plain INSERT: no fencing (the job's row is not
-- locked nor checked), no check of the name, nothing returned.
BEGIN;
SELECT id, attempts FROM rq_claim(ARRAY['bench'], worker => 'bench') \gset
WITH effect AS (INSERT INTO step_effects VALUES (:id, 's0')) INSERT INTO job_steps (job_id, name, result, attempt, recorded_at) VALUES (:id, 's0', '0', :attempts, 0);
WITH effect AS (INSERT INTO step_effects VALUES (:id, 's1')) INSERT INTO job_steps (job_id, name, result, attempt, recorded_at) VALUES (:id, 's1', '1', :attempts, 0);
WITH effect AS (INSERT INTO step_effects VALUES (:id, 's2')) INSERT INTO job_steps (job_id, name, result, attempt, recorded_at) VALUES (:id, 's2', '2', :attempts, 0);
WITH effect AS (INSERT INTO step_effects VALUES (:id, 's3')) INSERT INTO job_steps (job_id, name, result, attempt, recorded_at) VALUES (:id, 's3', '3', :attempts, 0);
WITH effect AS (INSERT INTO step_effects VALUES (:id, 's4')) INSERT INTO job_steps (job_id, name, result, attempt, recorded_at) VALUES (:id, 's4', '4', :attempts, 0);
WITH effect AS (INSERT INTO step_effects VALUES (:id, 's5')) INSERT INTO job_steps (job_id, name, result, attempt, recorded_at) VALUES (:id, 's5', '5', :attempts, 0);
WITH effect AS (INSERT INTO step_effects VALUES (:id, 's6')) INSERT INTO job_steps (job_id, name, result, attempt, recorded_at) VALUES (:id, 's6', '6', :attempts, 0);
WITH effect AS (INSERT INTO step_effects VALUES (:id, 's7')) INSERT INTO job_steps (job_id, name, result, attempt, recorded_at) VALUES (:id, 's7', '7', :attempts, 0);
WITH effect AS (INSERT INTO step_effects VALUES (:id, 's8')) INSERT INTO job_steps (job_id, name, result, attempt, recorded_at) VALUES (:id, 's8', '8', :attempts, 0);
WITH effect AS (INSERT INTO step_effects VALUES (:id, 's9')) INSERT INTO job_steps (job_id, name, result, attempt, recorded_at) VALUES (:id, 's9', '9', :attempts, 0);
SELECT rq_complete(:id, :attempts);
COMMIT;
