BEGIN;
SELECT array_agg(id) AS ids, array_agg(attempts) AS tries
FROM rq_claim(ARRAY['bench'], worker => 'bench', batch => 100) \gset
SELECT count(*) FROM rq_complete_batch(:ids, :tries);
COMMIT;
