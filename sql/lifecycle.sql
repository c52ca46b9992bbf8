-- The rest of a job's life. A worker holding a claim may hand the job back
-- (reschedule, reject) without using up a retry, or extend its lease; anyone
-- may cancel an unfinished job; an operator may retry a job that failed or
-- ended. Like rq_complete, each is one UPDATE, and rq_raise_cannot explains
-- a miss. The worker verbs take the claim's attempt, the fencing token, as
-- their second argument and require it (0.6.0: sql/finish.sql).

-- A claimed job goes back to queued at `at` plus `delay` (neither: the job's
-- min_retry_delay from now). claimed_by / claimed_at stay, as in the Python
-- library, so that rescheduled jobs can be found.
CREATE FUNCTION raquel_internal.rq_reschedule(
    id      uuid,
    attempt integer,
    at      timestamptz DEFAULT NULL,
    delay   interval    DEFAULT NULL
) RETURNS jobs
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    now_ms bigint := raquel_internal.rq_now_ms();
    due_ms bigint := raquel_internal.rq_due_ms(rq_reschedule.at, rq_reschedule.delay);
    -- on Citus, the job's queue: the UPDATE runs in its shard alone (src/distributed.rs)
    shard_queue text := raquel_internal.rq_shard_queue(rq_reschedule.id);
    job    @extschema@.jobs;
BEGIN
    PERFORM raquel_internal.rq_require_attempt(rq_reschedule.id, rq_reschedule.attempt, 'reschedule');
    UPDATE @extschema@.jobs j
    SET status = 'queued',
        scheduled_at = coalesce(due_ms, now_ms + coalesce(j.min_retry_delay, raquel_internal.rq_default_min_retry_delay())),
        requeues = j.requeues + 1,
        lease_expires_at = NULL,
        finished_at = NULL
    WHERE j.id = rq_reschedule.id AND j.queue = coalesce(shard_queue, j.queue)
      AND j.status = 'claimed'
      AND j.attempts = rq_reschedule.attempt
    RETURNING j.* INTO job;
    IF NOT FOUND THEN
        PERFORM raquel_internal.rq_raise_cannot(rq_reschedule.id, rq_reschedule.attempt, 'reschedule', '{claimed}');
    END IF;
    -- ready again: wake a waiting claim at commit (src/events.rs)
    PERFORM raquel_internal.rq_job_ready_again(job.queue, job.scheduled_at, job.max_age, job.priority, job.id);
    RETURN job;
END
$$;

-- The name users call: raquel's own code calls raquel_internal.rq_reschedule
-- (sql/privileges.sql says why).
CREATE FUNCTION rq_reschedule(
    id      uuid,
    attempt integer,
    at      timestamptz DEFAULT NULL,
    delay   interval    DEFAULT NULL
) RETURNS jobs
LANGUAGE sql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT * FROM raquel_internal.rq_reschedule($1, $2, $3, $4) $$;

-- A claimed job goes back to queued at once, for another worker.
CREATE FUNCTION rq_reject(id uuid, attempt integer) RETURNS jobs
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    -- on Citus, the job's queue: the UPDATE runs in its shard alone (src/distributed.rs)
    shard_queue text := raquel_internal.rq_shard_queue(rq_reject.id);
    job @extschema@.jobs;
BEGIN
    PERFORM raquel_internal.rq_require_attempt(rq_reject.id, rq_reject.attempt, 'reject');
    UPDATE @extschema@.jobs j
    SET status = 'queued', claimed_by = NULL, claimed_at = NULL,
        requeues = j.requeues + 1, lease_expires_at = NULL
    WHERE j.id = rq_reject.id AND j.queue = coalesce(shard_queue, j.queue)
      AND j.status = 'claimed'
      AND j.attempts = rq_reject.attempt
    RETURNING j.* INTO job;
    IF NOT FOUND THEN
        PERFORM raquel_internal.rq_raise_cannot(rq_reject.id, rq_reject.attempt, 'reject', '{claimed}');
    END IF;
    -- ready again: wake a waiting claim at commit (src/events.rs)
    PERFORM raquel_internal.rq_job_ready_again(job.queue, job.scheduled_at, job.max_age, job.priority, job.id);
    RETURN job;
END
$$;

-- The worker still holding the claim pushes its lease out to now + lease
-- (a heartbeat). A lease that ran out but was not rescued yet can be extended.
CREATE FUNCTION rq_extend(id uuid, attempt integer, lease interval DEFAULT raquel_internal.rq_default_lease())
RETURNS jobs
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    -- a value, not a call in the UPDATE: Citus refuses volatile calls there
    now_ms bigint := raquel_internal.rq_now_ms();
    lease_ms bigint := raquel_internal.rq_lease_ms(rq_extend.lease);
    -- on Citus, the job's queue: the UPDATE runs in its shard alone (src/distributed.rs)
    shard_queue text := raquel_internal.rq_shard_queue(rq_extend.id);
    job      @extschema@.jobs;
BEGIN
    PERFORM raquel_internal.rq_require_attempt(rq_extend.id, rq_extend.attempt, 'extend');
    UPDATE @extschema@.jobs j
    SET lease_expires_at = now_ms + lease_ms
    WHERE j.id = rq_extend.id AND j.queue = coalesce(shard_queue, j.queue)
      AND j.status = 'claimed'
      AND j.attempts = rq_extend.attempt
    RETURNING j.* INTO job;
    IF NOT FOUND THEN
        PERFORM raquel_internal.rq_raise_cannot(rq_extend.id, rq_extend.attempt, 'extend', '{claimed}');
    END IF;
    RETURN job;
END
$$;

-- Any unfinished job (queued, claimed, failed, blocked) becomes cancelled,
-- for good, and so do the jobs blocked waiting for it (sql/workflows.sql).
-- A worker still working on a cancelled job finds out when it completes it:
-- that is an error (55000), since the job is no longer claimed.
CREATE FUNCTION raquel_internal.rq_cancel(id uuid) RETURNS jobs
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    -- a value, not a call in the UPDATE: Citus refuses volatile calls there
    now_ms bigint := raquel_internal.rq_now_ms();
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
    -- what follows its end (src/ended.rs): its awaiters woken, a slot it
    -- may have held freed, what its end sets off (sql/finish.sql)
    PERFORM raquel_internal.rq_ended(ARRAY[job.id], ARRAY[job.queue], 'cancelled', true,
        ARRAY[job.key_period IS NOT NULL OR raquel_internal.rq_has_children(job.id)]);
    RETURN job;
END
$$;

-- The name users call: raquel's own code calls raquel_internal.rq_cancel
-- (sql/privileges.sql says why).
CREATE FUNCTION rq_cancel(id uuid) RETURNS jobs
LANGUAGE sql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT * FROM raquel_internal.rq_cancel($1) $$;

-- An operator puts a failed, exhausted, expired or cancelled job back to
-- queued, due now, with its whole retry budget again: the attempts so far
-- stay counted (history, and fencing tokens never repeat) but no longer use
-- up retries.
CREATE FUNCTION raquel_internal.rq_retry(id uuid) RETURNS jobs
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    -- a value, not a call in the UPDATE: Citus refuses volatile calls there
    now_ms bigint := raquel_internal.rq_now_ms();
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

-- The name users call: raquel's own code calls raquel_internal.rq_retry
-- (sql/privileges.sql says why).
CREATE FUNCTION rq_retry(id uuid) RETURNS jobs
LANGUAGE sql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT * FROM raquel_internal.rq_retry($1) $$;
