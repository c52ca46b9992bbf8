BEGIN;
SELECT pgq.next_batch('bench', 'bench') AS batch_id \gset
SELECT count(*) FROM pgq.get_batch_events(:batch_id);
SELECT pgq.finish_batch(:batch_id);
COMMIT;
