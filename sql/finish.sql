-- Finishing a claimed job. Both verbs take the claim's attempt number as an
-- optional fencing token: a worker whose lease ran out and whose job was
-- handed to someone else gets an error instead of overwriting the new
-- holder's attempt. Each is one UPDATE on the hot path; only when it matches
-- nothing does rq_raise_cannot (src/errors.rs) look at the row to say why.

-- rq_complete is every job's last call, so it is written in Rust
-- (src/finish.rs) around one kept plan: sql/finish.complete.sql.
CREATE FUNCTION rq_complete(id uuid, attempt integer DEFAULT NULL) RETURNS jobs
LANGUAGE c VOLATILE
SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'rq_complete_c';

-- A failed attempt: retried after rq_backoff(n, …) ms, or, with no retry
-- left (n > max_retry_count), exhausted for good; n = attempts - requeues,
-- the attempts that were not handed back.
CREATE FUNCTION rq_fail(
    id          uuid,
    error       text    DEFAULT NULL,
    error_trace text    DEFAULT NULL,
    attempt     integer DEFAULT NULL
) RETURNS jobs
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    now_ms bigint := @extschema@.rq_now_ms();
    -- on Citus, the job's queue: the UPDATE runs in its shard alone (src/distributed.rs)
    shard_queue text := @extschema@.rq_shard_queue(rq_fail.id);
    job    @extschema@.jobs;
BEGIN
    UPDATE @extschema@.jobs j
    SET status = CASE WHEN j.attempts - j.requeues > j.max_retry_count THEN 'exhausted' ELSE 'failed' END,
        finished_at = CASE WHEN j.attempts - j.requeues > j.max_retry_count THEN now_ms END,
        scheduled_at = CASE WHEN j.attempts - j.requeues > j.max_retry_count THEN j.scheduled_at
                            ELSE now_ms + @extschema@.rq_backoff(j.attempts - j.requeues,
                                    coalesce(j.backoff_base, @extschema@.rq_default_backoff_base()),
                                    coalesce(j.min_retry_delay, @extschema@.rq_default_min_retry_delay()),
                                    coalesce(j.max_retry_delay, @extschema@.rq_default_max_retry_delay()))
                       END,
        error = rq_fail.error,
        error_trace = rq_fail.error_trace,
        lease_expires_at = NULL
    WHERE j.id = rq_fail.id AND j.queue = coalesce(shard_queue, j.queue)
      AND j.status = 'claimed'
      AND (rq_fail.attempt IS NULL OR j.attempts = rq_fail.attempt)
    RETURNING j.* INTO job;
    IF NOT FOUND THEN
        PERFORM @extschema@.rq_raise_cannot(rq_fail.id, rq_fail.attempt, 'fail', '{claimed}');
    END IF;
    -- the attempt's run time, for the metrics (src/metrics.rs)
    PERFORM @extschema@.rq_note_metric(job.queue, 'failed', now_ms - job.claimed_at);
    IF job.status = 'failed' THEN
        -- to be retried: wake a waiting claim at commit (src/events.rs)
        PERFORM @extschema@.rq_job_ready_again(job.queue, job.scheduled_at, job.max_age);
    ELSE
        -- a slot freed under a concurrency limit (src/flow.rs)
        PERFORM @extschema@.rq_claim_ended(job.queue);
        IF job.key_period IS NOT NULL OR @extschema@.rq_has_children(job.id) THEN
            -- exhausted: what its end sets off (rq_job_ended)
            PERFORM @extschema@.rq_job_ended(job.id);
        END IF;
    END IF;
    RETURN job;
END
$$;

-- Completes many claimed jobs in one statement. All or nothing: when any id
-- cannot be completed (unknown, not claimed, stale token) the call raises the
-- error rq_complete would have raised for it, and nothing changes. Tokens,
-- when given, pair with the ids by position. The rows come back in id order.
CREATE FUNCTION rq_complete_batch(ids uuid[], attempts integer[] DEFAULT NULL) RETURNS SETOF jobs
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    -- a value, not a call in the UPDATE: Citus refuses volatile calls there
    now_ms bigint := @extschema@.rq_now_ms();
    done @extschema@.jobs[];
    miss record;
    shard_queues   text[];
    shard_queue    text;
    queue_ids      uuid[];
    queue_attempts integer[];
    queue_done     @extschema@.jobs[];
BEGIN
    IF ids IS NULL THEN
        PERFORM @extschema@.rq_refuse('ids_null', '{}');
    END IF;
    PERFORM @extschema@.rq_check_arrays(ARRAY['ids', 'attempts'], ARRAY[array_ndims(ids), array_ndims(attempts)], NULL);
    IF attempts IS NOT NULL AND cardinality(attempts) <> cardinality(ids) THEN
        PERFORM @extschema@.rq_refuse('attempts_count', ARRAY[cardinality(attempts), cardinality(ids)]::text[]);
    END IF;
    -- The completed rows are kept as they come out of the UPDATE, not read
    -- again from the table. One UPDATE in all on one server; on Citus one
    -- per queue, each in the queue's shard alone (src/distributed.rs).
    shard_queues := @extschema@.rq_shard_queues(ids);
    FOR shard_queue, queue_ids, queue_attempts IN
        SELECT NULL, ids, attempts WHERE shard_queues IS NULL
        UNION ALL
        SELECT shard_queues[w.n], array_agg(w.id), array_agg(w.attempt)
        FROM unnest(ids, attempts) WITH ORDINALITY AS w (id, attempt, n)
        WHERE shard_queues IS NOT NULL
        GROUP BY 1
    LOOP
        WITH wanted AS (
            SELECT w.id, w.attempt FROM unnest(queue_ids, queue_attempts) AS w (id, attempt)
        ), completed AS (
            UPDATE @extschema@.jobs j
            SET status = 'success', finished_at = now_ms, lease_expires_at = NULL
            FROM wanted w
            WHERE j.id = w.id AND j.queue = coalesce(shard_queue, j.queue)
              AND j.status = 'claimed' AND (w.attempt IS NULL OR j.attempts = w.attempt)
            RETURNING j AS job
        )
        SELECT array_agg(c.job ORDER BY (c.job).id) INTO queue_done FROM completed c;
        -- added to `done` here, not in the statement: on Citus that runs in
        -- the shard, where `done` is not of the shard's row type (|| with
        -- a NULL array gives the other)
        done := done || queue_done;
    END LOOP;
    IF shard_queues IS NOT NULL THEN
        SELECT array_agg(d ORDER BY d.id) INTO done FROM unnest(done) d;
    END IF;

    -- Fewer rows than ids: an id this call could not complete (raise, which
    -- undoes the rest), or the same id given twice (fine).
    IF coalesce(cardinality(done), 0) < cardinality(ids) THEN
        SELECT w.id, w.attempt INTO miss
        FROM unnest(ids, attempts) WITH ORDINALITY AS w (id, attempt, n)
        WHERE w.id IS NULL OR w.id NOT IN (SELECT d.id FROM unnest(done) d)
        ORDER BY w.n
        LIMIT 1;
        IF FOUND THEN
            PERFORM @extschema@.rq_raise_cannot(miss.id, miss.attempt, 'complete', '{claimed}');
        END IF;
    END IF;
    -- slots freed under concurrency limits (src/flow.rs), and the metrics
    PERFORM @extschema@.rq_claim_ended(d.queue) FROM (SELECT DISTINCT d.queue FROM unnest(done) d) d;
    PERFORM @extschema@.rq_note_metric(d.queue, 'succeeded', now_ms - d.claimed_at) FROM unnest(done) d;
    -- what their ends set off (rq_job_ended)
    PERFORM @extschema@.rq_job_ended(d.id) FROM unnest(done) d WHERE d.key_period IS NOT NULL OR @extschema@.rq_has_children(d.id);
    RETURN QUERY SELECT * FROM unnest(done);
END
$$;

-- What a job's end sets off, for the verbs that end a job whose
-- rq_has_children or key_period says there is something: the jobs waiting for
-- it are released or cancelled (sql/workflows.sql), and a key enqueued with
-- a key_period stays held by it for that long (key_holds, sql/schema.sql).
-- A job of another status is left alone.
CREATE FUNCTION rq_job_ended(job uuid) RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    ended record;
BEGIN
    SELECT j.id, j.queue, j.key, j.key_period, j.finished_at INTO ended
    FROM @extschema@.jobs j
    WHERE j.id = rq_job_ended.job AND j.status IN ('success', 'exhausted', 'expired', 'cancelled');
    IF NOT FOUND THEN
        RETURN;
    END IF;
    IF @extschema@.rq_has_children(ended.id) THEN
        PERFORM @extschema@.rq_parent_ended(ended.id);
    END IF;
    IF ended.key IS NOT NULL AND ended.key_period IS NOT NULL THEN
        INSERT INTO @extschema@.key_holds AS h (queue, key, job_id, until)
        VALUES (ended.queue, ended.key, ended.id, coalesce(ended.finished_at, @extschema@.rq_now_ms()) + ended.key_period)
        ON CONFLICT ON CONSTRAINT key_holds_pkey DO UPDATE SET job_id = excluded.job_id, until = excluded.until;
    END IF;
END
$$;
