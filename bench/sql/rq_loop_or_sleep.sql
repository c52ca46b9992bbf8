-- A worker's loop across transactions that sleeps 5 ms when the queue is
-- empty (bench/run --held): complete the job in hand and claim the next.
SELECT c.id, (c.id <> 'none')::int AS got
FROM (SELECT coalesce((SELECT id::text FROM rq_complete_and_claim(NULLIF(:id, 'none')::uuid, NULL, ARRAY['bench'], 'bench')), 'none') AS id) c \gset
\if :got = 0
\sleep 5 ms
\endif
