-- Recurring jobs, enqueued by the background worker inside the server: no
-- process outside PostgreSQL keeps a schedule firing. A schedule's slots
-- come from its cron pattern in its time zone (src/schedules.rs); the
-- worker's duty rq_fire_schedules enqueues each due slot once.
--
-- Once: the duty locks the schedule's row, enqueues the slot's job and
-- moves next_run_at past it in one transaction, so a slow round, a crash
-- mid-round or a restart either did both or neither, and a second round
-- passes over the locked row or finds next_run_at moved. A schedule's jobs
-- are its own: they carry no key, so nothing another role enqueues can
-- stand in for them or hold up the duty.

CREATE TABLE schedules (
    name            text    NOT NULL,
    cron            text    NOT NULL,
    timezone        text    NOT NULL DEFAULT 'UTC',
    queue           text    NOT NULL,
    payload         text,
    -- Slots a round reached over a minute late (the server down, the
    -- worker off): 'none' skips them, 'last' runs one job for them (at the
    -- latest), 'all' runs each, the latest 1000. Slots on time always run.
    catch_up        text    NOT NULL DEFAULT 'last',
    enabled         boolean NOT NULL DEFAULT true,
    -- the options of rq_enqueue, as the jobs table keeps them (ms)
    max_age         bigint,
    max_retry_count integer,
    min_retry_delay integer,
    max_retry_delay integer,
    backoff_base    integer,
    priority        integer NOT NULL DEFAULT 0,
    -- the next slot not yet enqueued, and the last one enqueued (ms)
    next_run_at     bigint,
    last_run_at     bigint,
    last_job_id     uuid,
    -- why the last slot could not be enqueued (NULL once one is): that slot
    -- was skipped, and the schedule goes on with the next
    last_error      text,

    CONSTRAINT schedules_pkey PRIMARY KEY (name),
    CONSTRAINT schedules_catch_up_check CHECK (catch_up IN ('none', 'last', 'all'))
);

COMMENT ON TABLE schedules IS
    'raquel recurring jobs: one row a schedule (rq_schedule). Times in ms since the Unix epoch (UTC).';

SELECT pg_catalog.pg_extension_config_dump('schedules', '');

-- The duty's walk: enabled schedules by their next slot.
CREATE INDEX schedules_due_idx ON schedules (next_run_at) WHERE enabled;

-- Creates or replaces a schedule. Its next slot is the first after now; a
-- replaced schedule keeps its history (last_run_at, last_job_id). Every
-- argument is checked first (22023; 54000 for a payload larger than
-- raquel.max_payload_size), so an error changes nothing and every job the
-- schedule will enqueue can be enqueued.
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

-- The name users call: raquel's own code calls raquel_internal.rq_schedule
-- (sql/privileges.sql says why).
CREATE FUNCTION rq_schedule(
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

-- The same with a JSON payload, stored as its text.
CREATE FUNCTION rq_schedule(
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

-- Deletes a schedule; whether there was one. Its jobs stay.
CREATE FUNCTION rq_unschedule(name text) RETURNS boolean
LANGUAGE sql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
    WITH gone AS (DELETE FROM @extschema@.schedules s WHERE s.name = $1 RETURNING 1)
    SELECT count(*) > 0 FROM gone
$$;

-- Stops a schedule firing; resuming it starts again at the first slot after
-- now (the slots in between are not run, whatever its catch_up). An unknown
-- name is error P0002.
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
CREATE FUNCTION rq_pause_schedule(name text) RETURNS schedules
LANGUAGE sql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT * FROM raquel_internal.rq_pause_schedule($1) $$;

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
CREATE FUNCTION rq_resume_schedule(name text) RETURNS schedules
LANGUAGE sql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT * FROM raquel_internal.rq_resume_schedule($1) $$;

-- Schedules for people: instants as timestamptz.
CREATE VIEW rq_schedules AS
SELECT s.name, s.cron, s.timezone, s.queue, s.enabled, s.catch_up,
       raquel_internal.rq_ms_to_timestamptz(s.next_run_at) AS next_run,
       raquel_internal.rq_ms_to_timestamptz(s.last_run_at) AS last_run,
       s.last_job_id, s.last_error
FROM @extschema@.schedules s;

-- The background worker's duty: enqueues the due slots of up to `batch`
-- schedules; how many jobs it enqueued. A slot a round reaches within a
-- minute is on time and runs; older ones were missed (the server was down,
-- the worker off, or the schedule created with a slot in the past) and
-- follow catch_up (src/schedules.rs). A schedule another session holds
-- locked is left to it.
--
-- Each schedule fires in a subtransaction of its own: one that fails (its
-- payload grown past a lowered raquel.max_payload_size, say) skips its due
-- slots, records why in last_error, says so in a WARNING with the failure's
-- SQLSTATE, and goes on at its next slot; the other schedules fire as usual.
-- One whose next slot cannot even be computed (a pattern changed by hand)
-- is disabled.
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

-- The name users call: raquel's own code calls raquel_internal.rq_fire_schedules
-- (sql/privileges.sql says why).
CREATE FUNCTION rq_fire_schedules(batch integer DEFAULT 1000) RETURNS bigint
LANGUAGE sql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT raquel_internal.rq_fire_schedules($1) $$;
