-- Producing jobs. rq_enqueue, one job, and rq_enqueue_batch, many, are
-- written in Rust (src/enqueue.rs, src/enqueue_batch.rs): a plain job is
-- written directly (src/direct.rs), and the rest by a kept plan of one
-- INSERT (sql/transition.enqueue.sql) or rq_enqueue_batch_planned
-- (sql/transitions.sql). Both check and
-- convert the options in one place, src/enqueue.rs (rq_job_options here),
-- and both run with the extension owner's rights: a producer needs EXECUTE
-- on them and no privilege on the table (see rq_grant_producer).
--
-- A retry delay left NULL is the table's default (1 second, 12 hours and
-- 1 second: src/limits.rs).

-- Many jobs of one queue in one call: a C function (src/enqueue_batch.rs)
-- that writes plain jobs directly and runs rq_enqueue_batch_planned
-- (sql/transitions.sql)
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
