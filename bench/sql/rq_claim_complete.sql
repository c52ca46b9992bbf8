BEGIN;
SELECT id, attempts FROM rq_claim(ARRAY['bench'], worker => 'bench') \gset
SELECT rq_complete(:id, :attempts);
COMMIT;
