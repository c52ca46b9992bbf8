-- A worker's loop in batches: complete the 100 jobs in hand (none on the
-- client's first run: -D ids=none) and claim the next 100, in one call.
SELECT coalesce(array_agg(id), '{}') AS ids, coalesce(array_agg(attempts), '{}') AS tries
FROM rq_complete_batch_and_claim(NULLIF(:ids, 'none')::uuid[], NULLIF(:tries, 'none')::integer[],
                                 ARRAY['bench'], 'bench', 100) \gset
