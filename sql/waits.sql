-- Durable sleep and events: a worker parks the job it holds, until an
-- instant (rq_sleep) or until an event is emitted (rq_wait_event, rq_emit),
-- keeping its steps and using up no retry. Both are steps (sql/steps.sql):
-- the step records the sleep's instant or the event's payload, so the
-- job's next attempt, run from the start as every attempt is, passes the
-- sleep or the wait it already did and reads what the event brought.
--
-- Parking is rq_reschedule's transition (sql/transitions.sql): the job goes
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
-- waiting for it later (the worker was still on its way to the wait when
-- the webhook came) gets it too. An event emitted without a keep waits
-- for its reader (`until_read`, 0.6.0): the first wait that reads it, or
-- the jobs parked for it when it comes, consume it, and it goes; unread,
-- it is kept for raquel.event_retention (7 days by default).
CREATE TABLE emitted_events (
    id         bigint GENERATED ALWAYS AS IDENTITY,
    name       text   NOT NULL,
    payload    jsonb,
    emitted_at bigint NOT NULL,
    kept_until bigint NOT NULL,
    until_read boolean NOT NULL DEFAULT false,
    CONSTRAINT emitted_events_pkey PRIMARY KEY (id)
);
CREATE INDEX emitted_events_name_idx ON emitted_events (name, kept_until);

COMMENT ON TABLE emitted_events IS
    'raquel durable jobs: the events emitted (rq_emit), each kept for the jobs that start waiting for it until kept_until. Times in ms since the Unix epoch (UTC).';

-- Who may emit what (rq_grant_emitter): a role with rows here may emit
-- only events whose name starts with one of its prefixes; a role that may
-- run rq_emit without rows here (the owner, a grant by hand, or
-- rq_grant_emitter without a prefix) may emit any.
CREATE TABLE event_emitters (
    role   oid  NOT NULL,
    prefix text NOT NULL,
    CONSTRAINT event_emitters_pkey PRIMARY KEY (role, prefix)
);

COMMENT ON TABLE event_emitters IS
    'raquel durable jobs: the event-name prefixes a role may emit (rq_grant_emitter); a role without rows may emit any event it may call rq_emit for.';

SELECT pg_catalog.pg_extension_config_dump('job_waits', '');
SELECT pg_catalog.pg_extension_config_dump('emitted_events', '');
SELECT pg_catalog.pg_extension_config_dump('event_emitters', '');
SELECT pg_catalog.pg_extension_config_dump('emitted_events_id_seq', '');

-- The end of time for a wait without a timeout: 9999-12-31 23:59:59 UTC.
CREATE FUNCTION raquel_internal.rq_forever_ms() RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT 253402300799000::bigint $$;

-- The claimed job `id` on `attempt` (its callers, rq_sleep and
-- rq_wait_event, refuse a NULL one first), locked until this transaction
-- ends; its attempt. Raises why not otherwise.
CREATE FUNCTION raquel_internal.rq_hold(id uuid, attempt integer, verb text) RETURNS integer
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

-- The checks an event's name passes, in rq_wait_event and rq_emit
-- (`function`, named in the refusal). Names that begin with `raquel:` are
-- raquel's own: a job's end is delivered to the jobs that wait for it
-- (rq_wait_job) under `raquel:job:<id>`, which nobody may emit or wait for
-- by hand.
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
    IF starts_with(event, 'raquel:') THEN
        PERFORM raquel_internal.rq_refuse('event_name_reserved', ARRAY[event, function]);
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

-- Puts the claimed job `id` to sleep until `at` plus `delay` (one of them
-- at least), as step `name`: true, the job sleeps (commit, and leave the
-- job alone: the claim is over); false, the sleep is over (go on with the
-- next step). The step records the instant; on a later attempt the same
-- call answers false once that instant has passed (and puts the job back
-- to sleep if it was claimed early, by hand). The same name called again
-- in one attempt is the next sleep (name#2, …: rq_step_instance), so a
-- loop sleeps each time round. Uses up no retry.
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

-- Parks the claimed job `id` until event `event` is emitted, for at most
-- `timeout` (NULL: no limit), as step `name`. parked: the job waits
-- (commit, and leave the job alone: the claim is over); it comes back when
-- the event is emitted or the timeout passes, and its next attempt, calling
-- this again, gets the event's payload (parked false) or hears that the
-- wait timed out (timed_out true). A wait without a timeout waits at most
-- raquel.max_event_wait (30 days by default; 0: no limit), then times out.
-- An emit kept when the wait begins (rq_emit's `keep`, or one that waits
-- for its reader) reaches it at once, without parking. The same name
-- called again in one attempt is the next wait (name#2, …). Uses up no
-- retry.
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

-- Emits event `event` with `payload`: every job parked for it resumes at
-- once and reads the payload as its step's result. Without a keep, an
-- event no job waits for yet waits for its reader: the first wait for it
-- gets it and consumes it, for up to raquel.event_retention (7 days by
-- default); with a keep, every job that starts waiting for it within the
-- keep gets it (at most raquel.max_event_keep). How many parked jobs it
-- resumed; NULL for a caller that may not read the jobs table, which learns
-- nothing of who waits. Runs with the extension owner's rights; not for
-- PUBLIC: rq_grant_emitter lets a role emit, limited to event names with a
-- prefix when given one.
CREATE FUNCTION rq_emit(event text, payload jsonb DEFAULT NULL, keep interval DEFAULT NULL)
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

-- Refuses (42501) an emit of `event` by a role limited to event-name
-- prefixes (event_emitters, through any role it is a member of) when the
-- name begins with none of them.
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

-- Lets `role` emit events (EXECUTE on rq_emit), only those whose name
-- begins with `prefix` when one is given (several calls give several
-- prefixes); without a prefix, any event. Not for PUBLIC.
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

-- The background worker's duty for events: resumes the waits an emit
-- missed (a wait and an emit that read from snapshots older than each
-- other's commit, under REPEATABLE READ) and the waits for a job whose
-- end missed them, drops the waits of jobs that ended some other way
-- (cancelled, expired) or are gone, and the emitted events an hour past
-- their keep. How many rows it changed.
CREATE FUNCTION raquel_internal.rq_settle_waits(batch integer DEFAULT 1000) RETURNS bigint
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
