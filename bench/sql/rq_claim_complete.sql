BEGIN;
SELECT id FROM rq_claim(ARRAY['bench'], worker => 'bench') \gset
SELECT rq_complete(:id);
COMMIT;
