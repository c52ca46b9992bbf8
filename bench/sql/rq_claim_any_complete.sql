BEGIN;
SELECT id, attempts FROM rq_claim(NULL, worker => 'bench') \gset
SELECT rq_complete(:id, :attempts);
COMMIT;
