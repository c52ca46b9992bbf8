-- A worker's loop in one round trip: complete the job in hand (none on the
-- client's first run: -D id=none) and claim the next, in one call.
SELECT id FROM rq_complete_and_claim(NULLIF(:id, 'none')::uuid, NULL, ARRAY['bench'], 'bench') \gset
