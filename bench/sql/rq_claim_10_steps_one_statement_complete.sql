-- A job of ten steps as bench/sql/rq_claim_10_steps_complete.sql, each
-- step's effect and its record sent as one statement: the round trips of
-- bench/sql/rq_claim_10_effects_complete.sql (bench/run's steps rows).
BEGIN;
SELECT id, attempts FROM rq_claim(ARRAY['bench'], worker => 'bench') \gset
WITH effect AS (INSERT INTO step_effects VALUES (:id, 's0')) SELECT rq_step(:id, :attempts, 's0', '0');
WITH effect AS (INSERT INTO step_effects VALUES (:id, 's1')) SELECT rq_step(:id, :attempts, 's1', '1');
WITH effect AS (INSERT INTO step_effects VALUES (:id, 's2')) SELECT rq_step(:id, :attempts, 's2', '2');
WITH effect AS (INSERT INTO step_effects VALUES (:id, 's3')) SELECT rq_step(:id, :attempts, 's3', '3');
WITH effect AS (INSERT INTO step_effects VALUES (:id, 's4')) SELECT rq_step(:id, :attempts, 's4', '4');
WITH effect AS (INSERT INTO step_effects VALUES (:id, 's5')) SELECT rq_step(:id, :attempts, 's5', '5');
WITH effect AS (INSERT INTO step_effects VALUES (:id, 's6')) SELECT rq_step(:id, :attempts, 's6', '6');
WITH effect AS (INSERT INTO step_effects VALUES (:id, 's7')) SELECT rq_step(:id, :attempts, 's7', '7');
WITH effect AS (INSERT INTO step_effects VALUES (:id, 's8')) SELECT rq_step(:id, :attempts, 's8', '8');
WITH effect AS (INSERT INTO step_effects VALUES (:id, 's9')) SELECT rq_step(:id, :attempts, 's9', '9');
SELECT rq_complete(:id, :attempts);
COMMIT;
