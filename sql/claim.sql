-- Handing jobs to workers. A claim is an attempt and a lease: the job's
-- attempts go up by one, and the job is the worker's until lease_expires_at
-- (then the rescue duty counts the attempt as failed). The attempts value the
-- claim returns is the fencing token for rq_complete / rq_fail.
--
-- queues NULL means any queue. batch is 1 to 100000; lease 1 ms to 365 days;
-- wait up to a day (0: return at once, maybe with nothing). Jobs come in claim
-- order: priority (higher first), scheduled time, id.
--
-- Every worker calls this for every job, so it is written in Rust
-- (src/hot_path.rs): the arguments are checked there, and the claim statement
-- (sql/statements/claim.sql) is prepared once per backend for each queue
-- filter and batch size, each plan walking a ready index in claim order.
CREATE FUNCTION rq_claim(
    queues text[]   DEFAULT NULL,
    worker text     DEFAULT NULL,
    batch  integer  DEFAULT 1,
    lease  interval DEFAULT '1 minute',
    wait   interval DEFAULT '0'
) RETURNS SETOF jobs
LANGUAGE c VOLATILE ROWS 1
AS 'MODULE_PATHNAME', 'rq_claim_c';

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
