-- The minimal queue's enqueue (minimal_claim_complete.sql): a plain INSERT.
INSERT INTO mini_jobs (queue, payload) VALUES ('bench', 'payload');
