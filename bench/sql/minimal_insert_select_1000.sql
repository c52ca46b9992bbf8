-- The minimal queue's batch enqueue: 1000 rows in one INSERT … SELECT.
INSERT INTO mini_jobs (queue, payload) SELECT 'bench', 'payload ' || i FROM generate_series(1, 1000) i;
