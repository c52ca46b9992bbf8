-- The transactional loop: a claim that only locks (rq_take), the work done
-- in the same transaction, then rq_complete: the job is written once after
-- its insert.
BEGIN;
SELECT id, attempts FROM rq_take(ARRAY['bench'], 'bench') \gset
SELECT rq_complete(:id, :attempts);
COMMIT;
