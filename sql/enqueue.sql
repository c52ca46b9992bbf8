-- Producing jobs. rq_enqueue, one job, and rq_enqueue_batch, many, are
-- written in Rust (src/enqueue.rs, src/enqueue_batch.rs): a plain job is
-- written directly (src/direct.rs), and the rest by a kept plan of one
-- INSERT (sql/enqueue.insert.sql) or rq_enqueue_batch_planned below. Both check and
-- convert the options in one place, src/enqueue.rs (rq_job_options here),
-- and both run with the extension owner's rights: a producer needs EXECUTE
-- on them and no privilege on the table (see rq_grant_producer).
--
-- A retry delay left NULL is the table's default (1 second, 12 hours and
-- 1 second: src/limits.rs).

-- rq_enqueue_batch's planned path (src/enqueue_batch.rs): every batch with
-- keys, group keys or parents, and plain ones when the table is not as
-- raquel made it. Called by rq_enqueue_batch, which runs as the extension's
-- owner, so this runs as the owner too (not for PUBLIC: sql/privileges.sql);
-- the pinned search_path keeps a caller's objects from standing in for ours
-- (every reference in the body is qualified too).
CREATE FUNCTION raquel_internal.rq_enqueue_batch_planned(
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
    keys            text[]      DEFAULT NULL,
    group_keys      text[]      DEFAULT NULL,
    after           uuid[]      DEFAULT NULL
) RETURNS SETOF jobs
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    o       record;
    new_ids  uuid[];
    missing  text;
    may_read boolean;
BEGIN
    SELECT * INTO o FROM raquel_internal.rq_job_options(rq_enqueue_batch_planned.queue, rq_enqueue_batch_planned.at,
        rq_enqueue_batch_planned.delay, rq_enqueue_batch_planned.max_age, rq_enqueue_batch_planned.max_retry_count,
        rq_enqueue_batch_planned.min_retry_delay, rq_enqueue_batch_planned.max_retry_delay, rq_enqueue_batch_planned.backoff_base);
    IF payloads IS NULL THEN
        PERFORM raquel_internal.rq_refuse('payloads_null', '{}');
    END IF;
    PERFORM raquel_internal.rq_check_arrays(ARRAY['payloads', 'keys', 'group_keys'],
        ARRAY[array_ndims(payloads), array_ndims(keys), array_ndims(group_keys)], keys || group_keys);
    IF group_keys IS NOT NULL OR after IS NOT NULL THEN
        PERFORM raquel_internal.rq_refuse_distributed('a workflow (after) or fair groups (group_keys)');
    END IF;
    -- group keys, when given, pair with the payloads by position
    IF group_keys IS NOT NULL AND cardinality(group_keys) <> cardinality(payloads) THEN
        PERFORM raquel_internal.rq_refuse('group_keys_count', ARRAY[cardinality(group_keys), cardinality(payloads)]::text[]);
    END IF;

    IF keys IS NULL AND after IS NULL THEN
        RETURN QUERY
        INSERT INTO @extschema@.jobs AS j (queue, payload, max_age, max_retry_count,
                               min_retry_delay, max_retry_delay, backoff_base,
                               enqueued_at, scheduled_at, priority, group_key)
        SELECT rq_enqueue_batch_planned.queue, p.payload, o.max_age_ms, rq_enqueue_batch_planned.max_retry_count,
               o.min_retry_delay_ms, o.max_retry_delay_ms, o.backoff_base_ms, o.now_ms, o.due_ms,
               coalesce(rq_enqueue_batch_planned.priority, 0), p.group_key
        FROM unnest(payloads, group_keys) WITH ORDINALITY AS p (payload, group_key, n)
        ORDER BY p.n
        RETURNING j.*;
        RETURN;
    END IF;

    IF keys IS NULL THEN
        -- after: the new jobs wait for those (sql/workflows.sql)
        WITH inserted AS (
            INSERT INTO @extschema@.jobs AS j (queue, payload, max_age, max_retry_count,
                                   min_retry_delay, max_retry_delay, backoff_base,
                                   enqueued_at, scheduled_at, priority, group_key)
            SELECT rq_enqueue_batch_planned.queue, p.payload, o.max_age_ms, rq_enqueue_batch_planned.max_retry_count,
                   o.min_retry_delay_ms, o.max_retry_delay_ms, o.backoff_base_ms, o.now_ms, o.due_ms,
                   coalesce(rq_enqueue_batch_planned.priority, 0), p.group_key
            FROM unnest(payloads, group_keys) WITH ORDINALITY AS p (payload, group_key, n)
            ORDER BY p.n
            RETURNING j.id
        )
        SELECT coalesce(array_agg(inserted.id), '{}') INTO new_ids FROM inserted;
        PERFORM raquel_internal.rq_hold_for_parents(new_ids, after);
        RETURN QUERY SELECT j.* FROM @extschema@.jobs j WHERE j.id = ANY (new_ids) ORDER BY j.id;
        RETURN;
    END IF;

    -- With keys: a key that an unfinished job of this queue already holds
    -- gives back that job instead of a new one. ON CONFLICT waits for a
    -- concurrent enqueue of the same key to commit or roll back, so two
    -- sessions never both insert one. The jobs that were there already are
    -- read by a second statement, whose fresh snapshot sees a job that such
    -- a concurrent session just committed.
    IF cardinality(keys) <> cardinality(payloads) THEN
        PERFORM raquel_internal.rq_refuse('keys_count', ARRAY[cardinality(keys), cardinality(payloads)]::text[]);
    END IF;
    WITH inserted AS (
        INSERT INTO @extschema@.jobs AS j (queue, payload, max_age, max_retry_count,
                               min_retry_delay, max_retry_delay, backoff_base,
                               enqueued_at, scheduled_at, priority, key, group_key)
        SELECT rq_enqueue_batch_planned.queue, p.payload, o.max_age_ms, rq_enqueue_batch_planned.max_retry_count,
               o.min_retry_delay_ms, o.max_retry_delay_ms, o.backoff_base_ms, o.now_ms, o.due_ms,
               coalesce(rq_enqueue_batch_planned.priority, 0), p.key, p.group_key
        FROM unnest(payloads, keys, group_keys) WITH ORDINALITY AS p (payload, key, group_key, n)
        ORDER BY p.n
        ON CONFLICT (queue, key) WHERE key IS NOT NULL AND status IN ('queued', 'claimed', 'failed')
        DO NOTHING
        RETURNING j.id
    )
    SELECT coalesce(array_agg(inserted.id), '{}') INTO new_ids FROM inserted;
    -- after: the new jobs (not the key holders) wait for those
    PERFORM raquel_internal.rq_hold_for_parents(new_ids, after);

    -- The jobs that held keys already: whole for a caller who may read the
    -- table, otherwise only their id, queue and key (src/privileges.rs).
    may_read := raquel_internal.rq_caller_may_read('@extschema@.jobs'::regclass);
    RETURN QUERY
    SELECT j.* FROM @extschema@.jobs j WHERE j.id = ANY (new_ids)
    UNION ALL
    SELECT (CASE WHEN may_read THEN ROW(j.*)::@extschema@.jobs
                 ELSE json_populate_record(NULL::@extschema@.jobs, json_build_object('id', j.id, 'queue', j.queue, 'key', j.key))
            END).*
    FROM @extschema@.jobs j
    WHERE j.queue = rq_enqueue_batch_planned.queue AND j.key = ANY (keys)
      AND j.status IN ('queued', 'claimed', 'failed', 'blocked') AND NOT j.id = ANY (new_ids);

    SELECT k.key INTO missing FROM unnest(keys) AS k (key)
    WHERE k.key IS NOT NULL AND NOT EXISTS (
        SELECT 1 FROM @extschema@.jobs j
        WHERE j.queue = rq_enqueue_batch_planned.queue AND j.key = k.key
          AND j.status IN ('queued', 'claimed', 'failed', 'blocked'))
    LIMIT 1;
    IF FOUND THEN
        PERFORM raquel_internal.rq_refuse('key_finished', ARRAY[missing, rq_enqueue_batch_planned.queue]);
    END IF;
END
$$;

-- Many jobs of one queue in one call: a C function (src/enqueue_batch.rs)
-- that writes plain jobs directly and runs rq_enqueue_batch_planned above
-- for the rest. A producer needs no privilege on the table, only EXECUTE on
-- it (see rq_grant_producer): it runs as the extension's owner.
CREATE FUNCTION rq_enqueue_batch(
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
    keys            text[]      DEFAULT NULL,
    group_keys      text[]      DEFAULT NULL,
    after           uuid[]      DEFAULT NULL
) RETURNS SETOF jobs
LANGUAGE c VOLATILE
SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'rq_enqueue_batch_c';
-- The same C function by the name raquel's own code calls: sql/schema.sql
-- says why.
CREATE FUNCTION raquel_internal.rq_enqueue_batch(
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
    keys            text[]      DEFAULT NULL,
    group_keys      text[]      DEFAULT NULL,
    after           uuid[]      DEFAULT NULL
) RETURNS SETOF jobs
LANGUAGE c VOLATILE
SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'rq_enqueue_batch_c';

-- The same with JSON payloads, each stored as its text.
CREATE FUNCTION rq_enqueue_batch(
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
    keys            text[]      DEFAULT NULL,
    group_keys      text[]      DEFAULT NULL,
    after           uuid[]      DEFAULT NULL
) RETURNS SETOF jobs
LANGUAGE c VOLATILE
SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'rq_enqueue_batch_c';

-- One job: one INSERT. With a key that an unfinished job of the queue
-- holds, that job comes back instead of a new one. A group_key puts the job
-- in a fair group of its queue (sql/flow.sql); `after` makes it wait for
-- those jobs (sql/workflows.sql). With a key_period, a job of this key that
-- ended less than key_period ago comes back too (sql/finish.sql).
CREATE FUNCTION rq_enqueue(
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
    key             text        DEFAULT NULL,
    group_key       text        DEFAULT NULL,
    after           uuid[]      DEFAULT NULL,
    key_period      interval    DEFAULT NULL
) RETURNS jobs
LANGUAGE c VOLATILE
SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'rq_enqueue_c';
-- The same C function by the name raquel's own code calls (rq_enqueue_trigger,
-- rq_fire_schedules): sql/schema.sql says why.
CREATE FUNCTION raquel_internal.rq_enqueue(
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
    key             text        DEFAULT NULL,
    group_key       text        DEFAULT NULL,
    after           uuid[]      DEFAULT NULL,
    key_period      interval    DEFAULT NULL
) RETURNS jobs
LANGUAGE c VOLATILE
SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'rq_enqueue_c';

-- The same with a JSON payload, stored as its text (the table's payload is
-- text, as in the Python library).
CREATE FUNCTION rq_enqueue(
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
    key             text        DEFAULT NULL,
    group_key       text        DEFAULT NULL,
    after           uuid[]      DEFAULT NULL,
    key_period      interval    DEFAULT NULL
) RETURNS jobs
LANGUAGE c VOLATILE
SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'rq_enqueue_c';
-- The same C function by the name raquel's own code calls (rq_enqueue_trigger,
-- rq_fire_schedules): sql/schema.sql says why.
CREATE FUNCTION raquel_internal.rq_enqueue(
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
    key             text        DEFAULT NULL,
    group_key       text        DEFAULT NULL,
    after           uuid[]      DEFAULT NULL,
    key_period      interval    DEFAULT NULL
) RETURNS jobs
LANGUAGE c VOLATILE
SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'rq_enqueue_c';

-- CREATE TRIGGER … FOR EACH ROW EXECUTE FUNCTION rq_enqueue_trigger('queue')
-- enqueues a job for each row change, in the same transaction as the change.
-- The payload is JSON: {"op", "schema", "table", "old", "new"}, where old or
-- new is null when the operation has none.
CREATE FUNCTION rq_enqueue_trigger() RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF TG_LEVEL <> 'ROW' THEN
        PERFORM raquel_internal.rq_refuse('trigger_per_statement', ARRAY[TG_NAME, TG_TABLE_SCHEMA, TG_TABLE_NAME]);
    END IF;
    IF TG_WHEN = 'INSTEAD OF' THEN
        PERFORM raquel_internal.rq_refuse('trigger_instead_of', ARRAY[TG_NAME, TG_TABLE_SCHEMA, TG_TABLE_NAME]);
    END IF;
    IF TG_RELID = '@extschema@.jobs'::regclass THEN
        PERFORM raquel_internal.rq_refuse('trigger_on_jobs', ARRAY[TG_NAME, TG_TABLE_SCHEMA, TG_TABLE_NAME]);
    END IF;
    IF TG_NARGS <> 1 THEN
        PERFORM raquel_internal.rq_refuse('trigger_arguments', ARRAY[TG_NARGS::text, TG_NAME, TG_TABLE_SCHEMA, TG_TABLE_NAME]);
    END IF;
    PERFORM raquel_internal.rq_enqueue(TG_ARGV[0], jsonb_build_object(
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
