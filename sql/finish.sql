-- Finishing a claimed job. Every verb that acts on a claimed job takes the
-- claim's attempt number as its second argument, the fencing token, and
-- requires it (0.6.0): a worker whose lease ran out and whose job was
-- handed to someone else gets an error instead of acting on the new
-- holder's attempt, whatever arguments it leaves out. Each is one UPDATE on the hot path; only when it matches
-- nothing does rq_raise_cannot (src/errors.rs) look at the row to say why.

-- rq_complete is every job's last call, so it is written in Rust
-- (src/finish.rs) around one kept plan: sql/transition.complete.sql. It ends a
-- claimed job, or one this transaction took (src/take.rs), with its result
-- if given (sql/results.sql).
CREATE FUNCTION rq_complete(id uuid, attempt integer, result jsonb DEFAULT NULL) RETURNS jobs
LANGUAGE c VOLATILE
SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'rq_complete_fenced_c';

-- A failed attempt: retried after rq_backoff(n, …) ms, or, with no retry
-- left (n > max_retry_count), exhausted for good; n = attempts - requeues,
-- the attempts that were not handed back. In C (src/finish.rs), one kept
-- plan of sql/transition.fail.sql, as rq_complete: a claimed job, or one this
-- transaction took (src/take.rs).
CREATE FUNCTION rq_fail(
    id          uuid,
    attempt     integer,
    error       text    DEFAULT NULL,
    error_trace text    DEFAULT NULL
) RETURNS jobs
LANGUAGE c VOLATILE
SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'rq_fail_fenced_c';
-- The same C function by the name raquel's own code calls (rq_rescue):
-- sql/schema.sql says why.
CREATE FUNCTION raquel_internal.rq_fail(id uuid, attempt integer, error text, error_trace text) RETURNS jobs
LANGUAGE c VOLATILE
SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'rq_fail_fenced_c';

-- Completes many claimed (or taken) jobs in one statement. All or nothing:
-- when any id cannot be completed (unknown, not claimed, stale token) the
-- call raises the error rq_complete would have raised for it, and nothing
-- changes. Tokens (one per id, required) pair with the ids by position,
-- and so do results (null for a job without one). The rows come back in id order (on
-- Citus, queue by queue). In C (src/finish.rs).
CREATE FUNCTION rq_complete_batch(ids uuid[], attempts integer[], results jsonb[] DEFAULT NULL) RETURNS SETOF jobs
LANGUAGE c VOLATILE
SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'rq_complete_batch_fenced_c';

-- What a job's end sets off, for the verbs that end a job whose
-- rq_has_children or key_period says there is something: the jobs that
-- await it (rq_wait_job) get its end, the jobs waiting for it in a
-- workflow are released or cancelled (sql/transitions.sql), and a key
-- enqueued with a key_period stays held by it for that long (key_holds,
-- sql/schema.sql).
-- A job of another status is left alone.
CREATE FUNCTION raquel_internal.rq_job_ended(job uuid) RETURNS void
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
    -- the jobs that wait for its end (rq_wait_job, sql/waits.sql) get it
    -- now, and their edges go before its workflow's children are seen to,
    -- when this role may hand it on (rq_grant_worker grants it); otherwise
    -- the background worker hands it on at its next round (rq_settle_waits)
    IF pg_catalog.has_function_privilege('raquel_internal.rq_deliver_job_end(uuid)', 'EXECUTE') THEN
        PERFORM raquel_internal.rq_deliver_job_end(ended.id);
    END IF;
    IF raquel_internal.rq_has_children(ended.id) THEN
        PERFORM raquel_internal.rq_parent_ended(ended.id);
    END IF;
    IF ended.key IS NOT NULL AND ended.key_period IS NOT NULL THEN
        INSERT INTO @extschema@.key_holds AS h (queue, key, job_id, until)
        VALUES (ended.queue, ended.key, ended.id, coalesce(ended.finished_at, raquel_internal.rq_now_ms()) + ended.key_period)
        ON CONFLICT ON CONSTRAINT key_holds_pkey DO UPDATE SET job_id = excluded.job_id, until = excluded.until;
    END IF;
END
$$;
