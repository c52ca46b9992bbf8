-- Looking at the queue from psql. These read the whole table (they are for
-- people, not for the hot path); times come out as timestamptz and
-- durations as intervals.

-- One row per queue: how many jobs in each status, how many are ready now,
-- how long the oldest ready job has been waiting, and the queue's flow
-- settings (sql/flow.sql); a queue with settings and no jobs has a row too.
-- Then how many of its jobs are parked for an event (sql/waits.sql), and
-- last how the claim cursors keep it (src/cursors.rs rq_cursor_state: 'in
-- use', or why its claims walk from the start).
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

-- The queues that have jobs, by name.
CREATE FUNCTION rq_queues() RETURNS SETOF text
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT DISTINCT j.queue FROM @extschema@.jobs j ORDER BY j.queue
$$;

-- The functions a user calls, one line each: its name, its arguments' names
-- (those with a default end in ?) and its comment; those whose names hold
-- `name_contains` when given. \df prints their whole signatures and \df+
-- their source too: this is the list to read first.
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

-- How many jobs, in one queue or all (NULL), in some statuses or all (NULL).
-- PL/pgSQL rather than SQL: Citus plans no SQL function's parameters
-- (sql/distributed.sql).
CREATE FUNCTION rq_count(queue text DEFAULT NULL, statuses text[] DEFAULT NULL) RETURNS bigint
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN (SELECT count(*) FROM @extschema@.jobs j
            WHERE (rq_count.queue IS NULL OR j.queue = rq_count.queue)
              AND (rq_count.statuses IS NULL OR j.status = ANY (rq_count.statuses)));
END
$$;

-- The jobs table as a person reads it: instants as timestamptz, durations as
-- intervals. The columns keep the table's names. The conversions are calls
-- of the extension's own functions on the column's exact type: an
-- expression in a view is resolved once, when the install script creates
-- it, and arithmetic such as `bigint / numeric` would have picked an
-- operator some role had planted on the search_path, to run whenever anyone
-- reads the view.
CREATE VIEW rq_jobs AS
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

-- A job's history (issue 38): every attempt of job `id`, oldest first, as
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
