-- A job of ten steps as the durable guide writes it: the claim commits,
-- then each step's effect and its record (rq_step) commit together, one
-- transaction a step, then the completion (bench/run's steps rows).
SELECT id, attempts FROM rq_claim(ARRAY['bench'], worker => 'bench') \gset
BEGIN;
INSERT INTO step_effects VALUES (:id, 's0');
SELECT rq_step(:id, :attempts, 's0', '0');
COMMIT;
BEGIN;
INSERT INTO step_effects VALUES (:id, 's1');
SELECT rq_step(:id, :attempts, 's1', '1');
COMMIT;
BEGIN;
INSERT INTO step_effects VALUES (:id, 's2');
SELECT rq_step(:id, :attempts, 's2', '2');
COMMIT;
BEGIN;
INSERT INTO step_effects VALUES (:id, 's3');
SELECT rq_step(:id, :attempts, 's3', '3');
COMMIT;
BEGIN;
INSERT INTO step_effects VALUES (:id, 's4');
SELECT rq_step(:id, :attempts, 's4', '4');
COMMIT;
BEGIN;
INSERT INTO step_effects VALUES (:id, 's5');
SELECT rq_step(:id, :attempts, 's5', '5');
COMMIT;
BEGIN;
INSERT INTO step_effects VALUES (:id, 's6');
SELECT rq_step(:id, :attempts, 's6', '6');
COMMIT;
BEGIN;
INSERT INTO step_effects VALUES (:id, 's7');
SELECT rq_step(:id, :attempts, 's7', '7');
COMMIT;
BEGIN;
INSERT INTO step_effects VALUES (:id, 's8');
SELECT rq_step(:id, :attempts, 's8', '8');
COMMIT;
BEGIN;
INSERT INTO step_effects VALUES (:id, 's9');
SELECT rq_step(:id, :attempts, 's9', '9');
COMMIT;
SELECT rq_complete(:id, :attempts);
