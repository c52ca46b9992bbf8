-- Handing jobs to workers. A claim is an attempt and a lease: the job's
-- attempts go up by one, and the job is the worker's until lease_expires_at
-- (then the rescue duty counts the attempt as failed). The attempts value the
-- claim returns is the fencing token for rq_complete / rq_fail.
--
-- Each shape of the queue filter (one queue, several, any) has its own
-- statement so that each keeps a cached plan that walks a partial index of
-- ready jobs in claim order; SKIP LOCKED lets concurrent claimers pass each
-- other's rows instead of queueing behind them.
CREATE FUNCTION rq_claim(
    queues text[]   DEFAULT NULL,
    worker text     DEFAULT NULL,
    batch  integer  DEFAULT 1,
    lease  interval DEFAULT '1 minute',
    wait   interval DEFAULT '0'
) RETURNS SETOF jobs
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    now_ms   bigint := @extschema@.rq_now_ms();
    lease_ms bigint;
    wait_ms  bigint := @extschema@.rq_interval_ms(coalesce(wait, '0'), 'wait', 0, 86400000);
    one      text;
BEGIN
    IF batch IS NULL OR batch < 1 OR batch > 100000 THEN
        RAISE EXCEPTION 'batch must be between 1 and 100000, got %', coalesce(batch::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF lease IS NULL THEN
        RAISE EXCEPTION 'lease must not be null'
            USING ERRCODE = 'invalid_parameter_value', HINT = 'Leave it out for one minute.';
    END IF;
    lease_ms := @extschema@.rq_interval_ms(lease, 'lease', 1, 31536000000);
    IF queues IS NOT NULL THEN
        FOREACH one IN ARRAY queues LOOP
            PERFORM @extschema@.rq_check_queue(one);
        END LOOP;
    END IF;
    IF wait_ms > 0 THEN
        RETURN QUERY SELECT * FROM @extschema@.rq_claim_waiting(queues, worker, batch, lease, wait_ms);
        RETURN;
    END IF;

    IF batch = 1 AND cardinality(queues) = 1 THEN
        -- The common case, one job from one queue, has a statement of its own
        -- with a constant LIMIT: its cached generic plan walks the queue's
        -- ready index in claim order. With `LIMIT batch` the generic plan
        -- would assume a tenth of the table and sort it, so the statements
        -- below are planned afresh each call (about 0.3 ms, measured), which
        -- a batch amortizes.
        RETURN QUERY
        WITH ready AS (
            SELECT j.id FROM @extschema@.jobs j
            WHERE j.queue = queues[1]
              AND j.status IN ('queued', 'failed')
              AND j.scheduled_at <= now_ms
              AND (j.max_age IS NULL OR j.scheduled_at + j.max_age > now_ms)
            ORDER BY j.priority DESC, j.scheduled_at, j.id
            LIMIT 1
            FOR UPDATE SKIP LOCKED
        )
        UPDATE @extschema@.jobs j
        SET status = 'claimed', attempts = j.attempts + 1, claimed_by = worker,
            claimed_at = now_ms, lease_expires_at = now_ms + lease_ms, finished_at = NULL
        FROM ready WHERE j.id = ready.id
        RETURNING j.*;
    ELSIF queues IS NULL THEN
        RETURN QUERY
        WITH ready AS (
            SELECT j.id FROM @extschema@.jobs j
            WHERE j.status IN ('queued', 'failed')
              AND j.scheduled_at <= now_ms
              AND (j.max_age IS NULL OR j.scheduled_at + j.max_age > now_ms)
            ORDER BY j.priority DESC, j.scheduled_at, j.id
            LIMIT batch
            FOR UPDATE SKIP LOCKED
        ), claimed AS (
            UPDATE @extschema@.jobs j
            SET status = 'claimed', attempts = j.attempts + 1, claimed_by = worker,
                claimed_at = now_ms, lease_expires_at = now_ms + lease_ms, finished_at = NULL
            FROM ready WHERE j.id = ready.id
            RETURNING j.*
        )
        SELECT * FROM claimed c ORDER BY c.priority DESC, c.scheduled_at, c.id;
    ELSIF cardinality(queues) = 1 THEN
        RETURN QUERY
        WITH ready AS (
            SELECT j.id FROM @extschema@.jobs j
            WHERE j.queue = queues[1]
              AND j.status IN ('queued', 'failed')
              AND j.scheduled_at <= now_ms
              AND (j.max_age IS NULL OR j.scheduled_at + j.max_age > now_ms)
            ORDER BY j.priority DESC, j.scheduled_at, j.id
            LIMIT batch
            FOR UPDATE SKIP LOCKED
        ), claimed AS (
            UPDATE @extschema@.jobs j
            SET status = 'claimed', attempts = j.attempts + 1, claimed_by = worker,
                claimed_at = now_ms, lease_expires_at = now_ms + lease_ms, finished_at = NULL
            FROM ready WHERE j.id = ready.id
            RETURNING j.*
        )
        SELECT * FROM claimed c ORDER BY c.priority DESC, c.scheduled_at, c.id;
    ELSE
        RETURN QUERY
        WITH ready AS (
            SELECT j.id FROM @extschema@.jobs j
            WHERE j.queue = ANY (queues)
              AND j.status IN ('queued', 'failed')
              AND j.scheduled_at <= now_ms
              AND (j.max_age IS NULL OR j.scheduled_at + j.max_age > now_ms)
            ORDER BY j.priority DESC, j.scheduled_at, j.id
            LIMIT batch
            FOR UPDATE SKIP LOCKED
        ), claimed AS (
            UPDATE @extschema@.jobs j
            SET status = 'claimed', attempts = j.attempts + 1, claimed_by = worker,
                claimed_at = now_ms, lease_expires_at = now_ms + lease_ms, finished_at = NULL
            FROM ready WHERE j.id = ready.id
            RETURNING j.*
        )
        SELECT * FROM claimed c ORDER BY c.priority DESC, c.scheduled_at, c.id;
    END IF;
END
$$;

-- A claim that waits up to wait_ms for a job: claim; if nothing, sleep until
-- a commit that enqueued jobs for these queues wakes us (sql/events.sql and
-- src/wait.rs), the next job scheduled for later is due, or the wait ends.
-- The waiter registers before it claims, so a commit between the claim and
-- the sleep still wakes it. Each claim is a new statement with a new
-- snapshot, which is why this needs READ COMMITTED. Without the preloaded
-- library there are no wake-ups, and it checks every 100 ms.
CREATE FUNCTION rq_claim_waiting(queues text[], worker text, batch integer, lease interval, wait_ms bigint)
RETURNS SETOF jobs
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    deadline   bigint := @extschema@.rq_now_ms() + wait_ms;
    now_ms     bigint;
    next_due   bigint;
    registered boolean;
BEGIN
    IF current_setting('transaction_isolation') <> 'read committed' THEN
        RAISE EXCEPTION 'rq_claim with a wait needs READ COMMITTED, not %', current_setting('transaction_isolation')
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'A snapshot that never changes would never see the job it waits for.';
    END IF;
    LOOP
        registered := @extschema@.rq_wait_register(queues);
        RETURN QUERY SELECT * FROM @extschema@.rq_claim(queues, worker, batch, lease);
        EXIT WHEN FOUND;
        now_ms := @extschema@.rq_now_ms();
        EXIT WHEN now_ms >= deadline;
        SELECT min(j.scheduled_at) INTO next_due FROM @extschema@.jobs j
        WHERE j.status IN ('queued', 'failed') AND j.scheduled_at > now_ms
          AND (queues IS NULL OR j.queue = ANY (queues));
        PERFORM @extschema@.rq_wait_sleep(
            least(deadline, coalesce(next_due, deadline), CASE WHEN registered THEN deadline ELSE now_ms + 100 END)
            - now_ms);
    END LOOP;
    PERFORM @extschema@.rq_wait_unregister();
END
$$;
