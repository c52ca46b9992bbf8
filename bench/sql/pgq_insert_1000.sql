SELECT count(pgq.insert_event('bench', 'job', 'payload ' || i)) FROM generate_series(1, 1000) i;
