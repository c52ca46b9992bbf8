SELECT id FROM rq_enqueue('bench', 'payload');
