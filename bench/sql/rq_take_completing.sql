-- rq_take(complete => true): take and complete in one statement, for work
-- done before it in the same transaction (bench/run makes queue 'bench'
-- keep no history for this row: the job is deleted).
SELECT id FROM rq_take(ARRAY['bench'], 'bench', complete => true) \gset
