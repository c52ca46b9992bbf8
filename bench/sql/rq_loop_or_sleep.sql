-- A worker's loop across transactions that sleeps 5 ms when the queue is
-- empty (bench/run --held): complete the job in hand, on its attempt, and
-- claim the next (none in hand: id and tries 'none').
SELECT coalesce(c.id::text, 'none') AS id, coalesce(c.attempts::text, 'none') AS tries, (c.id IS NOT NULL)::int AS got
FROM (SELECT) one
LEFT JOIN rq_complete_and_claim(NULLIF(:id, 'none')::uuid, NULLIF(:tries, 'none')::integer, ARRAY['bench'], 'bench') c ON true \gset
\if :got = 0
\sleep 5 ms
\endif
