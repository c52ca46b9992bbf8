-- raquel 0.5.0 -> 0.6.0: raquel calls its own functions only in
-- raquel_internal (sql/privileges.sql says why). Every public function
-- that raquel's own code, its background worker or its dashboard calls
-- gets a twin there: the C ones are declared twice over one symbol, the
-- PL/pgSQL ones move there whole and leave an entry point of their public
-- name. The functions that called them by their public names, the jobs
-- table's defaults and the views rq_jobs and rq_schedules now name the
-- twins. The twins of the functions not for PUBLIC are not for PUBLIC
-- either, and a role that may run rq_enqueue or rq_enqueue_batch may run
-- their twins. rq_warnings() is new: it says when roles other than the
-- owner may create in the extension's schema, and so does the update.
--
-- Fencing by default: every verb that acts on a claimed job takes the
-- attempt as its second argument and requires it (rq_complete, rq_fail,
-- rq_complete_batch, rq_fail_and_claim, rq_step, rq_reschedule, rq_reject,
-- rq_extend, rq_sleep, rq_wait_event are replaced; a call that leaves the
-- attempt out fails instead of acting on whatever attempt holds the job).

-- The verbs whose arguments change (the attempt second and required)
-- step aside under a name of their own; their grants are carried to
-- the new ones below, and then they go.
ALTER FUNCTION @extschema@.rq_complete(uuid, integer, jsonb) RENAME TO rq_complete_0_5_0;
ALTER FUNCTION @extschema@.rq_fail(uuid, text, text, integer) RENAME TO rq_fail_0_5_0;
ALTER FUNCTION @extschema@.rq_complete_batch(uuid[], integer[], jsonb[]) RENAME TO rq_complete_batch_0_5_0;
ALTER FUNCTION @extschema@.rq_fail_and_claim(uuid, text, text, integer, text[], text, integer, interval, interval) RENAME TO rq_fail_and_claim_0_5_0;
ALTER FUNCTION @extschema@.rq_step(uuid, text, jsonb, integer) RENAME TO rq_step_0_5_0;
ALTER FUNCTION @extschema@.rq_reschedule(uuid, timestamptz, interval, integer) RENAME TO rq_reschedule_0_5_0;
ALTER FUNCTION @extschema@.rq_reject(uuid, integer) RENAME TO rq_reject_0_5_0;
ALTER FUNCTION @extschema@.rq_extend(uuid, interval, integer) RENAME TO rq_extend_0_5_0;
ALTER FUNCTION @extschema@.rq_sleep(uuid, text, timestamptz, interval, integer) RENAME TO rq_sleep_0_5_0;
ALTER FUNCTION @extschema@.rq_wait_event(uuid, text, text, interval, integer) RENAME TO rq_wait_event_0_5_0;

-- new: raquel_internal.rq_backoff(int, int, int, int)
CREATE  FUNCTION raquel_internal."rq_backoff"(
	"attempt" INT, /* i32 */
	"backoff_base" INT, /* i32 */
	"min_retry_delay" INT, /* i32 */
	"max_retry_delay" INT /* i32 */
) RETURNS bigint /* i64 */
IMMUTABLE STRICT PARALLEL SAFE 
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'rq_backoff_wrapper';

-- new: raquel_internal.rq_caller()
CREATE  FUNCTION raquel_internal."rq_caller"() RETURNS oid /* pg_sys :: Oid */
STRICT STABLE PARALLEL SAFE 
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'rq_caller_wrapper';

-- new: raquel_internal.rq_check_event_payload(text, int)
CREATE  FUNCTION raquel_internal."rq_check_event_payload"(
	"event" TEXT, /* Option < & str > */
	"size" INT /* Option < i32 > */
) RETURNS void
STABLE PARALLEL SAFE 
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'rq_check_event_payload_wrapper';

-- new: raquel_internal.rq_due_within_ms(timestamp with time zone, interval, text)
CREATE  FUNCTION raquel_internal."rq_due_within_ms"(
	"at" timestamp with time zone, /* Option < TimestampWithTimeZone > */
	"delay" interval, /* Option < Interval > */
	"verb" TEXT /* Option < & str > */
) RETURNS bigint /* Option < i64 > */
VOLATILE PARALLEL SAFE 
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'rq_due_within_ms_wrapper';

-- new: raquel_internal.rq_event_keep_ms(interval)
CREATE  FUNCTION raquel_internal."rq_event_keep_ms"(
	"keep" interval /* Option < Interval > */
) RETURNS bigint /* Option < i64 > */
STABLE PARALLEL SAFE 
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'rq_event_keep_ms_wrapper';

-- new: raquel_internal.rq_metrics_lost()
CREATE  FUNCTION raquel_internal."rq_metrics_lost"() RETURNS bigint /* i64 */
STRICT VOLATILE PARALLEL SAFE 
SET search_path TO pg_catalog, pg_temp
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'rq_metrics_lost_wrapper';

-- new: raquel_internal.rq_ms_to_interval(bigint)
CREATE  FUNCTION raquel_internal."rq_ms_to_interval"(
	"ms" bigint /* i64 */
) RETURNS interval /* Interval */
IMMUTABLE STRICT PARALLEL SAFE 
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'rq_ms_to_interval_wrapper';

-- new: raquel_internal.rq_ms_to_timestamptz(bigint)
CREATE  FUNCTION raquel_internal."rq_ms_to_timestamptz"(
	"ms" bigint /* i64 */
) RETURNS timestamp with time zone /* TimestampWithTimeZone */
IMMUTABLE STRICT PARALLEL SAFE 
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'rq_ms_to_timestamptz_wrapper';

-- new: raquel_internal.rq_now_ms()
CREATE  FUNCTION raquel_internal."rq_now_ms"() RETURNS bigint /* i64 */
STRICT VOLATILE PARALLEL SAFE 
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'rq_now_ms_wrapper';

-- new: raquel_internal.rq_require_attempt(uuid, int, text)
CREATE  FUNCTION raquel_internal."rq_require_attempt"(
	"id" uuid, /* Option < pgrx :: Uuid > */
	"attempt" INT, /* Option < i32 > */
	"verb" TEXT /* Option < & str > */
) RETURNS void
STABLE PARALLEL SAFE 
SET search_path TO pg_catalog, pg_temp
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'rq_require_attempt_wrapper';

-- new: raquel_internal.rq_uuid7()
CREATE  FUNCTION raquel_internal."rq_uuid7"() RETURNS uuid /* pgrx :: Uuid */
STRICT VOLATILE PARALLEL SAFE 
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'rq_uuid7_wrapper';

-- new: raquel_internal.rq_worker_wake()
CREATE  FUNCTION raquel_internal."rq_worker_wake"() RETURNS bool /* bool */
STRICT VOLATILE PARALLEL UNSAFE 
SET search_path TO pg_catalog, pg_temp
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'rq_worker_wake_wrapper';

-- What follows a job's end is one function for the paths in SQL
-- (src/ended.rs): rq_ended takes the queues, the outcome and what the ends
-- set off, and does what rq_jobs_ended, rq_claim_ended and rq_note_metric
-- did for them (and what rq_expire on Citus left out: waking awaiters); it
-- is for roles that may update jobs.
DROP FUNCTION raquel_internal.rq_jobs_ended(uuid[]);
DROP FUNCTION raquel_internal.rq_claim_ended(text);
-- new: raquel_internal.rq_ended(uuid[], text[], text, boolean, boolean[])
CREATE  FUNCTION raquel_internal."rq_ended"(
	"ids" uuid[], /* :: std :: option :: Option < Vec < Option < pgrx :: Uuid > > > */
	"queues" TEXT[], /* :: std :: option :: Option < Vec < Option < String > > > */
	"outcome" TEXT, /* & str */
	"was_claimed" bool, /* bool */
	"sets_off" bool[] /* :: std :: option :: Option < Vec < Option < bool > > > */
) RETURNS void
VOLATILE PARALLEL UNSAFE 
SET search_path TO pg_catalog, pg_temp
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'rq_ended_wrapper';

-- new: raquel_internal.rq_kept_plans(): this backend's kept plans (src/statements.rs)
CREATE  FUNCTION raquel_internal."rq_kept_plans"() RETURNS TABLE (
	"kept" INT,  /* i32 */
	"max_kept" INT,  /* i32 */
	"runs" bigint,  /* i64 */
	"made" bigint,  /* i64 */
	"evicted" bigint,  /* i64 */
	"planned_once" bigint  /* i64 */
)
STRICT VOLATILE PARALLEL UNSAFE 
SET search_path TO pg_catalog, pg_temp
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'rq_kept_plans_wrapper';

-- new: raquel_internal.rq_kept_statements(): the statements of this backend's kept plans, whole (src/statements.rs)
CREATE  FUNCTION raquel_internal."rq_kept_statements"() RETURNS TABLE (
	"function" TEXT,  /* String */
	"statement" TEXT,  /* & '_ str */
	"variant" bigint,  /* i64 */
	"argument_types" TEXT[],  /* Vec < String > */
	"sql" TEXT  /* String */
)
STRICT VOLATILE PARALLEL UNSAFE 
SET search_path TO pg_catalog, pg_temp
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'rq_kept_statements_wrapper';

-- new: the counts of the rate limits' token buckets in shared memory
-- (src/rate_buckets.rs)
CREATE  FUNCTION raquel_internal."rq_rate_bucket_counts"() RETURNS TABLE (
	"claims_shared" bigint,  /* i64 */
	"claims_from_rows" bigint,  /* i64 */
	"buckets" INT,  /* i32 */
	"max_buckets" INT  /* i32 */
)
STRICT VOLATILE PARALLEL SAFE 
SET search_path TO pg_catalog, pg_temp
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'rq_rate_bucket_counts_wrapper';

-- new: the counts of the places claimed under each queue's max_claimed, in
-- shared memory (src/claim_slots.rs)
CREATE  FUNCTION raquel_internal."rq_claim_slot_counts"() RETURNS TABLE (
	"claims_shared" bigint,  /* i64 */
	"claims_from_rows" bigint,  /* i64 */
	"refreshes" bigint,  /* i64 */
	"checks" bigint,  /* i64 */
	"slots" INT,  /* i32 */
	"max_slots" INT  /* i32 */
)
STRICT VOLATILE PARALLEL SAFE 
SET search_path TO pg_catalog, pg_temp
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'rq_claim_slot_counts_wrapper';

-- new: raquel_internal.rq_cursor_counts(): the claim cursors' counts, server-wide (src/cursors.rs)
CREATE  FUNCTION raquel_internal."rq_cursor_counts"() RETURNS TABLE (
	"claims_with_cursors" bigint,  /* i64 */
	"claims_without_cursors" bigint,  /* i64 */
	"long_names" bigint,  /* i64 */
	"too_many_priorities" bigint,  /* i64 */
	"places_given_up" bigint,  /* i64 */
	"places" INT,  /* i32 */
	"max_name_bytes" INT,  /* i32 */
	"max_priorities" INT  /* i32 */
)
STRICT VOLATILE PARALLEL SAFE 
SET search_path TO pg_catalog, pg_temp
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'rq_cursor_counts_wrapper';

-- new: raquel_internal.rq_cursor_state(oid, text): how the claim cursors keep a queue, for rq_stats (src/cursors.rs)
CREATE  FUNCTION raquel_internal."rq_cursor_state"(
	"jobs" oid, /* pgrx::pg_sys::Oid */
	"queue" TEXT /* &str */
) RETURNS TEXT /* &str */
STRICT VOLATILE PARALLEL SAFE 
SET search_path TO pg_catalog, pg_temp
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'rq_cursor_state_wrapper';

-- new: raquel_internal.rq_cancel(uuid)
CREATE FUNCTION raquel_internal.rq_cancel(id uuid) RETURNS jobs
LANGUAGE c VOLATILE
SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'rq_cancel_c';

-- new: raquel_internal.rq_check_emit_scope(text)
CREATE FUNCTION raquel_internal.rq_check_emit_scope(event text) RETURNS void
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    caller   oid := raquel_internal.rq_caller();
    prefixes text[];
BEGIN
    SELECT array_agg(e.prefix ORDER BY e.prefix) INTO prefixes
    FROM @extschema@.event_emitters e
    WHERE pg_has_role(caller, e.role, 'USAGE');
    IF prefixes IS NULL OR EXISTS (SELECT FROM unnest(prefixes) p WHERE starts_with(event, p)) THEN
        RETURN;
    END IF;
    PERFORM raquel_internal.rq_refuse('event_out_of_scope', ARRAY[event, caller::regrole::text, array_to_string(prefixes, ', ')]);
END
$$;

-- gone: the flow claim of several queues, a paused queue or limits kept in
-- a row is Rust (src/claim/flow_claim.rs), with the plain and fair claims
-- it called
DROP FUNCTION raquel_internal.rq_claim_flow(text[], text, integer, bigint);
DROP FUNCTION raquel_internal.rq_claim_ready(text[], text, integer, bigint);
DROP FUNCTION raquel_internal.rq_claim_fair(text, text, integer, bigint, integer);

-- gone: the helpers of the verbs that are Rust now (rq_reschedule,
-- rq_reject, rq_extend, rq_cancel, rq_retry: src/job_verbs.rs; and
-- rq_complete_batch: src/finish.rs); their C symbols stay for the scripts
-- before 0.6.0
DROP FUNCTION raquel_internal.rq_shard_queue(uuid);
DROP FUNCTION raquel_internal.rq_shard_queues(uuid[]);
DROP FUNCTION raquel_internal.rq_lease_ms(interval);
DROP FUNCTION raquel_internal.rq_due_ms(timestamptz, interval);

-- changed: raquel_internal.rq_deliver(emitted_events)
CREATE OR REPLACE FUNCTION raquel_internal.rq_deliver(emitted emitted_events) RETURNS bigint
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    now_ms  bigint := raquel_internal.rq_now_ms();
    waiting @extschema@.job_waits;
    reached bigint := 0;
    resumed bigint := 0;
BEGIN
    FOR waiting IN
        DELETE FROM @extschema@.job_waits w
        WHERE w.event = emitted.name AND w.since <= emitted.kept_until
        RETURNING w.*
    LOOP
        reached := reached + 1;
        IF raquel_internal.rq_resume_waiter(waiting,
               jsonb_build_object('event', emitted.name, 'payload', emitted.payload,
                                  'emitted_at', raquel_internal.rq_ms_to_timestamptz(emitted.emitted_at)),
               'event', now_ms) THEN
            resumed := resumed + 1;
        END IF;
    END LOOP;
    -- an event that waited for its reader was read by the waits it reached
    IF emitted.until_read AND reached > 0 THEN
        DELETE FROM @extschema@.emitted_events e WHERE e.id = emitted.id;
    END IF;
    RETURN resumed;
END
$$;

-- new: raquel_internal.rq_distributed()
CREATE FUNCTION raquel_internal.rq_distributed() RETURNS boolean
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF pg_catalog.to_regclass('pg_catalog.pg_dist_partition') IS NULL THEN
        RETURN false;
    END IF;
    RETURN EXISTS (SELECT 1 FROM pg_catalog.pg_dist_partition p
                   WHERE p.logicalrelid = '@extschema@.jobs'::pg_catalog.regclass);
END
$$;

-- new: raquel_internal.rq_enqueue(text, jsonb, timestamptz, interval, interval, integer, interval, interval, interval, integer, text, text, uuid[], interval)
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

-- new: raquel_internal.rq_enqueue(text, text, timestamptz, interval, interval, integer, interval, interval, interval, integer, text, text, uuid[], interval)
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

-- new: raquel_internal.rq_enqueue_batch_planned(text, text[], timestamptz, interval, interval, integer, interval, interval, interval, integer, text[], text[], uuid[])
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

-- new: raquel_internal.rq_enqueue_batch(text, text[], timestamptz, interval, interval, integer, interval, interval, interval, integer, text[], text[], uuid[])
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

-- new: raquel_internal.rq_expire(integer)
CREATE FUNCTION raquel_internal.rq_expire(batch integer DEFAULT 1000) RETURNS bigint
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
DECLARE
    now_ms  bigint := raquel_internal.rq_now_ms();
    changed bigint;
    queues  text[];
    ended   uuid[];
    sets_off boolean[];
BEGIN
    PERFORM raquel_internal.rq_check_batch(batch);
    IF raquel_internal.rq_distributed() THEN
        RETURN raquel_internal.rq_expire_distributed(batch, now_ms);
    END IF;
    WITH due AS (
        SELECT j.id FROM @extschema@.jobs j
        WHERE j.status IN ('queued', 'failed') AND j.max_age IS NOT NULL
          AND j.scheduled_at + j.max_age <= now_ms
        ORDER BY j.scheduled_at + j.max_age
        LIMIT batch
        FOR UPDATE SKIP LOCKED
    ), expired AS (
        UPDATE @extschema@.jobs j SET status = 'expired', finished_at = now_ms
        FROM due WHERE j.id = due.id
        RETURNING j.id, j.queue, j.key_period IS NOT NULL OR raquel_internal.rq_has_children(j.id) AS sets_off
    )
    SELECT count(*), array_agg(e.id), array_agg(e.queue), array_agg(e.sets_off)
    INTO changed, ended, queues, sets_off
    FROM expired e;
    -- what follows their ends (src/ended.rs): counted, their awaiters
    -- woken, what their ends set off (sql/finish.sql)
    PERFORM raquel_internal.rq_ended(ended, queues, 'expired', false, sets_off);
    RETURN changed;
END
$$;

-- new: raquel_internal.rq_fail(uuid, integer, text, text)
CREATE FUNCTION raquel_internal.rq_fail(id uuid, attempt integer, error text, error_trace text) RETURNS jobs
LANGUAGE c VOLATILE
SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'rq_fail_fenced_c';

-- new: raquel_internal.rq_fire_schedules(integer)
CREATE FUNCTION raquel_internal.rq_fire_schedules(batch integer DEFAULT 1000) RETURNS bigint
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
DECLARE
    now_ms   bigint := raquel_internal.rq_now_ms();
    schedule record;
    due      bigint[];
    slot     bigint;
    job_id   uuid;
    enqueued bigint := 0;
    failure  text;
    state    text;
BEGIN
    PERFORM raquel_internal.rq_check_batch(batch);
    FOR schedule IN
        SELECT s.* FROM @extschema@.schedules s
        WHERE s.enabled AND s.next_run_at <= now_ms
        ORDER BY s.next_run_at
        LIMIT batch
        FOR UPDATE SKIP LOCKED
    LOOP
        BEGIN
            due := raquel_internal.rq_schedule_slots(schedule.cron, schedule.timezone, schedule.next_run_at, now_ms,
                                                 schedule.catch_up);
            job_id := NULL;
            FOREACH slot IN ARRAY due LOOP
                SELECT j.id INTO job_id FROM raquel_internal.rq_enqueue(schedule.queue, schedule.payload,
                    at => raquel_internal.rq_ms_to_timestamptz(slot),
                    max_age => raquel_internal.rq_ms_to_interval(schedule.max_age),
                    max_retry_count => schedule.max_retry_count,
                    min_retry_delay => raquel_internal.rq_ms_to_interval(schedule.min_retry_delay),
                    max_retry_delay => raquel_internal.rq_ms_to_interval(schedule.max_retry_delay),
                    backoff_base => raquel_internal.rq_ms_to_interval(schedule.backoff_base),
                    priority => schedule.priority) j;
            END LOOP;
            UPDATE @extschema@.schedules s
            SET next_run_at = raquel_internal.rq_cron_next(s.cron, s.timezone, greatest(now_ms, s.next_run_at)),
                last_run_at = coalesce(due[cardinality(due)], s.last_run_at),
                last_job_id = coalesce(job_id, s.last_job_id),
                last_error = NULL
            WHERE s.name = schedule.name;
            enqueued := enqueued + cardinality(due);
        EXCEPTION WHEN OTHERS THEN
            GET STACKED DIAGNOSTICS failure = MESSAGE_TEXT, state = RETURNED_SQLSTATE;
            BEGIN
                UPDATE @extschema@.schedules s
                SET next_run_at = raquel_internal.rq_cron_next(s.cron, s.timezone, greatest(now_ms, s.next_run_at)),
                    last_error = format('%s (SQLSTATE %s)', failure, state)
                WHERE s.name = schedule.name;
                RAISE WARNING 'raquel: schedule "%" could not enqueue its job: %', schedule.name, failure
                    USING ERRCODE = state,
                          HINT = 'Its due slots were skipped; it runs again at its next slot. rq_schedules.last_error says why.';
            EXCEPTION WHEN OTHERS THEN
                UPDATE @extschema@.schedules s
                SET enabled = false, last_error = format('%s (SQLSTATE %s); disabled', failure, state)
                WHERE s.name = schedule.name;
                RAISE WARNING 'raquel: schedule "%" is disabled: %', schedule.name, failure
                    USING ERRCODE = state,
                          HINT = 'Replace it with rq_schedule, or drop it with rq_unschedule.';
            END;
        END;
    END LOOP;
    RETURN enqueued;
END
$$;

-- changed: raquel_internal.rq_expire_distributed(integer, bigint): what
-- follows the ends is src/ended.rs's (it wakes awaiters now)
CREATE OR REPLACE FUNCTION raquel_internal.rq_expire_distributed(batch integer, now_ms bigint) RETURNS bigint
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    q       text;
    changed bigint := 0;
    more    bigint;
    ended   uuid[];
    sets_off boolean[];
BEGIN
    IF NOT citus_is_coordinator() THEN
        RETURN 0;
    END IF;
    FOR q IN
        SELECT DISTINCT j.queue FROM @extschema@.jobs j
        WHERE j.status IN ('queued', 'failed') AND j.max_age IS NOT NULL
          AND j.scheduled_at + j.max_age <= now_ms
    LOOP
        EXIT WHEN changed >= batch;
        WITH due AS (
            SELECT j.id FROM @extschema@.jobs j
            WHERE j.queue = q AND j.status IN ('queued', 'failed') AND j.max_age IS NOT NULL
              AND j.scheduled_at + j.max_age <= now_ms
            ORDER BY j.scheduled_at + j.max_age
            LIMIT batch - changed
            FOR UPDATE SKIP LOCKED
        )
        , expired AS (
            UPDATE @extschema@.jobs j SET status = 'expired', finished_at = now_ms
            FROM due WHERE j.queue = q AND j.id = due.id
            RETURNING j.id, j.key_period IS NOT NULL AS sets_off
        )
        SELECT count(*), array_agg(e.id), array_agg(e.sets_off) INTO more, ended, sets_off FROM expired e;
        changed := changed + more;
        -- what follows their ends (src/ended.rs): counted, their awaiters
        -- woken, a key enqueued with a key_period held (sql/finish.sql)
        PERFORM raquel_internal.rq_ended(ended, array_fill(q, ARRAY[more::integer]), 'expired', false, sets_off);
    END LOOP;
    RETURN changed;
END
$$;

-- changed: raquel_internal.rq_hold(uuid, integer, text)
CREATE OR REPLACE FUNCTION raquel_internal.rq_hold(id uuid, attempt integer, verb text) RETURNS integer
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    holder integer;
BEGIN
    SELECT j.attempts INTO holder FROM @extschema@.jobs j
    WHERE j.id = rq_hold.id AND j.status = 'claimed' AND j.attempts = rq_hold.attempt
    FOR UPDATE OF j;
    IF NOT FOUND THEN
        PERFORM raquel_internal.rq_raise_cannot(rq_hold.id, rq_hold.attempt, verb, '{claimed}');
    END IF;
    RETURN holder;
END
$$;

-- changed: raquel_internal.rq_hold_for_parents(uuid[], uuid[])
CREATE OR REPLACE FUNCTION raquel_internal.rq_hold_for_parents(ids uuid[], after uuid[]) RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    now_ms  bigint := raquel_internal.rq_now_ms();
    missing text;
    ended   record;
    pending uuid[];
BEGIN
    IF after IS NULL OR cardinality(after) = 0 THEN
        RETURN;
    END IF;
    PERFORM raquel_internal.rq_check_arrays(ARRAY['after'], ARRAY[array_ndims(after)], NULL);
    PERFORM raquel_internal.rq_check_parents(cardinality(ids), after);
    SELECT a.id::text INTO missing FROM unnest(after) a (id)
    WHERE NOT EXISTS (SELECT FROM @extschema@.jobs p WHERE p.id = a.id)
    LIMIT 1;
    IF FOUND THEN
        PERFORM raquel_internal.rq_refuse('after_unknown', ARRAY[missing]);
    END IF;
    INSERT INTO @extschema@.job_parents (child_id, parent_id)
    SELECT c.id, p.id FROM unnest(ids) c (id) CROSS JOIN (SELECT DISTINCT a.id FROM unnest(after) a (id)) p
    ON CONFLICT DO NOTHING;
    SELECT p.id, p.status INTO ended FROM @extschema@.jobs p
    WHERE p.id = ANY (after) AND p.status IN ('exhausted', 'expired', 'cancelled')
    ORDER BY p.id LIMIT 1;
    IF FOUND THEN
        UPDATE @extschema@.jobs j
        SET status = 'cancelled', finished_at = now_ms,
            error = format('cancelled: job %s, which it runs after, ended %s', ended.id, ended.status)
        WHERE j.id = ANY (ids);
        RETURN;
    END IF;
    pending := ARRAY(SELECT DISTINCT p.id FROM @extschema@.jobs p
                     WHERE p.id = ANY (after) AND p.status <> 'success');
    IF cardinality(pending) = 0 THEN
        RETURN;
    END IF;
    INSERT INTO @extschema@.job_dependencies (parent_id, child_id)
    SELECT p.id, c.id FROM unnest(pending) p (id) CROSS JOIN unnest(ids) c (id)
    ON CONFLICT DO NOTHING;
    UPDATE @extschema@.jobs j SET status = 'blocked', blocked_by = cardinality(pending)
    WHERE j.id = ANY (ids);
END
$$;

-- changed: raquel_internal.rq_job_ended(uuid)
CREATE OR REPLACE FUNCTION raquel_internal.rq_job_ended(job uuid) RETURNS void
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

-- changed: raquel_internal.rq_job_turn()
CREATE OR REPLACE FUNCTION raquel_internal.rq_job_turn() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    now_ms bigint := raquel_internal.rq_now_ms();
BEGIN
    IF NEW.status NOT IN ('queued', 'failed') THEN
        RETURN NEW;
    END IF;
    NEW.turn := greatest(
        (SELECT max(last.turn) + 1 FROM (
            (SELECT j.turn FROM @extschema@.jobs j
             WHERE j.queue = NEW.queue AND j.group_key IS NOT NULL AND j.group_key = NEW.group_key
               AND j.status = 'queued' AND j.turn IS NOT NULL
             ORDER BY j.turn DESC
             LIMIT 1)
            UNION ALL
            (SELECT j.turn FROM @extschema@.jobs j
             WHERE j.queue = NEW.queue AND j.group_key IS NOT NULL AND j.group_key = NEW.group_key
               AND j.status = 'failed' AND j.turn IS NOT NULL
             ORDER BY j.turn DESC
             LIMIT 1)) last),
        (SELECT j.turn FROM @extschema@.jobs j
         WHERE j.queue = NEW.queue AND j.priority = NEW.priority AND j.scheduled_at <= now_ms
           AND j.group_key IS NOT NULL AND j.status IN ('queued', 'failed')
         ORDER BY j.priority DESC, j.turn
         LIMIT 1),
        1);
    IF NOT EXISTS (SELECT FROM @extschema@.queue_limits l WHERE l.queue = NEW.queue AND l.grouped) THEN
        INSERT INTO @extschema@.queue_limits AS l (queue, grouped) VALUES (NEW.queue, true)
        ON CONFLICT ON CONSTRAINT queue_limits_pkey DO UPDATE SET grouped = true;
    END IF;
    RETURN NEW;
END
$$;

-- changed: raquel_internal.rq_lapsed(integer, bigint)
CREATE OR REPLACE FUNCTION raquel_internal.rq_lapsed(batch integer, now_ms bigint)
RETURNS TABLE (id uuid, attempts integer, claimed_by text)
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
BEGIN
    IF raquel_internal.rq_distributed() THEN
        RETURN QUERY SELECT * FROM raquel_internal.rq_lapsed_distributed(batch, now_ms);
        RETURN;
    END IF;
    RETURN QUERY
        -- (attempts is a domain over integer; RETURN QUERY wants the type declared)
        SELECT j.id, j.attempts::integer, j.claimed_by FROM @extschema@.jobs j
        WHERE j.status = 'claimed'
          AND coalesce(j.lease_expires_at, j.claimed_at + raquel_internal.rq_default_lease_ms()) <= now_ms
        ORDER BY coalesce(j.lease_expires_at, j.claimed_at + raquel_internal.rq_default_lease_ms())
        LIMIT batch
        FOR UPDATE SKIP LOCKED;
END
$$;

-- changed: raquel_internal.rq_parent_ended(uuid)
CREATE OR REPLACE FUNCTION raquel_internal.rq_parent_ended(parent uuid) RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    now_ms   bigint := raquel_internal.rq_now_ms();
    ended    record;
    released record;
    cancelled_ids uuid[];
    cancelled_queues text[];
    cancelled_sets_off boolean[];
BEGIN
    SELECT j.id, j.status INTO ended FROM @extschema@.jobs j WHERE j.id = parent;
    IF NOT FOUND OR ended.status NOT IN ('success', 'exhausted', 'expired', 'cancelled') THEN
        RETURN;
    END IF;
    IF ended.status = 'success' THEN
        FOR released IN
            WITH edges AS (
                DELETE FROM @extschema@.job_dependencies d WHERE d.parent_id = parent RETURNING d.child_id
            )
            UPDATE @extschema@.jobs c
            SET blocked_by = c.blocked_by - 1,
                status = CASE WHEN c.blocked_by <= 1 THEN 'queued' ELSE c.status END
            FROM edges WHERE c.id = edges.child_id AND c.status = 'blocked'
            RETURNING c.queue, c.scheduled_at, c.max_age, c.status, c.priority, c.id
        LOOP
            IF released.status = 'queued' THEN
                PERFORM raquel_internal.rq_job_ready_again(released.queue, released.scheduled_at, released.max_age, released.priority, released.id);
            END IF;
        END LOOP;
        RETURN;
    END IF;
    -- (only through children still blocked: an edge to a job that is not
    -- blocked is a running job's wait for this one, rq_wait_job, whose own
    -- children are not this workflow's)
    WITH RECURSIVE descendants AS (
        SELECT d.child_id AS id FROM @extschema@.job_dependencies d
        JOIN @extschema@.jobs b ON b.id = d.child_id AND b.status = 'blocked'
        WHERE d.parent_id = parent
        UNION
        SELECT d.child_id FROM @extschema@.job_dependencies d JOIN descendants x ON d.parent_id = x.id
        JOIN @extschema@.jobs b ON b.id = d.child_id AND b.status = 'blocked'
    ), cancelled AS (
        UPDATE @extschema@.jobs c
        SET status = 'cancelled', finished_at = now_ms,
            error = format('cancelled: job %s, which it runs after, ended %s', ended.id, ended.status)
        FROM descendants x WHERE c.id = x.id AND c.status = 'blocked'
        RETURNING c.id, c.queue,
                  c.key_period IS NOT NULL
                  OR EXISTS (SELECT FROM @extschema@.job_waits w WHERE w.event = 'raquel:job:' || c.id::text) AS sets_off
    ), gone AS (
        DELETE FROM @extschema@.job_dependencies d
        WHERE d.parent_id = parent OR d.parent_id IN (SELECT c.id FROM cancelled c)
    )
    SELECT array_agg(c.id), array_agg(c.queue), array_agg(c.sets_off) INTO cancelled_ids, cancelled_queues, cancelled_sets_off
    FROM cancelled c;
    -- what follows their ends (src/ended.rs): their awaiters woken, a key
    -- enqueued with a key_period held (their own children are among them)
    PERFORM raquel_internal.rq_ended(cancelled_ids, cancelled_queues, 'cancelled', false, cancelled_sets_off);
END
$$;

-- new: rq_help(text): the functions a user calls, one line each (sql/observe.sql)
CREATE FUNCTION rq_help(name_contains text DEFAULT NULL)
RETURNS TABLE (name text, arguments text, description text)
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT p.proname::text,
           coalesce((SELECT string_agg(a.arg || CASE WHEN a.n > p.pronargs - p.pronargdefaults THEN '?' ELSE '' END,
                                       ', ' ORDER BY a.n)
                     FROM (SELECT x.arg, row_number() OVER (ORDER BY x.ord) AS n
                           FROM unnest(p.proargnames,
                                       coalesce(p.proargmodes, array_fill('i'::"char", ARRAY[coalesce(cardinality(p.proargnames), 0)])))
                                WITH ORDINALITY AS x (arg, mode, ord)
                           WHERE x.mode IN ('i', 'b', 'v')) a), ''),
           obj_description(p.oid, 'pg_proc')
    FROM pg_proc p
    JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e'
    JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'raquel'
    WHERE p.pronamespace = e.extnamespace
      AND (rq_help.name_contains IS NULL OR strpos(p.proname, rq_help.name_contains) > 0)
    ORDER BY 1, 2
$$;

-- new: raquel_internal.rq_note_new_queue(text, text): a NOTICE when a verb that
-- sets a queue up names one raquel shows no sign of (sql/flow.sql)
CREATE FUNCTION raquel_internal.rq_note_new_queue(queue text, verb text) RETURNS void
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    BEGIN
        IF EXISTS (SELECT FROM @extschema@.jobs j
                   WHERE j.queue = rq_note_new_queue.queue AND j.status IN ('queued', 'failed') AND j.group_key IS NULL)
           OR EXISTS (SELECT FROM @extschema@.jobs j
                      WHERE j.queue = rq_note_new_queue.queue AND j.group_key IS NOT NULL
                        AND j.status IN ('queued', 'failed', 'claimed'))
           OR EXISTS (SELECT FROM @extschema@.queue_limits l WHERE l.queue = rq_note_new_queue.queue)
           OR EXISTS (SELECT FROM @extschema@.queues_without_history h WHERE h.queue = rq_note_new_queue.queue)
           OR EXISTS (SELECT FROM @extschema@.schedules s WHERE s.queue = rq_note_new_queue.queue)
           OR EXISTS (SELECT FROM @extschema@.metrics m WHERE m.queue = rq_note_new_queue.queue) THEN
            RETURN;
        END IF;
    EXCEPTION WHEN insufficient_privilege THEN
        RETURN;
    END;
    RAISE NOTICE '% names queue "%", which has no ready jobs, no settings, no schedule and no metrics', verb, queue
        USING DETAIL = 'It is set all the same: a queue may be set up before its first job.',
              HINT = 'Check the name; rq_queues() lists the queues that have jobs.';
END
$$;

-- changed: rq_set_limits and rq_set_history give that NOTICE
CREATE OR REPLACE FUNCTION rq_set_limits(
    queue             text,
    max_claimed       integer  DEFAULT NULL,
    rate              integer  DEFAULT NULL,
    per               interval DEFAULT '1 second',
    group_max_claimed integer  DEFAULT NULL
) RETURNS queue_limits
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    settings @extschema@.queue_limits;
BEGIN
    PERFORM raquel_internal.rq_check_limits(queue, max_claimed, rate, per, group_max_claimed);
    PERFORM raquel_internal.rq_refuse_distributed('rq_set_limits');
    PERFORM raquel_internal.rq_note_new_queue(queue, 'rq_set_limits');
    INSERT INTO @extschema@.queue_limits AS l (queue, max_claimed, rate, per, group_max_claimed)
    VALUES (rq_set_limits.queue, rq_set_limits.max_claimed, rq_set_limits.rate,
            CASE WHEN rq_set_limits.rate IS NULL THEN NULL ELSE rq_set_limits.per END,
            rq_set_limits.group_max_claimed)
    ON CONFLICT ON CONSTRAINT queue_limits_pkey DO UPDATE
    SET max_claimed = excluded.max_claimed, rate = excluded.rate, per = excluded.per,
        group_max_claimed = excluded.group_max_claimed,
        -- a new rate starts with a full bucket
        tokens = CASE WHEN l.rate IS NOT DISTINCT FROM excluded.rate AND l.per IS NOT DISTINCT FROM excluded.per
                      THEN l.tokens END,
        tokens_at = CASE WHEN l.rate IS NOT DISTINCT FROM excluded.rate AND l.per IS NOT DISTINCT FROM excluded.per
                         THEN l.tokens_at END
    RETURNING l.* INTO settings;
    PERFORM raquel_internal.rq_wake_claims(queue);
    RETURN raquel_internal.rq_tidy_queue_limits(queue, settings);
END
$$;

CREATE OR REPLACE FUNCTION rq_set_history(queue text, keep boolean) RETURNS boolean
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

-- new: raquel_internal.rq_pause(text)
CREATE FUNCTION raquel_internal.rq_pause(queue text) RETURNS queue_limits
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    settings @extschema@.queue_limits;
BEGIN
    PERFORM raquel_internal.rq_check_limits(queue, NULL, NULL, NULL, NULL);
    PERFORM raquel_internal.rq_refuse_distributed('rq_pause');
    PERFORM raquel_internal.rq_note_new_queue(queue, 'rq_pause');
    INSERT INTO @extschema@.queue_limits AS l (queue, paused) VALUES (rq_pause.queue, true)
    ON CONFLICT ON CONSTRAINT queue_limits_pkey DO UPDATE SET paused = true
    RETURNING l.* INTO settings;
    RETURN settings;
END
$$;

-- new: raquel_internal.rq_prune(integer, interval)
CREATE FUNCTION raquel_internal.rq_prune(batch integer DEFAULT 1000, retention interval DEFAULT NULL) RETURNS bigint
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
DECLARE
    -- A value, not rq_now_ms() in the statements: a volatile call cannot
    -- bound an index scan (the prune below then read the index of every
    -- finished job: 2.6 s a round with 10 million of them, measured), and
    -- Citus refuses volatile calls in a statement it sends to a shard.
    now_ms  bigint := raquel_internal.rq_now_ms();
    keep_ms bigint;
    cutoff  bigint;
    changed bigint;
BEGIN
    PERFORM raquel_internal.rq_check_batch(batch);
    -- keys whose hold after their job's end is over (sql/schema.sql)
    DELETE FROM @extschema@.key_holds h WHERE h.until <= now_ms;
    keep_ms := raquel_internal.rq_retention_ms(retention);
    -- the setting's 0 keeps finished jobs for ever; a retention of 0 given
    -- here keeps none: every job finished before now goes
    IF keep_ms = 0 AND retention IS NULL THEN
        RETURN 0;
    END IF;
    cutoff := now_ms - keep_ms;
    -- the metrics of minutes older than the retention (sql/metrics.sql)
    DELETE FROM @extschema@.metrics m WHERE m.minute < cutoff;
    IF raquel_internal.rq_distributed() THEN
        RETURN raquel_internal.rq_prune_distributed(batch, cutoff);
    END IF;
    WITH old AS (
        SELECT j.id FROM @extschema@.jobs j
        WHERE j.status IN ('success', 'cancelled', 'expired', 'exhausted')
          AND j.finished_at < cutoff
        ORDER BY j.finished_at
        LIMIT batch
        FOR UPDATE SKIP LOCKED
    ), gone AS (
        DELETE FROM @extschema@.jobs j USING old WHERE j.id = old.id
        RETURNING j.id
    ), steps AS (
        -- their recorded steps (sql/steps.sql) go with them
        DELETE FROM @extschema@.job_steps s USING gone WHERE s.job_id = gone.id
    ), parents AS (
        -- and the parents they ran after (sql/workflows.sql job_parents)
        DELETE FROM @extschema@.job_parents p USING gone WHERE p.child_id = gone.id
    )
    SELECT count(*) INTO changed FROM gone;
    RETURN changed;
END
$$;

-- changed: raquel_internal.rq_record_metrics()
CREATE OR REPLACE FUNCTION raquel_internal.rq_record_metrics() RETURNS bigint
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    touched bigint;
    now_ms  bigint := raquel_internal.rq_now_ms();
    ended   bigint := (now_ms / 60000 - 1) * 60000;
    more    bigint;
BEGIN
    -- One recorder at a time: a call waits for the one before it to commit,
    -- so that what it leaves is visible once it returns (figures taken from
    -- shared memory by a round not yet committed would otherwise be in
    -- neither). 7311: this function's own class of advisory lock.
    PERFORM pg_catalog.pg_advisory_xact_lock(7311, 0);
    INSERT INTO @extschema@.metrics AS m (queue, minute, enqueued, claimed, succeeded, failed, rescued, expired,
                                           wait_histogram, run_histogram)
    SELECT t.queue, t.minute, t.enqueued, t.claimed, t.succeeded, t.failed, t.rescued, t.expired,
           t.wait_histogram, t.run_histogram
    FROM raquel_internal.rq_take_metrics() t
    ON CONFLICT ON CONSTRAINT metrics_pkey DO UPDATE
    SET enqueued = m.enqueued + excluded.enqueued, claimed = m.claimed + excluded.claimed,
        succeeded = m.succeeded + excluded.succeeded, failed = m.failed + excluded.failed,
        rescued = m.rescued + excluded.rescued, expired = m.expired + excluded.expired,
        wait_histogram = raquel_internal.rq_histogram_add(m.wait_histogram, excluded.wait_histogram),
        run_histogram = raquel_internal.rq_histogram_add(m.run_histogram, excluded.run_histogram);
    GET DIAGNOSTICS touched = ROW_COUNT;
    -- The backlog once a minute: it reads every ready job's index entry.
    -- Kept for the queues that had something counted that minute (at most
    -- the slots of shared memory) and the 100 longest backlogs, so that a
    -- database of 200 000 idle queues with jobs waiting adds 100 rows a
    -- minute, not 200 000.
    IF NOT EXISTS (SELECT 1 FROM @extschema@.metrics m WHERE m.minute = ended AND m.backlog IS NOT NULL) THEN
        INSERT INTO @extschema@.metrics AS m (queue, minute, backlog)
        SELECT b.queue, ended, b.n
        FROM (SELECT j.queue, count(*) AS n FROM @extschema@.jobs j
              WHERE j.status IN ('queued', 'failed') AND j.scheduled_at <= now_ms
              GROUP BY j.queue) b
        WHERE b.queue IN (SELECT a.queue FROM @extschema@.metrics a WHERE a.minute = ended)
           OR b.queue IN (SELECT t.queue FROM (SELECT j.queue, count(*) AS n FROM @extschema@.jobs j
                                               WHERE j.status IN ('queued', 'failed') AND j.scheduled_at <= now_ms
                                               GROUP BY j.queue ORDER BY 2 DESC, 1 LIMIT 100) t)
        ON CONFLICT ON CONSTRAINT metrics_pkey DO UPDATE SET backlog = excluded.backlog;
        GET DIAGNOSTICS more = ROW_COUNT;
        touched := touched + more;
    END IF;
    RETURN touched;
END
$$;

-- changed: raquel_internal.rq_refuse_distributed(text)
CREATE OR REPLACE FUNCTION raquel_internal.rq_refuse_distributed(what text) RETURNS void
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF raquel_internal.rq_distributed() THEN
        RAISE EXCEPTION '% is not available on a distributed jobs table', what
            USING ERRCODE = 'feature_not_supported',
                  HINT = 'The Citus guide (docs/src/guides/citus.md) lists what the distributed mode offers.';
    END IF;
END
$$;

-- new: raquel_internal.rq_reschedule(uuid, integer, timestamptz, interval)
CREATE FUNCTION raquel_internal.rq_reschedule(
    id      uuid,
    attempt integer,
    at      timestamptz DEFAULT NULL,
    delay   interval    DEFAULT NULL
) RETURNS jobs
LANGUAGE c VOLATILE
SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'rq_reschedule_c';

-- new: raquel_internal.rq_rescue(integer)
CREATE FUNCTION raquel_internal.rq_rescue(batch integer DEFAULT 1000) RETURNS bigint
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
DECLARE
    now_ms  bigint := raquel_internal.rq_now_ms();
    job     record;
    changed bigint := 0;
    failed  @extschema@.jobs;
BEGIN
    PERFORM raquel_internal.rq_check_batch(batch);
    FOR job IN SELECT l.id, l.attempts, l.claimed_by FROM raquel_internal.rq_lapsed(batch, now_ms) l
    LOOP
        failed := raquel_internal.rq_fail(job.id, job.attempts,
                        format('lease expired: %s did not finish attempt %s in time',
                               coalesce('worker ' || job.claimed_by, 'the worker'), job.attempts),
                        NULL);
        PERFORM raquel_internal.rq_note_metric(failed.queue, 'rescued', NULL);
        changed := changed + 1;
    END LOOP;
    RETURN changed;
END
$$;

-- new: raquel_internal.rq_resume(text)
CREATE FUNCTION raquel_internal.rq_resume(queue text) RETURNS queue_limits
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    settings @extschema@.queue_limits;
BEGIN
    PERFORM raquel_internal.rq_check_limits(queue, NULL, NULL, NULL, NULL);
    PERFORM raquel_internal.rq_note_new_queue(queue, 'rq_resume');
    UPDATE @extschema@.queue_limits l SET paused = false
    WHERE l.queue = rq_resume.queue AND l.paused
    RETURNING l.* INTO settings;
    IF FOUND THEN
        PERFORM raquel_internal.rq_wake_claims(queue);
        settings := raquel_internal.rq_tidy_queue_limits(queue, settings);
    ELSE
        SELECT l.* INTO settings FROM @extschema@.queue_limits l WHERE l.queue = rq_resume.queue;
        IF NOT FOUND THEN
            settings.queue := queue;
            settings.paused := false;
            settings.grouped := false;
            settings.claimed := '{}';
        END IF;
    END IF;
    RETURN settings;
END
$$;

-- new: raquel_internal.rq_retry(uuid)
CREATE FUNCTION raquel_internal.rq_retry(id uuid) RETURNS jobs
LANGUAGE c VOLATILE
SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'rq_retry_c';

-- new: raquel_internal.rq_schedule(text, text, text, text, text, text, interval, integer, interval, interval, interval, integer)
CREATE FUNCTION raquel_internal.rq_schedule(
    name            text,
    cron            text,
    queue           text,
    payload         text        DEFAULT NULL,
    timezone        text        DEFAULT 'UTC',
    catch_up        text        DEFAULT 'last',
    max_age         interval    DEFAULT NULL,
    max_retry_count integer     DEFAULT NULL,
    min_retry_delay interval    DEFAULT NULL,
    max_retry_delay interval    DEFAULT NULL,
    backoff_base    interval    DEFAULT NULL,
    priority        integer     DEFAULT 0
) RETURNS schedules
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    o        record;
    next_ms  bigint;
    schedule @extschema@.schedules;
BEGIN
    PERFORM raquel_internal.rq_check_schedule_options(rq_schedule.name, rq_schedule.catch_up, rq_schedule.queue, rq_schedule.payload);
    SELECT * INTO o FROM raquel_internal.rq_job_options(rq_schedule.queue, NULL, NULL, rq_schedule.max_age,
        rq_schedule.max_retry_count, rq_schedule.min_retry_delay, rq_schedule.max_retry_delay, rq_schedule.backoff_base);
    next_ms := raquel_internal.rq_cron_next(rq_schedule.cron, rq_schedule.timezone, o.now_ms);
    IF next_ms IS NULL THEN
        PERFORM raquel_internal.rq_refuse('cron_never', ARRAY[rq_schedule.cron, rq_schedule.timezone]);
    END IF;
    INSERT INTO @extschema@.schedules AS s (name, cron, timezone, queue, payload, catch_up, max_age,
        max_retry_count, min_retry_delay, max_retry_delay, backoff_base, priority, next_run_at)
    VALUES (rq_schedule.name, rq_schedule.cron, rq_schedule.timezone, rq_schedule.queue, rq_schedule.payload,
        rq_schedule.catch_up, o.max_age_ms, rq_schedule.max_retry_count, o.min_retry_delay_ms,
        o.max_retry_delay_ms, o.backoff_base_ms, coalesce(rq_schedule.priority, 0), next_ms)
    ON CONFLICT ON CONSTRAINT schedules_pkey DO UPDATE
    SET cron = excluded.cron, timezone = excluded.timezone, queue = excluded.queue,
        payload = excluded.payload, catch_up = excluded.catch_up, max_age = excluded.max_age,
        max_retry_count = excluded.max_retry_count, min_retry_delay = excluded.min_retry_delay,
        max_retry_delay = excluded.max_retry_delay, backoff_base = excluded.backoff_base,
        priority = excluded.priority, next_run_at = excluded.next_run_at, last_error = NULL
    RETURNING s.* INTO schedule;
    IF schedule.enabled THEN
        PERFORM raquel_internal.rq_schedule_due(next_ms);
    END IF;
    RETURN schedule;
END
$$;

-- new: raquel_internal.rq_schema_writers()
CREATE FUNCTION raquel_internal.rq_schema_writers() RETURNS SETOF text
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    WITH s AS (
        SELECT n.nspowner, coalesce(n.nspacl, acldefault('n', n.nspowner)) AS acl, e.extowner
        FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace
        WHERE e.extname = 'raquel'
    ), creators AS (
        SELECT a.grantee AS role FROM s, aclexplode(s.acl) a WHERE a.privilege_type = 'CREATE'
        UNION
        SELECT s.nspowner FROM s
    ), resolved AS (
        SELECT DISTINCT CASE WHEN c.role = 'pg_database_owner'::regrole
                             THEN (SELECT d.datdba FROM pg_database d WHERE d.datname = current_database())
                             ELSE c.role END AS role
        FROM creators c
    )
    SELECT CASE WHEN r.role = 0 THEN 'PUBLIC' ELSE r.role::regrole::text END
    FROM resolved r, s
    WHERE r.role <> s.extowner
      AND (r.role = 0 OR NOT coalesce((SELECT ro.rolsuper FROM pg_roles ro WHERE ro.oid = r.role), false))
    ORDER BY 1
$$;

-- changed: raquel_internal.rq_settle_waits(integer)
CREATE OR REPLACE FUNCTION raquel_internal.rq_settle_waits(batch integer DEFAULT 1000) RETURNS bigint
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
DECLARE
    now_ms  bigint := raquel_internal.rq_now_ms();
    emitted @extschema@.emitted_events;
    awaited record;
    changed bigint := 0;
    n       bigint;
BEGIN
    PERFORM raquel_internal.rq_check_batch(batch);
    -- refused in the distributed mode: nothing waits there
    IF raquel_internal.rq_distributed() THEN
        RETURN 0;
    END IF;
    -- from the waits (few, next to the events kept): for each, the latest
    -- emit of its event kept when it began (emitted_events_name_idx)
    FOR emitted IN
        SELECT e.* FROM @extschema@.emitted_events e
        WHERE e.id IN (
            SELECT (SELECT e2.id FROM @extschema@.emitted_events e2
                    WHERE e2.name = w.event AND e2.kept_until >= w.since
                    ORDER BY e2.kept_until DESC LIMIT 1)
            FROM @extschema@.job_waits w)
        ORDER BY e.id
        LIMIT batch
    LOOP
        -- a busy event waits for the next round: the duty holds up no wait
        -- and takes no lock it could deadlock on
        CONTINUE WHEN NOT pg_catalog.pg_try_advisory_xact_lock_shared(7310, pg_catalog.hashtext(emitted.name));
        changed := changed + raquel_internal.rq_deliver(emitted);
    END LOOP;
    -- the waits for a job (rq_wait_job) whose end its ending transaction
    -- did not see (the wait and the end raced), or whose job is gone
    FOR awaited IN
        SELECT DISTINCT substr(w.event, 12)::uuid AS id FROM @extschema@.job_waits w
        WHERE starts_with(w.event, 'raquel:job:')
          AND NOT EXISTS (SELECT FROM @extschema@.jobs j
                          WHERE j.id = substr(w.event, 12)::uuid
                            AND j.status NOT IN ('success', 'exhausted', 'cancelled', 'expired'))
        LIMIT batch
    LOOP
        changed := changed + raquel_internal.rq_deliver_job_end(awaited.id);
    END LOOP;
    WITH ended AS (
        DELETE FROM @extschema@.job_waits w
        WHERE w.job_id IN (
            SELECT w2.job_id FROM @extschema@.job_waits w2
            LEFT JOIN @extschema@.jobs j ON j.id = w2.job_id
            WHERE j.id IS NULL OR j.status NOT IN ('queued', 'claimed', 'failed')
            LIMIT batch)
        RETURNING 1
    )
    SELECT count(*) INTO n FROM ended;
    changed := changed + n;
    WITH old AS (
        DELETE FROM @extschema@.emitted_events e
        WHERE e.id IN (SELECT e2.id FROM @extschema@.emitted_events e2
                       WHERE e2.kept_until < now_ms - 3600000 ORDER BY e2.id LIMIT batch)
        RETURNING 1
    )
    SELECT count(*) INTO n FROM old;
    RETURN changed + n;
END
$$;

-- new: raquel_internal.rq_settle_workflows(integer)
CREATE FUNCTION raquel_internal.rq_settle_workflows(batch integer DEFAULT 1000) RETURNS bigint
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
DECLARE
    parent  uuid;
    settled bigint := 0;
BEGIN
    PERFORM raquel_internal.rq_check_batch(batch);
    FOR parent IN
        SELECT DISTINCT d.parent_id FROM @extschema@.job_dependencies d
        JOIN @extschema@.jobs p ON p.id = d.parent_id
        WHERE p.status IN ('success', 'exhausted', 'expired', 'cancelled')
        LIMIT batch
    LOOP
        -- (the jobs that await it first, as rq_job_ended does)
        PERFORM raquel_internal.rq_deliver_job_end(parent);
        PERFORM raquel_internal.rq_parent_ended(parent);
        settled := settled + 1;
    END LOOP;
    RETURN settled;
END
$$;

-- new: raquel_internal.rq_warnings()
CREATE FUNCTION raquel_internal.rq_warnings() RETURNS TABLE (warning text, hint text)
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT format('roles other than raquel''s owner may create in its schema %s: %s',
                  '@extschema@', string_agg(w, ', ')),
           format('A function one of them creates there with a raquel name can take over your own calls of raquel''s '
                  'functions (raquel''s own calls are safe). Install raquel into a schema only its owner may create in '
                  '(CREATE SCHEMA raquel; CREATE EXTENSION raquel SCHEMA raquel), or REVOKE CREATE ON SCHEMA %s FROM %s.',
                  '@extschema@', string_agg(w, ', '))
    FROM raquel_internal.rq_schema_writers() w
    HAVING count(*) > 0
$$;

-- changed: rq_cancel(uuid)
CREATE OR REPLACE FUNCTION rq_cancel(id uuid) RETURNS jobs
LANGUAGE c VOLATILE
SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'rq_cancel_c';

-- changed: rq_complete(uuid, integer, jsonb)
CREATE OR REPLACE FUNCTION rq_complete(id uuid, attempt integer, result jsonb DEFAULT NULL) RETURNS jobs
LANGUAGE c VOLATILE
SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'rq_complete_fenced_c';

-- changed: rq_complete_and_claim(uuid, integer, text[], text, integer, interval, interval, jsonb)
CREATE OR REPLACE FUNCTION rq_complete_and_claim(
    id      uuid     DEFAULT NULL,
    attempt integer  DEFAULT NULL,
    queues  text[]   DEFAULT NULL,
    worker  text     DEFAULT NULL,
    batch   integer  DEFAULT 1,
    lease   interval DEFAULT raquel_internal.rq_default_lease(),
    wait    interval DEFAULT '0',
    result  jsonb    DEFAULT NULL
) RETURNS SETOF jobs
LANGUAGE c VOLATILE ROWS 1
SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'rq_complete_and_claim_fenced_c';

-- changed: rq_complete_batch(uuid[], integer[], jsonb[])
CREATE OR REPLACE FUNCTION rq_complete_batch(ids uuid[], attempts integer[], results jsonb[] DEFAULT NULL) RETURNS SETOF jobs
LANGUAGE c VOLATILE
SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'rq_complete_batch_fenced_c';

-- changed: rq_complete_batch_and_claim(uuid[], integer[], text[], text, integer, interval, interval, jsonb[])
CREATE OR REPLACE FUNCTION rq_complete_batch_and_claim(
    ids      uuid[]    DEFAULT NULL,
    attempts integer[] DEFAULT NULL,
    queues   text[]    DEFAULT NULL,
    worker   text      DEFAULT NULL,
    batch    integer   DEFAULT 1,
    lease    interval  DEFAULT raquel_internal.rq_default_lease(),
    wait     interval  DEFAULT '0',
    results  jsonb[]   DEFAULT NULL
) RETURNS SETOF jobs
LANGUAGE c VOLATILE ROWS 1
SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'rq_complete_batch_and_claim_fenced_c';

-- changed: rq_distribute(integer)
CREATE OR REPLACE FUNCTION rq_distribute(shard_count integer DEFAULT 32) RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF pg_catalog.to_regclass('pg_catalog.pg_dist_partition') IS NULL THEN
        RAISE EXCEPTION 'rq_distribute needs the citus extension in this database'
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = 'Add citus to shared_preload_libraries, then CREATE EXTENSION citus before CREATE EXTENSION raquel.';
    END IF;
    IF shard_count IS NULL OR shard_count < 1 OR shard_count > 64000 THEN
        RAISE EXCEPTION 'shard_count must be 1 to 64000, got %', coalesce(shard_count::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF raquel_internal.rq_distributed() THEN
        RAISE EXCEPTION 'the jobs table is distributed already'
            USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    IF NOT pg_catalog.current_setting('citus.enable_unsafe_triggers')::boolean THEN
        RAISE EXCEPTION 'rq_distribute needs citus.enable_unsafe_triggers = on'
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  DETAIL = 'The jobs table''s triggers (sql/events.sql, sql/flow.sql) run on its shards.',
                  HINT = 'Set it in postgresql.conf of the coordinator and of every worker node, and reload.';
    END IF;
    IF EXISTS (SELECT 1 FROM @extschema@.jobs j WHERE j.group_key IS NOT NULL OR j.status = 'blocked')
       OR EXISTS (SELECT 1 FROM @extschema@.queue_limits)
       OR EXISTS (SELECT 1 FROM @extschema@.job_dependencies)
       OR EXISTS (SELECT 1 FROM @extschema@.queues_without_history) THEN
        RAISE EXCEPTION 'rq_distribute cannot move fair groups, workflows, flow settings or queues without history'
            USING ERRCODE = 'feature_not_supported',
                  DETAIL = 'The distributed mode does not offer flow control, fair groups, workflows or queues without history yet.',
                  HINT = 'Let those jobs finish, remove the queue_limits rows (rq_set_limits, rq_resume) and the queues_without_history rows (rq_set_history) first.';
    END IF;
    ALTER TABLE @extschema@.jobs DROP CONSTRAINT jobs_pkey;
    ALTER TABLE @extschema@.jobs ADD CONSTRAINT jobs_pkey PRIMARY KEY (id, queue);
    PERFORM create_distributed_table('@extschema@.jobs', 'queue', shard_count => rq_distribute.shard_count);
    PERFORM create_distributed_table('@extschema@.key_holds', 'queue', colocate_with => '@extschema@.jobs');
END
$$;

-- changed: rq_distributed()
CREATE OR REPLACE FUNCTION rq_distributed() RETURNS boolean
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT raquel_internal.rq_distributed() $$;

-- changed: rq_emit(text, jsonb, interval)
CREATE OR REPLACE FUNCTION rq_emit(event text, payload jsonb DEFAULT NULL, keep interval DEFAULT NULL)
RETURNS bigint
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    now_ms  bigint;
    -- from 0 to raquel.max_event_keep
    keep_ms bigint := raquel_internal.rq_event_keep_ms(rq_emit.keep);
    resumed bigint;
    emitted @extschema@.emitted_events;
BEGIN
    PERFORM raquel_internal.rq_refuse_distributed('rq_emit');
    PERFORM raquel_internal.rq_check_event_name(rq_emit.event, 'rq_emit');
    -- a role given prefixes emits only events they begin
    PERFORM raquel_internal.rq_check_emit_scope(rq_emit.event);
    -- held to raquel.max_event_size (54000): it is copied into the step of
    -- every job parked for it
    PERFORM raquel_internal.rq_check_event_payload(rq_emit.event, pg_column_size(rq_emit.payload));
    PERFORM raquel_internal.rq_event_turn(rq_emit.event, true);
    -- the emit's instant is after its turn: every wait it can see began
    -- before it, and is reached whatever the keep
    now_ms := raquel_internal.rq_now_ms();
    INSERT INTO @extschema@.emitted_events AS e (name, payload, emitted_at, kept_until, until_read)
    VALUES (rq_emit.event, rq_emit.payload, now_ms,
            now_ms + coalesce(keep_ms, raquel_internal.rq_event_retention_ms()), keep_ms IS NULL)
    RETURNING e.* INTO emitted;
    -- under REPEATABLE READ a wait that committed after this snapshot is not
    -- seen here: the background worker looks in at commit
    IF current_setting('transaction_isolation') <> 'read committed' THEN
        PERFORM raquel_internal.rq_look_in_at_commit();
    END IF;
    resumed := raquel_internal.rq_deliver(emitted);
    -- who waits on a name is told only to a role that may read jobs
    IF NOT raquel_internal.rq_caller_may_read('@extschema@.jobs'::regclass) THEN
        RETURN NULL;
    END IF;
    RETURN resumed;
END
$$;

-- changed: rq_enqueue_batch(text, jsonb[], timestamptz, interval, interval, integer, interval, interval, interval, integer, text[], text[], uuid[])
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
    keys            text[]      DEFAULT NULL,
    group_keys      text[]      DEFAULT NULL,
    after           uuid[]      DEFAULT NULL
) RETURNS SETOF jobs
LANGUAGE c VOLATILE
SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'rq_enqueue_batch_c';

-- changed: rq_enqueue_batch(text, text[], timestamptz, interval, interval, integer, interval, interval, interval, integer, text[], text[], uuid[])
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
    keys            text[]      DEFAULT NULL,
    group_keys      text[]      DEFAULT NULL,
    after           uuid[]      DEFAULT NULL
) RETURNS SETOF jobs
LANGUAGE c VOLATILE
SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'rq_enqueue_batch_c';

-- changed: rq_enqueue_trigger()
CREATE OR REPLACE FUNCTION rq_enqueue_trigger() RETURNS trigger
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

-- changed: rq_expire(integer)
CREATE OR REPLACE FUNCTION rq_expire(batch integer DEFAULT 1000) RETURNS bigint
LANGUAGE sql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT raquel_internal.rq_expire($1) $$;

-- new: rq_extend(uuid, integer, interval)
CREATE FUNCTION rq_extend(id uuid, attempt integer, lease interval DEFAULT raquel_internal.rq_default_lease())
RETURNS jobs
LANGUAGE c VOLATILE
SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'rq_extend_c';

-- new: rq_fail(uuid, integer, text, text)
CREATE FUNCTION rq_fail(
    id          uuid,
    attempt     integer,
    error       text    DEFAULT NULL,
    error_trace text    DEFAULT NULL
) RETURNS jobs
LANGUAGE c VOLATILE
SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'rq_fail_fenced_c';

-- new: rq_fail_and_claim(uuid, integer, text, text, text[], text, integer, interval, interval)
CREATE FUNCTION rq_fail_and_claim(
    id          uuid     DEFAULT NULL,
    attempt     integer  DEFAULT NULL,
    error       text     DEFAULT NULL,
    error_trace text     DEFAULT NULL,
    queues      text[]   DEFAULT NULL,
    worker      text     DEFAULT NULL,
    batch       integer  DEFAULT 1,
    lease       interval DEFAULT raquel_internal.rq_default_lease(),
    wait        interval DEFAULT '0'
) RETURNS SETOF jobs
LANGUAGE c VOLATILE ROWS 1
SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'rq_fail_and_claim_fenced_c';

-- changed: rq_fire_schedules(integer)
CREATE OR REPLACE FUNCTION rq_fire_schedules(batch integer DEFAULT 1000) RETURNS bigint
LANGUAGE sql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT raquel_internal.rq_fire_schedules($1) $$;

-- new: rq_grant_emitter(regrole, text)
CREATE FUNCTION rq_grant_emitter(role regrole, prefix text DEFAULT NULL) RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF role IS NULL OR role::oid = 0 THEN
        PERFORM raquel_internal.rq_refuse('role_null', ARRAY['rq_grant_emitter']);
    END IF;
    IF NOT EXISTS (SELECT FROM pg_roles r WHERE r.oid = role) THEN
        PERFORM raquel_internal.rq_refuse('role_unknown', ARRAY['rq_grant_emitter', role::oid::text]);
    END IF;
    IF prefix = '' THEN
        PERFORM raquel_internal.rq_refuse('emit_prefix_empty', ARRAY[role::text]);
    END IF;
    EXECUTE format('GRANT USAGE ON SCHEMA %s, raquel_internal TO %s', '@extschema@', role);
    EXECUTE format('GRANT EXECUTE ON FUNCTION %s.rq_emit(text, jsonb, interval) TO %s', '@extschema@', role);
    IF prefix IS NOT NULL THEN
        INSERT INTO @extschema@.event_emitters (role, prefix) VALUES (role, prefix) ON CONFLICT DO NOTHING;
    END IF;
END
$$;

-- changed: rq_grant_producer(regrole)
CREATE OR REPLACE FUNCTION rq_grant_producer(role regrole) RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF role IS NULL OR role::oid = 0 THEN
        PERFORM raquel_internal.rq_refuse('role_null', ARRAY['rq_grant_producer']);
    END IF;
    IF NOT EXISTS (SELECT FROM pg_roles r WHERE r.oid = role) THEN
        PERFORM raquel_internal.rq_refuse('role_unknown', ARRAY['rq_grant_producer', role::oid::text]);
    END IF;
    EXECUTE format('GRANT USAGE ON SCHEMA %s, raquel_internal TO %s', '@extschema@', role);
    EXECUTE format('GRANT EXECUTE ON FUNCTION
        %1$s.rq_enqueue(text, text, timestamptz, interval, interval, integer, interval, interval, interval, integer, text, text, uuid[], interval),
        %1$s.rq_enqueue(text, jsonb, timestamptz, interval, interval, integer, interval, interval, interval, integer, text, text, uuid[], interval),
        %1$s.rq_enqueue_batch(text, text[], timestamptz, interval, interval, integer, interval, interval, interval, integer, text[], text[], uuid[]),
        %1$s.rq_enqueue_batch(text, jsonb[], timestamptz, interval, interval, integer, interval, interval, interval, integer, text[], text[], uuid[]),
        %1$s.rq_enqueue_trigger(),
        raquel_internal.rq_enqueue(text, text, timestamptz, interval, interval, integer, interval, interval, interval, integer, text, text, uuid[], interval),
        raquel_internal.rq_enqueue(text, jsonb, timestamptz, interval, interval, integer, interval, interval, interval, integer, text, text, uuid[], interval),
        raquel_internal.rq_enqueue_batch(text, text[], timestamptz, interval, interval, integer, interval, interval, interval, integer, text[], text[], uuid[])
        TO %2$s', '@extschema@', role);
END
$$;

-- changed: rq_grant_worker(regrole)
CREATE OR REPLACE FUNCTION rq_grant_worker(role regrole) RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF role IS NULL OR role::oid = 0 THEN
        PERFORM raquel_internal.rq_refuse('role_null', ARRAY['rq_grant_worker']);
    END IF;
    IF NOT EXISTS (SELECT FROM pg_roles r WHERE r.oid = role) THEN
        PERFORM raquel_internal.rq_refuse('role_unknown', ARRAY['rq_grant_worker', role::oid::text]);
    END IF;
    EXECUTE format('GRANT USAGE ON SCHEMA %s, raquel_internal TO %s', '@extschema@', role);
    EXECUTE format('GRANT SELECT, UPDATE ON %s.jobs TO %s', '@extschema@', role);
    EXECUTE format('GRANT SELECT ON %s.rq_jobs TO %s', '@extschema@', role);
    EXECUTE format('GRANT SELECT ON %s.metrics TO %s', '@extschema@', role);
    EXECUTE format('GRANT SELECT ON %s.queue_limits TO %s', '@extschema@', role);
    -- the flow claim's helpers, which write the limits' state as the owner
    -- and refuse to run outside rq_claim (src/flow.rs)
    EXECUTE format('GRANT EXECUTE ON FUNCTION raquel_internal.rq_flow_lock(text[]),
        raquel_internal.rq_flow_took(text, uuid[], double precision, bigint) TO %s', role);
    EXECUTE format('GRANT SELECT, DELETE ON %s.job_dependencies TO %s', '@extschema@', role);
    -- rq_parents reads what a job's parents produced (sql/workflows.sql)
    EXECUTE format('GRANT SELECT ON %s.job_parents TO %s', '@extschema@', role);
    EXECUTE format('GRANT SELECT, INSERT, UPDATE ON %s.key_holds TO %s', '@extschema@', role);
    -- rq_step records a job's steps (sql/steps.sql); rq_sleep,
    -- rq_wait_event and rq_wait_job park the job they hold (sql/waits.sql).
    -- They write job_steps and job_waits as the owner, fenced by the
    -- attempt: a worker reads them, and writes them only through the verbs.
    EXECUTE format('GRANT EXECUTE ON FUNCTION %1$s.rq_step(uuid, integer, text, jsonb),
        %1$s.rq_sleep(uuid, integer, text, timestamptz, interval),
        %1$s.rq_wait_event(uuid, integer, text, text, interval),
        %1$s.rq_wait_job(uuid, integer, text, uuid, interval),
        raquel_internal.rq_deliver_job_end(uuid) TO %2$s', '@extschema@', role);
    EXECUTE format('GRANT SELECT ON %s.job_steps TO %s', '@extschema@', role);
    EXECUTE format('GRANT SELECT ON %s.job_waits TO %s', '@extschema@', role);
    EXECUTE format('GRANT SELECT ON %s.emitted_events TO %s', '@extschema@', role);
    EXECUTE format('GRANT EXECUTE ON FUNCTION raquel_internal.rq_look_in_at_commit() TO %s', role);
END
$$;

-- changed: rq_metrics(text, interval)
CREATE OR REPLACE FUNCTION rq_metrics(queue text DEFAULT NULL, since interval DEFAULT '1 hour')
RETURNS TABLE (
    queue text, minute timestamptz,
    enqueued bigint, claimed bigint, succeeded bigint, failed bigint, rescued bigint, expired bigint,
    wait_p50_ms double precision, wait_p95_ms double precision, wait_p99_ms double precision,
    run_p50_ms double precision, run_p95_ms double precision, run_p99_ms double precision,
    backlog bigint
)
-- (SQL, not PL/pgSQL: the argument queue and the result column queue
-- would be one variable twice there.)
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT m.queue, raquel_internal.rq_ms_to_timestamptz(m.minute),
           m.enqueued, m.claimed, m.succeeded, m.failed, m.rescued, m.expired,
           raquel_internal.rq_histogram_percentile(m.wait_histogram, 0.5),
           raquel_internal.rq_histogram_percentile(m.wait_histogram, 0.95),
           raquel_internal.rq_histogram_percentile(m.wait_histogram, 0.99),
           raquel_internal.rq_histogram_percentile(m.run_histogram, 0.5),
           raquel_internal.rq_histogram_percentile(m.run_histogram, 0.95),
           raquel_internal.rq_histogram_percentile(m.run_histogram, 0.99),
           m.backlog
    FROM @extschema@.metrics m
    WHERE m.minute >= raquel_internal.rq_now_ms() - (extract(epoch FROM coalesce($2, interval '1 hour')) * 1000)::bigint
      AND ($1 IS NULL OR m.queue = $1)
    ORDER BY m.queue, m.minute
$$;

-- changed: rq_pause(text)
CREATE OR REPLACE FUNCTION rq_pause(queue text) RETURNS queue_limits
LANGUAGE sql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT * FROM raquel_internal.rq_pause($1) $$;

-- changed: rq_prometheus(integer)
CREATE OR REPLACE FUNCTION rq_prometheus(max_queues integer DEFAULT 100) RETURNS text
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    since   bigint := (raquel_internal.rq_now_ms() / 60000 - 5) * 60000;
    out     text;
    waiting bigint;
BEGIN
    IF max_queues IS NULL OR max_queues < 0 OR max_queues > 100000 THEN
        PERFORM raquel_internal.rq_refuse('max_queues', ARRAY[max_queues::text]);
    END IF;
    WITH jobs AS (
        SELECT j.queue, j.status, count(*) AS n FROM @extschema@.jobs j GROUP BY 1, 2
    ), events AS (
        SELECT m.queue, e.event, sum(e.n) AS n
        FROM @extschema@.metrics m
        CROSS JOIN LATERAL (VALUES ('enqueued', m.enqueued), ('claimed', m.claimed), ('succeeded', m.succeeded),
                                   ('failed', m.failed), ('rescued', m.rescued), ('expired', m.expired)) e (event, n)
        WHERE m.minute >= since
        GROUP BY 1, 2
    ), queues AS (
        SELECT coalesce(j.queue, e.queue) AS queue, coalesce(j.unfinished, 0) AS unfinished, coalesce(e.events, 0) AS events
        FROM (SELECT t.queue, sum(t.n) FILTER (WHERE t.status NOT IN ('success', 'cancelled', 'expired', 'exhausted')) AS unfinished
              FROM jobs t GROUP BY 1) j
        FULL JOIN (SELECT t.queue, sum(t.n) AS events FROM events t GROUP BY 1) e ON e.queue = j.queue
    ), shown AS (
        SELECT q.queue, row_number() OVER (ORDER BY q.unfinished DESC, q.events DESC, q.queue) AS rank
        FROM queues q
        ORDER BY q.unfinished DESC, q.events DESC, q.queue
        LIMIT max_queues
    ), histograms AS (
        SELECT s.queue, s.rank,
               (SELECT array_agg(b.n ORDER BY b.i) FROM (
                    SELECT u.i, sum(u.n)::integer AS n
                    FROM @extschema@.metrics m, unnest(m.wait_histogram) WITH ORDINALITY u (n, i)
                    WHERE m.queue = s.queue AND m.minute >= since GROUP BY u.i) b) AS wait,
               (SELECT array_agg(b.n ORDER BY b.i) FROM (
                    SELECT u.i, sum(u.n)::integer AS n
                    FROM @extschema@.metrics m, unnest(m.run_histogram) WITH ORDINALITY u (n, i)
                    WHERE m.queue = s.queue AND m.minute >= since GROUP BY u.i) b) AS run
        FROM shown s
    ), quantiles AS (
        SELECT w.which, w.metric, h.queue, h.rank, f.fraction,
               raquel_internal.rq_histogram_percentile(CASE w.which WHEN 0 THEN h.wait ELSE h.run END, f.fraction) AS ms
        FROM (VALUES (0, 'raquel_wait_seconds'), (1, 'raquel_run_seconds')) w (which, metric)
        CROSS JOIN histograms h
        CROSS JOIN (VALUES (0.5), (0.95), (0.99)) f (fraction)
    )
    SELECT string_agg(x.part, '' ORDER BY x.k) INTO out FROM (
        SELECT 1 AS k, E'# HELP raquel_jobs Jobs by queue and status, for the queues shown (rq_prometheus(max_queues)).\n# TYPE raquel_jobs gauge\n'
               || coalesce(string_agg(format(E'raquel_jobs{queue="%s",status="%s"} %s\n',
                                             raquel_internal.rq_prometheus_label(t.queue), t.status, t.n),
                                      '' ORDER BY s.rank, t.status), '') AS part
        FROM jobs t JOIN shown s ON s.queue = t.queue
        UNION ALL
        SELECT 2, E'# HELP raquel_jobs_all Jobs of every queue by status.\n# TYPE raquel_jobs_all gauge\n'
               || coalesce(string_agg(format(E'raquel_jobs_all{status="%s"} %s\n', a.status, a.n), '' ORDER BY a.status), '')
        FROM (SELECT t.status, sum(t.n) AS n FROM jobs t GROUP BY 1) a
        UNION ALL
        SELECT 3, format(E'# HELP raquel_queues Queues with jobs or events in the last five recorded minutes.\n# TYPE raquel_queues gauge\nraquel_queues %s\n',
                         (SELECT count(*) FROM queues))
        UNION ALL
        SELECT 4, E'# HELP raquel_events_5m Events in the last five recorded minutes, for the queues shown.\n# TYPE raquel_events_5m gauge\n'
               || coalesce(string_agg(format(E'raquel_events_5m{queue="%s",event="%s"} %s\n',
                                             raquel_internal.rq_prometheus_label(e.queue), e.event, e.n),
                                      '' ORDER BY s.rank, e.event), '')
        FROM events e JOIN shown s ON s.queue = e.queue
        UNION ALL
        SELECT 5, E'# HELP raquel_events_5m_all Events of every queue in the last five recorded minutes.\n# TYPE raquel_events_5m_all gauge\n'
               || coalesce(string_agg(format(E'raquel_events_5m_all{event="%s"} %s\n', a.event, a.n), '' ORDER BY a.event), '')
        FROM (SELECT e.event, sum(e.n) AS n FROM events e GROUP BY 1) a
        UNION ALL
        SELECT 6 + w.which,
               format(E'# HELP %1$s %2$s over the last five recorded minutes, for the queues shown.\n# TYPE %1$s gauge\n',
                      w.metric, CASE w.which WHEN 0 THEN 'Wait from due to claim' ELSE 'Run from claim to end' END)
               || coalesce((SELECT string_agg(format(E'%s{queue="%s",quantile="%s"} %s\n', q.metric,
                                                     raquel_internal.rq_prometheus_label(q.queue), q.fraction, q.ms / 1000),
                                              '' ORDER BY q.rank, q.fraction)
                            FROM quantiles q WHERE q.which = w.which AND q.ms IS NOT NULL), '')
        FROM (VALUES (0, 'raquel_wait_seconds'), (1, 'raquel_run_seconds')) w (which, metric)
        UNION ALL
        SELECT 8, format(E'# HELP raquel_metrics_lost_total Events the metrics could not count since the server started.\n# TYPE raquel_metrics_lost_total counter\nraquel_metrics_lost_total %s\n',
                         raquel_internal.rq_metrics_lost())
        UNION ALL
        -- the claim cursors (src/cursors.rs), server-wide since it started
        SELECT 9, format(E'# HELP raquel_cursor_claims_total One-queue claims since the server started, by whether they started at the queue\'s cursors or walked from the start.\n# TYPE raquel_cursor_claims_total counter\n'
                         || E'raquel_cursor_claims_total{cursors="used"} %s\nraquel_cursor_claims_total{cursors="walked"} %s\n'
                         || E'# HELP raquel_cursor_limits_total Claims of a queue name too long for a cursor, queues with too many priorities, and places given to another queue, since the server started.\n# TYPE raquel_cursor_limits_total counter\n'
                         || E'raquel_cursor_limits_total{limit="name_bytes"} %s\nraquel_cursor_limits_total{limit="priorities"} %s\nraquel_cursor_limits_total{limit="places"} %s\n',
                         c.claims_with_cursors, c.claims_without_cursors, c.long_names, c.too_many_priorities, c.places_given_up)
        FROM raquel_internal.rq_cursor_counts() c
    ) x;
    -- the jobs parked for an event (sql/waits.sql), for a role that may read
    -- them: a role given only jobs and metrics keeps its series
    IF pg_catalog.has_table_privilege('@extschema@.job_waits', 'SELECT') THEN
        SELECT count(*) INTO waiting FROM @extschema@.job_waits;
        out := out || format(E'# HELP raquel_jobs_waiting_for_event_all Jobs parked for an event (rq_wait_event), of every queue.\n'
                             || E'# TYPE raquel_jobs_waiting_for_event_all gauge\nraquel_jobs_waiting_for_event_all %s\n', waiting);
    END IF;
    RETURN out;
END
$$;

-- changed: rq_prune(integer, interval)
CREATE OR REPLACE FUNCTION rq_prune(batch integer DEFAULT 1000, retention interval DEFAULT NULL) RETURNS bigint
LANGUAGE sql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT raquel_internal.rq_prune($1, $2) $$;

-- changed: rq_reject(uuid, integer)
CREATE OR REPLACE FUNCTION rq_reject(id uuid, attempt integer) RETURNS jobs
LANGUAGE c VOLATILE
SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'rq_reject_c';

-- new: rq_reschedule(uuid, integer, timestamptz, interval)
CREATE FUNCTION rq_reschedule(
    id      uuid,
    attempt integer,
    at      timestamptz DEFAULT NULL,
    delay   interval    DEFAULT NULL
) RETURNS jobs
LANGUAGE c VOLATILE
SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'rq_reschedule_c';

-- changed: rq_rescue(integer)
CREATE OR REPLACE FUNCTION rq_rescue(batch integer DEFAULT 1000) RETURNS bigint
LANGUAGE sql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT raquel_internal.rq_rescue($1) $$;

-- changed: rq_resume(text)
CREATE OR REPLACE FUNCTION rq_resume(queue text) RETURNS queue_limits
LANGUAGE sql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT * FROM raquel_internal.rq_resume($1) $$;

-- changed: rq_resume_schedule(text)
CREATE FUNCTION raquel_internal.rq_resume_schedule(name text) RETURNS schedules
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    schedule @extschema@.schedules;
BEGIN
    UPDATE @extschema@.schedules s
    SET enabled = true,
        next_run_at = CASE WHEN s.enabled THEN s.next_run_at
                           ELSE raquel_internal.rq_cron_next(s.cron, s.timezone, raquel_internal.rq_now_ms()) END
    WHERE s.name = rq_resume_schedule.name
    RETURNING s.* INTO schedule;
    IF NOT FOUND THEN
        PERFORM raquel_internal.rq_refuse('schedule_unknown', ARRAY[coalesce(rq_resume_schedule.name, 'NULL')]);
    END IF;
    PERFORM raquel_internal.rq_schedule_due(schedule.next_run_at);
    RETURN schedule;
END
$$;

-- The name users call: the dashboard calls raquel_internal.rq_resume_schedule
-- (sql/privileges.sql says why).
CREATE OR REPLACE FUNCTION rq_resume_schedule(name text) RETURNS schedules
LANGUAGE sql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT * FROM raquel_internal.rq_resume_schedule($1) $$;


-- changed: rq_pause_schedule(text), its body now in raquel_internal (the dashboard calls it there)
CREATE FUNCTION raquel_internal.rq_pause_schedule(name text) RETURNS schedules
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    schedule @extschema@.schedules;
BEGIN
    UPDATE @extschema@.schedules s SET enabled = false WHERE s.name = rq_pause_schedule.name
    RETURNING s.* INTO schedule;
    IF NOT FOUND THEN
        PERFORM raquel_internal.rq_refuse('schedule_unknown', ARRAY[coalesce(rq_pause_schedule.name, 'NULL')]);
    END IF;
    RETURN schedule;
END
$$;

-- The name users call: the dashboard calls raquel_internal.rq_pause_schedule
-- (sql/privileges.sql says why).
CREATE OR REPLACE FUNCTION rq_pause_schedule(name text) RETURNS schedules
LANGUAGE sql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT * FROM raquel_internal.rq_pause_schedule($1) $$;

-- changed: rq_retry(uuid)
CREATE OR REPLACE FUNCTION rq_retry(id uuid) RETURNS jobs
LANGUAGE c VOLATILE
SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'rq_retry_c';

-- changed: rq_schedule(text, text, text, jsonb, text, text, interval, integer, interval, interval, interval, integer)
CREATE OR REPLACE FUNCTION rq_schedule(
    name            text,
    cron            text,
    queue           text,
    payload         jsonb,
    timezone        text        DEFAULT 'UTC',
    catch_up        text        DEFAULT 'last',
    max_age         interval    DEFAULT NULL,
    max_retry_count integer     DEFAULT NULL,
    min_retry_delay interval    DEFAULT NULL,
    max_retry_delay interval    DEFAULT NULL,
    backoff_base    interval    DEFAULT NULL,
    priority        integer     DEFAULT 0
) RETURNS schedules
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN raquel_internal.rq_schedule($1, $2, $3, $4::text, $5, $6, $7, $8, $9, $10, $11, $12);
END
$$;

-- changed: rq_schedule(text, text, text, text, text, text, interval, integer, interval, interval, interval, integer)
CREATE OR REPLACE FUNCTION rq_schedule(
    name            text,
    cron            text,
    queue           text,
    payload         text        DEFAULT NULL,
    timezone        text        DEFAULT 'UTC',
    catch_up        text        DEFAULT 'last',
    max_age         interval    DEFAULT NULL,
    max_retry_count integer     DEFAULT NULL,
    min_retry_delay interval    DEFAULT NULL,
    max_retry_delay interval    DEFAULT NULL,
    backoff_base    interval    DEFAULT NULL,
    priority        integer     DEFAULT 0
) RETURNS schedules
LANGUAGE sql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT * FROM raquel_internal.rq_schedule($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12) $$;

-- changed: rq_settle_workflows(integer)
CREATE OR REPLACE FUNCTION rq_settle_workflows(batch integer DEFAULT 1000) RETURNS bigint
LANGUAGE sql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT raquel_internal.rq_settle_workflows($1) $$;

-- new: rq_sleep(uuid, integer, text, timestamptz, interval)
CREATE FUNCTION rq_sleep(
    id      uuid,
    attempt integer,
    name    text,
    at      timestamptz DEFAULT NULL,
    delay   interval    DEFAULT NULL
) RETURNS boolean
LANGUAGE plpgsql VOLATILE
-- writes job_steps and job_waits as the owner (sql/steps.sql rq_step)
SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    -- at most a century from now, whether given as at or as delay
    wake_ms bigint := raquel_internal.rq_due_within_ms(rq_sleep.at, rq_sleep.delay, 'rq_sleep');
    holder  integer;
    now_ms  bigint;
    step    record;
BEGIN
    PERFORM raquel_internal.rq_require_attempt(rq_sleep.id, rq_sleep.attempt, 'put to sleep');
    PERFORM raquel_internal.rq_refuse_distributed('rq_sleep');
    PERFORM raquel_internal.rq_check_step_name(rq_sleep.id, rq_sleep.name, 'put to sleep');
    IF wake_ms IS NULL THEN
        PERFORM raquel_internal.rq_refuse('sleep_when', ARRAY[rq_sleep.id::text]);
    END IF;
    holder := raquel_internal.rq_hold(rq_sleep.id, rq_sleep.attempt, 'sleep');
    now_ms := raquel_internal.rq_now_ms();
    -- the sleep this call is (its name, or name#2 … in a loop)
    SELECT * INTO step FROM raquel_internal.rq_step_instance(rq_sleep.id, rq_sleep.name, 'sleep', holder);
    IF step.recorded THEN
        -- slept already: the instant recorded then, not the one asked now
        wake_ms := (step.result ->> 'until_ms')::bigint;
        IF wake_ms IS NULL OR wake_ms <= now_ms THEN
            -- gone past in this attempt: its name called again is the next sleep
            UPDATE @extschema@.job_steps s SET passed_by = holder
            WHERE s.job_id = rq_sleep.id AND s.name = step.instance;
            RETURN false;
        END IF;
    ELSE
        INSERT INTO @extschema@.job_steps (job_id, name, result, attempt, recorded_at, kind, passed_by)
        VALUES (rq_sleep.id, step.instance,
                jsonb_build_object('sleep_until', raquel_internal.rq_ms_to_timestamptz(wake_ms), 'until_ms', wake_ms),
                holder, now_ms, 'sleep', CASE WHEN wake_ms <= now_ms THEN holder END);
        IF wake_ms <= now_ms THEN
            RETURN false;
        END IF;
    END IF;
    PERFORM raquel_internal.rq_reschedule(rq_sleep.id, at => raquel_internal.rq_ms_to_timestamptz(wake_ms), attempt => holder);
    RETURN true;
END
$$;

-- changed: rq_stats()
-- (a column more, cursors: dropped and made again, with raquel's privileges:
-- EXECUTE for PUBLIC, the table's grants deciding who reads what)
DROP FUNCTION rq_stats();
CREATE FUNCTION rq_stats()
RETURNS TABLE (queue text, total bigint, queued bigint, claimed bigint, success bigint,
               failed bigint, expired bigint, exhausted bigint, cancelled bigint, blocked bigint,
               ready bigint, oldest_ready_age interval,
               paused boolean, max_claimed integer, rate integer, per interval, group_max_claimed integer,
               waiting_for_event bigint, cursors text)
LANGUAGE sql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
    WITH counts AS (
        SELECT j.queue,
               count(*) AS total,
               count(*) FILTER (WHERE j.status = 'queued') AS queued,
               count(*) FILTER (WHERE j.status = 'claimed') AS claimed,
               count(*) FILTER (WHERE j.status = 'success') AS success,
               count(*) FILTER (WHERE j.status = 'failed') AS failed,
               count(*) FILTER (WHERE j.status = 'expired') AS expired,
               count(*) FILTER (WHERE j.status = 'exhausted') AS exhausted,
               count(*) FILTER (WHERE j.status = 'cancelled') AS cancelled,
               count(*) FILTER (WHERE j.status = 'blocked') AS blocked,
               count(*) FILTER (WHERE r.ready) AS ready,
               (clock.ms - min(j.scheduled_at) FILTER (WHERE r.ready)) * interval '1 millisecond' AS oldest_ready_age
        FROM @extschema@.jobs j
        CROSS JOIN (SELECT raquel_internal.rq_now_ms() AS ms) clock
        CROSS JOIN LATERAL (
            SELECT j.status IN ('queued', 'failed') AND j.scheduled_at <= clock.ms
                   AND (j.max_age IS NULL OR j.scheduled_at + j.max_age > clock.ms) AS ready
        ) r
        GROUP BY j.queue, clock.ms
    )
    SELECT coalesce(c.queue, l.queue),
           coalesce(c.total, 0), coalesce(c.queued, 0), coalesce(c.claimed, 0), coalesce(c.success, 0),
           coalesce(c.failed, 0), coalesce(c.expired, 0), coalesce(c.exhausted, 0), coalesce(c.cancelled, 0),
           coalesce(c.blocked, 0),
           coalesce(c.ready, 0), c.oldest_ready_age,
           coalesce(l.paused, false), l.max_claimed, l.rate, l.per, l.group_max_claimed,
           coalesce(w.waiting, 0),
           raquel_internal.rq_cursor_state('@extschema@.jobs'::regclass::oid, coalesce(c.queue, l.queue))
    FROM counts c
    FULL JOIN @extschema@.queue_limits l ON l.queue = c.queue
    -- the jobs parked for an event (sql/waits.sql), by the queue they keep
    LEFT JOIN raquel_internal.rq_waiting_by_queue() w ON w.queue = coalesce(c.queue, l.queue)
    ORDER BY 1
$$;

-- new: rq_step(uuid, integer, text, jsonb)
CREATE FUNCTION rq_step(id uuid, attempt integer, name text, result jsonb DEFAULT NULL)
RETURNS job_steps
LANGUAGE c VOLATILE
SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'rq_step_fenced_c';

-- new (0.6.0): the end of a wait and a park, shared by rq_wait_event and rq_wait_job
-- The end of a wait, for the waiting job's own call (rq_wait_event,
-- rq_wait_job) that found it over: `got` recorded as its step `instance`
-- of kind `kind`, by attempt `holder` at `now_ms`, unless its end was
-- recorded first (by rq_deliver or rq_deliver_job_end; under REPEATABLE
-- READ, a record this snapshot cannot see is a serialization failure,
-- 40001: try again); what is recorded is returned. The job's wait row goes.
-- Writes job_steps and job_waits: the owner's (its callers run as the
-- owner), not for PUBLIC.
CREATE FUNCTION raquel_internal.rq_end_wait(id uuid, instance text, got jsonb, holder integer, now_ms bigint, kind text)
RETURNS jsonb
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    INSERT INTO @extschema@.job_steps (job_id, name, result, attempt, recorded_at, kind)
    VALUES (rq_end_wait.id, rq_end_wait.instance, rq_end_wait.got, rq_end_wait.holder, rq_end_wait.now_ms, rq_end_wait.kind)
    ON CONFLICT ON CONSTRAINT job_steps_pkey DO NOTHING;
    IF NOT FOUND THEN
        SELECT s.result INTO got FROM @extschema@.job_steps s
        WHERE s.job_id = rq_end_wait.id AND s.name = rq_end_wait.instance;
    END IF;
    DELETE FROM @extschema@.job_waits w WHERE w.job_id = rq_end_wait.id;
    RETURN got;
END
$$;
REVOKE EXECUTE ON FUNCTION raquel_internal.rq_end_wait(uuid, text, jsonb, integer, bigint, text) FROM PUBLIC;

-- Parks the job `id` that attempt `holder` holds, for rq_wait_event and
-- rq_wait_job: due at `until` (never, without one), and waiting for
-- `event` as its step `instance` since `since`. One wait a job: a wait
-- left by another step gives way. Under REPEATABLE READ an end that
-- committed after this snapshot is not seen by the caller: the background
-- worker looks in at commit. Writes jobs and job_waits: the owner's (its
-- callers run as the owner), not for PUBLIC.
CREATE FUNCTION raquel_internal.rq_park(id uuid, holder integer, instance text, event text, since bigint, until bigint)
RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    job @extschema@.jobs;
BEGIN
    job := raquel_internal.rq_reschedule(rq_park.id,
        at => raquel_internal.rq_ms_to_timestamptz(coalesce(rq_park.until, raquel_internal.rq_forever_ms())),
        attempt => rq_park.holder);
    INSERT INTO @extschema@.job_waits AS w (job_id, queue, name, event, since, until)
    VALUES (rq_park.id, job.queue, rq_park.instance, rq_park.event, rq_park.since, rq_park.until)
    ON CONFLICT ON CONSTRAINT job_waits_pkey DO UPDATE
    SET queue = excluded.queue, name = excluded.name, event = excluded.event, since = excluded.since, until = excluded.until;
    IF current_setting('transaction_isolation') <> 'read committed' THEN
        PERFORM raquel_internal.rq_look_in_at_commit();
    END IF;
END
$$;
REVOKE EXECUTE ON FUNCTION raquel_internal.rq_park(uuid, integer, text, text, bigint, bigint) FROM PUBLIC;

-- new: rq_wait_event(uuid, integer, text, text, interval, parked boolean, payload jsonb, timed_out boolean)
CREATE FUNCTION rq_wait_event(
    id        uuid,
    attempt   integer,
    name      text,
    event     text,
    timeout   interval DEFAULT NULL,
    OUT parked    boolean,
    OUT payload   jsonb,
    OUT timed_out boolean
)
LANGUAGE plpgsql VOLATILE
-- writes job_steps and job_waits as the owner (sql/steps.sql rq_step)
SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    -- from 0 to a century (3,153,600,000,000 ms), as a delay; without one,
    -- raquel.max_event_wait (NULL: no limit)
    timeout_ms bigint := coalesce(raquel_internal.rq_interval_ms(rq_wait_event.timeout, 'timeout', 0, 3153600000000),
                                  raquel_internal.rq_max_event_wait_ms());
    holder     integer;
    now_ms     bigint;
    got        jsonb;
    step       record;
    waiting    @extschema@.job_waits;
    emitted    @extschema@.emitted_events;
BEGIN
    PERFORM raquel_internal.rq_require_attempt(rq_wait_event.id, rq_wait_event.attempt, 'park');
    PERFORM raquel_internal.rq_refuse_distributed('rq_wait_event');
    PERFORM raquel_internal.rq_check_step_name(rq_wait_event.id, rq_wait_event.name, 'park');
    PERFORM raquel_internal.rq_check_event_name(rq_wait_event.event, 'rq_wait_event');
    holder := raquel_internal.rq_hold(rq_wait_event.id, rq_wait_event.attempt, 'wait_event');
    -- the wait begins now, before its turn: an emit made after this
    -- instant reaches it, even one that takes its turn first; one made
    -- before it reaches it while kept
    now_ms := raquel_internal.rq_now_ms();
    PERFORM raquel_internal.rq_event_turn(rq_wait_event.event, false);
    parked := false;
    timed_out := false;
    -- the wait this call is (its name, or name#2 … in a loop)
    SELECT * INTO step FROM raquel_internal.rq_step_instance(rq_wait_event.id, rq_wait_event.name, 'event', holder);
    IF step.recorded THEN
        -- waited already: what the step recorded (the event's payload, or the timeout)
        got := step.result;
        DELETE FROM @extschema@.job_waits w WHERE w.job_id = rq_wait_event.id AND w.name = step.instance;
    ELSE
        SELECT w.* INTO waiting FROM @extschema@.job_waits w
        WHERE w.job_id = rq_wait_event.id AND w.name = step.instance AND w.event = rq_wait_event.event;
        SELECT e.* INTO emitted FROM @extschema@.emitted_events e
        WHERE e.name = rq_wait_event.event AND e.kept_until >= coalesce(waiting.since, now_ms)
        ORDER BY e.id DESC LIMIT 1;
        IF FOUND THEN
            got := jsonb_build_object('event', emitted.name, 'payload', emitted.payload,
                                      'emitted_at', raquel_internal.rq_ms_to_timestamptz(emitted.emitted_at));
            -- an event that waited for its reader is read now, and goes
            IF emitted.until_read THEN
                DELETE FROM @extschema@.emitted_events e WHERE e.id = emitted.id;
            END IF;
        ELSIF waiting.until <= now_ms THEN
            got := jsonb_build_object('event', rq_wait_event.event, 'timed_out', true);
        END IF;
        IF got IS NOT NULL THEN
            -- the wait ends here (or an emit recorded its end first)
            got := raquel_internal.rq_end_wait(rq_wait_event.id, step.instance, got, holder, now_ms, 'event');
        END IF;
    END IF;
    IF got IS NOT NULL THEN
        -- gone past in this attempt: its name called again is the next wait
        UPDATE @extschema@.job_steps s SET passed_by = holder
        WHERE s.job_id = rq_wait_event.id AND s.name = step.instance;
        -- (a JSON null is no payload, as an emit without one)
        payload := nullif(got -> 'payload', 'null'::jsonb);
        timed_out := coalesce((got ->> 'timed_out')::boolean, false);
        RETURN;
    END IF;
    IF waiting.job_id IS NULL THEN
        -- a wait begins
        waiting.since := now_ms;
        waiting.until := now_ms + timeout_ms;
    END IF;
    PERFORM raquel_internal.rq_park(rq_wait_event.id, holder, step.instance, rq_wait_event.event, waiting.since, waiting.until);
    parked := true;
END
$$;

-- new: rq_warnings()
CREATE FUNCTION rq_warnings() RETURNS TABLE (warning text, hint text)
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT * FROM raquel_internal.rq_warnings() $$;


-- A job's history (issue 38): the attempts before the current one, kept
-- in the row (sql/schema.sql), and rq_history to read them.
ALTER TABLE @extschema@.jobs ADD COLUMN past_attempts jsonb;

-- new: rq_history(uuid). A job's history (issue 38): every attempt of job `id`, oldest first, as
-- the operator asks at 3 a.m. what happened to it. The attempts before the
-- current one are the row's past_attempts (sql/schema.sql), appended by
-- the verbs that end an attempt without ending the job: 'failed' (rq_fail
-- with a retry left, and a lapsed lease's rescue, its error 'lease
-- expired…'), 'rescheduled' (rq_reschedule, rq_sleep, rq_wait_event,
-- rq_wait_job), 'rejected' (rq_reject), and the end rq_retry reset
-- ('exhausted', 'cancelled', 'expired'). Then the row's own attempt, read
-- from the row: 'running' while claimed (no ended_at), or how the job
-- ended: 'success', 'exhausted' (with its error), 'cancelled' or
-- 'expired'. A job cancelled or expired while it waited, its attempt
-- already listed or never made, shows that end with no worker and no
-- claim time (src/transitions.rs OWN_ATTEMPT decides the same way). A
-- job queued or failed shows only its past attempts, except one failed by
-- hand or by the Python library (an UPDATE of its own, which appends
-- nothing): its row's failure is shown when no entry holds its attempt.
-- An unknown id is an error (P0002), as for rq_parents: a job pruned after
-- the retention is gone with its history. Reads the jobs table as its
-- caller (SECURITY INVOKER): whoever may read jobs may read histories.
CREATE FUNCTION raquel_internal.rq_history(id uuid)
RETURNS TABLE (attempt integer, worker text, claimed_at timestamptz, ended_at timestamptz,
               outcome text, error text, trace text)
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    job record;
    last_listed integer;
    own boolean;
BEGIN
    IF rq_history.id IS NULL THEN
        PERFORM raquel_internal.rq_refuse('history_of_null', '{}');
    END IF;
    SELECT j.status::text AS status, j.attempts, j.claimed_by, j.claimed_at, j.finished_at,
           j.error, j.error_trace, j.past_attempts
    INTO job FROM @extschema@.jobs j WHERE j.id = rq_history.id;
    IF NOT FOUND THEN
        PERFORM raquel_internal.rq_refuse('history_of_unknown', ARRAY[rq_history.id::text]);
    END IF;
    RETURN QUERY
        SELECT (e.entry ->> 'attempt')::integer, e.entry ->> 'worker',
               raquel_internal.rq_ms_to_timestamptz((e.entry ->> 'claimed_at')::bigint),
               raquel_internal.rq_ms_to_timestamptz((e.entry ->> 'ended_at')::bigint),
               e.entry ->> 'outcome', e.entry ->> 'error', e.entry ->> 'trace'
        FROM pg_catalog.jsonb_array_elements(coalesce(job.past_attempts, '[]'::jsonb)) WITH ORDINALITY e (entry, n)
        ORDER BY e.n;
    last_listed := coalesce((job.past_attempts -> -1 ->> 'attempt')::integer, 0);
    own := job.claimed_at IS NOT NULL AND job.attempts > last_listed;
    IF job.status IN ('claimed', 'success', 'exhausted')
       OR job.status IN ('cancelled', 'expired')
       OR job.status = 'failed' AND own THEN
        attempt := job.attempts;
        worker := CASE WHEN own OR job.status IN ('claimed', 'success', 'exhausted') THEN job.claimed_by END;
        claimed_at := CASE WHEN own OR job.status IN ('claimed', 'success', 'exhausted')
                           THEN raquel_internal.rq_ms_to_timestamptz(job.claimed_at) END;
        ended_at := raquel_internal.rq_ms_to_timestamptz(job.finished_at);
        outcome := CASE job.status WHEN 'claimed' THEN 'running' ELSE job.status END;
        error := CASE WHEN job.status IN ('exhausted', 'failed') THEN job.error END;
        trace := CASE WHEN job.status IN ('exhausted', 'failed') THEN job.error_trace END;
        RETURN NEXT;
    END IF;
END
$$;

-- The name users call: the dashboard calls raquel_internal.rq_history
-- (sql/privileges.sql says why).
CREATE FUNCTION rq_history(id uuid)
RETURNS TABLE (attempt integer, worker text, claimed_at timestamptz, ended_at timestamptz,
               outcome text, error text, trace text)
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT * FROM raquel_internal.rq_history($1) $$;


-- The jobs table's defaults and the views, by the twins' names.
ALTER TABLE @extschema@.jobs
    ALTER COLUMN id SET DEFAULT raquel_internal.rq_uuid7(),
    ALTER COLUMN enqueued_at SET DEFAULT raquel_internal.rq_now_ms(),
    ALTER COLUMN scheduled_at SET DEFAULT raquel_internal.rq_now_ms();

CREATE OR REPLACE VIEW rq_jobs AS
SELECT j.id, j.queue, j.status, j.priority, j.attempts, j.requeues, j.max_retry_count,
       j.payload, j.error, j.claimed_by,
       raquel_internal.rq_ms_to_timestamptz(j.enqueued_at)      AS enqueued_at,
       raquel_internal.rq_ms_to_timestamptz(j.scheduled_at)     AS scheduled_at,
       raquel_internal.rq_ms_to_timestamptz(j.claimed_at)       AS claimed_at,
       raquel_internal.rq_ms_to_timestamptz(j.lease_expires_at) AS lease_expires_at,
       raquel_internal.rq_ms_to_timestamptz(j.finished_at)      AS finished_at,
       raquel_internal.rq_ms_to_interval(j.max_age)                  AS max_age,
       raquel_internal.rq_ms_to_interval(j.min_retry_delay::bigint)  AS min_retry_delay,
       raquel_internal.rq_ms_to_interval(j.max_retry_delay::bigint)  AS max_retry_delay,
       raquel_internal.rq_ms_to_interval(j.backoff_base::bigint)     AS backoff_base,
       j.error_trace, j.result
FROM jobs j;

CREATE OR REPLACE VIEW rq_schedules AS
SELECT s.name, s.cron, s.timezone, s.queue, s.enabled, s.catch_up,
       raquel_internal.rq_ms_to_timestamptz(s.next_run_at) AS next_run,
       raquel_internal.rq_ms_to_timestamptz(s.last_run_at) AS last_run,
       s.last_job_id, s.last_error
FROM @extschema@.schedules s;

-- The checks of the jobs table's domains are C functions (src/schema.rs)
-- whose refusal names the value and its column (0.6.0). Adding a domain's
-- constraint checks every row of jobs once.
CREATE FUNCTION raquel_internal."rq_check_status"(
	"value" TEXT /* & str */
) RETURNS bool /* bool */
IMMUTABLE STRICT PARALLEL SAFE 
SET search_path TO pg_catalog, pg_temp
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'rq_check_status_wrapper';
CREATE FUNCTION raquel_internal."rq_check_nonnegative"(
	"value" INT /* i32 */
) RETURNS bool /* bool */
IMMUTABLE STRICT PARALLEL SAFE 
SET search_path TO pg_catalog, pg_temp
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'rq_check_nonnegative_wrapper';
CREATE FUNCTION raquel_internal."rq_check_delay_ms"(
	"value" INT /* i32 */
) RETURNS bool /* bool */
IMMUTABLE STRICT PARALLEL SAFE 
SET search_path TO pg_catalog, pg_temp
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'rq_check_delay_ms_wrapper';
CREATE FUNCTION raquel_internal."rq_check_max_age_ms"(
	"value" bigint /* i64 */
) RETURNS bool /* bool */
IMMUTABLE STRICT PARALLEL SAFE 
SET search_path TO pg_catalog, pg_temp
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'rq_check_max_age_ms_wrapper';
ALTER DOMAIN rq_status DROP CONSTRAINT rq_status_check;
ALTER DOMAIN rq_status ADD CONSTRAINT rq_status_check CHECK (raquel_internal.rq_check_status(VALUE));
ALTER DOMAIN rq_nonnegative DROP CONSTRAINT rq_nonnegative_check;
ALTER DOMAIN rq_nonnegative ADD CONSTRAINT rq_nonnegative_check CHECK (raquel_internal.rq_check_nonnegative(VALUE));
ALTER DOMAIN rq_delay_ms DROP CONSTRAINT rq_delay_ms_check;
ALTER DOMAIN rq_delay_ms ADD CONSTRAINT rq_delay_ms_check CHECK (raquel_internal.rq_check_delay_ms(VALUE));
ALTER DOMAIN rq_max_age_ms DROP CONSTRAINT rq_max_age_ms_check;
ALTER DOMAIN rq_max_age_ms ADD CONSTRAINT rq_max_age_ms_check CHECK (raquel_internal.rq_check_max_age_ms(VALUE));

-- Durable execution, second round (issue 37): each step recorded with its
-- kind (the steps of 0.5.0 read from what they recorded: a sleep its
-- instant, a wait its event), the attempt that last went past a sleep or
-- a wait (so that a loop's calls of one name are numbered), and events
-- that wait for their reader.
ALTER TABLE @extschema@.job_steps
    ADD COLUMN kind text NOT NULL DEFAULT 'step',
    ADD COLUMN passed_by integer;
UPDATE @extschema@.job_steps s SET kind = 'sleep'
WHERE s.result ? 'until_ms' AND s.result ? 'sleep_until';
UPDATE @extschema@.job_steps s SET kind = 'event'
WHERE s.kind = 'step' AND s.result ? 'event' AND (s.result ? 'emitted_at' OR s.result ? 'timed_out');
ALTER TABLE @extschema@.emitted_events ADD COLUMN until_read boolean NOT NULL DEFAULT false;
COMMENT ON COLUMN job_steps.kind IS
    'What recorded the step: step (rq_step), sleep (rq_sleep) or event (rq_wait_event); a call of another kind under its name is refused.';
COMMENT ON COLUMN job_steps.passed_by IS
    'The last attempt that went past this sleep or wait (its name called again in that attempt is the next one); NULL: none yet, or a step of rq_step.';
COMMENT ON COLUMN emitted_events.until_read IS
    'Emitted without a keep: the event waits for its reader, and goes once a wait has read it (or the jobs parked for it when it came).';

CREATE FUNCTION raquel_internal."rq_event_retention_ms"() RETURNS bigint /* i64 */
STRICT STABLE PARALLEL SAFE 
SET search_path TO pg_catalog, pg_temp
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'rq_event_retention_ms_wrapper';
CREATE FUNCTION raquel_internal."rq_max_event_wait_ms"() RETURNS bigint /* Option < i64 > */
STRICT STABLE PARALLEL SAFE 
SET search_path TO pg_catalog, pg_temp
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'rq_max_event_wait_ms_wrapper';

-- The step that a call of kind `kind` ('sleep', 'event') by attempt
-- `holder` under `name` is: `name` the first time in an attempt, `name#2`
-- the second, and so on (the first of them that this attempt has not gone
-- past: a loop that sleeps under one name sleeps each time round, as its
-- next attempt replays it), and what is recorded for it (recorded false:
-- nothing yet). A step of that name of another kind is refused (55000): a
-- name renamed or reused by a deploy would otherwise read what another
-- kind of step recorded (a sleep passing at once on rq_step's record).
CREATE FUNCTION raquel_internal.rq_step_instance(
    id       uuid,
    name     text,
    kind     text,
    holder   integer,
    OUT instance text,
    OUT recorded boolean,
    OUT result   jsonb
)
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    n    integer := 1;
    step record;
BEGIN
    LOOP
        instance := CASE WHEN n = 1 THEN rq_step_instance.name ELSE rq_step_instance.name || '#' || n END;
        SELECT s.kind, s.result, s.attempt, s.recorded_at, s.passed_by INTO step
        FROM @extschema@.job_steps s WHERE s.job_id = rq_step_instance.id AND s.name = instance;
        IF NOT FOUND THEN
            recorded := false;
            RETURN;
        END IF;
        IF step.kind <> rq_step_instance.kind THEN
            PERFORM raquel_internal.rq_refuse('step_kind', ARRAY[instance, rq_step_instance.id::text, step.kind,
                rq_step_instance.kind, step.attempt::text, raquel_internal.rq_ms_to_timestamptz(step.recorded_at)::text]);
        END IF;
        IF step.passed_by IS DISTINCT FROM holder THEN
            recorded := true;
            result := step.result;
            RETURN;
        END IF;
        n := n + 1;
    END LOOP;
END
$$;

COMMENT ON FUNCTION rq_emit(text, jsonb, interval) IS
    'raquel: emits an event: the jobs parked for it resume with its payload; without a keep, the first wait for it reads it (within raquel.event_retention), with one, every wait that starts within keep. Not for PUBLIC.';

-- The checks an event's name passes, in rq_wait_event and rq_emit
-- (`function`, named in the refusal). Names that begin with `raquel:` are
-- raquel's own: a job's end is delivered to the jobs that wait for it
-- (rq_wait_job) under `raquel:job:<id>`, which nobody may emit or wait for
-- by hand.
CREATE OR REPLACE FUNCTION raquel_internal.rq_check_event_name(event text, function text) RETURNS void
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF event IS NULL OR event = '' THEN
        PERFORM raquel_internal.rq_refuse('event_name_empty', ARRAY[function]);
    END IF;
    IF octet_length(event) > 1000 THEN
        PERFORM raquel_internal.rq_refuse('event_name_long', ARRAY[octet_length(event)::text, left(event, 20)]);
    END IF;
    IF starts_with(event, 'raquel:') THEN
        PERFORM raquel_internal.rq_refuse('event_name_reserved', ARRAY[event, function]);
    END IF;
END
$$;

-- Parks the claimed job `id` until job `job` ends, for at most `timeout`
-- (NULL: raquel.max_event_wait), as step `name`: a durable await of
-- another job (a child it enqueued, say), which holds no connection and
-- uses up no retry. parked: the job waits (commit, and leave the job
-- alone); it comes back when `job` ends or the timeout passes, and its
-- next attempt, calling this again, gets the job's end: its status
-- (success, exhausted, cancelled, expired; NULL for a job gone before its
-- end was seen), result and error, or timed_out. A job already ended
-- answers at once. The end reaches the waiting job in the ending
-- transaction (rq_job_ended, sql/finish.sql, through an edge of
-- job_dependencies, as a workflow child's release does), or, where the
-- two raced, at the background worker's next round (rq_settle_waits). The
-- same name called again in one attempt is the next wait (name#2, …).
CREATE FUNCTION rq_wait_job(
    id        uuid,
    attempt   integer,
    name      text,
    job       uuid,
    timeout   interval DEFAULT NULL,
    OUT parked    boolean,
    OUT status    text,
    OUT result    jsonb,
    OUT error     text,
    OUT timed_out boolean
)
LANGUAGE plpgsql VOLATILE
-- writes job_steps, job_waits and job_dependencies as the owner (sql/steps.sql rq_step)
SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    timeout_ms bigint := coalesce(raquel_internal.rq_interval_ms(rq_wait_job.timeout, 'timeout', 0, 3153600000000),
                                  raquel_internal.rq_max_event_wait_ms());
    -- the wait's event: raquel's own name for the job's end
    awaited_event text := 'raquel:job:' || rq_wait_job.job::text;
    holder     integer;
    now_ms     bigint;
    got        jsonb;
    step       record;
    awaited    record;
    waiting    @extschema@.job_waits;
BEGIN
    PERFORM raquel_internal.rq_require_attempt(rq_wait_job.id, rq_wait_job.attempt, 'park');
    PERFORM raquel_internal.rq_refuse_distributed('rq_wait_job');
    PERFORM raquel_internal.rq_check_step_name(rq_wait_job.id, rq_wait_job.name, 'park');
    IF rq_wait_job.job IS NULL OR rq_wait_job.job = rq_wait_job.id THEN
        PERFORM raquel_internal.rq_refuse('wait_job_which', ARRAY[rq_wait_job.id::text, rq_wait_job.job::text]);
    END IF;
    holder := raquel_internal.rq_hold(rq_wait_job.id, rq_wait_job.attempt, 'wait_job');
    now_ms := raquel_internal.rq_now_ms();
    parked := false;
    timed_out := false;
    -- the wait this call is (its name, or name#2 … in a loop)
    SELECT * INTO step FROM raquel_internal.rq_step_instance(rq_wait_job.id, rq_wait_job.name, 'job', holder);
    IF step.recorded THEN
        -- waited already: what the step recorded (the job's end, or the timeout)
        got := step.result;
        DELETE FROM @extschema@.job_waits w WHERE w.job_id = rq_wait_job.id AND w.name = step.instance;
    ELSE
        SELECT w.* INTO waiting FROM @extschema@.job_waits w
        WHERE w.job_id = rq_wait_job.id AND w.name = step.instance AND w.event = awaited_event;
        -- the awaited job, locked against an end until this transaction
        -- ends: an end in progress is waited for and seen here, and an end
        -- after this commit finds the wait's edge
        SELECT j.status, j.result, j.error, j.finished_at INTO awaited
        FROM @extschema@.jobs j WHERE j.id = rq_wait_job.job FOR SHARE OF j;
        IF NOT FOUND THEN
            PERFORM raquel_internal.rq_refuse('wait_job_unknown', ARRAY[rq_wait_job.job::text]);
        END IF;
        IF awaited.status IN ('success', 'exhausted', 'cancelled', 'expired') THEN
            got := jsonb_build_object('job', rq_wait_job.job, 'status', awaited.status, 'result', awaited.result,
                                      'error', awaited.error,
                                      'ended_at', raquel_internal.rq_ms_to_timestamptz(awaited.finished_at));
        ELSIF waiting.until <= now_ms THEN
            got := jsonb_build_object('job', rq_wait_job.job, 'timed_out', true);
        END IF;
        IF got IS NOT NULL THEN
            -- the wait ends here (or the job's end recorded it first)
            got := raquel_internal.rq_end_wait(rq_wait_job.id, step.instance, got, holder, now_ms, 'job');
            DELETE FROM @extschema@.job_dependencies d WHERE d.parent_id = rq_wait_job.job AND d.child_id = rq_wait_job.id;
        END IF;
    END IF;
    IF got IS NOT NULL THEN
        -- gone past in this attempt: its name called again is the next wait
        UPDATE @extschema@.job_steps s SET passed_by = holder
        WHERE s.job_id = rq_wait_job.id AND s.name = step.instance;
        -- (SELECT … INTO: the out column status is the awaited job's end
        -- as recorded, and `status :=` reads as a write of a job's status
        -- to the scan of src/transitions.rs)
        SELECT got ->> 'status', nullif(got -> 'result', 'null'::jsonb), got ->> 'error',
               coalesce((got ->> 'timed_out')::boolean, false)
        INTO status, result, error, timed_out;
        RETURN;
    END IF;
    IF waiting.job_id IS NULL THEN
        -- a wait begins
        waiting.since := now_ms;
        waiting.until := now_ms + timeout_ms;
    END IF;
    -- a wait left by another step gives way (rq_park), and so does its
    -- edge to a job it awaited
    DELETE FROM @extschema@.job_dependencies d
    USING @extschema@.job_waits w
    WHERE w.job_id = rq_wait_job.id AND w.event <> awaited_event AND starts_with(w.event, 'raquel:job:')
      AND d.child_id = rq_wait_job.id AND d.parent_id = substr(w.event, 12)::uuid;
    PERFORM raquel_internal.rq_park(rq_wait_job.id, holder, step.instance, awaited_event, waiting.since, waiting.until);
    -- the awaited job's end sets the wait off, in the ending transaction:
    -- the ending statements look for its edges (src/finish.rs sets_off)
    INSERT INTO @extschema@.job_dependencies (parent_id, child_id) VALUES (rq_wait_job.job, rq_wait_job.id)
    ON CONFLICT ON CONSTRAINT job_dependencies_pkey DO NOTHING;
    -- An end that was waiting for the lock above goes on after this commit
    -- with its statement's snapshot, taken before it: it cannot see the
    -- edge, and hands nothing on (measured: the parked job stayed parked
    -- until the background worker's next visit, minutes later). So the
    -- background worker looks in at commit (rq_settle_waits) under every
    -- isolation level, not only REPEATABLE READ (rq_park): at most a round
    -- a second, however many waits.
    PERFORM raquel_internal.rq_look_in_at_commit();
    parked := true;
END
$$;

COMMENT ON FUNCTION rq_wait_job(uuid, integer, text, uuid, interval) IS
    'raquel: parks the claimed job until another job ends or the timeout passes, as a step; parked: end the attempt; otherwise the job''s status, result and error, or timed_out.';

-- What the end of a wait does for the job that waited, for rq_deliver (an
-- emit) and rq_deliver_job_end (a job's end): `got` recorded as its step
-- `waiting.name` of kind `kind` (unless a step of that name is recorded
-- already) at `now_ms`, and the job, if still parked, due now, a waiting
-- claim woken for it at commit. Whether it made the job due. The wait's row
-- is the caller's to delete. Writes job_steps: the owner's (its callers run
-- as the owner), not for PUBLIC.
CREATE FUNCTION raquel_internal.rq_resume_waiter(waiting job_waits, got jsonb, kind text, now_ms bigint) RETURNS boolean
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    woken @extschema@.jobs;
BEGIN
    INSERT INTO @extschema@.job_steps (job_id, name, result, attempt, recorded_at, kind)
    SELECT waiting.job_id, waiting.name, got, j.attempts, now_ms, rq_resume_waiter.kind
    FROM @extschema@.jobs j WHERE j.id = waiting.job_id
    ON CONFLICT ON CONSTRAINT job_steps_pkey DO NOTHING;
    UPDATE @extschema@.jobs j SET scheduled_at = now_ms
    WHERE j.id = waiting.job_id AND j.status = 'queued' AND j.scheduled_at > now_ms
    RETURNING j.* INTO woken;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    -- ready now: wake a waiting claim at commit (src/events.rs)
    PERFORM raquel_internal.rq_job_ready_again(woken.queue, woken.scheduled_at, woken.max_age, woken.priority, woken.id);
    RETURN true;
END
$$;
REVOKE EXECUTE ON FUNCTION raquel_internal.rq_resume_waiter(job_waits, jsonb, text, bigint) FROM PUBLIC;

-- Hands the end of job `job` to the jobs that wait for it (rq_wait_job):
-- records its status, result and error as their step, ends their waits
-- and edges, and makes those still parked due now. Nothing while the job
-- has not ended; a job gone (deleted before its end was seen) hands
-- status NULL. How many parked jobs it made due. Called by a job's end
-- (rq_job_ended, sql/finish.sql) and by the background worker's duty for
-- the ends it missed (rq_settle_waits). It runs as the owner, who writes
-- the steps and waits; it hands on only a true end, which the duty would
-- hand on at its next round, and is for the roles that end jobs
-- (rq_grant_worker).
CREATE FUNCTION raquel_internal.rq_deliver_job_end(job uuid) RETURNS bigint
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    now_ms  bigint := raquel_internal.rq_now_ms();
    ended   record;
    there   boolean;
    got     jsonb;
    waiting @extschema@.job_waits;
    resumed bigint := 0;
BEGIN
    SELECT j.status, j.result, j.error, j.finished_at INTO ended FROM @extschema@.jobs j WHERE j.id = rq_deliver_job_end.job;
    there := FOUND;
    IF there AND ended.status NOT IN ('success', 'exhausted', 'cancelled', 'expired') THEN
        RETURN 0;
    END IF;
    got := CASE WHEN there
                THEN jsonb_build_object('job', rq_deliver_job_end.job, 'status', ended.status, 'result', ended.result,
                                        'error', ended.error,
                                        'ended_at', raquel_internal.rq_ms_to_timestamptz(ended.finished_at))
                ELSE jsonb_build_object('job', rq_deliver_job_end.job, 'status', NULL, 'gone', true)
           END;
    FOR waiting IN
        DELETE FROM @extschema@.job_waits w
        WHERE w.event = 'raquel:job:' || rq_deliver_job_end.job::text
        RETURNING w.*
    LOOP
        DELETE FROM @extschema@.job_dependencies d
        WHERE d.parent_id = rq_deliver_job_end.job AND d.child_id = waiting.job_id;
        IF raquel_internal.rq_resume_waiter(waiting, got, 'job', now_ms) THEN
            resumed := resumed + 1;
        END IF;
    END LOOP;
    RETURN resumed;
END
$$;

-- A claim on any queue takes every queue's ready jobs from an index of
-- its own (sql/schema.sql jobs_ready_idx), so that queues holding only
-- jobs due later no longer cost it a probe each. Built here, under the
-- update's lock on the table: on a table of millions of ready jobs the
-- update takes as long as building one index.
CREATE INDEX jobs_ready_idx
    ON @extschema@.jobs (priority DESC, scheduled_at, id)
    WHERE status IN ('queued', 'failed') AND priority >= -2147483648 AND group_key IS NULL;

-- Who may run the twins: as their public names (sql/privileges.sql).
REVOKE EXECUTE ON FUNCTION
    raquel_internal.rq_enqueue(text, text, timestamptz, interval, interval, integer, interval, interval, interval, integer, text, text, uuid[], interval),
    raquel_internal.rq_enqueue(text, jsonb, timestamptz, interval, interval, integer, interval, interval, interval, integer, text, text, uuid[], interval),
    raquel_internal.rq_enqueue_batch(text, text[], timestamptz, interval, interval, integer, interval, interval, interval, integer, text[], text[], uuid[]),
    raquel_internal.rq_expire(integer), raquel_internal.rq_rescue(integer), raquel_internal.rq_prune(integer, interval),
    raquel_internal.rq_settle_workflows(integer), raquel_internal.rq_fire_schedules(integer), raquel_internal.rq_worker_wake(),
    -- rq_enqueue_batch's planned path runs as the owner rq_enqueue_batch runs as
    raquel_internal.rq_enqueue_batch_planned(text, text[], timestamptz, interval, interval, integer, interval, interval, interval, integer, text[], text[], uuid[])
FROM PUBLIC;

-- The roles given rq_enqueue or rq_enqueue_batch (rq_grant_producer, or a
-- grant by hand) may run the twins their triggers and jsonb overloads call.
DO $$
DECLARE
    pair record;
    g    record;
BEGIN
    FOR pair IN
        SELECT * FROM (VALUES
            ('@extschema@.rq_enqueue(text, text, timestamptz, interval, interval, integer, interval, interval, interval, integer, text, text, uuid[], interval)',
             'raquel_internal.rq_enqueue(text, text, timestamptz, interval, interval, integer, interval, interval, interval, integer, text, text, uuid[], interval)'),
            ('@extschema@.rq_enqueue(text, jsonb, timestamptz, interval, interval, integer, interval, interval, interval, integer, text, text, uuid[], interval)',
             'raquel_internal.rq_enqueue(text, jsonb, timestamptz, interval, interval, integer, interval, interval, interval, integer, text, text, uuid[], interval)'),
            ('@extschema@.rq_enqueue_batch(text, text[], timestamptz, interval, interval, integer, interval, interval, interval, integer, text[], text[], uuid[])',
             'raquel_internal.rq_enqueue_batch(text, text[], timestamptz, interval, interval, integer, interval, interval, interval, integer, text[], text[], uuid[])')
        ) v (public_name, twin)
    LOOP
        FOR g IN
            SELECT a.grantee, a.is_grantable
            FROM pg_catalog.pg_proc p, pg_catalog.aclexplode(p.proacl) a
            WHERE p.oid = pair.public_name::pg_catalog.regprocedure
              AND a.privilege_type = 'EXECUTE' AND a.grantee <> p.proowner AND a.grantee <> 0
        LOOP
            EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION %s TO %s%s', pair.twin,
                g.grantee::pg_catalog.regrole::pg_catalog.text,
                CASE WHEN g.is_grantable THEN ' WITH GRANT OPTION' ELSE '' END);
        END LOOP;
    END LOOP;
END
$$;


-- The replaced verbs: their grants, as they were, and their comments.
DO $$
DECLARE
    pair record;
    g    record;
BEGIN
    FOR pair IN
        SELECT * FROM (VALUES
            ('@extschema@.rq_complete_0_5_0(uuid, integer, jsonb)', '@extschema@.rq_complete(uuid, integer, jsonb)'),
            ('@extschema@.rq_fail_0_5_0(uuid, text, text, integer)', '@extschema@.rq_fail(uuid, integer, text, text)'),
            ('@extschema@.rq_complete_batch_0_5_0(uuid[], integer[], jsonb[])', '@extschema@.rq_complete_batch(uuid[], integer[], jsonb[])'),
            ('@extschema@.rq_fail_and_claim_0_5_0(uuid, text, text, integer, text[], text, integer, interval, interval)', '@extschema@.rq_fail_and_claim(uuid, integer, text, text, text[], text, integer, interval, interval)'),
            ('@extschema@.rq_step_0_5_0(uuid, text, jsonb, integer)', '@extschema@.rq_step(uuid, integer, text, jsonb)'),
            ('@extschema@.rq_reschedule_0_5_0(uuid, timestamptz, interval, integer)', '@extschema@.rq_reschedule(uuid, integer, timestamptz, interval)'),
            ('@extschema@.rq_reject_0_5_0(uuid, integer)', '@extschema@.rq_reject(uuid, integer)'),
            ('@extschema@.rq_extend_0_5_0(uuid, interval, integer)', '@extschema@.rq_extend(uuid, integer, interval)'),
            ('@extschema@.rq_sleep_0_5_0(uuid, text, timestamptz, interval, integer)', '@extschema@.rq_sleep(uuid, integer, text, timestamptz, interval)'),
            ('@extschema@.rq_wait_event_0_5_0(uuid, text, text, interval, integer)', '@extschema@.rq_wait_event(uuid, integer, text, text, interval)')
        ) v (old, new)
    LOOP
        IF (SELECT p.proacl FROM pg_catalog.pg_proc p WHERE p.oid = pair.old::pg_catalog.regprocedure) IS NOT NULL THEN
            -- a function is made with EXECUTE for PUBLIC; the old one's grants hold instead
            EXECUTE pg_catalog.format('REVOKE EXECUTE ON FUNCTION %s FROM PUBLIC', pair.new);
            FOR g IN
                SELECT a.grantee, a.is_grantable
                FROM pg_catalog.pg_proc p, pg_catalog.aclexplode(p.proacl) a
                WHERE p.oid = pair.old::pg_catalog.regprocedure
                  AND a.privilege_type = 'EXECUTE' AND a.grantee <> p.proowner
            LOOP
                EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION %s TO %s%s', pair.new,
                    CASE WHEN g.grantee = 0 THEN 'PUBLIC' ELSE g.grantee::pg_catalog.regrole::pg_catalog.text END,
                    CASE WHEN g.is_grantable THEN ' WITH GRANT OPTION' ELSE '' END);
            END LOOP;
        END IF;
        EXECUTE pg_catalog.format('DROP FUNCTION %s', pair.old);
    END LOOP;
END
$$;

-- The durable verbs write job_steps and job_waits as the owner, fenced by
-- the attempt, and are for workers (sql/privileges.sql): every role that
-- could write those tables itself (a worker granted by 0.5.0's
-- rq_grant_worker, or by hand) may run the verbs instead, and loses the
-- writes. Reading them stays.
REVOKE EXECUTE ON FUNCTION
    @extschema@.rq_step(uuid, integer, text, jsonb),
    @extschema@.rq_sleep(uuid, integer, text, timestamptz, interval),
    @extschema@.rq_wait_event(uuid, integer, text, text, interval),
    @extschema@.rq_wait_job(uuid, integer, text, uuid, interval),
    raquel_internal.rq_deliver_job_end(uuid)
FROM PUBLIC;
DO $$
DECLARE
    r record;
BEGIN
    FOR r IN
        SELECT DISTINCT a.grantee
        FROM pg_catalog.pg_class c, pg_catalog.aclexplode(c.relacl) a
        WHERE c.oid IN ('@extschema@.job_steps'::pg_catalog.regclass, '@extschema@.job_waits'::pg_catalog.regclass)
          AND a.privilege_type IN ('INSERT', 'UPDATE', 'DELETE')
          AND a.grantee <> c.relowner
    LOOP
        IF r.grantee <> 0 THEN
            EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION
                @extschema@.rq_step(uuid, integer, text, jsonb),
                @extschema@.rq_sleep(uuid, integer, text, timestamptz, interval),
                @extschema@.rq_wait_event(uuid, integer, text, text, interval),
                @extschema@.rq_wait_job(uuid, integer, text, uuid, interval),
                raquel_internal.rq_deliver_job_end(uuid) TO %s',
                r.grantee::pg_catalog.regrole::pg_catalog.text);
        END IF;
        EXECUTE pg_catalog.format('REVOKE INSERT, UPDATE, DELETE ON @extschema@.job_steps, @extschema@.job_waits FROM %s',
            CASE WHEN r.grantee = 0 THEN 'PUBLIC' ELSE r.grantee::pg_catalog.regrole::pg_catalog.text END);
    END LOOP;
END
$$;

-- Emitting with scope (sql/waits.sql): the prefixes a role may emit.
CREATE TABLE @extschema@.event_emitters (
    role   oid  NOT NULL,
    prefix text NOT NULL,
    CONSTRAINT event_emitters_pkey PRIMARY KEY (role, prefix)
);
COMMENT ON TABLE @extschema@.event_emitters IS
    'raquel durable jobs: the event-name prefixes a role may emit (rq_grant_emitter); a role without rows may emit any event it may call rq_emit for.';
SELECT pg_catalog.pg_extension_config_dump('@extschema@.event_emitters', '');
REVOKE EXECUTE ON FUNCTION @extschema@.rq_grant_emitter(regrole, text) FROM PUBLIC;
COMMENT ON FUNCTION @extschema@.rq_grant_emitter(regrole, text) IS
    'raquel: lets a role emit events (rq_emit), only those whose name begins with prefix when one is given; for the extension''s owner.';

COMMENT ON FUNCTION rq_complete(uuid, integer, jsonb) IS
    'raquel: marks a claimed (or taken) job succeeded, with its result if given; attempt (required), the value the claim returned, fences out a worker whose lease ran out.';
COMMENT ON FUNCTION rq_fail(uuid, integer, text, text) IS
    'raquel: records a failed attempt (the fencing token the claim returned) of a claimed job with its error: queued again after the backoff, or exhausted when no retry is left.';
COMMENT ON FUNCTION rq_complete_batch(uuid[], integer[], jsonb[]) IS
    'raquel: completes several claimed jobs at once, all or nothing (attempts[i] is the fencing token of ids[i], results[i] its result), and returns their rows.';
COMMENT ON FUNCTION rq_fail_and_claim(uuid, integer, text, text, text[], text, integer, interval, interval) IS
    'raquel: fails a job (as rq_fail) and claims the next (as rq_claim) in one call.';
COMMENT ON FUNCTION rq_step(uuid, integer, text, jsonb) IS
    'raquel: records a named step of a claimed job with its result, kept across attempts (job_steps); a step already recorded is refused (23505).';
COMMENT ON FUNCTION rq_reschedule(uuid, integer, timestamptz, interval) IS
    'raquel: hands a claimed job back to be run again at `at` or after `delay` (default: its min_retry_delay), without counting a failed attempt.';
COMMENT ON FUNCTION rq_reject(uuid, integer) IS
    'raquel: hands a claimed job back to its queue at once, without counting a failed attempt.';
COMMENT ON FUNCTION rq_extend(uuid, integer, interval) IS
    'raquel: extends the lease of a claimed job to now + lease.';
COMMENT ON FUNCTION rq_sleep(uuid, integer, text, timestamptz, interval) IS
    'raquel: puts the claimed job to sleep until at plus delay, as a step; true: it sleeps (end the attempt), false: the sleep is over. Uses up no retry.';
COMMENT ON FUNCTION rq_wait_event(uuid, integer, text, text, interval) IS
    'raquel: parks the claimed job until the event is emitted or the timeout passes, as a step; parked: end the attempt; otherwise the payload, or timed_out.';
COMMENT ON FUNCTION rq_stats() IS
    'raquel: a row per queue: jobs in each status, how many are ready, the oldest ready job''s wait, the queue''s flow settings, how many jobs are parked for an event, and whether its claims start at claim cursors (in use) or why not. Reads the whole table.';
COMMENT ON FUNCTION rq_help(text) IS
    'raquel: the functions a user calls, one line each (name, arguments, this comment); those whose names hold name_contains when given.';
COMMENT ON FUNCTION rq_warnings() IS
    'raquel: what an operator should fix, with a hint each (roles other than raquel''s owner that may create in its schema); no rows when nothing.';
COMMENT ON FUNCTION rq_history(uuid) IS
    'raquel: every attempt of a job, oldest first: its worker, claim time, end, outcome (failed, rescheduled, rejected, running, success, exhausted, cancelled, expired), error and trace; kept with the job (past_attempts).';

-- new: the comment of every column a user reads (sql/column_comments.sql)
-- jobs
COMMENT ON COLUMN jobs.id IS
    'The job''s id, a time-ordered UUIDv7 (rq_uuid7()) unless the enqueue gives one; every verb names a job by it.';
COMMENT ON COLUMN jobs.queue IS
    'The name of the job''s queue, which rq_claim names; ''default'' when an INSERT gives none.';
COMMENT ON COLUMN jobs.payload IS
    'The job''s data as text, set by rq_enqueue (a jsonb payload is stored as its text); NULL: none.';
COMMENT ON COLUMN jobs.status IS
    'queued, claimed, success, failed (waiting for a retry at scheduled_at), exhausted (no retry left), cancelled, expired or blocked (waiting for the jobs it runs after).';
COMMENT ON COLUMN jobs.max_age IS
    'How long (ms) after scheduled_at the job may wait unclaimed before the expire duty expires it (rq_enqueue''s max_age); NULL: never expires.';
COMMENT ON COLUMN jobs.max_retry_count IS
    'How many retries after the first attempt (rq_enqueue''s max_retry_count); NULL: retry for ever. Attempts handed back (requeues) use up none.';
COMMENT ON COLUMN jobs.min_retry_delay IS
    'The shortest backoff after a failure, in ms (default 1000); rq_reschedule without at or delay waits this long too.';
COMMENT ON COLUMN jobs.max_retry_delay IS
    'The longest backoff after a failure, in ms (default 43200000, 12 hours).';
COMMENT ON COLUMN jobs.backoff_base IS
    'The first backoff after a failure, in ms (default 1000), doubled at each further failure and clamped to the retry delays (rq_backoff).';
COMMENT ON COLUMN jobs.enqueued_at IS
    'When the job was enqueued, ms since the Unix epoch, UTC.';
COMMENT ON COLUMN jobs.scheduled_at IS
    'When the job is due, ms since the Unix epoch, UTC: rq_enqueue''s at plus delay; after a failure, its time plus the backoff; rq_reschedule and rq_retry move it.';
COMMENT ON COLUMN jobs.attempts IS
    'Claims so far (rq_claim, rq_take), each an attempt: the fencing token that rq_complete, rq_fail and the other worker verbs require.';
COMMENT ON COLUMN jobs.error IS
    'The error of the last failed attempt (rq_fail), or why a workflow cancelled the job; kept after a later success. NULL: none.';
COMMENT ON COLUMN jobs.error_trace IS
    'The trace (say a stack trace) given with the last failure to rq_fail; NULL: none.';
COMMENT ON COLUMN jobs.claimed_by IS
    'The name of the worker that last claimed the job (rq_claim''s worker); kept after the job ends, cleared by rq_reject.';
COMMENT ON COLUMN jobs.claimed_at IS
    'When the job was last claimed, ms since the Unix epoch, UTC; kept after the job ends, cleared by rq_reject. NULL: never claimed.';
COMMENT ON COLUMN jobs.finished_at IS
    'When the job reached a final status (success, exhausted, cancelled, expired), ms since the Unix epoch, UTC; NULL while it has not.';
COMMENT ON COLUMN jobs.priority IS
    'rq_enqueue''s priority: higher runs first (default 0).';
COMMENT ON COLUMN jobs.lease_expires_at IS
    'When the current claim''s lease runs out, ms since the Unix epoch, UTC (rq_claim, rq_extend). NULL on a claimed job: claimed by hand, with a lease of a minute from claimed_at.';
COMMENT ON COLUMN jobs.requeues IS
    'Claims handed back (rq_reject, rq_reschedule, a sleep or a wait for an event), which use up no retry: retries used are attempts - requeues.';
COMMENT ON COLUMN jobs.key IS
    'rq_enqueue''s deduplication key: while a job of the same queue and key is unfinished, enqueueing that key again returns that job. NULL: none.';
COMMENT ON COLUMN jobs.group_key IS
    'rq_enqueue''s group_key: the job''s fair group in its queue (a tenant, say); claims take turns from group to group. NULL: no group.';
COMMENT ON COLUMN jobs.turn IS
    'A grouped job''s turn within its queue, set as it is inserted, which claims follow to let groups take turns; NULL without a group_key.';
COMMENT ON COLUMN jobs.blocked_by IS
    'For a blocked job, how many of the jobs it runs after (rq_enqueue''s after) have not ended yet; 0 otherwise. Only raquel''s functions write it.';
COMMENT ON COLUMN jobs.key_period IS
    'With a key: how long (ms) after the job ends its key still returns it (rq_enqueue''s key_period; held in key_holds). NULL: not held.';
COMMENT ON COLUMN jobs.result IS
    'What the job produced, as given to the verb that completed it (rq_complete and its siblings); rq_await returns it. NULL: none given, or not completed.';
COMMENT ON COLUMN jobs.past_attempts IS
    'The attempts before the current one, oldest first (the last 100): {attempt, worker, claimed_at, ended_at, outcome, error, trace}, times in ms; rq_history reads them. NULL: no earlier attempt.';

-- queue_limits
COMMENT ON COLUMN queue_limits.queue IS
    'The queue these settings are for; one row per queue that is paused, limited or grouped.';
COMMENT ON COLUMN queue_limits.paused IS
    'true: no claim takes the queue''s jobs (rq_pause) until rq_resume; enqueues go on.';
COMMENT ON COLUMN queue_limits.max_claimed IS
    'At most this many of the queue''s jobs claimed at once (rq_set_limits); NULL: no limit.';
COMMENT ON COLUMN queue_limits.rate IS
    'At most this many claims per `per`, as a token bucket that starts full (rq_set_limits); NULL: no rate limit.';
COMMENT ON COLUMN queue_limits.per IS
    'The interval of rate (rq_set_limits); NULL without a rate.';
COMMENT ON COLUMN queue_limits.group_max_claimed IS
    'At most this many claimed jobs of one group_key at once (rq_set_limits); NULL: no limit.';
COMMENT ON COLUMN queue_limits.grouped IS
    'true once the queue has had a job with a group_key (set by the first one): its claims take turns among its groups.';
COMMENT ON COLUMN queue_limits.claimed IS
    'State written by rq_claim alone: the jobs claimed under max_claimed, when the count is kept in the row rather than in shared memory.';
COMMENT ON COLUMN queue_limits.tokens IS
    'State written by rq_claim alone: the rate''s tokens left at tokens_at, when the bucket is kept in the row rather than in shared memory.';
COMMENT ON COLUMN queue_limits.tokens_at IS
    'State written by rq_claim alone: when tokens was counted, ms since the Unix epoch, UTC.';

-- queues_without_history
COMMENT ON COLUMN queues_without_history.queue IS
    'A queue whose jobs are deleted as they succeed through raquel''s verbs, instead of kept (rq_set_history(queue, false)).';

-- schedules
COMMENT ON COLUMN schedules.name IS
    'The schedule''s name, given to rq_schedule and the other schedule verbs.';
COMMENT ON COLUMN schedules.cron IS
    'The cron pattern whose slots enqueue a job each (rq_schedule).';
COMMENT ON COLUMN schedules.timezone IS
    'The time zone the cron pattern is read in (default UTC).';
COMMENT ON COLUMN schedules.queue IS
    'The queue the schedule''s jobs are enqueued into.';
COMMENT ON COLUMN schedules.payload IS
    'The payload of each job, as text (a jsonb payload is stored as its text); NULL: none.';
COMMENT ON COLUMN schedules.catch_up IS
    'What becomes of slots missed by over a minute: ''none'' skips them, ''last'' runs one job for them, ''all'' runs each (the latest 1000).';
COMMENT ON COLUMN schedules.enabled IS
    'false: paused (rq_pause_schedule), or disabled when its next slot could not be enqueued or computed; rq_resume_schedule sets it true.';
COMMENT ON COLUMN schedules.max_age IS
    'The max_age of each job, in ms; NULL: its jobs never expire.';
COMMENT ON COLUMN schedules.max_retry_count IS
    'The max_retry_count of each job; NULL: retry for ever.';
COMMENT ON COLUMN schedules.min_retry_delay IS
    'The min_retry_delay of each job, in ms; NULL: the jobs table''s default.';
COMMENT ON COLUMN schedules.max_retry_delay IS
    'The max_retry_delay of each job, in ms; NULL: the jobs table''s default.';
COMMENT ON COLUMN schedules.backoff_base IS
    'The backoff_base of each job, in ms; NULL: the jobs table''s default.';
COMMENT ON COLUMN schedules.priority IS
    'The priority of each job: higher runs first (default 0).';
COMMENT ON COLUMN schedules.next_run_at IS
    'The next slot not yet enqueued, ms since the Unix epoch, UTC; the duty rq_fire_schedules enqueues it when due and moves it on.';
COMMENT ON COLUMN schedules.last_run_at IS
    'The last slot enqueued, ms since the Unix epoch, UTC; NULL: none yet.';
COMMENT ON COLUMN schedules.last_job_id IS
    'The job enqueued for the last slot (jobs.id); NULL: none yet.';
COMMENT ON COLUMN schedules.last_error IS
    'Why the last due slot could not be enqueued (it was skipped, and the schedule goes on at its next slot); NULL once a slot is enqueued.';

-- job_dependencies
COMMENT ON COLUMN job_dependencies.parent_id IS
    'The job waited for (jobs.id); the row is deleted when it ends.';
COMMENT ON COLUMN job_dependencies.child_id IS
    'The job still waiting for parent_id (jobs.id), enqueued with it in rq_enqueue''s after.';

-- job_parents
COMMENT ON COLUMN job_parents.child_id IS
    'The job (jobs.id) enqueued to run after parent_id; its rows are deleted with it.';
COMMENT ON COLUMN job_parents.parent_id IS
    'A job named in the child''s rq_enqueue after, kept after it ends so that rq_parents can read its status and result.';

-- job_steps
COMMENT ON COLUMN job_steps.job_id IS
    'The job (jobs.id) that recorded the step; its steps are deleted with it.';
COMMENT ON COLUMN job_steps.name IS
    'The step''s name, unique within its job (rq_step, rq_sleep, rq_wait_event); a sleep or wait whose name is called again in one attempt is name#2, name#3 ….';
COMMENT ON COLUMN job_steps.result IS
    'The step''s result as given to rq_step, or what a sleep or a wait for an event recorded (its instant, the event''s payload); NULL: none given.';
COMMENT ON COLUMN job_steps.attempt IS
    'The attempt (the claim''s fencing token, jobs.attempts) that recorded the step.';
COMMENT ON COLUMN job_steps.recorded_at IS
    'When the step was recorded, ms since the Unix epoch, UTC.';

-- job_waits
COMMENT ON COLUMN job_waits.job_id IS
    'The job parked for an event (jobs.id), one wait a job; the row goes when the event is emitted or the wait ends.';
COMMENT ON COLUMN job_waits.queue IS
    'The parked job''s queue, for rq_stats.';
COMMENT ON COLUMN job_waits.name IS
    'The name of the step the wait is (rq_wait_event''s name), under which the event''s payload is recorded.';
COMMENT ON COLUMN job_waits.event IS
    'The name of the event waited for (rq_wait_event''s event).';
COMMENT ON COLUMN job_waits.since IS
    'When the wait began, ms since the Unix epoch, UTC: an emit kept until then or later reaches it.';
COMMENT ON COLUMN job_waits.until IS
    'When the wait times out, ms since the Unix epoch, UTC (rq_wait_event''s timeout); NULL: never.';

-- emitted_events
COMMENT ON COLUMN emitted_events.id IS
    'The emit''s number, rising in the order of the emits.';
COMMENT ON COLUMN emitted_events.name IS
    'The event''s name (rq_emit''s event).';
COMMENT ON COLUMN emitted_events.payload IS
    'rq_emit''s payload, recorded as the step of every job that waited for the event; NULL: none.';
COMMENT ON COLUMN emitted_events.emitted_at IS
    'When the event was emitted, ms since the Unix epoch, UTC.';
COMMENT ON COLUMN emitted_events.kept_until IS
    'Until when a job that starts waiting still gets the event, ms since the Unix epoch, UTC (emitted_at plus rq_emit''s keep, or raquel.event_retention for one that waits for its reader); deleted an hour later.';

-- event_emitters
COMMENT ON COLUMN event_emitters.role IS
    'The role (pg_roles.oid) that may emit events whose name begins with prefix (rq_grant_emitter).';
COMMENT ON COLUMN event_emitters.prefix IS
    'A prefix of the event names the role may emit; a role may emit an event that begins with any of its prefixes.';

-- metrics
COMMENT ON COLUMN metrics.queue IS
    'The queue the minute''s figures are for.';
COMMENT ON COLUMN metrics.minute IS
    'The minute''s start, ms since the Unix epoch, UTC.';
COMMENT ON COLUMN metrics.enqueued IS
    'Jobs enqueued in the minute, by any path (a plain INSERT too).';
COMMENT ON COLUMN metrics.claimed IS
    'Jobs claimed in the minute.';
COMMENT ON COLUMN metrics.succeeded IS
    'Attempts that succeeded in the minute.';
COMMENT ON COLUMN metrics.failed IS
    'Attempts that failed in the minute, the rescued ones included.';
COMMENT ON COLUMN metrics.rescued IS
    'Attempts the rescue duty failed in the minute because their lease ran out.';
COMMENT ON COLUMN metrics.expired IS
    'Jobs the expire duty expired in the minute.';
COMMENT ON COLUMN metrics.wait_histogram IS
    'Times from due (scheduled_at) to claim, as counts in 161 buckets, four per doubling of ms; rq_metrics gives its percentiles.';
COMMENT ON COLUMN metrics.run_histogram IS
    'Times from claim to the attempt''s end, as counts in 161 buckets, four per doubling of ms; rq_metrics gives its percentiles.';
COMMENT ON COLUMN metrics.backlog IS
    'Ready jobs (due, not claimed) when the minute was recorded; NULL: not recorded for this queue (kept for active queues and the 100 longest backlogs).';

-- key_holds
COMMENT ON COLUMN key_holds.queue IS
    'The queue of the job that held the key.';
COMMENT ON COLUMN key_holds.key IS
    'The key held after its job ended: enqueueing it again in the queue returns that job until `until`.';
COMMENT ON COLUMN key_holds.job_id IS
    'The ended job (jobs.id) that an enqueue of the key returns.';
COMMENT ON COLUMN key_holds.until IS
    'When the hold ends, ms since the Unix epoch, UTC: the job''s end plus its key_period; the prune duty then deletes the row.';

-- rq_jobs
COMMENT ON COLUMN rq_jobs.id IS
    'The job''s id, a time-ordered UUIDv7 (jobs.id).';
COMMENT ON COLUMN rq_jobs.queue IS
    'The name of the job''s queue.';
COMMENT ON COLUMN rq_jobs.status IS
    'queued, claimed, success, failed (waiting for a retry), exhausted (no retry left), cancelled, expired or blocked (waiting for the jobs it runs after).';
COMMENT ON COLUMN rq_jobs.priority IS
    'Higher runs first (default 0).';
COMMENT ON COLUMN rq_jobs.attempts IS
    'Claims so far, each an attempt: the fencing token the worker verbs require.';
COMMENT ON COLUMN rq_jobs.requeues IS
    'Claims handed back (rq_reject, rq_reschedule, a sleep or a wait), which use up no retry: retries used are attempts - requeues.';
COMMENT ON COLUMN rq_jobs.max_retry_count IS
    'How many retries after the first attempt; NULL: retry for ever.';
COMMENT ON COLUMN rq_jobs.payload IS
    'The job''s data as text; NULL: none.';
COMMENT ON COLUMN rq_jobs.error IS
    'The error of the last failed attempt (rq_fail), or why a workflow cancelled the job; NULL: none.';
COMMENT ON COLUMN rq_jobs.claimed_by IS
    'The name of the worker that last claimed the job (rq_claim''s worker).';
COMMENT ON COLUMN rq_jobs.enqueued_at IS
    'When the job was enqueued (timestamptz).';
COMMENT ON COLUMN rq_jobs.scheduled_at IS
    'When the job is due (timestamptz): at enqueue, at plus delay; after a failure, its time plus the backoff.';
COMMENT ON COLUMN rq_jobs.claimed_at IS
    'When the job was last claimed (timestamptz); NULL: never claimed, or handed back by rq_reject.';
COMMENT ON COLUMN rq_jobs.lease_expires_at IS
    'When the current claim''s lease runs out (timestamptz); NULL when not claimed, or claimed by hand (a lease of a minute from claimed_at).';
COMMENT ON COLUMN rq_jobs.finished_at IS
    'When the job reached a final status (timestamptz); NULL while it has not.';
COMMENT ON COLUMN rq_jobs.max_age IS
    'How long (interval) after scheduled_at the job may wait unclaimed before it expires; NULL: never expires.';
COMMENT ON COLUMN rq_jobs.min_retry_delay IS
    'The shortest backoff after a failure (interval).';
COMMENT ON COLUMN rq_jobs.max_retry_delay IS
    'The longest backoff after a failure (interval).';
COMMENT ON COLUMN rq_jobs.backoff_base IS
    'The first backoff after a failure (interval), doubled at each further failure.';
COMMENT ON COLUMN rq_jobs.error_trace IS
    'The trace given with the last failure to rq_fail; NULL: none.';
COMMENT ON COLUMN rq_jobs.result IS
    'What the job produced, as given to the verb that completed it; NULL: none given, or not completed.';

-- rq_schedules
COMMENT ON COLUMN rq_schedules.name IS
    'The schedule''s name.';
COMMENT ON COLUMN rq_schedules.cron IS
    'The cron pattern whose slots enqueue a job each.';
COMMENT ON COLUMN rq_schedules.timezone IS
    'The time zone the cron pattern is read in.';
COMMENT ON COLUMN rq_schedules.queue IS
    'The queue the schedule''s jobs are enqueued into.';
COMMENT ON COLUMN rq_schedules.enabled IS
    'false: paused (rq_pause_schedule) or disabled after an error; rq_resume_schedule sets it true.';
COMMENT ON COLUMN rq_schedules.catch_up IS
    'What becomes of slots missed by over a minute: ''none'' skips them, ''last'' runs one job for them, ''all'' runs each (the latest 1000).';
COMMENT ON COLUMN rq_schedules.next_run IS
    'The next slot not yet enqueued (timestamptz).';
COMMENT ON COLUMN rq_schedules.last_run IS
    'The last slot enqueued (timestamptz); NULL: none yet.';
COMMENT ON COLUMN rq_schedules.last_job_id IS
    'The job enqueued for the last slot; NULL: none yet.';
COMMENT ON COLUMN rq_schedules.last_error IS
    'Why the last due slot could not be enqueued (it was skipped); NULL once a slot is enqueued.';

-- Said at the update too (sql/warnings.sql).
DO $$
DECLARE
    w record;
BEGIN
    FOR w IN SELECT * FROM raquel_internal.rq_warnings() LOOP
        RAISE WARNING 'raquel: %', w.warning USING HINT = w.hint;
    END LOOP;
END
$$;
