-- Queues that keep no history. A job of such a queue that succeeds through
-- raquel's verbs (rq_complete, rq_complete_batch, rq_complete_and_claim,
-- rq_complete_batch_and_claim, rq_take(complete => true)) is deleted in the
-- same write instead of being updated to 'success': no new row version, no
-- index entries, nothing left for the prune duty. The verb still returns the
-- row as it ended (status 'success'), and the metrics still count it. A job
-- that ends otherwise (exhausted, cancelled, expired) is kept for a look and
-- pruned as usual, and so is a job whose end sets something off (jobs waiting
-- for it with `after`, a key held for a period) until that is done. A job
-- the Python library finishes with its own UPDATE is kept, too.
--
-- Like a pruned job, a deleted one can no longer be named by `after`.
-- Finishing verbs read the table (src/history.rs keeps a copy per backend,
-- dropped when it changes); not on Citus (0A000).
CREATE TABLE queues_without_history (
    queue text NOT NULL,
    CONSTRAINT queues_without_history_pkey PRIMARY KEY (queue)
);

COMMENT ON TABLE queues_without_history IS
    'raquel: the queues whose jobs are deleted when they succeed (rq_set_history).';

SELECT pg_catalog.pg_extension_config_dump('queues_without_history', '');

-- Every backend's copy is dropped when a change commits (as for
-- queue_limits, sql/flow.sql).
CREATE TRIGGER queues_without_history_changed
    AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE
    ON queues_without_history
    FOR EACH STATEMENT EXECUTE FUNCTION raquel_internal.rq_queue_limits_changed();

-- Whether `queue` keeps its succeeded jobs (keep, the default for every
-- queue) or deletes them as they succeed. Idempotent; returns keep. Runs with
-- the caller's rights: INSERT and DELETE on queues_without_history.
CREATE FUNCTION rq_set_history(queue text, keep boolean) RETURNS boolean
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM raquel_internal.rq_check_limits(queue, NULL, NULL, NULL, NULL);
    IF keep IS NULL THEN
        PERFORM raquel_internal.rq_refuse('keep_null', ARRAY[queue]);
    END IF;
    PERFORM raquel_internal.rq_refuse_distributed('rq_set_history');
    PERFORM raquel_internal.rq_note_new_queue(queue, 'rq_set_history');
    IF keep THEN
        DELETE FROM @extschema@.queues_without_history h WHERE h.queue = rq_set_history.queue;
    ELSE
        INSERT INTO @extschema@.queues_without_history AS h (queue) VALUES (rq_set_history.queue)
        ON CONFLICT ON CONSTRAINT queues_without_history_pkey DO NOTHING;
    END IF;
    RETURN keep;
END
$$;
