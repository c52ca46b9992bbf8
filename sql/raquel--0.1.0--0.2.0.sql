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
-- * Nothing runs with the extension's rights that a role could plant: every
--   function that resolves a name pins search_path = pg_catalog, pg_temp;
--   the rq_jobs view converts with rq_ms_to_timestamptz / rq_ms_to_interval
--   instead of operators resolved when the view was made; the duties,
--   rq_worker_wake and the trigger functions are no longer for PUBLIC.
-- * rq_job_events replaces rq_jobs_inserted as the insert trigger, and
--   rq_job_ready_again (for roles that may update jobs) replaces
--   rq_wait_notify: every verb that makes a job ready wakes waiting claims,
--   and both note deadlines for the background worker; an event trigger
--   ends waiting claims before a DROP EXTENSION.
-- * Bad input is refused up front (names, arrays, payload sizes, times past
--   the last timestamp), the grant helpers refuse NULL and unknown roles,
--   the worker role may read rq_jobs.
-- * The index of every queue's ready jobs gets a predicate that keeps
--   claims on one queue off it.
-- Nothing here rewrites the table or touches a job: the two indexes rebuilt
-- (jobs_lease_idx, jobs_ready_idx) hold only claimed and ready jobs.

-- The library's new functions: bounds and defaults (src/limits.rs), refusals
-- (src/errors.rs), checks, conversions, what a caller may read
-- (src/privileges.rs), as `cargo pgrx schema` writes them.
CREATE FUNCTION "rq_default_backoff_base"() RETURNS INT /* i32 */
IMMUTABLE STRICT PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'rq_default_backoff_base_wrapper';
CREATE FUNCTION "rq_default_lease"() RETURNS interval /* Interval */
IMMUTABLE STRICT PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'rq_default_lease_wrapper';
CREATE FUNCTION "rq_default_lease_ms"() RETURNS bigint /* i64 */
IMMUTABLE STRICT PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'rq_default_lease_ms_wrapper';
CREATE FUNCTION "rq_default_max_retry_delay"() RETURNS INT /* i32 */
IMMUTABLE STRICT PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'rq_default_max_retry_delay_wrapper';
CREATE FUNCTION "rq_default_min_retry_delay"() RETURNS INT /* i32 */
IMMUTABLE STRICT PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'rq_default_min_retry_delay_wrapper';
CREATE FUNCTION "rq_delay_ms"(
	"value" interval, /* Interval */
	"name" TEXT /* & str */
) RETURNS bigint /* i64 */
IMMUTABLE STRICT PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'rq_delay_ms_wrapper';
CREATE FUNCTION "rq_lease_ms"(
	"lease" interval /* Option < Interval > */
) RETURNS bigint /* i64 */
IMMUTABLE PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'rq_lease_ms_wrapper';
CREATE FUNCTION "rq_retention_ms"(
	"retention" interval /* Option < Interval > */
) RETURNS bigint /* i64 */
STABLE PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'rq_retention_ms_wrapper';
CREATE FUNCTION "rq_refuse"(
	"refusal" TEXT, /* Option < & str > */
	"refused" TEXT[] /* :: std :: option :: Option < Vec < Option < String > > > */
) RETURNS void
VOLATILE PARALLEL SAFE
SET search_path TO pg_catalog, pg_temp
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'rq_refuse_wrapper';
CREATE FUNCTION "rq_check_arrays"(
	"names" TEXT[], /* :: std :: option :: Option < Vec < Option < String > > > */
	"dimensions" INT[], /* :: std :: option :: Option < Vec < Option < i32 > > > */
	"keys" TEXT[] /* :: std :: option :: Option < Vec < Option < String > > > */
) RETURNS void
IMMUTABLE PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'rq_check_arrays_wrapper';
CREATE FUNCTION "rq_caller_may_read"(
	"relation" oid /* pg_sys :: Oid */
) RETURNS bool /* bool */
STRICT STABLE PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'rq_caller_may_read_wrapper';
CREATE FUNCTION "rq_due_ms"(
	"at" timestamp with time zone, /* Option < TimestampWithTimeZone > */
	"delay" interval /* Option < Interval > */
) RETURNS bigint /* Option < i64 > */
VOLATILE PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'rq_due_ms_wrapper';
CREATE FUNCTION "rq_ms_to_interval"(
	"ms" bigint /* i64 */
) RETURNS interval /* Interval */
IMMUTABLE STRICT PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'rq_ms_to_interval_wrapper';
CREATE FUNCTION "rq_ms_to_timestamptz"(
	"ms" bigint /* i64 */
) RETURNS timestamp with time zone /* TimestampWithTimeZone */
IMMUTABLE STRICT PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'rq_ms_to_timestamptz_wrapper';
CREATE FUNCTION "rq_job_ready_again"(
	"queue" TEXT, /* Option < & str > */
	"scheduled_at" bigint, /* Option < i64 > */
	"max_age" bigint /* Option < i64 > */
) RETURNS void
VOLATILE PARALLEL UNSAFE
SET search_path TO pg_catalog, pg_temp
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'rq_job_ready_again_wrapper';

-- rq_raise_cannot moves into the library (same arguments, same errors);
-- it, rq_job_options and rq_worker_wake run SQL, so their search_path is pinned.
CREATE OR REPLACE FUNCTION "rq_raise_cannot"(
	"id" uuid, /* Option < pgrx :: Uuid > */
	"attempt" INT, /* Option < i32 > */
	"verb" TEXT, /* & str */
	"allowed" TEXT[] /* Vec < Option < String > > */
) RETURNS void
VOLATILE PARALLEL UNSAFE
SET search_path TO pg_catalog, pg_temp
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'rq_raise_cannot_wrapper';
CREATE OR REPLACE FUNCTION "rq_job_options"(
	"queue" TEXT, /* Option < & str > */
	"at" timestamp with time zone, /* Option < TimestampWithTimeZone > */
	"delay" interval, /* Option < Interval > */
	"max_age" interval, /* Option < Interval > */
	"max_retry_count" INT, /* Option < i32 > */
	"min_retry_delay" interval, /* Option < Interval > */
	"max_retry_delay" interval, /* Option < Interval > */
	"backoff_base" interval /* Option < Interval > */
) RETURNS TABLE (
	"now_ms" bigint,  /* i64 */
	"due_ms" bigint,  /* i64 */
	"max_age_ms" bigint,  /* Option < i64 > */
	"min_retry_delay_ms" bigint,  /* i64 */
	"max_retry_delay_ms" bigint,  /* i64 */
	"backoff_base_ms" bigint  /* i64 */
)
VOLATILE PARALLEL SAFE
SET search_path TO pg_catalog, pg_temp
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'rq_job_options_wrapper';
CREATE OR REPLACE FUNCTION "rq_worker_wake"() RETURNS bool /* bool */
STRICT VOLATILE PARALLEL UNSAFE
SET search_path TO pg_catalog, pg_temp
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'rq_worker_wake_wrapper';

-- The table reads its defaults from there; the lease index too (its
-- expression changes, so it is built again).
ALTER TABLE jobs
    ALTER COLUMN min_retry_delay SET DEFAULT rq_default_min_retry_delay(),
    ALTER COLUMN max_retry_delay SET DEFAULT rq_default_max_retry_delay(),
    ALTER COLUMN backoff_base SET DEFAULT rq_default_backoff_base();
DROP INDEX jobs_lease_idx;
CREATE INDEX jobs_lease_idx ON jobs ((coalesce(lease_expires_at, claimed_at + rq_default_lease_ms())))
    WHERE status = 'claimed' AND coalesce(lease_expires_at, claimed_at + rq_default_lease_ms()) IS NOT NULL;

-- The index of every queue's ready jobs is for claims on any queue alone
-- (sql/schema.sql says why): built again with its new predicate; it holds
-- only ready jobs.
DROP INDEX jobs_ready_idx;
CREATE INDEX jobs_ready_idx
    ON jobs (priority DESC, scheduled_at, id)
    WHERE status IN ('queued', 'failed') AND priority >= -2147483648;

-- Gone: the waiting claim's PL/pgSQL loop and the helpers it called (a
-- waiting claim loops in the library), rq_wait_notify (the jobs table's
-- triggers wake waiting claims for every job made ready), and the insert
-- trigger's function, which becomes rq_job_events below.
DROP FUNCTION rq_claim_waiting(text[], text, integer, interval, bigint);
DROP FUNCTION rq_wait_register(text[]);
DROP FUNCTION rq_wait_sleep(bigint);
DROP FUNCTION rq_wait_unregister();
DROP FUNCTION rq_wait_notify(text, bigint);
DROP TRIGGER jobs_enqueued ON jobs;
DROP FUNCTION rq_jobs_inserted();

-- Every function the install script writes in SQL, replaced with its 0.2.0
-- definition exactly as sql/<idea>.sql has it: the bodies that changed, and
-- for all of them the pinned search_path (pg_catalog, pg_temp), so that no
-- role can plant a function or operator that one of them would run.
-- CREATE OR REPLACE keeps each function's OID and grants, so a session that
-- has kept plans for one goes on using them.

-- sql/enqueue.sql: rq_enqueue_batch
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
    new_ids  uuid[];
    missing  text;
    may_read boolean;
BEGIN
    SELECT * INTO o FROM @extschema@.rq_job_options(rq_enqueue_batch.queue, rq_enqueue_batch.at,
        rq_enqueue_batch.delay, rq_enqueue_batch.max_age, rq_enqueue_batch.max_retry_count,
        rq_enqueue_batch.min_retry_delay, rq_enqueue_batch.max_retry_delay, rq_enqueue_batch.backoff_base);
    IF payloads IS NULL THEN
        PERFORM @extschema@.rq_refuse('payloads_null', '{}');
    END IF;
    PERFORM @extschema@.rq_check_arrays(ARRAY['payloads', 'keys'], ARRAY[array_ndims(payloads), array_ndims(keys)], keys);

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

    -- The jobs that held keys already: whole for a caller who may read the
    -- table, otherwise only their id, queue and key (src/privileges.rs).
    may_read := @extschema@.rq_caller_may_read('@extschema@.jobs'::regclass);
    RETURN QUERY
    SELECT j.* FROM @extschema@.jobs j WHERE j.id = ANY (new_ids)
    UNION ALL
    SELECT (CASE WHEN may_read THEN j
                 ELSE json_populate_record(NULL::@extschema@.jobs, json_build_object('id', j.id, 'queue', j.queue, 'key', j.key))
            END).*
    FROM @extschema@.jobs j
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

-- sql/enqueue.sql: rq_enqueue_batch
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
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN QUERY SELECT * FROM @extschema@.rq_enqueue_batch($1, $2::text[], $3, $4, $5, $6, $7, $8, $9, $10, $11);
END
$$;

-- sql/enqueue.sql: rq_enqueue
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

-- sql/enqueue.sql: rq_enqueue
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

-- sql/enqueue.sql: rq_enqueue_trigger
CREATE OR REPLACE FUNCTION rq_enqueue_trigger() RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF TG_LEVEL <> 'ROW' THEN
        PERFORM @extschema@.rq_refuse('trigger_per_statement', ARRAY[TG_NAME, TG_TABLE_SCHEMA, TG_TABLE_NAME]);
    END IF;
    IF TG_WHEN = 'INSTEAD OF' THEN
        PERFORM @extschema@.rq_refuse('trigger_instead_of', ARRAY[TG_NAME, TG_TABLE_SCHEMA, TG_TABLE_NAME]);
    END IF;
    IF TG_RELID = '@extschema@.jobs'::regclass THEN
        PERFORM @extschema@.rq_refuse('trigger_on_jobs', ARRAY[TG_NAME, TG_TABLE_SCHEMA, TG_TABLE_NAME]);
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

-- sql/claim.sql: rq_claim
CREATE OR REPLACE FUNCTION rq_claim(
    queues text[]   DEFAULT NULL,
    worker text     DEFAULT NULL,
    batch  integer  DEFAULT 1,
    lease  interval DEFAULT rq_default_lease(),
    wait   interval DEFAULT '0'
) RETURNS SETOF jobs
LANGUAGE c VOLATILE ROWS 1
SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'rq_claim_c';

-- sql/claim.sql: rq_drop_started
CREATE OR REPLACE FUNCTION rq_drop_started() RETURNS event_trigger
LANGUAGE c
AS 'MODULE_PATHNAME', 'rq_drop_started';

-- sql/finish.sql: rq_complete
CREATE OR REPLACE FUNCTION rq_complete(id uuid, attempt integer DEFAULT NULL) RETURNS jobs
LANGUAGE c VOLATILE
SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'rq_complete_c';

-- sql/finish.sql: rq_fail
CREATE OR REPLACE FUNCTION rq_fail(
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
    IF job.status = 'failed' THEN
        -- to be retried: wake a waiting claim at commit (src/events.rs)
        PERFORM @extschema@.rq_job_ready_again(job.queue, job.scheduled_at, job.max_age);
    END IF;
    RETURN job;
END
$$;

-- sql/finish.sql: rq_complete_batch
CREATE OR REPLACE FUNCTION rq_complete_batch(ids uuid[], attempts integer[] DEFAULT NULL) RETURNS SETOF jobs
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    done @extschema@.jobs[];
    miss record;
BEGIN
    IF ids IS NULL THEN
        PERFORM @extschema@.rq_refuse('ids_null', '{}');
    END IF;
    PERFORM @extschema@.rq_check_arrays(ARRAY['ids', 'attempts'], ARRAY[array_ndims(ids), array_ndims(attempts)], NULL);
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

-- sql/lifecycle.sql: rq_reschedule
CREATE OR REPLACE FUNCTION rq_reschedule(
    id      uuid,
    at      timestamptz DEFAULT NULL,
    delay   interval    DEFAULT NULL,
    attempt integer     DEFAULT NULL
) RETURNS jobs
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    now_ms bigint := @extschema@.rq_now_ms();
    due_ms bigint := @extschema@.rq_due_ms(rq_reschedule.at, rq_reschedule.delay);
    job    @extschema@.jobs;
BEGIN
    UPDATE @extschema@.jobs j
    SET status = 'queued',
        scheduled_at = coalesce(due_ms, now_ms + coalesce(j.min_retry_delay, @extschema@.rq_default_min_retry_delay())),
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
    -- ready again: wake a waiting claim at commit (src/events.rs)
    PERFORM @extschema@.rq_job_ready_again(job.queue, job.scheduled_at, job.max_age);
    RETURN job;
END
$$;

-- sql/lifecycle.sql: rq_reject
CREATE OR REPLACE FUNCTION rq_reject(id uuid, attempt integer DEFAULT NULL) RETURNS jobs
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    job @extschema@.jobs;
BEGIN
    UPDATE @extschema@.jobs j
    SET status = 'queued', claimed_by = NULL, claimed_at = NULL,
        requeues = j.requeues + 1, lease_expires_at = NULL
    WHERE j.id = rq_reject.id
      AND j.status = 'claimed'
      AND (rq_reject.attempt IS NULL OR j.attempts = rq_reject.attempt)
    RETURNING j.* INTO job;
    IF NOT FOUND THEN
        PERFORM @extschema@.rq_raise_cannot(rq_reject.id, rq_reject.attempt, 'reject', '{claimed}');
    END IF;
    -- ready again: wake a waiting claim at commit (src/events.rs)
    PERFORM @extschema@.rq_job_ready_again(job.queue, job.scheduled_at, job.max_age);
    RETURN job;
END
$$;

-- sql/lifecycle.sql: rq_extend
CREATE OR REPLACE FUNCTION rq_extend(id uuid, lease interval DEFAULT rq_default_lease(), attempt integer DEFAULT NULL)
RETURNS jobs
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
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

-- sql/lifecycle.sql: rq_cancel
CREATE OR REPLACE FUNCTION rq_cancel(id uuid) RETURNS jobs
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    job @extschema@.jobs;
BEGIN
    UPDATE @extschema@.jobs j
    SET status = 'cancelled', finished_at = @extschema@.rq_now_ms(), lease_expires_at = NULL
    WHERE j.id = rq_cancel.id AND j.status IN ('queued', 'claimed', 'failed')
    RETURNING j.* INTO job;
    IF NOT FOUND THEN
        PERFORM @extschema@.rq_raise_cannot(rq_cancel.id, NULL, 'cancel', '{queued,claimed,failed}');
    END IF;
    RETURN job;
END
$$;

-- sql/lifecycle.sql: rq_retry
CREATE OR REPLACE FUNCTION rq_retry(id uuid) RETURNS jobs
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
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
    -- ready again: wake a waiting claim at commit (src/events.rs)
    PERFORM @extschema@.rq_job_ready_again(job.queue, job.scheduled_at, job.max_age);
    RETURN job;
EXCEPTION WHEN unique_violation THEN
    -- an ended job's key was taken by a newer job that is still unfinished
    PERFORM @extschema@.rq_refuse('retry_key_taken', ARRAY[rq_retry.id::text]);
END
$$;

-- sql/observe.sql: rq_stats
CREATE OR REPLACE FUNCTION rq_stats()
RETURNS TABLE (queue text, total bigint, queued bigint, claimed bigint, success bigint,
               failed bigint, expired bigint, exhausted bigint, cancelled bigint,
               ready bigint, oldest_ready_age interval)
LANGUAGE sql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT j.queue,
           count(*),
           count(*) FILTER (WHERE j.status = 'queued'),
           count(*) FILTER (WHERE j.status = 'claimed'),
           count(*) FILTER (WHERE j.status = 'success'),
           count(*) FILTER (WHERE j.status = 'failed'),
           count(*) FILTER (WHERE j.status = 'expired'),
           count(*) FILTER (WHERE j.status = 'exhausted'),
           count(*) FILTER (WHERE j.status = 'cancelled'),
           count(*) FILTER (WHERE r.ready),
           (clock.ms - min(j.scheduled_at) FILTER (WHERE r.ready)) * interval '1 millisecond'
    FROM @extschema@.jobs j
    CROSS JOIN (SELECT @extschema@.rq_now_ms() AS ms) clock
    CROSS JOIN LATERAL (
        SELECT j.status IN ('queued', 'failed') AND j.scheduled_at <= clock.ms
               AND (j.max_age IS NULL OR j.scheduled_at + j.max_age > clock.ms) AS ready
    ) r
    GROUP BY j.queue, clock.ms
    ORDER BY j.queue
$$;

-- sql/observe.sql: rq_queues
CREATE OR REPLACE FUNCTION rq_queues() RETURNS SETOF text
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT DISTINCT j.queue FROM @extschema@.jobs j ORDER BY j.queue
$$;

-- sql/observe.sql: rq_count
CREATE OR REPLACE FUNCTION rq_count(queue text DEFAULT NULL, statuses text[] DEFAULT NULL) RETURNS bigint
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT count(*) FROM @extschema@.jobs j
    WHERE ($1 IS NULL OR j.queue = $1) AND ($2 IS NULL OR j.status = ANY ($2))
$$;

-- sql/events.sql: rq_channel
CREATE OR REPLACE FUNCTION rq_channel(queue text) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT CASE WHEN octet_length($1) <= 60 THEN 'rq_' || $1 ELSE 'rq_' || md5($1) END
$$;

-- sql/privileges.sql: rq_grant_producer
CREATE OR REPLACE FUNCTION rq_grant_producer(role regrole) RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF role IS NULL OR role::oid = 0 THEN
        PERFORM @extschema@.rq_refuse('role_null', ARRAY['rq_grant_producer']);
    END IF;
    IF NOT EXISTS (SELECT FROM pg_roles r WHERE r.oid = role) THEN
        PERFORM @extschema@.rq_refuse('role_unknown', ARRAY['rq_grant_producer', role::oid::text]);
    END IF;
    EXECUTE format('GRANT USAGE ON SCHEMA %s TO %s', '@extschema@', role);
    EXECUTE format('GRANT EXECUTE ON FUNCTION
        %1$s.rq_enqueue(text, text, timestamptz, interval, interval, integer, interval, interval, interval, integer, text),
        %1$s.rq_enqueue(text, jsonb, timestamptz, interval, interval, integer, interval, interval, interval, integer, text),
        %1$s.rq_enqueue_batch(text, text[], timestamptz, interval, interval, integer, interval, interval, interval, integer, text[]),
        %1$s.rq_enqueue_batch(text, jsonb[], timestamptz, interval, interval, integer, interval, interval, interval, integer, text[]),
        %1$s.rq_enqueue_trigger()
        TO %2$s', '@extschema@', role);
END
$$;

-- sql/privileges.sql: rq_grant_worker
CREATE OR REPLACE FUNCTION rq_grant_worker(role regrole) RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF role IS NULL OR role::oid = 0 THEN
        PERFORM @extschema@.rq_refuse('role_null', ARRAY['rq_grant_worker']);
    END IF;
    IF NOT EXISTS (SELECT FROM pg_roles r WHERE r.oid = role) THEN
        PERFORM @extschema@.rq_refuse('role_unknown', ARRAY['rq_grant_worker', role::oid::text]);
    END IF;
    EXECUTE format('GRANT USAGE ON SCHEMA %s TO %s', '@extschema@', role);
    EXECUTE format('GRANT SELECT, UPDATE ON %s.jobs TO %s', '@extschema@', role);
    EXECUTE format('GRANT SELECT ON %s.rq_jobs TO %s', '@extschema@', role);
END
$$;

-- sql/duties.sql: rq_expire
CREATE OR REPLACE FUNCTION rq_expire(batch integer DEFAULT 1000) RETURNS bigint
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
DECLARE
    now_ms  bigint := @extschema@.rq_now_ms();
    changed bigint;
BEGIN
    PERFORM @extschema@.rq_check_batch(batch);
    WITH due AS (
        SELECT j.id FROM @extschema@.jobs j
        WHERE j.status IN ('queued', 'failed') AND j.max_age IS NOT NULL
          AND j.scheduled_at + j.max_age <= now_ms
        ORDER BY j.scheduled_at + j.max_age
        LIMIT batch
        FOR UPDATE SKIP LOCKED
    )
    UPDATE @extschema@.jobs j SET status = 'expired', finished_at = now_ms
    FROM due WHERE j.id = due.id;
    GET DIAGNOSTICS changed = ROW_COUNT;
    RETURN changed;
END
$$;

-- sql/duties.sql: rq_rescue
CREATE OR REPLACE FUNCTION rq_rescue(batch integer DEFAULT 1000) RETURNS bigint
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
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

-- sql/duties.sql: rq_prune
CREATE OR REPLACE FUNCTION rq_prune(batch integer DEFAULT 1000, retention interval DEFAULT NULL) RETURNS bigint
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
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

-- The jobs table's insert trigger (sql/events.sql), under its new name.
CREATE FUNCTION rq_job_events() RETURNS trigger
LANGUAGE c
AS 'MODULE_PATHNAME', 'rq_job_events';

-- Only a job that can be claimed wakes anyone: a bulk load of finished
-- jobs queues no trigger events at all.
CREATE TRIGGER jobs_enqueued
    AFTER INSERT ON jobs
    FOR EACH ROW WHEN (NEW.status IN ('queued', 'failed'))
    EXECUTE FUNCTION rq_job_events();

-- A DROP EXTENSION ends the waiting claims first (sql/claim.sql).
CREATE EVENT TRIGGER rq_drop_started ON ddl_command_start
    WHEN TAG IN ('DROP EXTENSION')
    EXECUTE FUNCTION rq_drop_started();

-- When the background worker next has work here (sql/duties.sql).
CREATE FUNCTION rq_next_duty_ms(retention interval DEFAULT NULL) RETURNS bigint
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
    SELECT least(
        (SELECT coalesce(j.lease_expires_at, j.claimed_at + @extschema@.rq_default_lease_ms())
         FROM @extschema@.jobs j
         WHERE j.status = 'claimed'
           AND coalesce(j.lease_expires_at, j.claimed_at + @extschema@.rq_default_lease_ms()) IS NOT NULL
         ORDER BY coalesce(j.lease_expires_at, j.claimed_at + @extschema@.rq_default_lease_ms())
         LIMIT 1),
        (SELECT j.scheduled_at + j.max_age
         FROM @extschema@.jobs j
         WHERE j.status IN ('queued', 'failed') AND j.max_age IS NOT NULL
         ORDER BY j.scheduled_at + j.max_age
         LIMIT 1),
        (SELECT j.finished_at + keep.ms
         FROM @extschema@.jobs j, (SELECT @extschema@.rq_retention_ms($1) AS ms) keep
         WHERE j.status IN ('success', 'cancelled', 'expired', 'exhausted') AND keep.ms > 0
         ORDER BY j.finished_at
         LIMIT 1))
$$;

-- The view converts with the library's functions instead of arithmetic whose
-- operators the install script would resolve (sql/observe.sql says why).
-- An install of 0.1.0 in a schema where a role could plant a better-matching
-- operator before CREATE EXTENSION may have a view that bound it, with a
-- column of another type, which CREATE OR REPLACE VIEW cannot change
-- (42P16): such a view is dropped and made again, with its grants. A view
-- of the user's own built on it stops that; the error then says what to do.
DO $do$
DECLARE
    grants aclitem[];
    g      record;
BEGIN
    BEGIN
        CREATE OR REPLACE VIEW rq_jobs AS
        SELECT j.id, j.queue, j.status, j.priority, j.attempts, j.requeues, j.max_retry_count,
               j.payload, j.error, j.claimed_by,
               rq_ms_to_timestamptz(j.enqueued_at)      AS enqueued_at,
               rq_ms_to_timestamptz(j.scheduled_at)     AS scheduled_at,
               rq_ms_to_timestamptz(j.claimed_at)       AS claimed_at,
               rq_ms_to_timestamptz(j.lease_expires_at) AS lease_expires_at,
               rq_ms_to_timestamptz(j.finished_at)      AS finished_at,
               rq_ms_to_interval(j.max_age)                  AS max_age,
               rq_ms_to_interval(j.min_retry_delay::bigint)  AS min_retry_delay,
               rq_ms_to_interval(j.max_retry_delay::bigint)  AS max_retry_delay,
               rq_ms_to_interval(j.backoff_base::bigint)     AS backoff_base,
               j.error_trace
        FROM jobs j;
    EXCEPTION WHEN invalid_table_definition THEN
        SELECT c.relacl INTO grants FROM pg_catalog.pg_class c WHERE c.oid = '@extschema@.rq_jobs'::pg_catalog.regclass;
        BEGIN
            DROP VIEW @extschema@.rq_jobs;
        EXCEPTION WHEN dependent_objects_still_exist THEN
            RAISE EXCEPTION 'the view rq_jobs of this 0.1.0 install was bound to an operator planted before CREATE EXTENSION, and views of yours are built on it'
                USING ERRCODE = 'dependent_objects_still_exist',
                      HINT = 'Drop the views built on rq_jobs (\d+ rq_jobs lists them), run ALTER EXTENSION raquel UPDATE, and make them again.';
        END;
        CREATE VIEW rq_jobs AS
        SELECT j.id, j.queue, j.status, j.priority, j.attempts, j.requeues, j.max_retry_count,
               j.payload, j.error, j.claimed_by,
               rq_ms_to_timestamptz(j.enqueued_at)      AS enqueued_at,
               rq_ms_to_timestamptz(j.scheduled_at)     AS scheduled_at,
               rq_ms_to_timestamptz(j.claimed_at)       AS claimed_at,
               rq_ms_to_timestamptz(j.lease_expires_at) AS lease_expires_at,
               rq_ms_to_timestamptz(j.finished_at)      AS finished_at,
               rq_ms_to_interval(j.max_age)                  AS max_age,
               rq_ms_to_interval(j.min_retry_delay::bigint)  AS min_retry_delay,
               rq_ms_to_interval(j.max_retry_delay::bigint)  AS max_retry_delay,
               rq_ms_to_interval(j.backoff_base::bigint)     AS backoff_base,
               j.error_trace
        FROM jobs j;
        FOR g IN
            SELECT a.grantee, a.privilege_type, a.is_grantable FROM pg_catalog.aclexplode(grants) a
            WHERE a.grantee <> (SELECT c.relowner FROM pg_catalog.pg_class c
                                WHERE c.oid = '@extschema@.rq_jobs'::pg_catalog.regclass)
        LOOP
            EXECUTE pg_catalog.format('GRANT %s ON @extschema@.rq_jobs TO %s%s', g.privilege_type,
                CASE WHEN g.grantee = 0 THEN 'PUBLIC' ELSE g.grantee::regrole::text END,
                CASE WHEN g.is_grantable THEN ' WITH GRANT OPTION' ELSE '' END);
        END LOOP;
    END;
END
$do$;

-- What starts work in the server is not for PUBLIC (sql/privileges.sql).
REVOKE EXECUTE ON FUNCTION
    rq_enqueue(text, text, timestamptz, interval, interval, integer, interval, interval, interval, integer, text),
    rq_enqueue(text, jsonb, timestamptz, interval, interval, integer, interval, interval, interval, integer, text),
    rq_enqueue_batch(text, text[], timestamptz, interval, interval, integer, interval, interval, interval, integer, text[]),
    rq_enqueue_batch(text, jsonb[], timestamptz, interval, interval, integer, interval, interval, interval, integer, text[]),
    rq_expire(integer), rq_rescue(integer), rq_prune(integer, interval), rq_next_duty_ms(interval),
    rq_worker_wake(),
    rq_enqueue_trigger(), rq_job_events(), rq_drop_started()
FROM PUBLIC;

-- Let the background worker find the updated install now rather than at
-- its next look.
SELECT rq_worker_wake();
