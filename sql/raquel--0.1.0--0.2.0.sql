-- raquel 0.1.0 → 0.2.0, run by ALTER EXTENSION raquel UPDATE.
--
-- What changes, and why:
-- * Every bound and default has one home, src/limits.rs; SQL reads them
--   through new immutable functions instead of writing the numbers again:
--   the table's retry-delay defaults, the lease index and the rescue duty
--   (the library's one-minute lease), rq_claim's and rq_extend's default
--   lease, rq_reschedule's and rq_prune's bounds. The values are the same.
-- * rq_enqueue's and rq_enqueue_batch's retry delays default to NULL, which
--   has always meant the table's default: the same jobs as before.
-- * A waiting claim loops in the library (src/claim.rs) instead of in
--   PL/pgSQL, so rq_claim_waiting and the rq_wait_register / _sleep /
--   _unregister functions it called go.
-- * Every refusal is built in the library (src/errors.rs), with the same
--   SQLSTATEs and messages: rq_raise_cannot moves there, and the verbs
--   written in PL/pgSQL name their refusals to the new rq_refuse.
-- Nothing here rewrites the table or touches a job: the one index rebuilt
-- (jobs_lease_idx) holds only claimed jobs.

-- The bounds and defaults (src/limits.rs).
CREATE FUNCTION rq_default_backoff_base() RETURNS integer
IMMUTABLE STRICT PARALLEL SAFE
LANGUAGE c AS 'MODULE_PATHNAME', 'rq_default_backoff_base_wrapper';
CREATE FUNCTION rq_default_lease() RETURNS interval
IMMUTABLE STRICT PARALLEL SAFE
LANGUAGE c AS 'MODULE_PATHNAME', 'rq_default_lease_wrapper';
CREATE FUNCTION rq_default_lease_ms() RETURNS bigint
IMMUTABLE STRICT PARALLEL SAFE
LANGUAGE c AS 'MODULE_PATHNAME', 'rq_default_lease_ms_wrapper';
CREATE FUNCTION rq_default_max_retry_delay() RETURNS integer
IMMUTABLE STRICT PARALLEL SAFE
LANGUAGE c AS 'MODULE_PATHNAME', 'rq_default_max_retry_delay_wrapper';
CREATE FUNCTION rq_default_min_retry_delay() RETURNS integer
IMMUTABLE STRICT PARALLEL SAFE
LANGUAGE c AS 'MODULE_PATHNAME', 'rq_default_min_retry_delay_wrapper';
CREATE FUNCTION rq_delay_ms("value" interval, "name" text) RETURNS bigint
IMMUTABLE STRICT PARALLEL SAFE
LANGUAGE c AS 'MODULE_PATHNAME', 'rq_delay_ms_wrapper';
CREATE FUNCTION rq_lease_ms(lease interval) RETURNS bigint
IMMUTABLE PARALLEL SAFE
LANGUAGE c AS 'MODULE_PATHNAME', 'rq_lease_ms_wrapper';
CREATE FUNCTION rq_retention_ms(retention interval) RETURNS bigint
STABLE PARALLEL SAFE
LANGUAGE c AS 'MODULE_PATHNAME', 'rq_retention_ms_wrapper';

-- The table reads its defaults from there; the lease index too (its
-- expression changes, so it is built again).
ALTER TABLE jobs
    ALTER COLUMN min_retry_delay SET DEFAULT rq_default_min_retry_delay(),
    ALTER COLUMN max_retry_delay SET DEFAULT rq_default_max_retry_delay(),
    ALTER COLUMN backoff_base SET DEFAULT rq_default_backoff_base();
DROP INDEX jobs_lease_idx;
CREATE INDEX jobs_lease_idx ON jobs ((coalesce(lease_expires_at, claimed_at + rq_default_lease_ms())))
    WHERE status = 'claimed' AND coalesce(lease_expires_at, claimed_at + rq_default_lease_ms()) IS NOT NULL;

-- Refusals are built in the library (same arguments, same errors).
CREATE OR REPLACE FUNCTION rq_raise_cannot(id uuid, attempt integer, verb text, allowed text[]) RETURNS void
VOLATILE PARALLEL UNSAFE
LANGUAGE c AS 'MODULE_PATHNAME', 'rq_raise_cannot_wrapper';
CREATE FUNCTION rq_refuse(refusal text, refused text[]) RETURNS void
VOLATILE PARALLEL SAFE
LANGUAGE c AS 'MODULE_PATHNAME', 'rq_refuse_wrapper';

-- A waiting claim loops in the library.
DROP FUNCTION rq_claim_waiting(text[], text, integer, interval, bigint);
DROP FUNCTION rq_wait_register(text[]);
DROP FUNCTION rq_wait_sleep(bigint);
DROP FUNCTION rq_wait_unregister();

-- The functions whose defaults or bodies read the new functions; each is
-- replaced in place (same OID, same grants), so a session that has kept
-- plans for it goes on using them.
-- rq_claim: the default lease comes from rq_default_lease().
CREATE OR REPLACE FUNCTION rq_claim(
    queues text[]   DEFAULT NULL,
    worker text     DEFAULT NULL,
    batch  integer  DEFAULT 1,
    lease  interval DEFAULT rq_default_lease(),
    wait   interval DEFAULT '0'
) RETURNS SETOF jobs
LANGUAGE c VOLATILE ROWS 1
AS 'MODULE_PATHNAME', 'rq_claim_c';

-- rq_enqueue, rq_enqueue_batch: retry delays default to NULL (the table's
-- default); the batch names its refusals to rq_refuse.
CREATE OR REPLACE FUNCTION rq_enqueue_batch(
    queue           text,
    payloads        text[],
    at              timestamptz DEFAULT NULL,
    delay           interval    DEFAULT NULL,
    max_age         interval    DEFAULT NULL,
    max_retry_count integer     DEFAULT NULL,
    min_retry_delay interval    DEFAULT NULL,
    max_retry_delay interval    DEFAULT NULL,
    backoff_base    interval    DEFAULT NULL,
    priority        integer     DEFAULT 0,
    keys            text[]      DEFAULT NULL
) RETURNS SETOF jobs
LANGUAGE plpgsql VOLATILE
-- A producer needs no privilege on the table, only EXECUTE on this function
-- (see rq_grant_producer); the pinned search_path keeps a caller's objects
-- from standing in for ours (every reference in the body is qualified too).
SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    o       record;
    new_ids uuid[];
    missing text;
BEGIN
    SELECT * INTO o FROM @extschema@.rq_job_options(rq_enqueue_batch.queue, rq_enqueue_batch.at,
        rq_enqueue_batch.delay, rq_enqueue_batch.max_age, rq_enqueue_batch.max_retry_count,
        rq_enqueue_batch.min_retry_delay, rq_enqueue_batch.max_retry_delay, rq_enqueue_batch.backoff_base);
    IF payloads IS NULL THEN
        PERFORM @extschema@.rq_refuse('payloads_null', '{}');
    END IF;

    IF keys IS NULL THEN
        RETURN QUERY
        INSERT INTO @extschema@.jobs AS j (queue, payload, max_age, max_retry_count,
                               min_retry_delay, max_retry_delay, backoff_base,
                               enqueued_at, scheduled_at, priority)
        SELECT rq_enqueue_batch.queue, p.payload, o.max_age_ms, rq_enqueue_batch.max_retry_count,
               o.min_retry_delay_ms, o.max_retry_delay_ms, o.backoff_base_ms, o.now_ms, o.due_ms,
               coalesce(rq_enqueue_batch.priority, 0)
        FROM unnest(payloads) WITH ORDINALITY AS p (payload, n)
        ORDER BY p.n
        RETURNING j.*;
        RETURN;
    END IF;

    -- With keys: a key that an unfinished job of this queue already holds
    -- gives back that job instead of a new one. ON CONFLICT waits for a
    -- concurrent enqueue of the same key to commit or roll back, so two
    -- sessions never both insert one. The jobs that were there already are
    -- read by a second statement, whose fresh snapshot sees a job that such
    -- a concurrent session just committed.
    IF cardinality(keys) <> cardinality(payloads) THEN
        PERFORM @extschema@.rq_refuse('keys_count', ARRAY[cardinality(keys), cardinality(payloads)]::text[]);
    END IF;
    WITH inserted AS (
        INSERT INTO @extschema@.jobs AS j (queue, payload, max_age, max_retry_count,
                               min_retry_delay, max_retry_delay, backoff_base,
                               enqueued_at, scheduled_at, priority, key)
        SELECT rq_enqueue_batch.queue, p.payload, o.max_age_ms, rq_enqueue_batch.max_retry_count,
               o.min_retry_delay_ms, o.max_retry_delay_ms, o.backoff_base_ms, o.now_ms, o.due_ms,
               coalesce(rq_enqueue_batch.priority, 0), p.key
        FROM unnest(payloads, keys) WITH ORDINALITY AS p (payload, key, n)
        ORDER BY p.n
        ON CONFLICT (queue, key) WHERE key IS NOT NULL AND status IN ('queued', 'claimed', 'failed')
        DO NOTHING
        RETURNING j.id
    )
    SELECT coalesce(array_agg(inserted.id), '{}') INTO new_ids FROM inserted;

    RETURN QUERY
    SELECT j.* FROM @extschema@.jobs j WHERE j.id = ANY (new_ids)
    UNION ALL
    SELECT j.* FROM @extschema@.jobs j
    WHERE j.queue = rq_enqueue_batch.queue AND j.key = ANY (keys)
      AND j.status IN ('queued', 'claimed', 'failed') AND NOT j.id = ANY (new_ids);

    SELECT k.key INTO missing FROM unnest(keys) AS k (key)
    WHERE k.key IS NOT NULL AND NOT EXISTS (
        SELECT 1 FROM @extschema@.jobs j
        WHERE j.queue = rq_enqueue_batch.queue AND j.key = k.key
          AND j.status IN ('queued', 'claimed', 'failed'))
    LIMIT 1;
    IF FOUND THEN
        PERFORM @extschema@.rq_refuse('key_finished', ARRAY[missing, rq_enqueue_batch.queue]);
    END IF;
END
$$;

CREATE OR REPLACE FUNCTION rq_enqueue_batch(
    queue           text,
    payloads        jsonb[],
    at              timestamptz DEFAULT NULL,
    delay           interval    DEFAULT NULL,
    max_age         interval    DEFAULT NULL,
    max_retry_count integer     DEFAULT NULL,
    min_retry_delay interval    DEFAULT NULL,
    max_retry_delay interval    DEFAULT NULL,
    backoff_base    interval    DEFAULT NULL,
    priority        integer     DEFAULT 0,
    keys            text[]      DEFAULT NULL
) RETURNS SETOF jobs
LANGUAGE plpgsql VOLATILE
AS $$
BEGIN
    RETURN QUERY SELECT * FROM @extschema@.rq_enqueue_batch($1, $2::text[], $3, $4, $5, $6, $7, $8, $9, $10, $11);
END
$$;

CREATE OR REPLACE FUNCTION rq_enqueue(
    queue           text        DEFAULT 'default',
    payload         text        DEFAULT NULL,
    at              timestamptz DEFAULT NULL,
    delay           interval    DEFAULT NULL,
    max_age         interval    DEFAULT NULL,
    max_retry_count integer     DEFAULT NULL,
    min_retry_delay interval    DEFAULT NULL,
    max_retry_delay interval    DEFAULT NULL,
    backoff_base    interval    DEFAULT NULL,
    priority        integer     DEFAULT 0,
    key             text        DEFAULT NULL
) RETURNS jobs
LANGUAGE c VOLATILE
SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'rq_enqueue_c';

CREATE OR REPLACE FUNCTION rq_enqueue(
    queue           text,
    payload         jsonb,
    at              timestamptz DEFAULT NULL,
    delay           interval    DEFAULT NULL,
    max_age         interval    DEFAULT NULL,
    max_retry_count integer     DEFAULT NULL,
    min_retry_delay interval    DEFAULT NULL,
    max_retry_delay interval    DEFAULT NULL,
    backoff_base    interval    DEFAULT NULL,
    priority        integer     DEFAULT 0,
    key             text        DEFAULT NULL
) RETURNS jobs
LANGUAGE c VOLATILE
SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'rq_enqueue_c';

-- rq_fail reads the default retry delays; rq_complete_batch names its
-- refusals to rq_refuse.
CREATE OR REPLACE FUNCTION rq_fail(
    id          uuid,
    error       text    DEFAULT NULL,
    error_trace text    DEFAULT NULL,
    attempt     integer DEFAULT NULL
) RETURNS jobs
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    now_ms bigint := @extschema@.rq_now_ms();
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
    WHERE j.id = rq_fail.id
      AND j.status = 'claimed'
      AND (rq_fail.attempt IS NULL OR j.attempts = rq_fail.attempt)
    RETURNING j.* INTO job;
    IF NOT FOUND THEN
        PERFORM @extschema@.rq_raise_cannot(rq_fail.id, rq_fail.attempt, 'fail', '{claimed}');
    END IF;
    RETURN job;
END
$$;

CREATE OR REPLACE FUNCTION rq_complete_batch(ids uuid[], attempts integer[] DEFAULT NULL) RETURNS SETOF jobs
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    done @extschema@.jobs[];
    miss record;
BEGIN
    IF ids IS NULL THEN
        PERFORM @extschema@.rq_refuse('ids_null', '{}');
    END IF;
    IF attempts IS NOT NULL AND cardinality(attempts) <> cardinality(ids) THEN
        PERFORM @extschema@.rq_refuse('attempts_count', ARRAY[cardinality(attempts), cardinality(ids)]::text[]);
    END IF;
    -- The completed rows are kept as they come out of the UPDATE, not read
    -- again from the table.
    WITH wanted AS (
        SELECT w.id, w.attempt FROM unnest(ids, attempts) AS w (id, attempt)
    ), completed AS (
        UPDATE @extschema@.jobs j
        SET status = 'success', finished_at = @extschema@.rq_now_ms(), lease_expires_at = NULL
        FROM wanted w
        WHERE j.id = w.id AND j.status = 'claimed' AND (w.attempt IS NULL OR j.attempts = w.attempt)
        RETURNING j AS job
    )
    SELECT array_agg(c.job ORDER BY (c.job).id) INTO done FROM completed c;

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
    RETURN QUERY SELECT * FROM unnest(done);
END
$$;

-- rq_reschedule and rq_extend check delays and leases with the new
-- functions; rq_retry names its refusal to rq_refuse.
CREATE OR REPLACE FUNCTION rq_reschedule(
    id      uuid,
    at      timestamptz DEFAULT NULL,
    delay   interval    DEFAULT NULL,
    attempt integer     DEFAULT NULL
) RETURNS jobs
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    now_ms   bigint := @extschema@.rq_now_ms();
    at_ms    bigint := @extschema@.rq_timestamp_ms(rq_reschedule.at, 'at');
    delay_ms bigint := @extschema@.rq_delay_ms(rq_reschedule.delay, 'delay');
    job      @extschema@.jobs;
BEGIN
    UPDATE @extschema@.jobs j
    SET status = 'queued',
        scheduled_at = CASE WHEN at_ms IS NULL AND delay_ms IS NULL
                            THEN now_ms + coalesce(j.min_retry_delay, @extschema@.rq_default_min_retry_delay())
                            ELSE coalesce(at_ms, now_ms) + coalesce(delay_ms, 0) END,
        requeues = j.requeues + 1,
        lease_expires_at = NULL,
        finished_at = NULL
    WHERE j.id = rq_reschedule.id
      AND j.status = 'claimed'
      AND (rq_reschedule.attempt IS NULL OR j.attempts = rq_reschedule.attempt)
    RETURNING j.* INTO job;
    IF NOT FOUND THEN
        PERFORM @extschema@.rq_raise_cannot(rq_reschedule.id, rq_reschedule.attempt, 'reschedule', '{claimed}');
    END IF;
    RETURN job;
END
$$;

CREATE OR REPLACE FUNCTION rq_extend(id uuid, lease interval DEFAULT rq_default_lease(), attempt integer DEFAULT NULL)
RETURNS jobs
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    lease_ms bigint := @extschema@.rq_lease_ms(rq_extend.lease);
    job      @extschema@.jobs;
BEGIN
    UPDATE @extschema@.jobs j
    SET lease_expires_at = @extschema@.rq_now_ms() + lease_ms
    WHERE j.id = rq_extend.id
      AND j.status = 'claimed'
      AND (rq_extend.attempt IS NULL OR j.attempts = rq_extend.attempt)
    RETURNING j.* INTO job;
    IF NOT FOUND THEN
        PERFORM @extschema@.rq_raise_cannot(rq_extend.id, rq_extend.attempt, 'extend', '{claimed}');
    END IF;
    RETURN job;
END
$$;

CREATE OR REPLACE FUNCTION rq_retry(id uuid) RETURNS jobs
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    job @extschema@.jobs;
BEGIN
    UPDATE @extschema@.jobs j
    SET status = 'queued', scheduled_at = @extschema@.rq_now_ms(), finished_at = NULL,
        lease_expires_at = NULL, requeues = j.attempts
    WHERE j.id = rq_retry.id AND j.status IN ('failed', 'exhausted', 'expired', 'cancelled')
    RETURNING j.* INTO job;
    IF NOT FOUND THEN
        PERFORM @extschema@.rq_raise_cannot(rq_retry.id, NULL, 'retry', '{failed,exhausted,expired,cancelled}');
    END IF;
    PERFORM @extschema@.rq_wait_notify(job.queue, 1);  -- ready again: wake a waiting claim at commit
    RETURN job;
EXCEPTION WHEN unique_violation THEN
    -- an ended job's key was taken by a newer job that is still unfinished
    PERFORM @extschema@.rq_refuse('retry_key_taken', ARRAY[rq_retry.id::text]);
END
$$;

-- rq_enqueue_trigger names its refusals to rq_refuse.
CREATE OR REPLACE FUNCTION rq_enqueue_trigger() RETURNS trigger
LANGUAGE plpgsql
AS $$
BEGIN
    IF TG_LEVEL <> 'ROW' THEN
        PERFORM @extschema@.rq_refuse('trigger_per_statement', ARRAY[TG_NAME, TG_TABLE_SCHEMA, TG_TABLE_NAME]);
    END IF;
    IF TG_NARGS <> 1 THEN
        PERFORM @extschema@.rq_refuse('trigger_arguments', ARRAY[TG_NARGS::text, TG_NAME, TG_TABLE_SCHEMA, TG_TABLE_NAME]);
    END IF;
    PERFORM @extschema@.rq_enqueue(TG_ARGV[0], jsonb_build_object(
        'op', TG_OP,
        'schema', TG_TABLE_SCHEMA,
        'table', TG_TABLE_NAME,
        'old', CASE WHEN TG_OP IN ('UPDATE', 'DELETE') THEN to_jsonb(OLD) END,
        'new', CASE WHEN TG_OP IN ('INSERT', 'UPDATE') THEN to_jsonb(NEW) END));
    IF TG_WHEN = 'BEFORE' THEN
        RETURN CASE WHEN TG_OP = 'DELETE' THEN OLD ELSE NEW END;
    END IF;
    RETURN NULL;
END
$$;

-- rq_rescue reads the library's lease, rq_prune the retention, from the
-- new functions.
CREATE OR REPLACE FUNCTION rq_rescue(batch integer DEFAULT 1000) RETURNS bigint
LANGUAGE plpgsql VOLATILE
SET jit = off
AS $$
DECLARE
    now_ms  bigint := @extschema@.rq_now_ms();
    job     record;
    changed bigint := 0;
BEGIN
    PERFORM @extschema@.rq_check_batch(batch);
    FOR job IN
        SELECT j.id, j.attempts, j.claimed_by FROM @extschema@.jobs j
        WHERE j.status = 'claimed'
          AND coalesce(j.lease_expires_at, j.claimed_at + @extschema@.rq_default_lease_ms()) <= now_ms
        ORDER BY coalesce(j.lease_expires_at, j.claimed_at + @extschema@.rq_default_lease_ms())
        LIMIT batch
        FOR UPDATE SKIP LOCKED
    LOOP
        PERFORM @extschema@.rq_fail(job.id,
                        format('lease expired: %s did not finish attempt %s in time',
                               coalesce('worker ' || job.claimed_by, 'the worker'), job.attempts),
                        NULL, job.attempts);
        changed := changed + 1;
    END LOOP;
    RETURN changed;
END
$$;

CREATE OR REPLACE FUNCTION rq_prune(batch integer DEFAULT 1000, retention interval DEFAULT NULL) RETURNS bigint
LANGUAGE plpgsql VOLATILE
SET jit = off
AS $$
DECLARE
    keep_ms bigint;
    cutoff  bigint;
    changed bigint;
BEGIN
    PERFORM @extschema@.rq_check_batch(batch);
    keep_ms := @extschema@.rq_retention_ms(retention);
    IF keep_ms = 0 THEN
        RETURN 0;
    END IF;
    -- A value, not rq_now_ms() in the condition: a volatile call cannot bound
    -- the index scan, which then read the index of every finished job (2.6 s
    -- a round with 10 million of them, measured).
    cutoff := @extschema@.rq_now_ms() - keep_ms;
    WITH old AS (
        SELECT j.id FROM @extschema@.jobs j
        WHERE j.status IN ('success', 'cancelled', 'expired', 'exhausted')
          AND j.finished_at < cutoff
        ORDER BY j.finished_at
        LIMIT batch
        FOR UPDATE SKIP LOCKED
    )
    DELETE FROM @extschema@.jobs j USING old WHERE j.id = old.id;
    GET DIAGNOSTICS changed = ROW_COUNT;
    RETURN changed;
END
$$;

-- Let the background worker find the updated install now rather than at
-- its next look.
SELECT rq_worker_wake();
