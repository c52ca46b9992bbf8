-- The same ten effects as bench/sql/rq_claim_10_steps_complete.sql, no
-- step recorded.
BEGIN;
SELECT id, attempts FROM rq_claim(ARRAY['bench'], worker => 'bench') \gset
INSERT INTO step_effects VALUES (:id, 's0');
INSERT INTO step_effects VALUES (:id, 's1');
INSERT INTO step_effects VALUES (:id, 's2');
INSERT INTO step_effects VALUES (:id, 's3');
INSERT INTO step_effects VALUES (:id, 's4');
INSERT INTO step_effects VALUES (:id, 's5');
INSERT INTO step_effects VALUES (:id, 's6');
INSERT INTO step_effects VALUES (:id, 's7');
INSERT INTO step_effects VALUES (:id, 's8');
INSERT INTO step_effects VALUES (:id, 's9');
SELECT rq_complete(:id, :attempts);
COMMIT;
