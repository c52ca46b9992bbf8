-- A job of ten steps, each writing its effect and recorded with rq_step,
-- in the claim's transaction (bench/run's steps row).
BEGIN;
SELECT id, attempts FROM rq_claim(ARRAY['bench'], worker => 'bench') \gset
INSERT INTO step_effects VALUES (:id, 's0');
SELECT rq_step(:id, :attempts, 's0', '0');
INSERT INTO step_effects VALUES (:id, 's1');
SELECT rq_step(:id, :attempts, 's1', '1');
INSERT INTO step_effects VALUES (:id, 's2');
SELECT rq_step(:id, :attempts, 's2', '2');
INSERT INTO step_effects VALUES (:id, 's3');
SELECT rq_step(:id, :attempts, 's3', '3');
INSERT INTO step_effects VALUES (:id, 's4');
SELECT rq_step(:id, :attempts, 's4', '4');
INSERT INTO step_effects VALUES (:id, 's5');
SELECT rq_step(:id, :attempts, 's5', '5');
INSERT INTO step_effects VALUES (:id, 's6');
SELECT rq_step(:id, :attempts, 's6', '6');
INSERT INTO step_effects VALUES (:id, 's7');
SELECT rq_step(:id, :attempts, 's7', '7');
INSERT INTO step_effects VALUES (:id, 's8');
SELECT rq_step(:id, :attempts, 's8', '8');
INSERT INTO step_effects VALUES (:id, 's9');
SELECT rq_step(:id, :attempts, 's9', '9');
SELECT rq_complete(:id, :attempts);
COMMIT;
