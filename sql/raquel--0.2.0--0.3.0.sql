-- raquel 0.2.0 → 0.3.0, run by ALTER EXTENSION raquel UPDATE.
--
-- What changes, and why (issue 11, flow control inside the claim):
-- * A new table, queue_limits, holds each queue's flow settings (paused,
--   max_claimed, rate per interval, group_max_claimed) and the state its
--   limits keep; rq_pause, rq_resume and rq_set_limits set them, and
--   rq_claim obeys them through rq_claim_flow (sql/flow.sql).
-- * Jobs get a group_key (rq_enqueue(..., group_key), rq_enqueue_batch(...,
--   group_keys), or a plain INSERT) and a turn, set by a new BEFORE INSERT
--   trigger; claims on a grouped queue take turns among its groups. The
--   enqueue functions get the new argument, so they are made anew, and the
--   roles that could run them may run the new ones.
-- * Grouped jobs have two indexes of their own; the two ready indexes of the
--   plain claim leave them out, so they are rebuilt with that predicate.
-- * rq_stats shows each queue's flow settings and its blocked jobs, so its
--   result type changes.
-- * Workflows (issue 12, sql/workflows.sql): rq_enqueue(..., after) and
--   rq_enqueue_batch(..., after) make jobs that stay in the new status
--   `blocked` until their parents succeed; the table job_dependencies holds
--   the pending edges; jobs get blocked_by and has_children; the verbs that
--   end a job (and the expire duty, and the new duty rq_settle_workflows)
--   release or cancel the jobs waiting for it; the key index counts a
--   blocked job as unfinished, so it is rebuilt.
-- * Keys held for a period (issue 12): rq_enqueue(..., key_period); jobs get
--   key_period, the table key_holds keeps a key after its job ended, and the
--   verbs that end a job call rq_job_ended; rq_prune deletes old holds.
-- * A worker's loop in one round trip (issue 13): rq_complete_and_claim
--   and rq_fail_and_claim.
-- * Recurring jobs (issue 12, sql/schedules.sql): the table schedules,
--   rq_schedule, rq_unschedule, rq_pause_schedule, rq_resume_schedule, the
--   view rq_schedules, and the duty rq_fire_schedules; rq_next_duty_ms
--   tells the worker when the next schedule is due.
-- * The verbs that end a claim wake the waiting claims of a queue with a
--   concurrency limit (rq_claim_ended).
-- Nothing here rewrites the table (the two new columns are NULL) or touches
-- a job; the rebuilt and new indexes hold only ready or claimed jobs.

-- The library's new functions, as `cargo pgrx schema` writes them.
CREATE FUNCTION "rq_check_limits"(
	"queue" TEXT, /* Option < & str > */
	"max_claimed" INT, /* Option < i32 > */
	"rate" INT, /* Option < i32 > */
	"per" interval, /* Option < Interval > */
	"group_max_claimed" INT /* Option < i32 > */
) RETURNS bigint /* Option < i64 > */
IMMUTABLE PARALLEL SAFE
SET search_path TO pg_catalog, pg_temp
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'rq_check_limits_wrapper';

CREATE FUNCTION "rq_claim_ended"(
	"queue" TEXT /* Option < & str > */
) RETURNS void
VOLATILE PARALLEL UNSAFE
SET search_path TO pg_catalog, pg_temp
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'rq_claim_ended_wrapper';

CREATE FUNCTION "rq_wake_claims"(
	"queue" TEXT /* Option < & str > */
) RETURNS void
VOLATILE PARALLEL UNSAFE
SET search_path TO pg_catalog, pg_temp
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'rq_wake_claims_wrapper';

CREATE FUNCTION "rq_cron_next"(
	"cron" TEXT, /* Option < & str > */
	"timezone" TEXT, /* Option < & str > */
	"after_ms" bigint /* Option < i64 > */
) RETURNS bigint /* Option < i64 > */
STABLE PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'rq_cron_next_wrapper';

CREATE FUNCTION "rq_cron_slots"(
	"cron" TEXT, /* Option < & str > */
	"timezone" TEXT, /* Option < & str > */
	"from_ms" bigint, /* Option < i64 > */
	"until_ms" bigint, /* Option < i64 > */
	"keep" INT /* Option < i32 > */
) RETURNS bigint[] /* Vec < i64 > */
STABLE PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'rq_cron_slots_wrapper';

CREATE FUNCTION "rq_schedule_due"(
	"due_ms" bigint /* Option < i64 > */
) RETURNS void
VOLATILE PARALLEL UNSAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'rq_schedule_due_wrapper';

CREATE FUNCTION "rq_check_schedule"(
	"name" TEXT, /* Option < & str > */
	"catch_up" TEXT /* Option < & str > */
) RETURNS void
IMMUTABLE PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'rq_check_schedule_wrapper';

-- The columns of fair groups (sql/schema.sql).
ALTER TABLE jobs ADD COLUMN group_key text, ADD COLUMN turn bigint,
    ADD COLUMN blocked_by integer NOT NULL DEFAULT 0, ADD COLUMN has_children boolean NOT NULL DEFAULT false,
    ADD COLUMN key_period bigint;
-- Keys held after their job ended: a job enqueued with a key and a
-- key_period leaves a row here when it ends, and until `until` (ms) an
-- enqueue of that queue and key gets that job back (src/enqueue.rs). The
-- prune duty deletes the rows whose time is up.
CREATE TABLE key_holds (
    queue  text   NOT NULL,
    key    text   NOT NULL,
    job_id uuid   NOT NULL,
    until  bigint NOT NULL,
    CONSTRAINT key_holds_pkey PRIMARY KEY (queue, key)
);
SELECT pg_catalog.pg_extension_config_dump('key_holds', '');

-- the new status of workflows
ALTER TABLE jobs DROP CONSTRAINT jobs_status_check;
ALTER TABLE jobs ADD CONSTRAINT jobs_status_check CHECK (status IN
    ('queued', 'claimed', 'success', 'failed', 'cancelled', 'expired', 'exhausted', 'blocked'));

-- The plain claim's ready indexes leave grouped jobs out; grouped jobs have
-- their own (sql/schema.sql).
DROP INDEX jobs_ready_by_queue_idx;
DROP INDEX jobs_ready_idx;
-- A blocked job holds its key (sql/workflows.sql).
DROP INDEX jobs_key_idx;
CREATE INDEX jobs_ready_by_queue_idx
    ON jobs (queue, priority DESC, scheduled_at, id)
    WHERE status IN ('queued', 'failed') AND group_key IS NULL;
CREATE INDEX jobs_ready_idx
    ON jobs (priority DESC, scheduled_at, id)
    WHERE status IN ('queued', 'failed') AND priority >= -2147483648 AND group_key IS NULL;
CREATE UNIQUE INDEX jobs_key_idx ON jobs (queue, key)
    WHERE key IS NOT NULL AND status IN ('queued', 'claimed', 'failed', 'blocked');
CREATE INDEX jobs_ready_fair_idx
    ON jobs (queue, priority DESC, turn, scheduled_at, id)
    WHERE group_key IS NOT NULL AND status IN ('queued', 'failed');
CREATE INDEX jobs_group_idx
    ON jobs (queue, group_key, status, turn)
    WHERE group_key IS NOT NULL AND status IN ('queued', 'failed', 'claimed');

-- Recurring jobs: sql/schedules.sql as it stands.
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

-- Workflows: sql/workflows.sql as it stands.
CREATE TABLE job_dependencies (
    parent_id uuid NOT NULL,
    child_id  uuid NOT NULL,
    CONSTRAINT job_dependencies_pkey PRIMARY KEY (parent_id, child_id)
);

COMMENT ON TABLE job_dependencies IS
    'raquel workflows: the jobs (child_id) still waiting for a job (parent_id) to end.';

SELECT pg_catalog.pg_extension_config_dump('job_dependencies', '');

-- Makes the jobs `ids`, just inserted (queued) by this transaction, wait
-- for the jobs `after`: blocked while any of those is unfinished, queued as
-- they were if all succeeded already, cancelled if one ended otherwise.
-- For the enqueue functions (which run as the extension's owner).
--
-- The parents are locked FOR SHARE: a parent's end that is under way is
-- waited for and then seen; one that comes later waits for this
-- transaction, and then sees its edges (rq_parent_ended runs after the
-- UPDATE that ended the parent, with a new snapshot).
CREATE FUNCTION rq_hold_for_parents(ids uuid[], after uuid[]) RETURNS void
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
    PERFORM @extschema@.rq_check_arrays(ARRAY['after'], ARRAY[array_ndims(after)], NULL);
    SELECT coalesce(a.id::text, 'NULL') INTO missing FROM unnest(after) a (id)
    WHERE a.id IS NULL OR NOT EXISTS (SELECT FROM @extschema@.jobs p WHERE p.id = a.id)
    LIMIT 1;
    IF FOUND THEN
        PERFORM @extschema@.rq_refuse('after_unknown', ARRAY[missing]);
    END IF;
    -- the parents as they are once no end of theirs is under way
    PERFORM FROM @extschema@.jobs p WHERE p.id = ANY (after) ORDER BY p.id FOR SHARE;
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
    UPDATE @extschema@.jobs p SET has_children = true WHERE p.id = ANY (pending) AND NOT p.has_children;
    INSERT INTO @extschema@.job_dependencies (parent_id, child_id)
    SELECT p.id, c.id FROM unnest(pending) p (id) CROSS JOIN unnest(ids) c (id)
    ON CONFLICT DO NOTHING;
    UPDATE @extschema@.jobs j SET status = 'blocked', blocked_by = cardinality(pending)
    WHERE j.id = ANY (ids);
END
$$;

-- A job with children ended: on success, each child waits for one parent
-- fewer and is queued (waking a waiting claim at commit) when none is
-- left; on any other end, every blocked descendant is cancelled. Called by
-- the verbs that end a job that has children (has_children), and by the
-- background worker for parents that ended some other way (rq_settle_workflows).
CREATE FUNCTION rq_parent_ended(parent uuid) RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    now_ms   bigint := @extschema@.rq_now_ms();
    ended    record;
    released record;
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
            RETURNING c.queue, c.scheduled_at, c.max_age, c.status
        LOOP
            IF released.status = 'queued' THEN
                PERFORM @extschema@.rq_job_ready_again(released.queue, released.scheduled_at, released.max_age);
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
    )
    DELETE FROM @extschema@.job_dependencies d
    WHERE d.parent_id = parent OR d.parent_id IN (SELECT c.id FROM cancelled c);
END
$$;

-- The background worker's duty for parents that ended without raquel's
-- verbs (the Python library's own complete, an UPDATE by hand): what
-- rq_parent_ended would have done, for up to `batch` of them. The table of
-- pending edges is small (edges go when their parent ends), so a round that
-- finds nothing costs a scan of it.
CREATE FUNCTION rq_settle_workflows(batch integer DEFAULT 1000) RETURNS bigint
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
DECLARE
    parent  uuid;
    settled bigint := 0;
BEGIN
    PERFORM @extschema@.rq_check_batch(batch);
    FOR parent IN
        SELECT DISTINCT d.parent_id FROM @extschema@.job_dependencies d
        JOIN @extschema@.jobs p ON p.id = d.parent_id
        WHERE p.status IN ('success', 'exhausted', 'expired', 'cancelled')
        LIMIT batch
    LOOP
        PERFORM @extschema@.rq_parent_ended(parent);
        settled := settled + 1;
    END LOOP;
    RETURN settled;
END
$$;

-- Flow control: sql/flow.sql as it stands.
CREATE TABLE queue_limits (
    queue             text    NOT NULL,
    -- No claim takes the queue's jobs while it is paused.
    paused            boolean NOT NULL DEFAULT false,
    -- At most this many of the queue's jobs claimed at once.
    max_claimed       integer,
    -- At most `rate` claims per `per`, as a token bucket: it holds up to
    -- `rate` tokens, starts full and gains rate/per continuously; each job
    -- claimed takes one.
    rate              integer,
    per               interval,
    -- At most this many claimed jobs of one group at once.
    group_max_claimed integer,
    -- The queue has had jobs with a group_key: claims take turns among its
    -- groups. Set by the first such job (rq_job_turn).
    grouped           boolean NOT NULL DEFAULT false,
    -- The state the limits keep, written by claims under the row's lock:
    -- the jobs claimed under max_claimed (those still claimed count), and
    -- the tokens left at tokens_at (ms).
    claimed           uuid[]  NOT NULL DEFAULT '{}',
    tokens            double precision,
    tokens_at         bigint,

    CONSTRAINT queue_limits_pkey PRIMARY KEY (queue),
    CONSTRAINT queue_limits_max_claimed_check CHECK (max_claimed >= 1),
    CONSTRAINT queue_limits_rate_check CHECK (rate >= 1 AND per > interval '0'),
    CONSTRAINT queue_limits_group_max_claimed_check CHECK (group_max_claimed >= 1)
);

COMMENT ON TABLE queue_limits IS
    'raquel flow control: one row per queue that is paused, limited or grouped (rq_pause, rq_set_limits).';

-- pg_dump keeps the settings (the state columns come along; they only ever
-- hold back claims for jobs that are no longer claimed, which count for nothing).
SELECT pg_catalog.pg_extension_config_dump('queue_limits', '');

-- Every backend's copy of the settings is dropped when a change to them
-- commits (src/flow.rs). The claims' own writes to the state columns do not
-- fire it. It runs no SQL, but its Rust sits beside code that does
-- (src/flow.rs), and every such function pins its search_path.
CREATE FUNCTION rq_queue_limits_changed() RETURNS trigger
LANGUAGE c
SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'rq_queue_limits_changed';
CREATE TRIGGER queue_limits_changed
    AFTER INSERT OR DELETE OR TRUNCATE
       OR UPDATE OF queue, paused, max_claimed, rate, per, group_max_claimed, grouped
    ON queue_limits
    FOR EACH STATEMENT EXECUTE FUNCTION rq_queue_limits_changed();

-- A grouped job's turn, set as it is inserted (however it is enqueued):
-- one past its group's last ready job's turn (the last queued or failed
-- one: two probes of jobs_group_idx), and never before the turn the
-- queue's claims have reached at its priority (its first due grouped job's),
-- so that a group that was idle takes its turn next rather than catching up
-- on turns it missed. Claims go by priority, then turn: the groups take
-- turns, a group with a million jobs and a group with ten side by side.
-- It runs as the extension's owner: a role that may only INSERT jobs may
-- not read the table the turn comes from.
CREATE FUNCTION rq_job_turn() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    now_ms bigint := @extschema@.rq_now_ms();
BEGIN
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
CREATE TRIGGER jobs_grouped
    BEFORE INSERT ON jobs
    FOR EACH ROW WHEN (NEW.group_key IS NOT NULL AND NEW.status IN ('queued', 'failed'))
    EXECUTE FUNCTION rq_job_turn();

-- Stops claims of a queue's jobs; enqueues go on, and waiting claims keep
-- waiting. Idempotent; a queue may be paused before it has jobs.
CREATE FUNCTION rq_pause(queue text) RETURNS queue_limits
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    settings @extschema@.queue_limits;
BEGIN
    PERFORM @extschema@.rq_check_limits(queue, NULL, NULL, NULL, NULL);
    INSERT INTO @extschema@.queue_limits AS l (queue, paused) VALUES (rq_pause.queue, true)
    ON CONFLICT ON CONSTRAINT queue_limits_pkey DO UPDATE SET paused = true
    RETURNING l.* INTO settings;
    RETURN settings;
END
$$;

-- Lets claims take a paused queue's jobs again, and wakes its waiting
-- claims at commit. Idempotent.
CREATE FUNCTION rq_resume(queue text) RETURNS queue_limits
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    settings @extschema@.queue_limits;
BEGIN
    PERFORM @extschema@.rq_check_limits(queue, NULL, NULL, NULL, NULL);
    UPDATE @extschema@.queue_limits l SET paused = false
    WHERE l.queue = rq_resume.queue AND l.paused
    RETURNING l.* INTO settings;
    IF FOUND THEN
        PERFORM @extschema@.rq_wake_claims(queue);
        settings := @extschema@.rq_tidy_queue_limits(queue, settings);
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

-- Sets a queue's limits; NULL removes one. Checked first (22023 naming the
-- bad argument), so an error changes nothing. A limit lowered below what is
-- claimed now holds back new claims until enough jobs end; a limit raised
-- or removed wakes the queue's waiting claims at commit.
CREATE FUNCTION rq_set_limits(
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
    PERFORM @extschema@.rq_check_limits(queue, max_claimed, rate, per, group_max_claimed);
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
    PERFORM @extschema@.rq_wake_claims(queue);
    RETURN @extschema@.rq_tidy_queue_limits(queue, settings);
END
$$;

-- A row that no longer sets anything is deleted, so that the queue's claims
-- go back to the plain claim; returns the row as it was.
CREATE FUNCTION rq_tidy_queue_limits(queue text, settings queue_limits) RETURNS queue_limits
LANGUAGE sql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
    DELETE FROM @extschema@.queue_limits l
    WHERE l.queue = $1 AND NOT l.paused AND NOT l.grouped
      AND l.max_claimed IS NULL AND l.rate IS NULL AND l.group_max_claimed IS NULL;
    SELECT $2;
$$;

-- The plain claim (src/claim.rs), which knows no flow settings: what
-- rq_claim_flow calls for what the settings allow. Not for workers, whose
-- claims must go through rq_claim to obey the settings.
CREATE FUNCTION rq_claim_ready(queues text[], worker text, batch integer, lease_ms bigint)
RETURNS SETOF jobs
LANGUAGE c VOLATILE ROWS 1
SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'rq_claim_ready_c';

-- rq_claim's claim for queues that have flow settings (src/claim.rs), with
-- rq_claim's arguments checked. Queues NULL means any queue.
--
-- Each queue with settings is claimed from on its own: a paused one not at
-- all; a limited one under its row's lock (FOR UPDATE, held until the
-- claiming transaction ends; several are locked at once, in name order),
-- which makes its claims one at a time and lets each read what the ones
-- before it committed: how many of the jobs claimed under max_claimed are
-- still claimed, and the tokens left. The queues
-- without settings are claimed from together, by the plain claim. The
-- order in which the queues with settings and the rest take their turn to
-- fill the batch starts at a random one, so that none of them always goes
-- first. For any queue, the queues without settings are the ones with
-- ready jobs (one probe of the ready index for each).
CREATE FUNCTION rq_claim_flow(queues text[], worker text, batch integer, lease_ms bigint)
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
        PERFORM FROM @extschema@.queue_limits l
        WHERE l.queue = ANY (limited) AND (l.max_claimed IS NOT NULL OR l.rate IS NOT NULL)
        ORDER BY l.queue
        FOR UPDATE;
    END IF;
    first := floor(random() * (cardinality(limited) + 1))::integer;
    FOR turn IN 0 .. cardinality(limited) LOOP
        EXIT WHEN wanted <= 0;
        member := (first + turn) % (cardinality(limited) + 1) + 1;
        IF member > cardinality(limited) THEN
            CONTINUE WHEN cardinality(others) = 0;
            FOR job IN SELECT * FROM @extschema@.rq_claim_ready(others, worker, wanted, lease_ms) LOOP
                wanted := wanted - 1;
                RETURN NEXT job;
            END LOOP;
            CONTINUE;
        END IF;
        SELECT l.* INTO settings FROM @extschema@.queue_limits l WHERE l.queue = limited[member];
        CONTINUE WHEN NOT FOUND OR settings.paused;
        allow := wanted;
        IF settings.max_claimed IS NOT NULL OR settings.rate IS NOT NULL THEN
            PERFORM FROM @extschema@.queue_limits l WHERE l.queue = limited[member] FOR UPDATE;
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
            SELECT * FROM @extschema@.rq_claim_ready(ARRAY[limited[member]], worker, allow, lease_ms)
        LOOP
            got := got || job.id;
            RETURN NEXT job;
        END LOOP;
        IF settings.grouped AND cardinality(got) < allow THEN
            FOR job IN
                SELECT * FROM @extschema@.rq_claim_fair(limited[member], worker, allow - cardinality(got),
                                                        lease_ms, settings.group_max_claimed)
            LOOP
                got := got || job.id;
                RETURN NEXT job;
            END LOOP;
        END IF;
        wanted := wanted - cardinality(got);
        IF cardinality(got) > 0 AND (settings.max_claimed IS NOT NULL OR settings.rate IS NOT NULL) THEN
            UPDATE @extschema@.queue_limits l
            SET claimed = CASE WHEN l.max_claimed IS NULL THEN '{}' ELSE live || got END,
                tokens = CASE WHEN l.rate IS NULL THEN NULL ELSE bucket - cardinality(got) END,
                tokens_at = CASE WHEN l.rate IS NULL THEN NULL ELSE now_ms END
            WHERE l.queue = limited[member];
        END IF;
    END LOOP;
END
$$;

-- A grouped queue's claim of its grouped jobs (its jobs without a group go
-- first, by the plain claim: rq_claim_flow). Jobs come in the fair order:
-- priority, then turn, then scheduled time and id. With group_max_claimed,
-- each candidate's group is locked for the rest of the transaction
-- (pg_try_advisory_xact_lock on the queue's and the group's hashes; a group
-- another claim holds is passed over) and its claimed jobs counted by a new
-- statement, which sees every claim of the group committed before; the
-- walk takes one job per group, and walks again while it finds some. Its
-- cost grows with the jobs of the groups it passes over (those at their
-- limit), not with the number of groups.
CREATE FUNCTION rq_claim_fair(queue text, worker text, batch integer, lease_ms bigint, group_max_claimed integer)
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

-- The enqueue functions with their new argument (sql/enqueue.sql). The old
-- ones go; a role that could run one of them may run its successor.
-- Who may run them, kept for the rest of this transaction (as "name grantee" pairs).
SELECT pg_catalog.set_config('raquel.enqueue_grants', coalesce(string_agg(p.proname || ' ' || a.grantee::oid, ','), ''), true)
FROM pg_catalog.pg_proc p
CROSS JOIN LATERAL pg_catalog.aclexplode(p.proacl) a
WHERE p.pronamespace = '@extschema@'::regnamespace
  AND p.proname IN ('rq_enqueue', 'rq_enqueue_batch')
  AND a.privilege_type = 'EXECUTE' AND a.grantee <> p.proowner;
DROP FUNCTION rq_enqueue(text, text, timestamptz, interval, interval, integer, interval, interval, interval, integer, text);
DROP FUNCTION rq_enqueue(text, jsonb, timestamptz, interval, interval, integer, interval, interval, interval, integer, text);
DROP FUNCTION rq_enqueue_batch(text, text[], timestamptz, interval, interval, integer, interval, interval, interval, integer, text[]);
DROP FUNCTION rq_enqueue_batch(text, jsonb[], timestamptz, interval, interval, integer, interval, interval, interval, integer, text[]);
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
    PERFORM @extschema@.rq_check_arrays(ARRAY['payloads', 'keys', 'group_keys'],
        ARRAY[array_ndims(payloads), array_ndims(keys), array_ndims(group_keys)], keys || group_keys);
    -- group keys, when given, pair with the payloads by position
    IF group_keys IS NOT NULL AND cardinality(group_keys) <> cardinality(payloads) THEN
        PERFORM @extschema@.rq_refuse('group_keys_count', ARRAY[cardinality(group_keys), cardinality(payloads)]::text[]);
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
        PERFORM @extschema@.rq_hold_for_parents(new_ids, after);
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
        PERFORM @extschema@.rq_refuse('keys_count', ARRAY[cardinality(keys), cardinality(payloads)]::text[]);
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
    PERFORM @extschema@.rq_hold_for_parents(new_ids, after);

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
      AND j.status IN ('queued', 'claimed', 'failed', 'blocked') AND NOT j.id = ANY (new_ids);

    SELECT k.key INTO missing FROM unnest(keys) AS k (key)
    WHERE k.key IS NOT NULL AND NOT EXISTS (
        SELECT 1 FROM @extschema@.jobs j
        WHERE j.queue = rq_enqueue_batch.queue AND j.key = k.key
          AND j.status IN ('queued', 'claimed', 'failed', 'blocked'))
    LIMIT 1;
    IF FOUND THEN
        PERFORM @extschema@.rq_refuse('key_finished', ARRAY[missing, rq_enqueue_batch.queue]);
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
BEGIN
    RETURN QUERY SELECT * FROM @extschema@.rq_enqueue_batch($1, $2::text[], $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13);
END
$$;

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


-- rq_stats with each queue's flow settings (sql/observe.sql).
DROP FUNCTION rq_stats();
CREATE FUNCTION rq_stats()
RETURNS TABLE (queue text, total bigint, queued bigint, claimed bigint, success bigint,
               failed bigint, expired bigint, exhausted bigint, cancelled bigint, blocked bigint,
               ready bigint, oldest_ready_age interval,
               paused boolean, max_claimed integer, rate integer, per interval, group_max_claimed integer)
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
           coalesce(l.paused, false), l.max_claimed, l.rate, l.per, l.group_max_claimed
    FROM counts c
    FULL JOIN @extschema@.queue_limits l ON l.queue = c.queue
    ORDER BY 1
$$;

-- The verbs that end a claim wake a limited queue's waiting claims
-- (sql/finish.sql, sql/lifecycle.sql); they, and the expire duty, see to
-- the jobs waiting for the job they end (sql/workflows.sql); rq_cancel
-- cancels a blocked job too.
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
    ELSE
        -- a slot freed under a concurrency limit (src/flow.rs)
        PERFORM @extschema@.rq_claim_ended(job.queue);
        IF job.has_children OR job.key_period IS NOT NULL THEN
            -- exhausted: what its end sets off (rq_job_ended)
            PERFORM @extschema@.rq_job_ended(job.id);
        END IF;
    END IF;
    RETURN job;
END
$$;

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
    -- slots freed under concurrency limits (src/flow.rs)
    PERFORM @extschema@.rq_claim_ended(d.queue) FROM (SELECT DISTINCT d.queue FROM unnest(done) d) d;
    -- what their ends set off (rq_job_ended)
    PERFORM @extschema@.rq_job_ended(d.id) FROM unnest(done) d WHERE d.has_children OR d.key_period IS NOT NULL;
    RETURN QUERY SELECT * FROM unnest(done);
END
$$;

CREATE OR REPLACE FUNCTION rq_cancel(id uuid) RETURNS jobs
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    job @extschema@.jobs;
BEGIN
    UPDATE @extschema@.jobs j
    SET status = 'cancelled', finished_at = @extschema@.rq_now_ms(), lease_expires_at = NULL
    WHERE j.id = rq_cancel.id AND j.status IN ('queued', 'claimed', 'failed', 'blocked')
    RETURNING j.* INTO job;
    IF NOT FOUND THEN
        PERFORM @extschema@.rq_raise_cannot(rq_cancel.id, NULL, 'cancel', '{queued,claimed,failed,blocked}');
    END IF;
    -- when it was claimed, a slot freed under a concurrency limit (src/flow.rs)
    PERFORM @extschema@.rq_claim_ended(job.queue);
    IF job.has_children OR job.key_period IS NOT NULL THEN
        -- what its end sets off (sql/finish.sql)
        PERFORM @extschema@.rq_job_ended(job.id);
    END IF;
    RETURN job;
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
BEGIN
    PERFORM @extschema@.rq_check_batch(batch);
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
        RETURNING j.id, j.has_children OR j.key_period IS NOT NULL AS sets_off
    )
    SELECT count(*), array_agg(e.id) FILTER (WHERE e.sets_off) INTO changed, parents FROM expired e;
    -- what their ends set off (sql/finish.sql)
    PERFORM @extschema@.rq_job_ended(p.id) FROM unnest(parents) p (id);
    RETURN changed;
END
$$;

CREATE OR REPLACE FUNCTION rq_next_duty_ms(retention interval DEFAULT NULL) RETURNS bigint
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
         LIMIT 1),
        (SELECT s.next_run_at FROM @extschema@.schedules s
         WHERE s.enabled
         ORDER BY s.next_run_at
         LIMIT 1))
$$;

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
    -- keys whose hold after their job's end is over (sql/schema.sql)
    DELETE FROM @extschema@.key_holds h WHERE h.until <= @extschema@.rq_now_ms();
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

CREATE FUNCTION rq_job_ended(job uuid) RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    ended record;
BEGIN
    SELECT j.id, j.queue, j.key, j.key_period, j.finished_at, j.has_children INTO ended
    FROM @extschema@.jobs j
    WHERE j.id = rq_job_ended.job AND j.status IN ('success', 'exhausted', 'expired', 'cancelled');
    IF NOT FOUND THEN
        RETURN;
    END IF;
    IF ended.has_children THEN
        PERFORM @extschema@.rq_parent_ended(ended.id);
    END IF;
    IF ended.key IS NOT NULL AND ended.key_period IS NOT NULL THEN
        INSERT INTO @extschema@.key_holds AS h (queue, key, job_id, until)
        VALUES (ended.queue, ended.key, ended.id, coalesce(ended.finished_at, @extschema@.rq_now_ms()) + ended.key_period)
        ON CONFLICT ON CONSTRAINT key_holds_pkey DO UPDATE SET job_id = excluded.job_id, until = excluded.until;
    END IF;
END
$$;

-- A worker's loop in one round trip (sql/claim.sql).
CREATE FUNCTION rq_complete_and_claim(
    id      uuid     DEFAULT NULL,
    attempt integer  DEFAULT NULL,
    queues  text[]   DEFAULT NULL,
    worker  text     DEFAULT NULL,
    batch   integer  DEFAULT 1,
    lease   interval DEFAULT rq_default_lease(),
    wait    interval DEFAULT '0'
) RETURNS SETOF jobs
LANGUAGE c VOLATILE ROWS 1
SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'rq_complete_and_claim_c';

CREATE FUNCTION rq_fail_and_claim(
    id          uuid     DEFAULT NULL,
    error       text     DEFAULT NULL,
    error_trace text     DEFAULT NULL,
    attempt     integer  DEFAULT NULL,
    queues      text[]   DEFAULT NULL,
    worker      text     DEFAULT NULL,
    batch       integer  DEFAULT 1,
    lease       interval DEFAULT rq_default_lease(),
    wait        interval DEFAULT '0'
) RETURNS SETOF jobs
LANGUAGE plpgsql VOLATILE ROWS 1
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF rq_fail_and_claim.id IS NOT NULL THEN
        PERFORM @extschema@.rq_fail(rq_fail_and_claim.id, rq_fail_and_claim.error,
                                    rq_fail_and_claim.error_trace, rq_fail_and_claim.attempt);
    END IF;
    RETURN QUERY SELECT * FROM @extschema@.rq_claim(rq_fail_and_claim.queues, rq_fail_and_claim.worker,
        rq_fail_and_claim.batch, rq_fail_and_claim.lease, rq_fail_and_claim.wait);
END
$$;

-- Privileges (sql/privileges.sql): the new enqueue functions and trigger
-- functions are not for PUBLIC; the settings are for everyone to read; the
-- worker helper grants the state of queue limits too, and the roles it
-- made workers before get that now.
REVOKE EXECUTE ON FUNCTION
    rq_enqueue(text, text, timestamptz, interval, interval, integer, interval, interval, interval, integer, text, text, uuid[], interval),
    rq_enqueue(text, jsonb, timestamptz, interval, interval, integer, interval, interval, interval, integer, text, text, uuid[], interval),
    rq_enqueue_batch(text, text[], timestamptz, interval, interval, integer, interval, interval, interval, integer, text[], text[], uuid[]),
    rq_enqueue_batch(text, jsonb[], timestamptz, interval, interval, integer, interval, interval, interval, integer, text[], text[], uuid[]),
    rq_expire(integer), rq_rescue(integer), rq_prune(integer, interval), rq_next_duty_ms(interval),
    rq_worker_wake(),
    rq_enqueue_trigger(), rq_job_events(), rq_drop_started(),
    rq_job_turn(), rq_queue_limits_changed(),
    rq_hold_for_parents(uuid[], uuid[]), rq_settle_workflows(integer),
    rq_fire_schedules(integer)
FROM PUBLIC;

-- Every claim and every finish reads the flow settings (src/flow.rs), so
-- anyone may read them; the state the limits keep is for workers
-- (rq_grant_worker), and changing the settings (rq_pause, rq_resume,
-- rq_set_limits) for roles given INSERT and UPDATE on the table.
GRANT SELECT (queue, paused, max_claimed, rate, per, group_max_claimed, grouped) ON queue_limits TO PUBLIC;

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
        PERFORM @extschema@.rq_refuse('role_null', ARRAY['rq_grant_worker']);
    END IF;
    IF NOT EXISTS (SELECT FROM pg_roles r WHERE r.oid = role) THEN
        PERFORM @extschema@.rq_refuse('role_unknown', ARRAY['rq_grant_worker', role::oid::text]);
    END IF;
    EXECUTE format('GRANT USAGE ON SCHEMA %s TO %s', '@extschema@', role);
    EXECUTE format('GRANT SELECT, UPDATE ON %s.jobs TO %s', '@extschema@', role);
    EXECUTE format('GRANT SELECT ON %s.rq_jobs TO %s', '@extschema@', role);
    EXECUTE format('GRANT SELECT, UPDATE (claimed, tokens, tokens_at) ON %s.queue_limits TO %s', '@extschema@', role);
    EXECUTE format('GRANT SELECT, DELETE ON %s.job_dependencies TO %s', '@extschema@', role);
    EXECUTE format('GRANT SELECT, INSERT, UPDATE ON %s.key_holds TO %s', '@extschema@', role);
END
$$;

DO $$
DECLARE
    grant_row record;
BEGIN
    FOR grant_row IN
        SELECT DISTINCT split_part(g.pair, ' ', 1) AS name, split_part(g.pair, ' ', 2)::oid AS grantee
        FROM unnest(string_to_array(current_setting('raquel.enqueue_grants'), ',')) g (pair)
    LOOP
        EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO %s',
            CASE grant_row.name
                WHEN 'rq_enqueue' THEN
                    '@extschema@.rq_enqueue(text, text, timestamptz, interval, interval, integer, interval, interval, interval, integer, text, text, uuid[], interval), '
                    || '@extschema@.rq_enqueue(text, jsonb, timestamptz, interval, interval, integer, interval, interval, interval, integer, text, text, uuid[], interval)'
                ELSE
                    '@extschema@.rq_enqueue_batch(text, text[], timestamptz, interval, interval, integer, interval, interval, interval, integer, text[], text[], uuid[]), '
                    || '@extschema@.rq_enqueue_batch(text, jsonb[], timestamptz, interval, interval, integer, interval, interval, interval, integer, text[], text[], uuid[])'
            END,
            CASE WHEN grant_row.grantee = 0 THEN 'PUBLIC' ELSE grant_row.grantee::regrole::text END);
    END LOOP;
    -- the roles that may update jobs (workers) keep the state of queue limits
    FOR grant_row IN
        SELECT DISTINCT a.grantee FROM pg_catalog.pg_class c
        CROSS JOIN LATERAL pg_catalog.aclexplode(c.relacl) a
        WHERE c.oid = '@extschema@.jobs'::regclass AND a.privilege_type = 'UPDATE'
          AND a.grantee <> c.relowner AND a.grantee <> 0
    LOOP
        EXECUTE format('GRANT SELECT, UPDATE (claimed, tokens, tokens_at) ON @extschema@.queue_limits TO %s',
                       grant_row.grantee::regrole);
        EXECUTE format('GRANT SELECT, DELETE ON @extschema@.job_dependencies TO %s', grant_row.grantee::regrole);
        EXECUTE format('GRANT SELECT, INSERT, UPDATE ON @extschema@.key_holds TO %s', grant_row.grantee::regrole);
    END LOOP;
END
$$;
