-- Recurring jobs, enqueued by the background worker inside the server: no
-- process outside PostgreSQL keeps a schedule firing. A schedule's slots
-- come from its cron pattern in its time zone (src/schedules.rs); the
-- worker's duty rq_fire_schedules enqueues each due slot once.
--
-- Once: the duty locks the schedule's row, enqueues the slot's job and
-- moves next_run_at past it in one transaction, so a slow round, a crash
-- mid-round or a restart either did both or neither; and the slot's instant
-- is part of the job's key ('rq_schedule:<name>@<slot ms>'), so even a
-- schedule replaced while that job is unfinished gets it back rather than
-- a second one.

CREATE TABLE schedules (
    name            text    NOT NULL,
    cron            text    NOT NULL,
    timezone        text    NOT NULL DEFAULT 'UTC',
    queue           text    NOT NULL,
    payload         text,
    -- Slots missed while no round ran (the server down): 'none' skips
    -- them, 'last' runs once for them, 'all' runs each, the last 1000.
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
-- argument is checked first (22023), so an error changes nothing.
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
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    o        record;
    next_ms  bigint;
    schedule @extschema@.schedules;
BEGIN
    PERFORM @extschema@.rq_check_schedule(rq_schedule.name, rq_schedule.catch_up);
    SELECT * INTO o FROM @extschema@.rq_job_options(rq_schedule.queue, NULL, NULL, rq_schedule.max_age,
        rq_schedule.max_retry_count, rq_schedule.min_retry_delay, rq_schedule.max_retry_delay, rq_schedule.backoff_base);
    next_ms := @extschema@.rq_cron_next(rq_schedule.cron, rq_schedule.timezone, o.now_ms);
    IF next_ms IS NULL THEN
        PERFORM @extschema@.rq_refuse('cron_never', ARRAY[rq_schedule.cron, rq_schedule.timezone]);
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
        priority = excluded.priority, next_run_at = excluded.next_run_at
    RETURNING s.* INTO schedule;
    IF schedule.enabled THEN
        PERFORM @extschema@.rq_schedule_due(next_ms);
    END IF;
    RETURN schedule;
END
$$;

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
    RETURN @extschema@.rq_schedule($1, $2, $3, $4::text, $5, $6, $7, $8, $9, $10, $11, $12);
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
CREATE FUNCTION rq_pause_schedule(name text) RETURNS schedules
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    schedule @extschema@.schedules;
BEGIN
    UPDATE @extschema@.schedules s SET enabled = false WHERE s.name = rq_pause_schedule.name
    RETURNING s.* INTO schedule;
    IF NOT FOUND THEN
        PERFORM @extschema@.rq_refuse('schedule_unknown', ARRAY[coalesce(rq_pause_schedule.name, 'NULL')]);
    END IF;
    RETURN schedule;
END
$$;

CREATE FUNCTION rq_resume_schedule(name text) RETURNS schedules
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    schedule @extschema@.schedules;
BEGIN
    UPDATE @extschema@.schedules s
    SET enabled = true,
        next_run_at = CASE WHEN s.enabled THEN s.next_run_at
                           ELSE @extschema@.rq_cron_next(s.cron, s.timezone, @extschema@.rq_now_ms()) END
    WHERE s.name = rq_resume_schedule.name
    RETURNING s.* INTO schedule;
    IF NOT FOUND THEN
        PERFORM @extschema@.rq_refuse('schedule_unknown', ARRAY[coalesce(rq_resume_schedule.name, 'NULL')]);
    END IF;
    PERFORM @extschema@.rq_schedule_due(schedule.next_run_at);
    RETURN schedule;
END
$$;

-- Schedules for people: instants as timestamptz.
CREATE VIEW rq_schedules AS
SELECT s.name, s.cron, s.timezone, s.queue, s.enabled, s.catch_up,
       @extschema@.rq_ms_to_timestamptz(s.next_run_at) AS next_run,
       @extschema@.rq_ms_to_timestamptz(s.last_run_at) AS last_run,
       s.last_job_id
FROM @extschema@.schedules s;

-- The background worker's duty: enqueues the due slots of up to `batch`
-- schedules; how many jobs it enqueued. A slot is on time when a round
-- reaches it within a minute; older ones were missed (the server was down,
-- or the schedule was created with a slot in the past) and follow catch_up.
-- A schedule another session holds locked is left to it.
CREATE FUNCTION rq_fire_schedules(batch integer DEFAULT 1000) RETURNS bigint
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
DECLARE
    now_ms   bigint := @extschema@.rq_now_ms();
    grace_ms constant bigint := 60000;
    schedule record;
    due      bigint[];
    slot     bigint;
    job_id   uuid;
    enqueued bigint := 0;
BEGIN
    PERFORM @extschema@.rq_check_batch(batch);
    FOR schedule IN
        SELECT s.* FROM @extschema@.schedules s
        WHERE s.enabled AND s.next_run_at <= now_ms
        ORDER BY s.next_run_at
        LIMIT batch
        FOR UPDATE SKIP LOCKED
    LOOP
        due := @extschema@.rq_cron_slots(schedule.cron, schedule.timezone, schedule.next_run_at, now_ms,
                                         CASE schedule.catch_up WHEN 'all' THEN 1000 ELSE 1 END);
        IF schedule.catch_up = 'none' THEN
            due := ARRAY(SELECT d FROM unnest(due) d WHERE now_ms - d <= grace_ms);
        END IF;
        job_id := NULL;
        FOREACH slot IN ARRAY due LOOP
            SELECT j.id INTO job_id FROM @extschema@.rq_enqueue(schedule.queue, schedule.payload,
                at => @extschema@.rq_ms_to_timestamptz(slot),
                max_age => @extschema@.rq_ms_to_interval(schedule.max_age),
                max_retry_count => schedule.max_retry_count,
                min_retry_delay => @extschema@.rq_ms_to_interval(schedule.min_retry_delay),
                max_retry_delay => @extschema@.rq_ms_to_interval(schedule.max_retry_delay),
                backoff_base => @extschema@.rq_ms_to_interval(schedule.backoff_base),
                priority => schedule.priority,
                key => format('rq_schedule:%s@%s', schedule.name, slot)) j;
            enqueued := enqueued + 1;
        END LOOP;
        UPDATE @extschema@.schedules s
        SET next_run_at = @extschema@.rq_cron_next(s.cron, s.timezone, greatest(now_ms, s.next_run_at)),
            last_run_at = coalesce(due[cardinality(due)], s.last_run_at),
            last_job_id = coalesce(job_id, s.last_job_id)
        WHERE s.name = schedule.name;
    END LOOP;
    RETURN enqueued;
END
$$;
