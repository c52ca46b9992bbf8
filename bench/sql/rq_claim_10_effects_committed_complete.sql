-- The same ten effects as bench/sql/rq_claim_10_steps_committed_complete.sql,
-- each committed on its own, no step recorded.
SELECT id, attempts FROM rq_claim(ARRAY['bench'], worker => 'bench') \gset
BEGIN;
INSERT INTO step_effects VALUES (:id, 's0');
COMMIT;
BEGIN;
INSERT INTO step_effects VALUES (:id, 's1');
COMMIT;
BEGIN;
INSERT INTO step_effects VALUES (:id, 's2');
COMMIT;
BEGIN;
INSERT INTO step_effects VALUES (:id, 's3');
COMMIT;
BEGIN;
INSERT INTO step_effects VALUES (:id, 's4');
COMMIT;
BEGIN;
INSERT INTO step_effects VALUES (:id, 's5');
COMMIT;
BEGIN;
INSERT INTO step_effects VALUES (:id, 's6');
COMMIT;
BEGIN;
INSERT INTO step_effects VALUES (:id, 's7');
COMMIT;
BEGIN;
INSERT INTO step_effects VALUES (:id, 's8');
COMMIT;
BEGIN;
INSERT INTO step_effects VALUES (:id, 's9');
COMMIT;
SELECT rq_complete(:id, :attempts);
