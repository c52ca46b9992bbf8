SELECT count(*) FROM rq_enqueue_batch('bench', ARRAY(SELECT 'payload ' || i FROM generate_series(1, 1000) i));
