-- raquel 0.4.0 → 0.5.0, run by ALTER EXTENSION raquel UPDATE.
--
-- What changes, and why (issue 22: the surfaces added since 0.3.0 against
-- hostile roles):
-- * Recurring jobs (sql/schedules.sql): a schedule's jobs carry no key, so
--   no role can hold the next slots' keys to stall the duty or stand in for
--   the schedule's jobs; a slot a round reaches within a minute is on time
--   and runs whatever catch_up says (rq_schedule_slots replaces
--   rq_cron_slots); each schedule fires in a subtransaction of its own, and
--   one that cannot enqueue skips its slot with the reason in the new
--   column schedules.last_error (and rq_schedules.last_error) and a WARNING;
--   rq_schedule refuses a payload over raquel.max_payload_size (54000,
--   rq_check_schedule_options replaces rq_check_schedule); rq_schedule_due
--   is for roles that may update schedules.
-- * Workflows (sql/workflows.sql): rq_hold_for_parents neither locks nor
--   writes the parents (has_children goes from the jobs table: whether a
--   job has children is in job_dependencies, rq_has_children); what `after`
--   may name is checked by rq_check_parents: at most 1000 jobs and 100 000
--   edges, and for a caller who may not read jobs only jobs its own session
--   enqueued. The verbs that end a job ask rq_has_children.
-- * Flow control (sql/flow.sql): the plain claim (rq_claim_ready),
--   rq_claim_flow, rq_claim_fair and the new rq_flow_lock and rq_flow_took
--   run only inside rq_claim (rq_require_flow_claim, 42501 otherwise);
--   the state the limits keep is written as the owner, and workers lose
--   UPDATE on it (rq_grant_worker grants SELECT on queue_limits).
-- * Metrics (sql/metrics.sql): rq_prometheus(max_queues) shows that many
--   queues and totals for all, in one pass (rq_prometheus() goes);
--   rq_record_metrics keeps backlog rows for the queues counted that minute
--   and the 100 longest backlogs; rq_metrics_lost() counts the events the
--   metrics could not count.
-- And the hot path (issue 23: less work per job):
-- * A job's single values are checked by domains, its checks across
--   columns by a C trigger (rq_job_values), instead of seven CHECK
--   constraints that PostgreSQL read and planned for every statement.
-- * rq_take: a claim that only locks, for work inside the claim's
--   transaction (the row lock is the lease; the job is written once).
-- * rq_complete_batch_and_claim: a worker's loop in batches.
-- * Queues without history (sql/history.sql, rq_set_history): a job that
--   succeeds is deleted in the same write.
-- * rq_fail, rq_fail_and_claim and rq_complete_batch are written in C.
-- The jobs table loses the column has_children; no job is rewritten.
-- And (issue 25) the internal helpers move to the schema raquel_internal,
-- and every public function, view and table gets a COMMENT.
-- And (issue 26, durable execution) results and steps: the jobs table gets
-- the column result (jsonb), which the verbs that complete take
-- (rq_complete, rq_complete_batch and the one-call loops get a last
-- parameter, so they are made again with their grants), rq_await waits
-- for a job's end, and the table job_steps with rq_step records a job's
-- steps across its attempts.

-- raquel_internal (src/lib.rs): the schema of the internal helpers, which
-- leave the extension's schema, so that it lists what users call. Each
-- keeps its EXECUTE grants; the verbs name them as their caller, hence
-- USAGE for PUBLIC (sql/privileges.sql). Triggers, column defaults, the
-- lease index and the views follow a moved function by its OID; function
-- bodies name it in text and are made again below (the statements that
-- create or replace a function in this script name raquel_internal).
-- rq_job_ready_again(text, bigint, bigint) stays to be dropped below.
CREATE SCHEMA raquel_internal;
GRANT USAGE ON SCHEMA raquel_internal TO PUBLIC;
ALTER FUNCTION rq_caller_may_read(oid) SET SCHEMA raquel_internal;
ALTER FUNCTION rq_check_arrays(text[], integer[], text[]) SET SCHEMA raquel_internal;
ALTER FUNCTION rq_check_batch(integer) SET SCHEMA raquel_internal;
ALTER FUNCTION rq_check_limits(text, integer, integer, interval, integer) SET SCHEMA raquel_internal;
ALTER FUNCTION rq_claim_ended(text) SET SCHEMA raquel_internal;
ALTER FUNCTION rq_cron_next(text, text, bigint) SET SCHEMA raquel_internal;
ALTER FUNCTION rq_default_backoff_base() SET SCHEMA raquel_internal;
ALTER FUNCTION rq_default_lease() SET SCHEMA raquel_internal;
ALTER FUNCTION rq_default_lease_ms() SET SCHEMA raquel_internal;
ALTER FUNCTION rq_default_max_retry_delay() SET SCHEMA raquel_internal;
ALTER FUNCTION rq_default_min_retry_delay() SET SCHEMA raquel_internal;
ALTER FUNCTION rq_delay_ms(interval, text) SET SCHEMA raquel_internal;
ALTER FUNCTION rq_due_ms(timestamptz, interval) SET SCHEMA raquel_internal;
ALTER FUNCTION rq_histogram_add(integer[], integer[]) SET SCHEMA raquel_internal;
ALTER FUNCTION rq_histogram_percentile(integer[], double precision) SET SCHEMA raquel_internal;
ALTER FUNCTION rq_interval_ms(interval, text, bigint, bigint) SET SCHEMA raquel_internal;
ALTER FUNCTION rq_job_options(text, timestamptz, interval, interval, integer, interval, interval, interval) SET SCHEMA raquel_internal;
ALTER FUNCTION rq_lease_ms(interval) SET SCHEMA raquel_internal;
ALTER FUNCTION rq_note_metric(text, text, bigint) SET SCHEMA raquel_internal;
ALTER FUNCTION rq_raise_cannot(uuid, integer, text, text[]) SET SCHEMA raquel_internal;
ALTER FUNCTION rq_refuse(text, text[]) SET SCHEMA raquel_internal;
ALTER FUNCTION rq_retention_ms(interval) SET SCHEMA raquel_internal;
ALTER FUNCTION rq_schedule_due(bigint) SET SCHEMA raquel_internal;
ALTER FUNCTION rq_shard_queue(uuid) SET SCHEMA raquel_internal;
ALTER FUNCTION rq_shard_queues(uuid[]) SET SCHEMA raquel_internal;
ALTER FUNCTION rq_take_metrics() SET SCHEMA raquel_internal;
ALTER FUNCTION rq_timestamp_ms(timestamptz, text) SET SCHEMA raquel_internal;
ALTER FUNCTION rq_job_events() SET SCHEMA raquel_internal;
ALTER FUNCTION rq_drop_started() SET SCHEMA raquel_internal;
ALTER FUNCTION rq_hold_for_parents(uuid[], uuid[]) SET SCHEMA raquel_internal;
ALTER FUNCTION rq_parent_ended(uuid) SET SCHEMA raquel_internal;
ALTER FUNCTION rq_job_ended(uuid) SET SCHEMA raquel_internal;
ALTER FUNCTION rq_record_metrics() SET SCHEMA raquel_internal;
ALTER FUNCTION rq_prometheus_label(text) SET SCHEMA raquel_internal;
ALTER FUNCTION rq_refuse_distributed(text) SET SCHEMA raquel_internal;
-- its HINT names the docs book, not the README (0.5.0)
CREATE OR REPLACE FUNCTION raquel_internal.rq_refuse_distributed(what text) RETURNS void
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF @extschema@.rq_distributed() THEN
        RAISE EXCEPTION '% is not available on a distributed jobs table', what
            USING ERRCODE = 'feature_not_supported',
                  HINT = 'The Citus guide (docs/src/guides/citus.md) lists what the distributed mode offers.';
    END IF;
END
$$;
ALTER FUNCTION rq_expire_distributed(integer, bigint) SET SCHEMA raquel_internal;
ALTER FUNCTION rq_lapsed_distributed(integer, bigint) SET SCHEMA raquel_internal;
ALTER FUNCTION rq_prune_distributed(integer, bigint) SET SCHEMA raquel_internal;
ALTER FUNCTION rq_wake_claims(text) SET SCHEMA raquel_internal;
ALTER FUNCTION rq_queue_limits_changed() SET SCHEMA raquel_internal;
ALTER FUNCTION rq_job_turn() SET SCHEMA raquel_internal;
ALTER FUNCTION rq_tidy_queue_limits(text, queue_limits) SET SCHEMA raquel_internal;
ALTER FUNCTION rq_claim_ready(text[], text, integer, bigint) SET SCHEMA raquel_internal;
ALTER FUNCTION rq_claim_flow(text[], text, integer, bigint) SET SCHEMA raquel_internal;
ALTER FUNCTION rq_claim_fair(text, text, integer, bigint, integer) SET SCHEMA raquel_internal;
ALTER FUNCTION rq_lapsed(integer, bigint) SET SCHEMA raquel_internal;
ALTER FUNCTION rq_next_duty_ms(interval) SET SCHEMA raquel_internal;

-- The jobs table: whether a job has children is in job_dependencies.
ALTER TABLE jobs DROP COLUMN has_children;

-- A job's single values are checked by domains instead of the table's
-- CHECK constraints (sql/schema.sql says why), and the checks across
-- columns by the trigger rq_job_values. The domains are made without their
-- constraints, so that a column changes to one without a rewrite of the
-- table, and get them after (a read of the table, which the constraints
-- they replace already held to them). The view rq_jobs reads the columns:
-- it is made again, with its grants.
CREATE DOMAIN rq_status AS text;
CREATE DOMAIN rq_nonnegative AS integer;
CREATE DOMAIN rq_delay_ms AS integer;
CREATE DOMAIN rq_max_age_ms AS bigint;

DO $$
DECLARE
    grants aclitem[];
    g      record;
BEGIN
    SELECT c.relacl INTO grants FROM pg_catalog.pg_class c WHERE c.oid = '@extschema@.rq_jobs'::pg_catalog.regclass;
    DROP VIEW @extschema@.rq_jobs;
    -- a completed job's result (sql/results.sql); no row is rewritten
    ALTER TABLE @extschema@.jobs ADD COLUMN result jsonb;
    -- the triggers whose WHEN reads status, made again below as they were
    DROP TRIGGER jobs_enqueued ON @extschema@.jobs;
    DROP TRIGGER jobs_grouped ON @extschema@.jobs;
    ALTER TABLE @extschema@.jobs
        DROP CONSTRAINT jobs_status_check, DROP CONSTRAINT jobs_max_age_check,
        DROP CONSTRAINT jobs_max_retry_count_check, DROP CONSTRAINT jobs_retry_delays_check,
        DROP CONSTRAINT jobs_backoff_base_check, DROP CONSTRAINT jobs_attempts_check,
        DROP CONSTRAINT jobs_requeues_check,
        ALTER COLUMN status TYPE @extschema@.rq_status,
        ALTER COLUMN max_age TYPE @extschema@.rq_max_age_ms,
        ALTER COLUMN max_retry_count TYPE @extschema@.rq_nonnegative,
        ALTER COLUMN min_retry_delay TYPE @extschema@.rq_delay_ms,
        ALTER COLUMN max_retry_delay TYPE @extschema@.rq_delay_ms,
        ALTER COLUMN backoff_base TYPE @extschema@.rq_delay_ms,
        ALTER COLUMN attempts TYPE @extschema@.rq_nonnegative,
        ALTER COLUMN requeues TYPE @extschema@.rq_nonnegative;
    -- the functions test the status themselves (sql/events.sql, sql/flow.sql)
    CREATE TRIGGER jobs_enqueued
        AFTER INSERT ON @extschema@.jobs
        FOR EACH ROW
        EXECUTE FUNCTION raquel_internal.rq_job_events();
    CREATE TRIGGER jobs_grouped
        BEFORE INSERT ON @extschema@.jobs
        FOR EACH ROW WHEN (NEW.group_key IS NOT NULL)
        EXECUTE FUNCTION raquel_internal.rq_job_turn();
    -- jobs for people (sql/observe.sql), over the columns' domains
    CREATE VIEW @extschema@.rq_jobs AS
    SELECT j.id, j.queue, j.status, j.priority, j.attempts, j.requeues, j.max_retry_count,
           j.payload, j.error, j.claimed_by,
           @extschema@.rq_ms_to_timestamptz(j.enqueued_at)      AS enqueued_at,
           @extschema@.rq_ms_to_timestamptz(j.scheduled_at)     AS scheduled_at,
           @extschema@.rq_ms_to_timestamptz(j.claimed_at)       AS claimed_at,
           @extschema@.rq_ms_to_timestamptz(j.lease_expires_at) AS lease_expires_at,
           @extschema@.rq_ms_to_timestamptz(j.finished_at)      AS finished_at,
           @extschema@.rq_ms_to_interval(j.max_age)                  AS max_age,
           @extschema@.rq_ms_to_interval(j.min_retry_delay::bigint)  AS min_retry_delay,
           @extschema@.rq_ms_to_interval(j.max_retry_delay::bigint)  AS max_retry_delay,
           @extschema@.rq_ms_to_interval(j.backoff_base::bigint)     AS backoff_base,
           j.error_trace, j.result
    FROM @extschema@.jobs j;
    FOR g IN
        SELECT a.grantee, a.privilege_type, a.is_grantable FROM pg_catalog.aclexplode(grants) a
        WHERE a.grantee <> (SELECT c.relowner FROM pg_catalog.pg_class c
                            WHERE c.oid = '@extschema@.rq_jobs'::pg_catalog.regclass)
    LOOP
        EXECUTE pg_catalog.format('GRANT %s ON @extschema@.rq_jobs TO %s%s', g.privilege_type,
            CASE WHEN g.grantee = 0 THEN 'PUBLIC' ELSE g.grantee::pg_catalog.regrole::pg_catalog.text END,
            CASE WHEN g.is_grantable THEN ' WITH GRANT OPTION' ELSE '' END);
    END LOOP;
END
$$;

-- A grouped job's turn: the trigger's WHEN no longer tests the status (above)
CREATE OR REPLACE FUNCTION raquel_internal.rq_job_turn() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    now_ms bigint := @extschema@.rq_now_ms();
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

ALTER DOMAIN rq_status ADD CONSTRAINT rq_status_check CHECK (VALUE IN
    ('queued', 'claimed', 'success', 'failed', 'cancelled', 'expired', 'exhausted', 'blocked'));
ALTER DOMAIN rq_nonnegative ADD CONSTRAINT rq_nonnegative_check CHECK (VALUE >= 0);
ALTER DOMAIN rq_delay_ms ADD CONSTRAINT rq_delay_ms_check CHECK (VALUE >= 0);
ALTER DOMAIN rq_max_age_ms ADD CONSTRAINT rq_max_age_ms_check CHECK (VALUE > 0);


-- Schedules: why the last slot could not be enqueued.
ALTER TABLE schedules ADD COLUMN last_error text;

DROP FUNCTION rq_check_schedule(text, text);
DROP FUNCTION rq_cron_slots(text, text, bigint, bigint, integer);
DROP FUNCTION rq_prometheus();
-- rq_job_ready_again takes the job's priority and id (claim cursors,
-- src/cursors.rs); the verbs that call it are made again below.
DROP FUNCTION rq_job_ready_again(text, bigint, bigint);

-- Queues without history (sql/history.sql).
CREATE TABLE queues_without_history (
    queue text NOT NULL,
    CONSTRAINT queues_without_history_pkey PRIMARY KEY (queue)
);
COMMENT ON TABLE queues_without_history IS
    'raquel: the queues whose jobs are deleted when they succeed (rq_set_history).';
SELECT pg_catalog.pg_extension_config_dump('queues_without_history', '');
CREATE TRIGGER queues_without_history_changed
    AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE
    ON queues_without_history
    FOR EACH STATEMENT EXECUTE FUNCTION raquel_internal.rq_queue_limits_changed();
GRANT SELECT ON queues_without_history TO PUBLIC;

-- BEGIN functions (drafted by bin/update-script-draft)
CREATE OR REPLACE FUNCTION rq_cancel(id uuid) RETURNS jobs
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    -- a value, not a call in the UPDATE: Citus refuses volatile calls there
    now_ms bigint := @extschema@.rq_now_ms();
    -- on Citus, the job's queue: the UPDATE runs in its shard alone (src/distributed.rs)
    shard_queue text := raquel_internal.rq_shard_queue(rq_cancel.id);
    job @extschema@.jobs;
BEGIN
    UPDATE @extschema@.jobs j
    SET status = 'cancelled', finished_at = now_ms, lease_expires_at = NULL
    WHERE j.id = rq_cancel.id AND j.queue = coalesce(shard_queue, j.queue)
      AND j.status IN ('queued', 'claimed', 'failed', 'blocked')
    RETURNING j.* INTO job;
    IF NOT FOUND THEN
        PERFORM raquel_internal.rq_raise_cannot(rq_cancel.id, NULL, 'cancel', '{queued,claimed,failed,blocked}');
    END IF;
    -- when it was claimed, a slot freed under a concurrency limit (src/flow.rs)
    PERFORM raquel_internal.rq_claim_ended(job.queue);
    -- its awaiters (rq_await) are woken at commit (src/results.rs)
    PERFORM raquel_internal.rq_jobs_ended(ARRAY[job.id]);
    IF job.key_period IS NOT NULL OR raquel_internal.rq_has_children(job.id) THEN
        -- what its end sets off (sql/finish.sql)
        PERFORM raquel_internal.rq_job_ended(job.id);
    END IF;
    RETURN job;
END
$$;

CREATE  FUNCTION raquel_internal."rq_check_parents"(
	"jobs" INT, /* i32 */
	"after" uuid[] /* :: std :: option :: Option < Vec < Option < pgrx :: Uuid > > > */
) RETURNS void
VOLATILE PARALLEL UNSAFE
SET search_path TO pg_catalog, pg_temp
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'rq_check_parents_wrapper';

CREATE  FUNCTION raquel_internal."rq_check_schedule_options"(
	"name" TEXT, /* Option < & str > */
	"catch_up" TEXT, /* Option < & str > */
	"queue" TEXT, /* Option < & str > */
	"payload" TEXT /* Option < & str > */
) RETURNS void
STABLE PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'rq_check_schedule_options_wrapper';

CREATE OR REPLACE FUNCTION raquel_internal.rq_claim_fair(queue text, worker text, batch integer, lease_ms bigint, group_max_claimed integer)
RETURNS SETOF jobs
LANGUAGE plpgsql VOLATILE ROWS 1
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    now_ms    bigint := @extschema@.rq_now_ms();
    wanted    integer := batch;
    tried     text[];
    found_one boolean;
    candidate record;
    job       @extschema@.jobs;
BEGIN
    PERFORM raquel_internal.rq_require_flow_claim('rq_claim_fair');
    IF group_max_claimed IS NULL THEN
        RETURN QUERY
        WITH ready AS (
            SELECT j.id FROM @extschema@.jobs j
            WHERE j.queue = rq_claim_fair.queue AND j.group_key IS NOT NULL AND j.status IN ('queued', 'failed')
              AND j.scheduled_at <= now_ms AND (j.max_age IS NULL OR j.scheduled_at + j.max_age > now_ms)
            ORDER BY j.priority DESC, j.turn, j.scheduled_at, j.id
            LIMIT wanted
            FOR UPDATE SKIP LOCKED
        ), claimed AS (
            UPDATE @extschema@.jobs j
            SET status = 'claimed', attempts = j.attempts + 1, claimed_by = worker,
                claimed_at = now_ms, lease_expires_at = now_ms + lease_ms, finished_at = NULL
            FROM ready WHERE j.id = ready.id
            RETURNING j.*
        )
        SELECT * FROM claimed c ORDER BY c.priority DESC, c.turn, c.scheduled_at, c.id;
        RETURN;
    END IF;
    <<walks>>
    LOOP
        tried := '{}';
        found_one := false;
        FOR candidate IN
            SELECT j.id, j.group_key FROM @extschema@.jobs j
            WHERE j.queue = rq_claim_fair.queue AND j.group_key IS NOT NULL AND j.status IN ('queued', 'failed')
              AND j.scheduled_at <= now_ms AND (j.max_age IS NULL OR j.scheduled_at + j.max_age > now_ms)
            ORDER BY j.priority DESC, j.turn, j.scheduled_at, j.id
            LIMIT 1000
        LOOP
            CONTINUE WHEN candidate.group_key = ANY (tried);
            tried := tried || candidate.group_key;
            CONTINUE WHEN NOT pg_try_advisory_xact_lock(hashtext(queue), hashtext(candidate.group_key));
            CONTINUE WHEN (SELECT count(*) FROM @extschema@.jobs c
                           WHERE c.queue = rq_claim_fair.queue AND c.group_key IS NOT NULL
                             AND c.group_key = candidate.group_key AND c.status = 'claimed') >= group_max_claimed;
            UPDATE @extschema@.jobs j
            SET status = 'claimed', attempts = j.attempts + 1, claimed_by = worker,
                claimed_at = now_ms, lease_expires_at = now_ms + lease_ms, finished_at = NULL
            WHERE j.id = candidate.id AND j.status IN ('queued', 'failed')
            RETURNING j.* INTO job;
            CONTINUE WHEN NOT FOUND;
            RETURN NEXT job;
            found_one := true;
            wanted := wanted - 1;
            EXIT walks WHEN wanted = 0;
        END LOOP;
        EXIT WHEN NOT found_one;
    END LOOP;
END
$$;

CREATE OR REPLACE FUNCTION raquel_internal.rq_claim_flow(queues text[], worker text, batch integer, lease_ms bigint)
RETURNS SETOF jobs
LANGUAGE plpgsql VOLATILE ROWS 1
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    wanted   integer := batch;
    limited  text[];
    others   text[];
    first    integer;
    member   integer;
    settings @extschema@.queue_limits;
    now_ms   bigint;
    allow    integer;
    live     uuid[];
    bucket   double precision;
    got      uuid[];
    job      @extschema@.jobs;
BEGIN
    PERFORM raquel_internal.rq_require_flow_claim('rq_claim_flow');
    IF queues IS NULL THEN
        limited := ARRAY(SELECT l.queue FROM @extschema@.queue_limits l ORDER BY l.queue);
        others := ARRAY(
            WITH RECURSIVE ready_queues AS (
                (SELECT j.queue FROM @extschema@.jobs j
                 WHERE j.status IN ('queued', 'failed') AND j.group_key IS NULL
                 ORDER BY j.queue LIMIT 1)
                UNION ALL
                SELECT (SELECT j.queue FROM @extschema@.jobs j
                        WHERE j.status IN ('queued', 'failed') AND j.group_key IS NULL AND j.queue > r.queue
                        ORDER BY j.queue LIMIT 1)
                FROM ready_queues r WHERE r.queue IS NOT NULL
            )
            SELECT r.queue FROM ready_queues r WHERE r.queue IS NOT NULL AND r.queue <> ALL (limited));
    ELSE
        limited := ARRAY(SELECT l.queue FROM @extschema@.queue_limits l WHERE l.queue = ANY (queues) ORDER BY l.queue);
        others := ARRAY(SELECT DISTINCT q.name FROM unnest(queues) q (name)
                        WHERE q.name IS NOT NULL AND q.name <> ALL (limited));
    END IF;
    -- A claim on several limited queues locks their rows up front, in name
    -- order: two such claims never wait for each other in a circle, however
    -- their turns below are ordered.
    IF cardinality(limited) > 1 THEN
        PERFORM FROM raquel_internal.rq_flow_lock(limited);
    END IF;
    first := floor(random() * (cardinality(limited) + 1))::integer;
    FOR turn IN 0 .. cardinality(limited) LOOP
        EXIT WHEN wanted <= 0;
        member := (first + turn) % (cardinality(limited) + 1) + 1;
        IF member > cardinality(limited) THEN
            CONTINUE WHEN cardinality(others) = 0;
            FOR job IN SELECT * FROM raquel_internal.rq_claim_ready(others, worker, wanted, lease_ms) LOOP
                wanted := wanted - 1;
                RETURN NEXT job;
            END LOOP;
            CONTINUE;
        END IF;
        SELECT l.* INTO settings FROM @extschema@.queue_limits l WHERE l.queue = limited[member];
        CONTINUE WHEN NOT FOUND OR settings.paused;
        allow := wanted;
        IF settings.max_claimed IS NOT NULL OR settings.rate IS NOT NULL THEN
            PERFORM FROM raquel_internal.rq_flow_lock(ARRAY[limited[member]]);
            -- read again by a new statement, which sees what the claims
            -- that held the lock before committed
            SELECT l.* INTO settings FROM @extschema@.queue_limits l WHERE l.queue = limited[member];
            CONTINUE WHEN NOT FOUND OR settings.paused;
            now_ms := @extschema@.rq_now_ms();
            live := ARRAY(SELECT j.id FROM @extschema@.jobs j
                          WHERE j.id = ANY (settings.claimed) AND j.status = 'claimed');
            IF settings.max_claimed IS NOT NULL THEN
                allow := least(allow, settings.max_claimed - cardinality(live));
            END IF;
            IF settings.rate IS NOT NULL THEN
                bucket := least(settings.rate::double precision,
                    coalesce(settings.tokens, settings.rate)
                    + greatest(now_ms - coalesce(settings.tokens_at, now_ms), 0)
                      * settings.rate / (extract(epoch FROM settings.per) * 1000));
                allow := least(allow, floor(bucket)::integer);
            END IF;
            CONTINUE WHEN allow <= 0;
        END IF;
        got := '{}';
        FOR job IN
            SELECT * FROM raquel_internal.rq_claim_ready(ARRAY[limited[member]], worker, allow, lease_ms)
        LOOP
            got := got || job.id;
            RETURN NEXT job;
        END LOOP;
        IF settings.grouped AND cardinality(got) < allow THEN
            FOR job IN
                SELECT * FROM raquel_internal.rq_claim_fair(limited[member], worker, allow - cardinality(got),
                                                        lease_ms, settings.group_max_claimed)
            LOOP
                got := got || job.id;
                RETURN NEXT job;
            END LOOP;
        END IF;
        wanted := wanted - cardinality(got);
        IF cardinality(got) > 0 AND (settings.max_claimed IS NOT NULL OR settings.rate IS NOT NULL) THEN
            PERFORM raquel_internal.rq_flow_took(limited[member], live || got, bucket - cardinality(got), now_ms);
        END IF;
    END LOOP;
END
$$;

CREATE OR REPLACE FUNCTION rq_complete_batch(ids uuid[], attempts integer[] DEFAULT NULL) RETURNS SETOF jobs
LANGUAGE c VOLATILE
SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'rq_complete_batch_c';

CREATE FUNCTION rq_complete_batch_and_claim(
    ids      uuid[]    DEFAULT NULL,
    attempts integer[] DEFAULT NULL,
    queues   text[]    DEFAULT NULL,
    worker   text      DEFAULT NULL,
    batch    integer   DEFAULT 1,
    lease    interval  DEFAULT raquel_internal.rq_default_lease(),
    wait     interval  DEFAULT '0'
) RETURNS SETOF jobs
LANGUAGE c VOLATILE ROWS 1
SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'rq_complete_batch_and_claim_c';

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
    IF @extschema@.rq_distributed() THEN
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
    SELECT * INTO o FROM raquel_internal.rq_job_options(rq_enqueue_batch.queue, rq_enqueue_batch.at,
        rq_enqueue_batch.delay, rq_enqueue_batch.max_age, rq_enqueue_batch.max_retry_count,
        rq_enqueue_batch.min_retry_delay, rq_enqueue_batch.max_retry_delay, rq_enqueue_batch.backoff_base);
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
        SELECT rq_enqueue_batch.queue, p.payload, o.max_age_ms, rq_enqueue_batch.max_retry_count,
               o.min_retry_delay_ms, o.max_retry_delay_ms, o.backoff_base_ms, o.now_ms, o.due_ms,
               coalesce(rq_enqueue_batch.priority, 0), p.group_key
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
            SELECT rq_enqueue_batch.queue, p.payload, o.max_age_ms, rq_enqueue_batch.max_retry_count,
                   o.min_retry_delay_ms, o.max_retry_delay_ms, o.backoff_base_ms, o.now_ms, o.due_ms,
                   coalesce(rq_enqueue_batch.priority, 0), p.group_key
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
        SELECT rq_enqueue_batch.queue, p.payload, o.max_age_ms, rq_enqueue_batch.max_retry_count,
               o.min_retry_delay_ms, o.max_retry_delay_ms, o.backoff_base_ms, o.now_ms, o.due_ms,
               coalesce(rq_enqueue_batch.priority, 0), p.key, p.group_key
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
    WHERE j.queue = rq_enqueue_batch.queue AND j.key = ANY (keys)
      AND j.status IN ('queued', 'claimed', 'failed', 'blocked') AND NOT j.id = ANY (new_ids);

    SELECT k.key INTO missing FROM unnest(keys) AS k (key)
    WHERE k.key IS NOT NULL AND NOT EXISTS (
        SELECT 1 FROM @extschema@.jobs j
        WHERE j.queue = rq_enqueue_batch.queue AND j.key = k.key
          AND j.status IN ('queued', 'claimed', 'failed', 'blocked'))
    LIMIT 1;
    IF FOUND THEN
        PERFORM raquel_internal.rq_refuse('key_finished', ARRAY[missing, rq_enqueue_batch.queue]);
    END IF;
END
$$;

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

CREATE OR REPLACE FUNCTION rq_expire(batch integer DEFAULT 1000) RETURNS bigint
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
DECLARE
    now_ms  bigint := @extschema@.rq_now_ms();
    changed bigint;
    parents uuid[];
    queues  text[];
    ended   uuid[];
BEGIN
    PERFORM raquel_internal.rq_check_batch(batch);
    IF @extschema@.rq_distributed() THEN
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
    SELECT count(*), array_agg(e.id) FILTER (WHERE e.sets_off), array_agg(e.queue), array_agg(e.id)
    INTO changed, parents, queues, ended
    FROM expired e;
    PERFORM raquel_internal.rq_note_metric(q, 'expired', NULL) FROM unnest(queues) q;
    -- their awaiters (rq_await) are woken at commit (src/results.rs)
    PERFORM raquel_internal.rq_jobs_ended(ended);
    -- what their ends set off (sql/finish.sql)
    PERFORM raquel_internal.rq_job_ended(p.id) FROM unnest(parents) p (id);
    RETURN changed;
END
$$;

CREATE OR REPLACE FUNCTION raquel_internal.rq_expire_distributed(batch integer, now_ms bigint) RETURNS bigint
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    q       text;
    changed bigint := 0;
    more    bigint;
    held    uuid[];
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
        SELECT count(*), array_agg(e.id) FILTER (WHERE e.sets_off) INTO more, held FROM expired e;
        changed := changed + more;
        PERFORM raquel_internal.rq_note_metric(q, 'expired', NULL) FROM generate_series(1, more);
        -- a key enqueued with a key_period stays held (sql/finish.sql)
        PERFORM raquel_internal.rq_job_ended(h.id) FROM unnest(held) h (id);
    END LOOP;
    RETURN changed;
END
$$;

CREATE OR REPLACE FUNCTION rq_extend(id uuid, lease interval DEFAULT raquel_internal.rq_default_lease(), attempt integer DEFAULT NULL)
RETURNS jobs
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    -- a value, not a call in the UPDATE: Citus refuses volatile calls there
    now_ms bigint := @extschema@.rq_now_ms();
    lease_ms bigint := raquel_internal.rq_lease_ms(rq_extend.lease);
    -- on Citus, the job's queue: the UPDATE runs in its shard alone (src/distributed.rs)
    shard_queue text := raquel_internal.rq_shard_queue(rq_extend.id);
    job      @extschema@.jobs;
BEGIN
    UPDATE @extschema@.jobs j
    SET lease_expires_at = now_ms + lease_ms
    WHERE j.id = rq_extend.id AND j.queue = coalesce(shard_queue, j.queue)
      AND j.status = 'claimed'
      AND (rq_extend.attempt IS NULL OR j.attempts = rq_extend.attempt)
    RETURNING j.* INTO job;
    IF NOT FOUND THEN
        PERFORM raquel_internal.rq_raise_cannot(rq_extend.id, rq_extend.attempt, 'extend', '{claimed}');
    END IF;
    RETURN job;
END
$$;

CREATE OR REPLACE FUNCTION rq_fail(
    id          uuid,
    error       text    DEFAULT NULL,
    error_trace text    DEFAULT NULL,
    attempt     integer DEFAULT NULL
) RETURNS jobs
LANGUAGE c VOLATILE
SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'rq_fail_c';

CREATE OR REPLACE FUNCTION rq_fail_and_claim(
    id          uuid     DEFAULT NULL,
    error       text     DEFAULT NULL,
    error_trace text     DEFAULT NULL,
    attempt     integer  DEFAULT NULL,
    queues      text[]   DEFAULT NULL,
    worker      text     DEFAULT NULL,
    batch       integer  DEFAULT 1,
    lease       interval DEFAULT raquel_internal.rq_default_lease(),
    wait        interval DEFAULT '0'
) RETURNS SETOF jobs
LANGUAGE c VOLATILE ROWS 1
SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'rq_fail_and_claim_c';

CREATE OR REPLACE FUNCTION rq_fire_schedules(batch integer DEFAULT 1000) RETURNS bigint
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
DECLARE
    now_ms   bigint := @extschema@.rq_now_ms();
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
                SELECT j.id INTO job_id FROM @extschema@.rq_enqueue(schedule.queue, schedule.payload,
                    at => @extschema@.rq_ms_to_timestamptz(slot),
                    max_age => @extschema@.rq_ms_to_interval(schedule.max_age),
                    max_retry_count => schedule.max_retry_count,
                    min_retry_delay => @extschema@.rq_ms_to_interval(schedule.min_retry_delay),
                    max_retry_delay => @extschema@.rq_ms_to_interval(schedule.max_retry_delay),
                    backoff_base => @extschema@.rq_ms_to_interval(schedule.backoff_base),
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

CREATE FUNCTION raquel_internal.rq_flow_lock(queues text[]) RETURNS SETOF queue_limits
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM raquel_internal.rq_require_flow_claim('rq_flow_lock');
    RETURN QUERY
    SELECT l.* FROM @extschema@.queue_limits l
    WHERE l.queue = ANY (queues) AND (l.max_claimed IS NOT NULL OR l.rate IS NOT NULL)
    ORDER BY l.queue
    FOR UPDATE;
END
$$;

CREATE FUNCTION raquel_internal.rq_flow_took(queue text, claimed uuid[], tokens double precision, tokens_at bigint) RETURNS void
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM raquel_internal.rq_require_flow_claim('rq_flow_took');
    UPDATE @extschema@.queue_limits l
    SET claimed = CASE WHEN l.max_claimed IS NULL THEN '{}' ELSE rq_flow_took.claimed END,
        tokens = CASE WHEN l.rate IS NULL THEN NULL ELSE rq_flow_took.tokens END,
        tokens_at = CASE WHEN l.rate IS NULL THEN NULL ELSE rq_flow_took.tokens_at END
    WHERE l.queue = rq_flow_took.queue;
END
$$;

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
        %1$s.rq_enqueue_trigger()
        TO %2$s', '@extschema@', role);
END
$$;

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
    -- rq_step records a job's steps (sql/steps.sql); rq_sleep and
    -- rq_wait_event park the job they hold (sql/waits.sql) and look for an
    -- event kept for it
    EXECUTE format('GRANT SELECT, INSERT ON %s.job_steps TO %s', '@extschema@', role);
    EXECUTE format('GRANT SELECT, INSERT, UPDATE, DELETE ON %s.job_waits TO %s', '@extschema@', role);
    EXECUTE format('GRANT SELECT ON %s.emitted_events TO %s', '@extschema@', role);
    EXECUTE format('GRANT EXECUTE ON FUNCTION raquel_internal.rq_look_in_at_commit() TO %s', role);
END
$$;

CREATE FUNCTION raquel_internal.rq_has_children(parent uuid) RETURNS boolean
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT EXISTS (SELECT FROM @extschema@.job_dependencies d WHERE d.parent_id = $1)
$$;

CREATE OR REPLACE FUNCTION raquel_internal.rq_hold_for_parents(ids uuid[], after uuid[]) RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    now_ms  bigint := @extschema@.rq_now_ms();
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
    IF raquel_internal.rq_has_children(ended.id) THEN
        PERFORM raquel_internal.rq_parent_ended(ended.id);
    END IF;
    IF ended.key IS NOT NULL AND ended.key_period IS NOT NULL THEN
        INSERT INTO @extschema@.key_holds AS h (queue, key, job_id, until)
        VALUES (ended.queue, ended.key, ended.id, coalesce(ended.finished_at, @extschema@.rq_now_ms()) + ended.key_period)
        ON CONFLICT ON CONSTRAINT key_holds_pkey DO UPDATE SET job_id = excluded.job_id, until = excluded.until;
    END IF;
END
$$;

CREATE  FUNCTION raquel_internal."rq_job_ready_again"(
	"queue" TEXT, /* Option < & str > */
	"scheduled_at" bigint, /* Option < i64 > */
	"max_age" bigint, /* Option < i64 > */
	"priority" INT DEFAULT NULL, /* Option < i32 > */
	"id" uuid DEFAULT NULL /* Option < pgrx :: Uuid > */
) RETURNS void
VOLATILE PARALLEL UNSAFE
SET search_path TO pg_catalog, pg_temp
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'rq_job_ready_in_lane_wrapper';

CREATE FUNCTION raquel_internal.rq_job_values() RETURNS trigger
LANGUAGE c
AS 'MODULE_PATHNAME', 'rq_job_values';

CREATE OR REPLACE FUNCTION raquel_internal.rq_lapsed(batch integer, now_ms bigint)
RETURNS TABLE (id uuid, attempts integer, claimed_by text)
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
BEGIN
    IF @extschema@.rq_distributed() THEN
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

CREATE OR REPLACE FUNCTION raquel_internal.rq_lapsed_distributed(batch integer, now_ms bigint)
RETURNS TABLE (id uuid, attempts integer, claimed_by text)
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    q     text;
    taken bigint := 0;
    more  bigint;
BEGIN
    IF NOT citus_is_coordinator() THEN
        RETURN;
    END IF;
    FOR q IN
        SELECT DISTINCT j.queue FROM @extschema@.jobs j
        WHERE j.status = 'claimed'
          AND coalesce(j.lease_expires_at, j.claimed_at + raquel_internal.rq_default_lease_ms()) <= now_ms
    LOOP
        EXIT WHEN taken >= batch;
        RETURN QUERY
            -- (attempts is a domain over integer; RETURN QUERY wants the type declared)
            SELECT j.id, j.attempts::integer, j.claimed_by FROM @extschema@.jobs j
            WHERE j.queue = q AND j.status = 'claimed'
              AND coalesce(j.lease_expires_at, j.claimed_at + raquel_internal.rq_default_lease_ms()) <= now_ms
            ORDER BY coalesce(j.lease_expires_at, j.claimed_at + raquel_internal.rq_default_lease_ms())
            LIMIT batch - taken
            FOR UPDATE SKIP LOCKED;
        GET DIAGNOSTICS more = ROW_COUNT;
        taken := taken + more;
    END LOOP;
END
$$;

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
    SELECT m.queue, @extschema@.rq_ms_to_timestamptz(m.minute),
           m.enqueued, m.claimed, m.succeeded, m.failed, m.rescued, m.expired,
           raquel_internal.rq_histogram_percentile(m.wait_histogram, 0.5),
           raquel_internal.rq_histogram_percentile(m.wait_histogram, 0.95),
           raquel_internal.rq_histogram_percentile(m.wait_histogram, 0.99),
           raquel_internal.rq_histogram_percentile(m.run_histogram, 0.5),
           raquel_internal.rq_histogram_percentile(m.run_histogram, 0.95),
           raquel_internal.rq_histogram_percentile(m.run_histogram, 0.99),
           m.backlog
    FROM @extschema@.metrics m
    WHERE m.minute >= @extschema@.rq_now_ms() - (extract(epoch FROM coalesce($2, interval '1 hour')) * 1000)::bigint
      AND ($1 IS NULL OR m.queue = $1)
    ORDER BY m.queue, m.minute
$$;

CREATE  FUNCTION "rq_metrics_lost"() RETURNS bigint /* i64 */
STRICT VOLATILE PARALLEL SAFE
SET search_path TO pg_catalog, pg_temp
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'rq_metrics_lost_wrapper';

CREATE OR REPLACE FUNCTION raquel_internal.rq_next_duty_ms(retention interval DEFAULT NULL) RETURNS bigint
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
DECLARE
    keep_ms bigint := raquel_internal.rq_retention_ms(retention);
BEGIN
    RETURN least(
        (SELECT coalesce(j.lease_expires_at, j.claimed_at + raquel_internal.rq_default_lease_ms())
         FROM @extschema@.jobs j
         WHERE j.status = 'claimed'
           AND coalesce(j.lease_expires_at, j.claimed_at + raquel_internal.rq_default_lease_ms()) IS NOT NULL
         ORDER BY coalesce(j.lease_expires_at, j.claimed_at + raquel_internal.rq_default_lease_ms())
         LIMIT 1),
        (SELECT j.scheduled_at + j.max_age
         FROM @extschema@.jobs j
         WHERE j.status IN ('queued', 'failed') AND j.max_age IS NOT NULL
         ORDER BY j.scheduled_at + j.max_age
         LIMIT 1),
        (SELECT j.finished_at + keep_ms
         FROM @extschema@.jobs j
         WHERE j.status IN ('success', 'cancelled', 'expired', 'exhausted') AND keep_ms > 0
         ORDER BY j.finished_at
         LIMIT 1),
        (SELECT s.next_run_at FROM @extschema@.schedules s
         WHERE s.enabled
         ORDER BY s.next_run_at
         LIMIT 1));
END
$$;

CREATE OR REPLACE FUNCTION raquel_internal.rq_parent_ended(parent uuid) RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    now_ms   bigint := @extschema@.rq_now_ms();
    ended    record;
    released record;
    cancelled_ids uuid[];
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
    WITH RECURSIVE descendants AS (
        SELECT d.child_id AS id FROM @extschema@.job_dependencies d WHERE d.parent_id = parent
        UNION
        SELECT d.child_id FROM @extschema@.job_dependencies d JOIN descendants x ON d.parent_id = x.id
    ), cancelled AS (
        UPDATE @extschema@.jobs c
        SET status = 'cancelled', finished_at = now_ms,
            error = format('cancelled: job %s, which it runs after, ended %s', ended.id, ended.status)
        FROM descendants x WHERE c.id = x.id AND c.status = 'blocked'
        RETURNING c.id
    ), gone AS (
        DELETE FROM @extschema@.job_dependencies d
        WHERE d.parent_id = parent OR d.parent_id IN (SELECT c.id FROM cancelled c)
    )
    SELECT array_agg(c.id) INTO cancelled_ids FROM cancelled c;
    -- their awaiters (rq_await) are woken at commit (src/results.rs)
    PERFORM raquel_internal.rq_jobs_ended(cancelled_ids);
END
$$;

CREATE OR REPLACE FUNCTION rq_pause(queue text) RETURNS queue_limits
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    settings @extschema@.queue_limits;
BEGIN
    PERFORM raquel_internal.rq_check_limits(queue, NULL, NULL, NULL, NULL);
    PERFORM raquel_internal.rq_refuse_distributed('rq_pause');
    INSERT INTO @extschema@.queue_limits AS l (queue, paused) VALUES (rq_pause.queue, true)
    ON CONFLICT ON CONSTRAINT queue_limits_pkey DO UPDATE SET paused = true
    RETURNING l.* INTO settings;
    RETURN settings;
END
$$;

CREATE OR REPLACE FUNCTION rq_pause_schedule(name text) RETURNS schedules
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

CREATE FUNCTION rq_prometheus(max_queues integer DEFAULT 100) RETURNS text
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    since   bigint := (@extschema@.rq_now_ms() / 60000 - 5) * 60000;
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
                         @extschema@.rq_metrics_lost())
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

CREATE OR REPLACE FUNCTION rq_prune(batch integer DEFAULT 1000, retention interval DEFAULT NULL) RETURNS bigint
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
DECLARE
    -- A value, not rq_now_ms() in the statements: a volatile call cannot
    -- bound an index scan (the prune below then read the index of every
    -- finished job: 2.6 s a round with 10 million of them, measured), and
    -- Citus refuses volatile calls in a statement it sends to a shard.
    now_ms  bigint := @extschema@.rq_now_ms();
    keep_ms bigint;
    cutoff  bigint;
    changed bigint;
BEGIN
    PERFORM raquel_internal.rq_check_batch(batch);
    -- keys whose hold after their job's end is over (sql/schema.sql)
    DELETE FROM @extschema@.key_holds h WHERE h.until <= now_ms;
    keep_ms := raquel_internal.rq_retention_ms(retention);
    IF keep_ms = 0 THEN
        RETURN 0;
    END IF;
    cutoff := now_ms - keep_ms;
    -- the metrics of minutes older than the retention (sql/metrics.sql)
    DELETE FROM @extschema@.metrics m WHERE m.minute < cutoff;
    IF @extschema@.rq_distributed() THEN
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

CREATE OR REPLACE FUNCTION raquel_internal.rq_record_metrics() RETURNS bigint
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    touched bigint;
    now_ms  bigint := @extschema@.rq_now_ms();
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

CREATE OR REPLACE FUNCTION rq_reject(id uuid, attempt integer DEFAULT NULL) RETURNS jobs
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    -- on Citus, the job's queue: the UPDATE runs in its shard alone (src/distributed.rs)
    shard_queue text := raquel_internal.rq_shard_queue(rq_reject.id);
    job @extschema@.jobs;
BEGIN
    UPDATE @extschema@.jobs j
    SET status = 'queued', claimed_by = NULL, claimed_at = NULL,
        requeues = j.requeues + 1, lease_expires_at = NULL
    WHERE j.id = rq_reject.id AND j.queue = coalesce(shard_queue, j.queue)
      AND j.status = 'claimed'
      AND (rq_reject.attempt IS NULL OR j.attempts = rq_reject.attempt)
    RETURNING j.* INTO job;
    IF NOT FOUND THEN
        PERFORM raquel_internal.rq_raise_cannot(rq_reject.id, rq_reject.attempt, 'reject', '{claimed}');
    END IF;
    -- ready again: wake a waiting claim at commit (src/events.rs)
    PERFORM raquel_internal.rq_job_ready_again(job.queue, job.scheduled_at, job.max_age, job.priority, job.id);
    RETURN job;
END
$$;

CREATE  FUNCTION raquel_internal."rq_require_flow_claim"(
	"name" TEXT /* & str */
) RETURNS void
STRICT VOLATILE PARALLEL UNSAFE
SET search_path TO pg_catalog, pg_temp
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'rq_require_flow_claim_wrapper';

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
    due_ms bigint := raquel_internal.rq_due_ms(rq_reschedule.at, rq_reschedule.delay);
    -- on Citus, the job's queue: the UPDATE runs in its shard alone (src/distributed.rs)
    shard_queue text := raquel_internal.rq_shard_queue(rq_reschedule.id);
    job    @extschema@.jobs;
BEGIN
    UPDATE @extschema@.jobs j
    SET status = 'queued',
        scheduled_at = coalesce(due_ms, now_ms + coalesce(j.min_retry_delay, raquel_internal.rq_default_min_retry_delay())),
        requeues = j.requeues + 1,
        lease_expires_at = NULL,
        finished_at = NULL
    WHERE j.id = rq_reschedule.id AND j.queue = coalesce(shard_queue, j.queue)
      AND j.status = 'claimed'
      AND (rq_reschedule.attempt IS NULL OR j.attempts = rq_reschedule.attempt)
    RETURNING j.* INTO job;
    IF NOT FOUND THEN
        PERFORM raquel_internal.rq_raise_cannot(rq_reschedule.id, rq_reschedule.attempt, 'reschedule', '{claimed}');
    END IF;
    -- ready again: wake a waiting claim at commit (src/events.rs)
    PERFORM raquel_internal.rq_job_ready_again(job.queue, job.scheduled_at, job.max_age, job.priority, job.id);
    RETURN job;
END
$$;

CREATE OR REPLACE FUNCTION rq_rescue(batch integer DEFAULT 1000) RETURNS bigint
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
DECLARE
    now_ms  bigint := @extschema@.rq_now_ms();
    job     record;
    changed bigint := 0;
    failed  @extschema@.jobs;
BEGIN
    PERFORM raquel_internal.rq_check_batch(batch);
    FOR job IN SELECT l.id, l.attempts, l.claimed_by FROM raquel_internal.rq_lapsed(batch, now_ms) l
    LOOP
        failed := @extschema@.rq_fail(job.id,
                        format('lease expired: %s did not finish attempt %s in time',
                               coalesce('worker ' || job.claimed_by, 'the worker'), job.attempts),
                        NULL, job.attempts);
        PERFORM raquel_internal.rq_note_metric(failed.queue, 'rescued', NULL);
        changed := changed + 1;
    END LOOP;
    RETURN changed;
END
$$;

CREATE OR REPLACE FUNCTION rq_resume(queue text) RETURNS queue_limits
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    settings @extschema@.queue_limits;
BEGIN
    PERFORM raquel_internal.rq_check_limits(queue, NULL, NULL, NULL, NULL);
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

CREATE OR REPLACE FUNCTION rq_resume_schedule(name text) RETURNS schedules
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    schedule @extschema@.schedules;
BEGIN
    UPDATE @extschema@.schedules s
    SET enabled = true,
        next_run_at = CASE WHEN s.enabled THEN s.next_run_at
                           ELSE raquel_internal.rq_cron_next(s.cron, s.timezone, @extschema@.rq_now_ms()) END
    WHERE s.name = rq_resume_schedule.name
    RETURNING s.* INTO schedule;
    IF NOT FOUND THEN
        PERFORM raquel_internal.rq_refuse('schedule_unknown', ARRAY[coalesce(rq_resume_schedule.name, 'NULL')]);
    END IF;
    PERFORM raquel_internal.rq_schedule_due(schedule.next_run_at);
    RETURN schedule;
END
$$;

CREATE OR REPLACE FUNCTION rq_retry(id uuid) RETURNS jobs
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    -- a value, not a call in the UPDATE: Citus refuses volatile calls there
    now_ms bigint := @extschema@.rq_now_ms();
    -- on Citus, the job's queue: the UPDATE runs in its shard alone (src/distributed.rs)
    shard_queue text := raquel_internal.rq_shard_queue(rq_retry.id);
    job @extschema@.jobs;
BEGIN
    UPDATE @extschema@.jobs j
    SET status = 'queued', scheduled_at = now_ms, finished_at = NULL,
        lease_expires_at = NULL, requeues = j.attempts
    WHERE j.id = rq_retry.id AND j.queue = coalesce(shard_queue, j.queue)
      AND j.status IN ('failed', 'exhausted', 'expired', 'cancelled')
    RETURNING j.* INTO job;
    IF NOT FOUND THEN
        PERFORM raquel_internal.rq_raise_cannot(rq_retry.id, NULL, 'retry', '{failed,exhausted,expired,cancelled}');
    END IF;
    -- ready again: wake a waiting claim at commit (src/events.rs)
    PERFORM raquel_internal.rq_job_ready_again(job.queue, job.scheduled_at, job.max_age, job.priority, job.id);
    RETURN job;
EXCEPTION WHEN unique_violation THEN
    -- an ended job's key was taken by a newer job that is still unfinished
    PERFORM raquel_internal.rq_refuse('retry_key_taken', ARRAY[rq_retry.id::text]);
END
$$;

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

CREATE OR REPLACE FUNCTION raquel_internal."rq_schedule_due"(
	"due_ms" bigint /* Option < i64 > */
) RETURNS void
VOLATILE PARALLEL UNSAFE
SET search_path TO pg_catalog, pg_temp
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'rq_schedule_due_wrapper';

CREATE  FUNCTION raquel_internal."rq_schedule_slots"(
	"cron" TEXT, /* Option < & str > */
	"timezone" TEXT, /* Option < & str > */
	"next_ms" bigint, /* Option < i64 > */
	"now_ms" bigint, /* Option < i64 > */
	"catch_up" TEXT /* Option < & str > */
) RETURNS bigint[] /* Vec < i64 > */
STABLE PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'rq_schedule_slots_wrapper';

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
    IF keep THEN
        DELETE FROM @extschema@.queues_without_history h WHERE h.queue = rq_set_history.queue;
    ELSE
        INSERT INTO @extschema@.queues_without_history AS h (queue) VALUES (rq_set_history.queue)
        ON CONFLICT ON CONSTRAINT queues_without_history_pkey DO NOTHING;
    END IF;
    RETURN keep;
END
$$;

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

CREATE OR REPLACE FUNCTION rq_settle_workflows(batch integer DEFAULT 1000) RETURNS bigint
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
        PERFORM raquel_internal.rq_parent_ended(parent);
        settled := settled + 1;
    END LOOP;
    RETURN settled;
END
$$;

CREATE FUNCTION rq_take(
    queues   text[]   DEFAULT NULL,
    worker   text     DEFAULT NULL,
    batch    integer  DEFAULT 1,
    complete boolean  DEFAULT false,
    wait     interval DEFAULT '0'
) RETURNS SETOF jobs
LANGUAGE c VOLATILE ROWS 1
SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'rq_take_c';
-- END functions

-- The checks across a job's columns (rq_job_values, above).
CREATE TRIGGER jobs_values
    BEFORE INSERT OR UPDATE OF min_retry_delay, max_retry_delay, attempts, requeues ON jobs
    FOR EACH ROW EXECUTE FUNCTION raquel_internal.rq_job_values();

-- Schedules for people: instants as timestamptz, and why the last slot
-- could not be enqueued.
CREATE OR REPLACE VIEW rq_schedules AS
SELECT s.name, s.cron, s.timezone, s.queue, s.enabled, s.catch_up,
       @extschema@.rq_ms_to_timestamptz(s.next_run_at) AS next_run,
       @extschema@.rq_ms_to_timestamptz(s.last_run_at) AS last_run,
       s.last_job_id, s.last_error
FROM @extschema@.schedules s;

-- Workers read the state the limits keep but no longer write it: the flow
-- claim writes it as the owner (rq_flow_took).
DO $$
DECLARE
    grantee text;
BEGIN
    FOR grantee IN
        -- grantee 0 is PUBLIC, which regrole would print as '-'
        SELECT DISTINCT CASE WHEN a.grantee = 0 THEN 'PUBLIC'
                             ELSE a.grantee::pg_catalog.regrole::pg_catalog.text END
        FROM pg_catalog.pg_attribute c, pg_catalog.aclexplode(c.attacl) a
        WHERE c.attrelid = '@extschema@.queue_limits'::pg_catalog.regclass
          AND c.attname IN ('claimed', 'tokens', 'tokens_at') AND a.privilege_type = 'UPDATE'
          AND a.grantee <> (SELECT r.relowner FROM pg_catalog.pg_class r
                            WHERE r.oid = '@extschema@.queue_limits'::pg_catalog.regclass)
    LOOP
        EXECUTE pg_catalog.format('REVOKE UPDATE (claimed, tokens, tokens_at) ON @extschema@.queue_limits FROM %s', grantee);
        EXECUTE pg_catalog.format('GRANT SELECT ON @extschema@.queue_limits TO %s', grantee);
        EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION raquel_internal.rq_flow_lock(text[]),
            raquel_internal.rq_flow_took(text, uuid[], double precision, bigint) TO %s', grantee);
    END LOOP;
END
$$;

REVOKE EXECUTE ON FUNCTION
    raquel_internal.rq_check_parents(integer, uuid[]), raquel_internal.rq_job_values(),
    raquel_internal.rq_flow_lock(text[]), raquel_internal.rq_flow_took(text, uuid[], double precision, bigint)
FROM PUBLIC;

-- Claims on any queue walk the ready index queue by queue
-- (sql/claim.queues_any.sql); the index of every queue's ready jobs cost
-- every job an entry at enqueue.
DROP INDEX @extschema@.jobs_ready_idx;

-- Results and steps (issue 26): the verbs and duties written in SQL that
-- end jobs wake those jobs' awaiters (src/results.rs).
CREATE  FUNCTION raquel_internal."rq_jobs_ended"(
	"ids" uuid[] /* :: std :: option :: Option < Vec < Option < pgrx :: Uuid > > > */
) RETURNS void
VOLATILE PARALLEL UNSAFE
SET search_path TO pg_catalog, pg_temp
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'rq_jobs_ended_wrapper';

-- Results and steps (issue 26). The verbs that complete take a result as
-- their last parameter: each is made again (DROP and CREATE, since its
-- argument list changes) and keeps the EXECUTE grants it had.
DO $$
DECLARE
    verb record;
    grants aclitem[];
    g record;
BEGIN
    FOR verb IN
        SELECT * FROM (VALUES
            ('@extschema@.rq_complete(uuid, integer)',
             '@extschema@.rq_complete(id uuid, attempt integer DEFAULT NULL, result jsonb DEFAULT NULL) RETURNS @extschema@.jobs',
             'rq_complete_c', '@extschema@.rq_complete(uuid, integer, jsonb)'),
            ('@extschema@.rq_complete_batch(uuid[], integer[])',
             '@extschema@.rq_complete_batch(ids uuid[], attempts integer[] DEFAULT NULL, results jsonb[] DEFAULT NULL) RETURNS SETOF @extschema@.jobs',
             'rq_complete_batch_c', '@extschema@.rq_complete_batch(uuid[], integer[], jsonb[])'),
            ('@extschema@.rq_complete_and_claim(uuid, integer, text[], text, integer, interval, interval)',
             '@extschema@.rq_complete_and_claim(id uuid DEFAULT NULL, attempt integer DEFAULT NULL, queues text[] DEFAULT NULL, '
             'worker text DEFAULT NULL, batch integer DEFAULT 1, lease interval DEFAULT raquel_internal.rq_default_lease(), '
             'wait interval DEFAULT ''0'', result jsonb DEFAULT NULL) RETURNS SETOF @extschema@.jobs',
             'rq_complete_and_claim_c', '@extschema@.rq_complete_and_claim(uuid, integer, text[], text, integer, interval, interval, jsonb)'),
            ('@extschema@.rq_complete_batch_and_claim(uuid[], integer[], text[], text, integer, interval, interval)',
             '@extschema@.rq_complete_batch_and_claim(ids uuid[] DEFAULT NULL, attempts integer[] DEFAULT NULL, queues text[] DEFAULT NULL, '
             'worker text DEFAULT NULL, batch integer DEFAULT 1, lease interval DEFAULT raquel_internal.rq_default_lease(), '
             'wait interval DEFAULT ''0'', results jsonb[] DEFAULT NULL) RETURNS SETOF @extschema@.jobs',
             'rq_complete_batch_and_claim_c', '@extschema@.rq_complete_batch_and_claim(uuid[], integer[], text[], text, integer, interval, interval, jsonb[])')
        ) v (old, declaration, symbol, new)
    LOOP
        SELECT p.proacl INTO grants FROM pg_catalog.pg_proc p WHERE p.oid = verb.old::pg_catalog.regprocedure;
        EXECUTE pg_catalog.format('DROP FUNCTION %s', verb.old);
        EXECUTE pg_catalog.format('CREATE FUNCTION %s LANGUAGE c VOLATILE %s SET search_path = pg_catalog, pg_temp AS %L, %L',
            verb.declaration, CASE WHEN verb.symbol LIKE '%and_claim%' THEN 'ROWS 1' ELSE '' END, 'MODULE_PATHNAME', verb.symbol);
        IF grants IS NOT NULL THEN
            -- a function is made with EXECUTE for PUBLIC; the old one's grants hold instead
            EXECUTE pg_catalog.format('REVOKE EXECUTE ON FUNCTION %s FROM PUBLIC', verb.new);
            FOR g IN
                SELECT a.grantee, a.is_grantable FROM pg_catalog.aclexplode(grants) a
                WHERE a.privilege_type = 'EXECUTE'
                  AND a.grantee <> (SELECT p.proowner FROM pg_catalog.pg_proc p WHERE p.oid = verb.new::pg_catalog.regprocedure)
            LOOP
                EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION %s TO %s%s', verb.new,
                    CASE WHEN g.grantee = 0 THEN 'PUBLIC' ELSE g.grantee::pg_catalog.regrole::pg_catalog.text END,
                    CASE WHEN g.is_grantable THEN ' WITH GRANT OPTION' ELSE '' END);
            END LOOP;
        END IF;
    END LOOP;
END
$$;

-- Results: a job completed with a result (rq_complete's `result`, and the
-- batch and one-call verbs' `results` / `result`) keeps it in the jobs
-- table's `result` column, written by the UPDATE that completes it. A job
-- completed with a result is kept for the retention even in a queue
-- without history, so that the result can be read. Whoever may read jobs
-- may read results.

-- Waits until job `id` has ended (success, exhausted, cancelled, expired)
-- or `timeout` passes, and returns its row as it then is: the caller reads
-- status, result and error. Woken at the commit that ends the job when a
-- verb of raquel's ends it (rq_complete, rq_fail, rq_cancel, the expire
-- duty, …); an end written by other SQL is seen within 5 seconds. NULL when
-- the job was deleted while it waited. Needs READ COMMITTED (each look has
-- a new snapshot). In C (src/results.rs).
CREATE FUNCTION rq_await(id uuid, timeout interval DEFAULT '30 seconds') RETURNS jobs
LANGUAGE c VOLATILE
SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'rq_await_c';

-- Steps: what a job's run has done so far, kept across its attempts. A
-- worker records each named step of a job it holds with the step's result
-- (rq_step); on a later attempt (a retry, a rescue after its worker died)
-- it reads back what is recorded and skips what is done. A step recorded
-- inside the claim's transaction commits with the step's own writes to
-- this database, or neither does: such a step happens once. A step whose
-- effect is outside the database (an e-mail, a payment) is recorded after
-- it, so a crash between the two repeats it: make it idempotent.

-- One row a recorded step. The primary key makes a step's record unique:
-- a second record of the same step (by a stale worker, or twice in one
-- run) is refused, and so is the transaction around it.
CREATE TABLE job_steps (
    job_id      uuid    NOT NULL,
    name        text    NOT NULL,
    result      jsonb,
    -- the attempt (the claim's fencing token) that recorded it
    attempt     integer NOT NULL,
    recorded_at bigint  NOT NULL,
    CONSTRAINT job_steps_pkey PRIMARY KEY (job_id, name)
);

COMMENT ON TABLE job_steps IS
    'raquel durable jobs: the steps recorded for a job (rq_step), kept across its attempts. Times in ms since the Unix epoch (UTC).';

SELECT pg_catalog.pg_extension_config_dump('job_steps', '');

-- A step's name is checked wherever a step is recorded (rq_step, rq_sleep,
-- rq_wait_event) by raquel_internal.rq_check_step_name (src/steps.rs):
-- not NULL, not empty, at most 1000 bytes.

-- Records step `name` of the claimed job `id`, with its result. Fenced as
-- the worker verbs are: the job must be claimed (on `attempt`, when given),
-- and it stays locked against a rescue (FOR SHARE) until this transaction
-- ends, so a step is never recorded for an attempt that lost its claim
-- before the record committed. A step already recorded is refused (23505)
-- and nothing changes. One row written: the step's (and the job's row
-- locked, which writes nothing when this transaction claimed it). In C
-- (src/steps.rs, one statement: sql/steps.record.sql): it runs once per step
-- of every durable job.
CREATE FUNCTION rq_step(id uuid, name text, result jsonb DEFAULT NULL, attempt integer DEFAULT NULL)
RETURNS job_steps
LANGUAGE c VOLATILE
SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'rq_step_c';

-- rq_check_step_name (src/steps.rs), as pgrx declares it.
CREATE  FUNCTION raquel_internal."rq_check_step_name"(
	"id" uuid, /* Option < pgrx :: Uuid > */
	"name" TEXT, /* Option < & str > */
	"verb" TEXT /* Option < & str > */
) RETURNS void
STABLE PARALLEL SAFE
SET search_path TO pg_catalog, pg_temp
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'rq_check_step_name_wrapper';

-- A child reads its parents' results (issue 26): job_parents and
-- rq_parents, as sql/workflows.sql has them. The children in flight keep
-- the parents they still wait for (job_dependencies); the edges of parents
-- that ended before the update are gone.
-- Every parent a job was enqueued to run after, kept while the child is
-- (job_dependencies forgets an edge when its parent ends): what rq_parents
-- reads, so that a child reads its parents' results. A child's rows go
-- with it: deleted by the prune duty (rq_prune) and by a complete that
-- deletes the child (a queue without history, src/finish.rs).
CREATE TABLE job_parents (
    child_id  uuid NOT NULL,
    parent_id uuid NOT NULL,
    CONSTRAINT job_parents_pkey PRIMARY KEY (child_id, parent_id)
);

COMMENT ON TABLE job_parents IS
    'raquel workflows: every job (parent_id) a job (child_id) was enqueued to run after (rq_parents).';

SELECT pg_catalog.pg_extension_config_dump('job_parents', '');
INSERT INTO job_parents (child_id, parent_id)
SELECT d.child_id, d.parent_id FROM job_dependencies d
ON CONFLICT DO NOTHING;

-- The jobs job `id` was enqueued to run after, as they are now (their
-- status, result and error): a child reads what its parents produced. A
-- parent pruned after the retention is not there any more. Reads the jobs
-- table as its caller.
CREATE FUNCTION rq_parents(id uuid) RETURNS SETOF jobs
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF rq_parents.id IS NULL THEN
        PERFORM raquel_internal.rq_refuse('parents_of_null', '{}');
    END IF;
    IF NOT EXISTS (SELECT FROM @extschema@.jobs j WHERE j.id = rq_parents.id) THEN
        PERFORM raquel_internal.rq_refuse('parents_of_unknown', ARRAY[rq_parents.id::text]);
    END IF;
    RETURN QUERY
        SELECT p.* FROM @extschema@.job_parents e JOIN @extschema@.jobs p ON p.id = e.parent_id
        WHERE e.child_id = rq_parents.id
        ORDER BY p.id;
END
$$;

-- Durable sleep and events (issue 26): sql/waits.sql, and the helper that
-- asks the background worker to look in at commit (src/deadlines.rs).
CREATE  FUNCTION raquel_internal."rq_look_in_at_commit"() RETURNS void
STRICT VOLATILE PARALLEL UNSAFE
SET search_path TO pg_catalog, pg_temp
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'rq_look_in_at_commit_wrapper';

-- Durable sleep and events: a worker parks the job it holds, until an
-- instant (rq_sleep) or until an event is emitted (rq_wait_event, rq_emit),
-- keeping its steps and using up no retry. Both are steps (sql/steps.sql):
-- the step records the sleep's instant or the event's payload, so the
-- job's next attempt, run from the start as every attempt is, passes the
-- sleep or the wait it already did and reads what the event brought.
--
-- Parking is rq_reschedule's transition (sql/lifecycle.sql): the job goes
-- back to queued at the instant it must wake (a wait without a timeout: at
-- the end of time), its requeues counted, its lease dropped; a claim takes
-- it when it is due, and waiting claims wake for it as for any job
-- scheduled for later. An emit makes the jobs parked for its event due at
-- once. A parked job is queued, so rq_cancel cancels it, and cancelling a
-- parent goes through its children as in any workflow.

-- The jobs parked for an event: one wait a job at a time (the job's queue
-- beside it, for rq_stats). `since` is when the wait began (an emit kept at
-- that instant or later reaches it), `until` when it times out (NULL:
-- never). Times in ms since the epoch.
CREATE TABLE job_waits (
    job_id uuid   NOT NULL,
    queue  text   NOT NULL,
    name   text   NOT NULL,
    event  text   NOT NULL,
    since  bigint NOT NULL,
    until  bigint,
    CONSTRAINT job_waits_pkey PRIMARY KEY (job_id)
);
CREATE INDEX job_waits_event_idx ON job_waits (event);

COMMENT ON TABLE job_waits IS
    'raquel durable jobs: the jobs parked until an event is emitted (rq_wait_event). Times in ms since the Unix epoch (UTC).';

-- Events emitted, each kept until `kept_until` so that a job that starts
-- waiting for it a little later (the worker was still on its way to the
-- wait when the webhook came) gets it too.
CREATE TABLE emitted_events (
    id         bigint GENERATED ALWAYS AS IDENTITY,
    name       text   NOT NULL,
    payload    jsonb,
    emitted_at bigint NOT NULL,
    kept_until bigint NOT NULL,
    CONSTRAINT emitted_events_pkey PRIMARY KEY (id)
);
CREATE INDEX emitted_events_name_idx ON emitted_events (name, kept_until);

COMMENT ON TABLE emitted_events IS
    'raquel durable jobs: the events emitted (rq_emit), each kept for the jobs that start waiting for it until kept_until. Times in ms since the Unix epoch (UTC).';

SELECT pg_catalog.pg_extension_config_dump('job_waits', '');
SELECT pg_catalog.pg_extension_config_dump('emitted_events', '');
SELECT pg_catalog.pg_extension_config_dump('emitted_events_id_seq', '');

-- The end of time for a wait without a timeout: 9999-12-31 23:59:59 UTC.
CREATE FUNCTION raquel_internal.rq_forever_ms() RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT 253402300799000::bigint $$;

-- The claimed job `id` (on `attempt`, when given), locked until this
-- transaction ends; its attempt. Raises why not otherwise.
CREATE FUNCTION raquel_internal.rq_hold(id uuid, attempt integer, verb text) RETURNS integer
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    holder integer;
BEGIN
    SELECT j.attempts INTO holder FROM @extschema@.jobs j
    WHERE j.id = rq_hold.id AND j.status = 'claimed'
      AND (rq_hold.attempt IS NULL OR j.attempts = rq_hold.attempt)
    FOR UPDATE OF j;
    IF NOT FOUND THEN
        PERFORM raquel_internal.rq_raise_cannot(rq_hold.id, rq_hold.attempt, verb, '{claimed}');
    END IF;
    RETURN holder;
END
$$;

-- The checks an event's name passes, in rq_wait_event and rq_emit
-- (`function`, named in the refusal).
CREATE FUNCTION raquel_internal.rq_check_event_name(event text, function text) RETURNS void
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
END
$$;

-- A wait and an emit of the same event take turns (a transaction-level
-- advisory lock on the event's name, until the transaction ends): whichever
-- comes second sees what the first committed, so a wait that starts while
-- an emit commits is not missed. Emits share their turn (`shared`): two
-- emits never wait for each other, nor deadlock over several events.
-- (Under REPEATABLE READ the second may read from a snapshot older than
-- the first's commit; the background worker, asked to look in at commit,
-- delivers what was missed: rq_settle_waits.)
CREATE FUNCTION raquel_internal.rq_event_turn(event text, shared boolean) RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF shared THEN
        PERFORM pg_catalog.pg_advisory_xact_lock_shared(7310, pg_catalog.hashtext(event));
    ELSE
        PERFORM pg_catalog.pg_advisory_xact_lock(7310, pg_catalog.hashtext(event));
    END IF;
END
$$;

-- Puts the claimed job `id` to sleep until `at` plus `delay` (one of them
-- at least), as step `name`: true, the job sleeps (commit, and leave the
-- job alone: the claim is over); false, the sleep is over (go on with the
-- next step). The step records the instant; on a later attempt the same
-- call answers false once that instant has passed (and puts the job back
-- to sleep if it was claimed early, by hand). Uses up no retry.
CREATE FUNCTION rq_sleep(
    id      uuid,
    name    text,
    at      timestamptz DEFAULT NULL,
    delay   interval    DEFAULT NULL,
    attempt integer     DEFAULT NULL
) RETURNS boolean
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    wake_ms bigint := raquel_internal.rq_due_ms(rq_sleep.at, rq_sleep.delay);
    holder  integer;
    slept   jsonb;
BEGIN
    PERFORM raquel_internal.rq_refuse_distributed('rq_sleep');
    PERFORM raquel_internal.rq_check_step_name(rq_sleep.id, rq_sleep.name, 'put to sleep');
    IF wake_ms IS NULL THEN
        PERFORM raquel_internal.rq_refuse('sleep_when', ARRAY[rq_sleep.id::text]);
    END IF;
    holder := raquel_internal.rq_hold(rq_sleep.id, rq_sleep.attempt, 'sleep');
    SELECT s.result INTO slept FROM @extschema@.job_steps s WHERE s.job_id = rq_sleep.id AND s.name = rq_sleep.name;
    IF FOUND THEN
        -- slept already: the instant recorded then, not the one asked now
        wake_ms := (slept ->> 'until_ms')::bigint;
    ELSE
        INSERT INTO @extschema@.job_steps (job_id, name, result, attempt, recorded_at)
        VALUES (rq_sleep.id, rq_sleep.name,
                jsonb_build_object('sleep_until', @extschema@.rq_ms_to_timestamptz(wake_ms), 'until_ms', wake_ms),
                holder, @extschema@.rq_now_ms());
    END IF;
    IF wake_ms IS NULL OR wake_ms <= @extschema@.rq_now_ms() THEN
        RETURN false;
    END IF;
    PERFORM @extschema@.rq_reschedule(rq_sleep.id, at => @extschema@.rq_ms_to_timestamptz(wake_ms), attempt => holder);
    RETURN true;
END
$$;

-- Parks the claimed job `id` until event `event` is emitted, for at most
-- `timeout` (NULL: no limit), as step `name`. parked: the job waits
-- (commit, and leave the job alone: the claim is over); it comes back when
-- the event is emitted or the timeout passes, and its next attempt, calling
-- this again, gets the event's payload (parked false) or hears that the
-- wait timed out (timed_out true). An emit kept when the wait begins
-- (rq_emit's `keep`) reaches it at once, without parking. Uses up no retry.
CREATE FUNCTION rq_wait_event(
    id        uuid,
    name      text,
    event     text,
    timeout   interval DEFAULT NULL,
    attempt   integer  DEFAULT NULL,
    OUT parked    boolean,
    OUT payload   jsonb,
    OUT timed_out boolean
)
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    -- from 0 to a century (3,153,600,000,000 ms), as a delay
    timeout_ms bigint := raquel_internal.rq_interval_ms(rq_wait_event.timeout, 'timeout', 0, 3153600000000);
    holder     integer;
    now_ms     bigint;
    got        jsonb;
    waiting    @extschema@.job_waits;
    emitted    @extschema@.emitted_events;
    job        @extschema@.jobs;
BEGIN
    PERFORM raquel_internal.rq_refuse_distributed('rq_wait_event');
    PERFORM raquel_internal.rq_check_step_name(rq_wait_event.id, rq_wait_event.name, 'park');
    PERFORM raquel_internal.rq_check_event_name(rq_wait_event.event, 'rq_wait_event');
    holder := raquel_internal.rq_hold(rq_wait_event.id, rq_wait_event.attempt, 'wait_event');
    -- the wait begins now, before its turn: an emit made after this
    -- instant reaches it, even one that takes its turn first; one made
    -- before it reaches it while kept
    now_ms := @extschema@.rq_now_ms();
    PERFORM raquel_internal.rq_event_turn(rq_wait_event.event, false);
    parked := false;
    timed_out := false;
    -- waited already: what the step recorded (the event's payload, or the timeout)
    SELECT s.result INTO got FROM @extschema@.job_steps s
    WHERE s.job_id = rq_wait_event.id AND s.name = rq_wait_event.name;
    IF FOUND THEN
        DELETE FROM @extschema@.job_waits w WHERE w.job_id = rq_wait_event.id AND w.name = rq_wait_event.name;
        -- (a JSON null is no payload, as an emit without one)
        payload := nullif(got -> 'payload', 'null'::jsonb);
        timed_out := coalesce((got ->> 'timed_out')::boolean, false);
        RETURN;
    END IF;
    SELECT w.* INTO waiting FROM @extschema@.job_waits w
    WHERE w.job_id = rq_wait_event.id AND w.name = rq_wait_event.name AND w.event = rq_wait_event.event;
    SELECT e.* INTO emitted FROM @extschema@.emitted_events e
    WHERE e.name = rq_wait_event.event AND e.kept_until >= coalesce(waiting.since, now_ms)
    ORDER BY e.id DESC LIMIT 1;
    IF FOUND THEN
        got := jsonb_build_object('event', emitted.name, 'payload', emitted.payload,
                                  'emitted_at', @extschema@.rq_ms_to_timestamptz(emitted.emitted_at));
    ELSIF waiting.until <= now_ms THEN
        got := jsonb_build_object('event', rq_wait_event.event, 'timed_out', true);
    END IF;
    IF got IS NOT NULL THEN
        -- the wait ends here: its step recorded, unless an emit recorded it
        -- first (then what it recorded; under REPEATABLE READ, a record
        -- this snapshot cannot see is a serialization failure, 40001: try
        -- again)
        INSERT INTO @extschema@.job_steps (job_id, name, result, attempt, recorded_at)
        VALUES (rq_wait_event.id, rq_wait_event.name, got, holder, now_ms)
        ON CONFLICT ON CONSTRAINT job_steps_pkey DO NOTHING;
        IF NOT FOUND THEN
            SELECT s.result INTO got FROM @extschema@.job_steps s
            WHERE s.job_id = rq_wait_event.id AND s.name = rq_wait_event.name;
        END IF;
        DELETE FROM @extschema@.job_waits w WHERE w.job_id = rq_wait_event.id;
        payload := nullif(got -> 'payload', 'null'::jsonb);
        timed_out := coalesce((got ->> 'timed_out')::boolean, false);
        RETURN;
    END IF;
    IF waiting.job_id IS NULL THEN
        -- a wait begins
        waiting.since := now_ms;
        waiting.until := now_ms + timeout_ms;
    END IF;
    job := @extschema@.rq_reschedule(rq_wait_event.id,
        at => @extschema@.rq_ms_to_timestamptz(coalesce(waiting.until, raquel_internal.rq_forever_ms())),
        attempt => holder);
    -- one wait a job: a wait left by another step gives way
    INSERT INTO @extschema@.job_waits AS w (job_id, queue, name, event, since, until)
    VALUES (rq_wait_event.id, job.queue, rq_wait_event.name, rq_wait_event.event, waiting.since, waiting.until)
    ON CONFLICT ON CONSTRAINT job_waits_pkey DO UPDATE
    SET queue = excluded.queue, name = excluded.name, event = excluded.event, since = excluded.since, until = excluded.until;
    -- under REPEATABLE READ an emit that committed after this snapshot is
    -- not seen here: the background worker looks in at commit
    IF current_setting('transaction_isolation') <> 'read committed' THEN
        PERFORM raquel_internal.rq_look_in_at_commit();
    END IF;
    parked := true;
END
$$;

-- Resumes the jobs parked for `emitted`'s event whose wait began while it
-- was kept: records its payload as their step, ends their waits and makes
-- those still parked due now. How many it made due (a job claimed again
-- after its timeout reads the step when it calls rq_wait_event again; an
-- ended one gets the step too, and loses its wait).
CREATE FUNCTION raquel_internal.rq_deliver(emitted emitted_events) RETURNS bigint
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    now_ms  bigint := @extschema@.rq_now_ms();
    waiting @extschema@.job_waits;
    job     @extschema@.jobs;
    resumed bigint := 0;
BEGIN
    FOR waiting IN
        DELETE FROM @extschema@.job_waits w
        WHERE w.event = emitted.name AND w.since <= emitted.kept_until
        RETURNING w.*
    LOOP
        INSERT INTO @extschema@.job_steps (job_id, name, result, attempt, recorded_at)
        SELECT waiting.job_id, waiting.name,
               jsonb_build_object('event', emitted.name, 'payload', emitted.payload,
                                  'emitted_at', @extschema@.rq_ms_to_timestamptz(emitted.emitted_at)),
               j.attempts, now_ms
        FROM @extschema@.jobs j WHERE j.id = waiting.job_id
        ON CONFLICT ON CONSTRAINT job_steps_pkey DO NOTHING;
        UPDATE @extschema@.jobs j SET scheduled_at = now_ms
        WHERE j.id = waiting.job_id AND j.status = 'queued' AND j.scheduled_at > now_ms
        RETURNING j.* INTO job;
        IF FOUND THEN
            -- ready now: wake a waiting claim at commit (src/events.rs)
            PERFORM raquel_internal.rq_job_ready_again(job.queue, job.scheduled_at, job.max_age, job.priority, job.id);
            resumed := resumed + 1;
        END IF;
    END LOOP;
    RETURN resumed;
END
$$;

-- Emits event `event` with `payload`: every job parked for it resumes at
-- once and reads the payload as its step's result; a job that starts
-- waiting for it within `keep` gets it too. How many parked jobs it
-- resumed. Runs with the extension owner's rights; not for PUBLIC: GRANT
-- EXECUTE to the roles that may emit.
CREATE FUNCTION rq_emit(event text, payload jsonb DEFAULT NULL, keep interval DEFAULT '10 minutes')
RETURNS bigint
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    now_ms  bigint;
    -- from 0 to a century, as a delay
    keep_ms bigint := raquel_internal.rq_interval_ms(rq_emit.keep, 'keep', 0, 3153600000000);
    emitted @extschema@.emitted_events;
BEGIN
    PERFORM raquel_internal.rq_refuse_distributed('rq_emit');
    PERFORM raquel_internal.rq_check_event_name(rq_emit.event, 'rq_emit');
    IF keep_ms IS NULL THEN
        PERFORM raquel_internal.rq_refuse('event_keep_null', ARRAY[rq_emit.event]);
    END IF;
    PERFORM raquel_internal.rq_event_turn(rq_emit.event, true);
    -- the emit's instant is after its turn: every wait it can see began
    -- before it, and is reached whatever the keep
    now_ms := @extschema@.rq_now_ms();
    INSERT INTO @extschema@.emitted_events AS e (name, payload, emitted_at, kept_until)
    VALUES (rq_emit.event, rq_emit.payload, now_ms, now_ms + keep_ms)
    RETURNING e.* INTO emitted;
    -- under REPEATABLE READ a wait that committed after this snapshot is not
    -- seen here: the background worker looks in at commit
    IF current_setting('transaction_isolation') <> 'read committed' THEN
        PERFORM raquel_internal.rq_look_in_at_commit();
    END IF;
    RETURN raquel_internal.rq_deliver(emitted);
END
$$;

-- The background worker's duty for events: resumes the waits an emit
-- missed (a wait and an emit that read from snapshots older than each
-- other's commit, under REPEATABLE READ), drops the waits of jobs that
-- ended some other way (cancelled, expired) or are gone, and the emitted
-- events an hour past their keep. How many rows it changed.
CREATE FUNCTION raquel_internal.rq_settle_waits(batch integer DEFAULT 1000) RETURNS bigint
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
DECLARE
    now_ms  bigint := @extschema@.rq_now_ms();
    emitted @extschema@.emitted_events;
    changed bigint := 0;
    n       bigint;
BEGIN
    PERFORM raquel_internal.rq_check_batch(batch);
    -- refused in the distributed mode: nothing waits there
    IF @extschema@.rq_distributed() THEN
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

-- How many jobs are parked for an event, by queue (rq_stats, rq_prometheus),
-- for a role that may read job_waits; for any other, none: a role given
-- only jobs keeps its rq_stats.
CREATE FUNCTION raquel_internal.rq_waiting_by_queue() RETURNS TABLE (queue text, waiting bigint)
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF pg_catalog.has_table_privilege('@extschema@.job_waits', 'SELECT') THEN
        RETURN QUERY SELECT w.queue, count(*) FROM @extschema@.job_waits w GROUP BY w.queue;
    END IF;
END
$$;

REVOKE EXECUTE ON FUNCTION
    rq_emit(text, jsonb, interval), raquel_internal.rq_deliver(emitted_events), raquel_internal.rq_settle_waits(integer),
    raquel_internal.rq_look_in_at_commit()
FROM PUBLIC;

-- rq_stats counts the jobs parked for an event in a column of its own, the
-- last: made again, as sql/observe.sql has it.
DROP FUNCTION rq_stats();
-- rq_stats: sql/observe.sql
CREATE FUNCTION rq_stats()
RETURNS TABLE (queue text, total bigint, queued bigint, claimed bigint, success bigint,
               failed bigint, expired bigint, exhausted bigint, cancelled bigint, blocked bigint,
               ready bigint, oldest_ready_age interval,
               paused boolean, max_claimed integer, rate integer, per interval, group_max_claimed integer,
               waiting_for_event bigint)
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
        CROSS JOIN (SELECT @extschema@.rq_now_ms() AS ms) clock
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
           coalesce(w.waiting, 0)
    FROM counts c
    FULL JOIN @extschema@.queue_limits l ON l.queue = c.queue
    -- the jobs parked for an event (sql/waits.sql), by the queue they keep
    LEFT JOIN raquel_internal.rq_waiting_by_queue() w ON w.queue = coalesce(c.queue, l.queue)
    ORDER BY 1
$$;
-- end of rq_stats

-- The workers of 0.4.0 (roles that may update jobs) record steps and park
-- the jobs they hold as rq_grant_worker's roles do from now on.
DO $$
DECLARE
    r record;
    grantee text;
BEGIN
    FOR r IN
        SELECT DISTINCT a.grantee FROM pg_catalog.pg_class c, pg_catalog.aclexplode(c.relacl) a
        WHERE c.oid = '@extschema@.jobs'::pg_catalog.regclass AND a.privilege_type = 'UPDATE' AND a.grantee <> c.relowner
    LOOP
        grantee := CASE WHEN r.grantee = 0 THEN 'PUBLIC' ELSE r.grantee::pg_catalog.regrole::pg_catalog.text END;
        EXECUTE pg_catalog.format('GRANT SELECT, INSERT ON @extschema@.job_steps TO %s', grantee);
        EXECUTE pg_catalog.format('GRANT SELECT ON @extschema@.job_parents TO %s', grantee);
        EXECUTE pg_catalog.format('GRANT SELECT, INSERT, UPDATE, DELETE ON @extschema@.job_waits TO %s', grantee);
        EXECUTE pg_catalog.format('GRANT SELECT ON @extschema@.emitted_events TO %s', grantee);
        EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION raquel_internal.rq_look_in_at_commit() TO %s', grantee);
    END LOOP;
END
$$;

-- What each public object is for, in the catalog: the statements of
-- sql/comments.sql, the end of a fresh install's script too.
COMMENT ON SCHEMA raquel_internal IS
    'raquel''s internal helpers (called by its verbs, triggers, column defaults and background worker): not an API, they change without notice between versions. Call the functions of the extension''s schema instead.';

-- Enqueueing
COMMENT ON FUNCTION rq_enqueue(text, text, timestamptz, interval, interval, integer, interval, interval, interval, integer, text, text, uuid[], interval) IS
    'raquel: enqueues one job with a text payload into queue (due now, at `at` or after `delay`) and returns its row; key, group_key, after and key_period make it unique, fairly grouped, wait for other jobs, or hold its key.';
COMMENT ON FUNCTION rq_enqueue(text, jsonb, timestamptz, interval, interval, integer, interval, interval, interval, integer, text, text, uuid[], interval) IS
    'raquel: enqueues one job with a jsonb payload (stored as its text); otherwise as rq_enqueue with a text payload.';
COMMENT ON FUNCTION rq_enqueue_batch(text, text[], timestamptz, interval, interval, integer, interval, interval, interval, integer, text[], text[], uuid[]) IS
    'raquel: enqueues one job per text payload into queue in one statement, with the same options for all (keys and group_keys per job), and returns their rows.';
COMMENT ON FUNCTION rq_enqueue_batch(text, jsonb[], timestamptz, interval, interval, integer, interval, interval, interval, integer, text[], text[], uuid[]) IS
    'raquel: enqueues one job per jsonb payload into queue in one statement; otherwise as rq_enqueue_batch with text payloads.';
COMMENT ON FUNCTION rq_enqueue_trigger() IS
    'raquel: a row trigger function that enqueues a job for each changed row (the row as jsonb payload) into the queue named by its one argument: EXECUTE FUNCTION rq_enqueue_trigger(''my_queue'').';

-- Claiming and finishing
COMMENT ON FUNCTION rq_claim(text[], text, integer, interval, interval) IS
    'raquel: claims up to batch ready jobs of the named queues (NULL: any queue) for a lease, obeying pauses and limits, and returns them; with wait, waits that long for a job to become ready.';
COMMENT ON FUNCTION rq_take(text[], text, integer, boolean, interval) IS
    'raquel: takes up to batch ready jobs by locking them for the work of this transaction (no lease is written; complete => true completes them at once); finish them with rq_complete or rq_fail before commit.';
COMMENT ON FUNCTION rq_complete(uuid, integer, jsonb) IS
    'raquel: marks a claimed (or taken) job succeeded, with its result if given; attempt, the value the claim returned, fences out a worker whose lease ran out.';
COMMENT ON FUNCTION rq_complete_batch(uuid[], integer[], jsonb[]) IS
    'raquel: completes several claimed jobs at once, all or nothing (attempts[i] is the fencing token of ids[i], results[i] its result), and returns their rows.';
COMMENT ON FUNCTION rq_fail(uuid, text, text, integer) IS
    'raquel: records a failed attempt of a claimed job with its error: queued again after the backoff, or exhausted when no retry is left.';
COMMENT ON FUNCTION rq_complete_and_claim(uuid, integer, text[], text, integer, interval, interval, jsonb) IS
    'raquel: completes a job (as rq_complete) and claims the next (as rq_claim) in one call: a worker''s loop in one statement.';
COMMENT ON FUNCTION rq_fail_and_claim(uuid, text, text, integer, text[], text, integer, interval, interval) IS
    'raquel: fails a job (as rq_fail) and claims the next (as rq_claim) in one call.';
COMMENT ON FUNCTION rq_complete_batch_and_claim(uuid[], integer[], text[], text, integer, interval, interval, jsonb[]) IS
    'raquel: completes several jobs (as rq_complete_batch) and claims the next batch (as rq_claim) in one call.';

-- Results and steps
COMMENT ON FUNCTION rq_await(uuid, interval) IS
    'raquel: waits until a job has ended (success, exhausted, cancelled, expired) or the timeout passes, woken at the ending commit, and returns its row: status, result, error.';
COMMENT ON FUNCTION rq_step(uuid, text, jsonb, integer) IS
    'raquel: records a named step of a claimed job with its result, kept across attempts (job_steps); a step already recorded is refused (23505).';
COMMENT ON FUNCTION rq_parents(uuid) IS
    'raquel: the jobs a job was enqueued to run after (after), as they are now: a child reads its parents'' status and result.';
COMMENT ON FUNCTION rq_sleep(uuid, text, timestamptz, interval, integer) IS
    'raquel: puts the claimed job to sleep until at plus delay, as a step; true: it sleeps (end the attempt), false: the sleep is over. Uses up no retry.';
COMMENT ON FUNCTION rq_wait_event(uuid, text, text, interval, integer) IS
    'raquel: parks the claimed job until the event is emitted or the timeout passes, as a step; parked: end the attempt; otherwise the payload, or timed_out.';
COMMENT ON FUNCTION rq_emit(text, jsonb, interval) IS
    'raquel: emits an event: the jobs parked for it resume with its payload, and jobs that start waiting within keep get it too. Not for PUBLIC.';

-- A job's life after its claim
COMMENT ON FUNCTION rq_reschedule(uuid, timestamptz, interval, integer) IS
    'raquel: hands a claimed job back to be run again at `at` or after `delay` (default: its min_retry_delay), without counting a failed attempt.';
COMMENT ON FUNCTION rq_reject(uuid, integer) IS
    'raquel: hands a claimed job back to its queue at once, without counting a failed attempt.';
COMMENT ON FUNCTION rq_extend(uuid, interval, integer) IS
    'raquel: extends the lease of a claimed job to now + lease.';
COMMENT ON FUNCTION rq_cancel(uuid) IS
    'raquel: cancels a job that has not ended (queued, claimed, failed or blocked); jobs waiting for it are cancelled too.';
COMMENT ON FUNCTION rq_retry(uuid) IS
    'raquel: queues an ended job (failed, exhausted, expired or cancelled) again, due now, with its retries counted afresh.';
COMMENT ON FUNCTION rq_set_history(text, boolean) IS
    'raquel: whether a queue keeps its succeeded jobs (keep => true, the default) or deletes them when they succeed (keep => false).';

-- Notifications, looking at the queue
COMMENT ON FUNCTION rq_channel(text) IS
    'raquel: the LISTEN channel of a queue, notified at commit when raquel.notify is on.';
COMMENT ON FUNCTION rq_stats() IS
    'raquel: a row per queue: jobs in each status, how many are ready, the oldest ready job''s wait, the queue''s flow settings, and how many jobs are parked for an event. Reads the whole table.';
COMMENT ON FUNCTION rq_queues() IS
    'raquel: the names of the queues that have jobs.';
COMMENT ON FUNCTION rq_count(text, text[]) IS
    'raquel: how many jobs a queue (NULL: every queue) has in the given statuses (NULL: any status).';
COMMENT ON VIEW rq_jobs IS
    'raquel: the jobs table for people: instants as timestamptz and durations as intervals.';

-- Small helpers
COMMENT ON FUNCTION rq_backoff(integer, integer, integer, integer) IS
    'raquel: the delay in ms after attempt fails: backoff_base * 2^(attempt-1), clamped to [min_retry_delay, max_retry_delay].';
COMMENT ON FUNCTION rq_now_ms() IS
    'raquel: the wall clock (clock_timestamp()) in ms since the Unix epoch, the jobs table''s unit of time.';
COMMENT ON FUNCTION rq_uuid7() IS
    'raquel: a new time-ordered UUIDv7, the default job id.';
COMMENT ON FUNCTION rq_ms_to_timestamptz(bigint) IS
    'raquel: an instant of the jobs table (ms since the Unix epoch) as a timestamptz.';
COMMENT ON FUNCTION rq_ms_to_interval(bigint) IS
    'raquel: a duration of the jobs table (ms) as an interval.';
COMMENT ON FUNCTION rq_worker_wake() IS
    'raquel: asks the background worker to run the duties in this database now (at most a round a second); false when no worker runs.';

-- Flow control
COMMENT ON FUNCTION rq_pause(text) IS
    'raquel: pauses a queue: claims take none of its jobs until rq_resume; enqueues go on.';
COMMENT ON FUNCTION rq_resume(text) IS
    'raquel: resumes a paused queue and wakes its waiting claims.';
COMMENT ON FUNCTION rq_set_limits(text, integer, integer, interval, integer) IS
    'raquel: sets a queue''s limits: at most max_claimed jobs claimed at once, rate claims per `per`, group_max_claimed per group_key (NULL removes a limit).';

-- Recurring jobs
COMMENT ON FUNCTION rq_schedule(text, text, text, text, text, text, interval, integer, interval, interval, interval, integer) IS
    'raquel: creates or replaces the schedule `name`: a job with a text payload enqueued into queue at each slot of the cron pattern, in timezone; catch_up says what becomes of missed slots.';
COMMENT ON FUNCTION rq_schedule(text, text, text, jsonb, text, text, interval, integer, interval, interval, interval, integer) IS
    'raquel: creates or replaces a schedule whose jobs have a jsonb payload; otherwise as rq_schedule with a text payload.';
COMMENT ON FUNCTION rq_unschedule(text) IS
    'raquel: removes a schedule; true when there was one.';
COMMENT ON FUNCTION rq_pause_schedule(text) IS
    'raquel: pauses a schedule: no jobs are enqueued for it until rq_resume_schedule.';
COMMENT ON FUNCTION rq_resume_schedule(text) IS
    'raquel: resumes a paused schedule from its next slot after now.';
COMMENT ON VIEW rq_schedules IS
    'raquel: the schedules for people: next and last run as timestamptz, and why the last slot could not be enqueued.';

-- Duties (the background worker runs them; callable by the owner)
COMMENT ON FUNCTION rq_expire(integer) IS
    'raquel duty: expires up to batch jobs that waited past their max_age; returns how many.';
COMMENT ON FUNCTION rq_rescue(integer) IS
    'raquel duty: fails up to batch claimed jobs whose lease ran out (retried or exhausted as rq_fail); returns how many.';
COMMENT ON FUNCTION rq_prune(integer, interval) IS
    'raquel duty: deletes up to batch jobs that ended longer ago than retention (NULL: raquel.retention), and old metrics; returns how many.';
COMMENT ON FUNCTION rq_fire_schedules(integer) IS
    'raquel duty: enqueues the jobs of the schedules whose slots are due (up to batch schedules); returns how many fired.';
COMMENT ON FUNCTION rq_settle_workflows(integer) IS
    'raquel duty: releases or cancels up to batch jobs still waiting for parents that have ended; returns how many.';

-- Workflows, metrics, Citus, privileges
COMMENT ON FUNCTION rq_metrics(text, interval) IS
    'raquel: per queue (NULL: every queue) and minute since `since`: jobs enqueued, claimed, succeeded, failed, rescued and expired, wait and run percentiles, backlog.';
COMMENT ON FUNCTION rq_metrics_lost() IS
    'raquel: how many events the metrics could not count since the server started (shared memory full).';
COMMENT ON FUNCTION rq_prometheus(integer) IS
    'raquel: the metrics in the Prometheus text format: series for the max_queues busiest queues and totals for all.';
COMMENT ON FUNCTION rq_distribute(integer) IS
    'raquel: distributes the jobs table over shard_count shards with Citus (once; needs citus.enable_unsafe_triggers).';
COMMENT ON FUNCTION rq_distributed() IS
    'raquel: whether the jobs table is distributed with Citus (rq_distribute).';
COMMENT ON FUNCTION rq_grant_producer(regrole) IS
    'raquel: lets a role enqueue jobs (rq_enqueue, rq_enqueue_batch, rq_enqueue_trigger) and nothing else.';
COMMENT ON FUNCTION rq_grant_worker(regrole) IS
    'raquel: lets a role claim, finish, hand back, extend, cancel and retry jobs, and read jobs, rq_jobs and the metrics.';

-- Tables (jobs, job_dependencies, queue_limits, queues_without_history and
-- schedules have theirs beside their CREATE TABLE)
COMMENT ON TABLE key_holds IS
    'raquel: keys held for a period after their job ended (rq_enqueue''s key_period): enqueueing such a key again returns that job.';
COMMENT ON TABLE metrics IS
    'raquel metrics: per queue and minute, the events counted, wait and run histograms and the backlog (rq_metrics, rq_prometheus).';
