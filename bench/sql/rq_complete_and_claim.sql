-- A worker's loop in one round trip: complete the job in hand, on its
-- attempt (none on the client's first run: -D id=none -D tries=none), and
-- claim the next, in one call.
SELECT id, attempts AS tries
FROM rq_complete_and_claim(NULLIF(:id, 'none')::uuid, NULLIF(:tries, 'none')::integer, ARRAY['bench'], 'bench') \gset
