-- Deduplication keys, LISTEN channels, and enqueueing from a trigger.
\set SHOW_CONTEXT never
TRUNCATE jobs;

-- A key: while a job of the same queue and key is unfinished, enqueueing the
-- key again returns that job instead of making a second one.
SELECT id AS first FROM rq_enqueue('invoices', 'send #7', key => 'invoice-7') \gset
SELECT id = :'first' AS same_job, payload FROM rq_enqueue('invoices', 'send #7 again', key => 'invoice-7');
SELECT payload FROM rq_enqueue_batch('invoices', ARRAY['#8', '#8 again', '#9'],
                                     keys => ARRAY['invoice-8', 'invoice-8', 'invoice-9']);
-- Once the job is finished, the key is free again.
SELECT c.status FROM rq_claim(ARRAY['invoices']) j, rq_complete(j.id, j.attempts) c;
SELECT id <> :'first' AS new_job FROM rq_enqueue('invoices', 'send #7 once more', key => 'invoice-7');

-- Each enqueue notifies channel rq_<queue> at commit (one per queue per
-- transaction): LISTEN rq_invoices; long names are hashed to fit.
SELECT rq_channel('invoices'), rq_channel(repeat('x', 64));

-- A trigger that enqueues a job for each row change, in the same transaction.
CREATE TABLE signups (email text PRIMARY KEY, plan text);
CREATE TRIGGER signups_welcome AFTER INSERT OR UPDATE ON signups
    FOR EACH ROW EXECUTE FUNCTION rq_enqueue_trigger('welcome');
INSERT INTO signups VALUES ('a@b.c', 'free');
UPDATE signups SET plan = 'pro';
BEGIN;
INSERT INTO signups VALUES ('rolled@back.c', 'free');
ROLLBACK;
SELECT payload::jsonb FROM jobs WHERE queue = 'welcome' ORDER BY id;
DROP TABLE signups;
