INSERT INTO jobs (queue, payload) SELECT 'bench', 'payload ' || i FROM generate_series(1, 1000) i;
