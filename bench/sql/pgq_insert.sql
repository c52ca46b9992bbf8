SELECT pgq.insert_event('bench', 'job', 'payload');
