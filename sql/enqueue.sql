-- Producing jobs. Every enqueue, single or batch, goes through one INSERT …
-- SELECT in rq_enqueue_batch, so the checks and defaults live in one place
-- and a batch of thousands is one statement. The wrappers are PL/pgSQL, not
-- SQL functions: PostgreSQL 15 plans a SQL function's body on every call
-- (measured: a fifth of an enqueue), PL/pgSQL caches its plans.

-- Bounds on what a caller may ask for. Retry delays are integer milliseconds
-- in the table (about 24.8 days at most); a job's schedule and maximum age
-- stop at a century, a lease at a year: anything longer is a mistake.
--   delay, max_age:        3153600000000 ms = 36500 days
--   retry delays, base:       2147483647 ms
--   lease:                   31536000000 ms = 365 days

CREATE FUNCTION rq_enqueue_batch(
    queue           text,
    payloads        text[],
    at              timestamptz DEFAULT NULL,
    delay           interval    DEFAULT NULL,
    max_age         interval    DEFAULT NULL,
    max_retry_count integer     DEFAULT NULL,
    min_retry_delay interval    DEFAULT '1 second',
    max_retry_delay interval    DEFAULT '12 hours',
    backoff_base    interval    DEFAULT '1 second',
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
    now_ms     bigint := @extschema@.rq_now_ms();
    max_age_ms bigint := @extschema@.rq_interval_ms(rq_enqueue_batch.max_age, 'max_age', 1, 3153600000000);
    min_delay  bigint := coalesce(@extschema@.rq_interval_ms(rq_enqueue_batch.min_retry_delay, 'min_retry_delay', 0, 2147483647), 1000);
    max_delay  bigint := coalesce(@extschema@.rq_interval_ms(rq_enqueue_batch.max_retry_delay, 'max_retry_delay', 0, 2147483647), 43200000);
    base_ms    bigint := coalesce(@extschema@.rq_interval_ms(rq_enqueue_batch.backoff_base, 'backoff_base', 0, 2147483647), 1000);
    due_ms     bigint := coalesce(@extschema@.rq_timestamp_ms(rq_enqueue_batch.at, 'at'), now_ms)
                         + coalesce(@extschema@.rq_interval_ms(rq_enqueue_batch.delay, 'delay', 0, 3153600000000), 0);
    new_ids    uuid[];
    missing    text;
BEGIN
    PERFORM @extschema@.rq_check_queue(rq_enqueue_batch.queue);
    IF payloads IS NULL THEN
        RAISE EXCEPTION 'payloads must not be null'
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Pass an array; ARRAY[NULL]::text[] enqueues one job without a payload.';
    END IF;
    IF rq_enqueue_batch.max_retry_count < 0 THEN
        RAISE EXCEPTION 'max_retry_count must not be negative, got %', rq_enqueue_batch.max_retry_count
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Use 0 for no retry, or NULL to retry forever.';
    END IF;
    IF min_delay > max_delay THEN
        RAISE EXCEPTION 'min_retry_delay (%) must not exceed max_retry_delay (%)',
                rq_enqueue_batch.min_retry_delay, rq_enqueue_batch.max_retry_delay
            USING ERRCODE = 'invalid_parameter_value';
    END IF;

    IF keys IS NULL THEN
        RETURN QUERY
        INSERT INTO @extschema@.jobs AS j (queue, payload, max_age, max_retry_count,
                               min_retry_delay, max_retry_delay, backoff_base,
                               enqueued_at, scheduled_at, priority)
        SELECT rq_enqueue_batch.queue, p.payload, max_age_ms, rq_enqueue_batch.max_retry_count,
               min_delay, max_delay, base_ms, now_ms, due_ms, coalesce(rq_enqueue_batch.priority, 0)
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
        RAISE EXCEPTION 'keys has % elements for % payloads', cardinality(keys), cardinality(payloads)
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Give one key (or NULL) per payload.';
    END IF;
    WITH inserted AS (
        INSERT INTO @extschema@.jobs AS j (queue, payload, max_age, max_retry_count,
                               min_retry_delay, max_retry_delay, backoff_base,
                               enqueued_at, scheduled_at, priority, key)
        SELECT rq_enqueue_batch.queue, p.payload, max_age_ms, rq_enqueue_batch.max_retry_count,
               min_delay, max_delay, base_ms, now_ms, due_ms, coalesce(rq_enqueue_batch.priority, 0), p.key
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
        RAISE EXCEPTION 'the job holding key % in queue % finished while this enqueue ran', missing, rq_enqueue_batch.queue
            USING ERRCODE = 'serialization_failure', HINT = 'Try again: the key is free now.';
    END IF;
END
$$;

CREATE FUNCTION rq_enqueue_batch(
    queue           text,
    payloads        jsonb[],
    at              timestamptz DEFAULT NULL,
    delay           interval    DEFAULT NULL,
    max_age         interval    DEFAULT NULL,
    max_retry_count integer     DEFAULT NULL,
    min_retry_delay interval    DEFAULT '1 second',
    max_retry_delay interval    DEFAULT '12 hours',
    backoff_base    interval    DEFAULT '1 second',
    priority        integer     DEFAULT 0,
    keys            text[]      DEFAULT NULL
) RETURNS SETOF jobs
LANGUAGE plpgsql VOLATILE
AS $$
BEGIN
    RETURN QUERY SELECT * FROM @extschema@.rq_enqueue_batch($1, $2::text[], $3, $4, $5, $6, $7, $8, $9, $10, $11);
END
$$;

CREATE FUNCTION rq_enqueue(
    queue           text        DEFAULT 'default',
    payload         text        DEFAULT NULL,
    at              timestamptz DEFAULT NULL,
    delay           interval    DEFAULT NULL,
    max_age         interval    DEFAULT NULL,
    max_retry_count integer     DEFAULT NULL,
    min_retry_delay interval    DEFAULT '1 second',
    max_retry_delay interval    DEFAULT '12 hours',
    backoff_base    interval    DEFAULT '1 second',
    priority        integer     DEFAULT 0,
    key             text        DEFAULT NULL
) RETURNS jobs
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    job @extschema@.jobs;
BEGIN
    SELECT * INTO job FROM @extschema@.rq_enqueue_batch($1, ARRAY[$2], $3, $4, $5, $6, $7, $8, $9, $10,
                                                        CASE WHEN $11 IS NOT NULL THEN ARRAY[$11] END);
    RETURN job;
END
$$;

-- The same with a JSON payload, stored as its text (the table's payload is
-- text, as in the Python library).
CREATE FUNCTION rq_enqueue(
    queue           text,
    payload         jsonb,
    at              timestamptz DEFAULT NULL,
    delay           interval    DEFAULT NULL,
    max_age         interval    DEFAULT NULL,
    max_retry_count integer     DEFAULT NULL,
    min_retry_delay interval    DEFAULT '1 second',
    max_retry_delay interval    DEFAULT '12 hours',
    backoff_base    interval    DEFAULT '1 second',
    priority        integer     DEFAULT 0,
    key             text        DEFAULT NULL
) RETURNS jobs
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    job @extschema@.jobs;
BEGIN
    SELECT * INTO job FROM @extschema@.rq_enqueue_batch($1, ARRAY[$2::text], $3, $4, $5, $6, $7, $8, $9, $10,
                                                        CASE WHEN $11 IS NOT NULL THEN ARRAY[$11] END);
    RETURN job;
END
$$;
