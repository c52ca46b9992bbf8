INSERT INTO jobs (queue, payload) VALUES ('bench', 'payload');
