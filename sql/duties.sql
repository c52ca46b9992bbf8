-- Housekeeping duties. The background worker runs them every round; without
-- it (no shared_preload_libraries), run them by hand or from cron. Each one
-- handles at most `batch` jobs and returns how many it changed, so that one
-- call is one short transaction: call again while it returns `batch`. Each
-- walks a partial index of just the rows it is after, and skips rows that
-- another session holds locked. JIT is off for them: on a table of millions
-- of rows the planner's estimates passed jit_above_cost, and compiling took
-- 5 to 20 ms a call for queries that find nothing in a millisecond.

-- Up to `batch` claimed jobs whose lease ran out by `now_ms`, locked
-- (SKIP LOCKED: a row some session still holds locked is that session's,
-- however old its claim), for rq_rescue. On Citus, queue by queue
-- (sql/distributed.sql).
CREATE FUNCTION raquel_internal.rq_lapsed(batch integer, now_ms bigint)
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

-- Claimed jobs whose lease ran out: a failed attempt ("lease expired") that
-- follows the retry rules, exactly as if the worker had called rq_fail. A
-- claim without lease_expires_at (made by the Python library or by hand) has
-- the library's lease of one minute from claimed_at. SKIP LOCKED: a row some
-- session still holds locked is that session's, however old its claim.
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

-- The name users call: raquel's own code calls raquel_internal.rq_rescue
-- (sql/privileges.sql says why).
CREATE FUNCTION rq_rescue(batch integer DEFAULT 1000) RETURNS bigint
LANGUAGE sql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT raquel_internal.rq_rescue($1) $$;

-- Finished jobs older than the retention: deleted. The retention defaults to
-- the raquel.retention setting (a week), whose zero keeps finished jobs for
-- ever; a retention of zero passed to rq_prune deletes every finished job.

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

-- The name users call: raquel's own code calls raquel_internal.rq_prune
-- (sql/privileges.sql says why).
CREATE FUNCTION rq_prune(batch integer DEFAULT 1000, retention interval DEFAULT NULL) RETURNS bigint
LANGUAGE sql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT raquel_internal.rq_prune($1, $2) $$;

-- When the next duty falls due (ms since the epoch; NULL: nothing is
-- coming): the first lease to end, the first job to expire, the first
-- finished job to pass the retention. The background worker asks after
-- each round, and does not come back before then unless a backend notes
-- something sooner (src/deadlines.rs). Each is the first entry of its
-- duty's index.
-- PL/pgSQL rather than SQL: Citus plans no SQL function's parameters.
CREATE FUNCTION raquel_internal.rq_next_duty_ms(retention interval DEFAULT NULL) RETURNS bigint
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

-- The background worker's wake-up by its public name (src/worker.rs): the
-- same C function as raquel_internal.rq_worker_wake, which raquel calls.
CREATE FUNCTION rq_worker_wake() RETURNS boolean
LANGUAGE c STRICT VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'rq_worker_wake_wrapper';

-- Tell the launcher a database now has the extension; say so when there is
-- no launcher to tell.
DO $$
BEGIN
    IF NOT raquel_internal.rq_worker_wake() THEN
        RAISE NOTICE 'raquel: no background worker is running, so nothing expires, rescues or prunes jobs by itself'
            USING HINT = 'Add raquel to shared_preload_libraries and restart, or call rq_expire(), rq_rescue() and rq_prune() yourself.';
    END IF;
END
$$;
