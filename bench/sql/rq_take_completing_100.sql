-- rq_take(complete => true) of up to 100 jobs in one statement: taken and
-- finished at once (bench/run makes queue 'bench' keep no history for this
-- row: the jobs are deleted), as a consumer of PGQ's batches finishes them.
SELECT count(*) FROM rq_take(ARRAY['bench'], 'bench', batch => 100, complete => true);
