-- Handing jobs to workers. A claim is an attempt and a lease: the job's
-- attempts go up by one, and the job is the worker's until lease_expires_at
-- (then the rescue duty counts the attempt as failed). The attempts value the
-- claim returns is the fencing token for rq_complete / rq_fail.
--
-- queues NULL means any queue. batch is 1 to 100000; lease 1 ms to 365 days;
-- wait up to a day (0: return at once, maybe with nothing), in READ
-- COMMITTED only. Jobs come in claim order: priority (higher first),
-- scheduled time, id.
--
-- Every worker calls this for every job, so it is written in Rust
-- (src/claim.rs): the arguments are checked there, and the claim statement
-- (sql/claim.ready.sql) is prepared once per backend for each queue filter
-- and batch size, each plan walking a ready index in claim order. A waiting
-- claim sleeps on its latch between claims; a commit that enqueues jobs
-- for its queues wakes it (sql/events.sql, src/waiters.rs). Without the
-- preloaded library there are no wake-ups, and it looks every 100 ms.
CREATE FUNCTION rq_claim(
    queues text[]   DEFAULT NULL,
    worker text     DEFAULT NULL,
    batch  integer  DEFAULT 1,
    lease  interval DEFAULT rq_default_lease(),
    wait   interval DEFAULT '0'
) RETURNS SETOF jobs
LANGUAGE c VOLATILE ROWS 1
SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'rq_claim_c';

-- A worker's loop in one round trip: completes the job in hand (as
-- rq_complete, the attempt its fencing token) and claims the next (as
-- rq_claim), in one statement, so one transaction and one commit where the
-- two-call loop has two. A NULL id only claims (the loop's first call). An
-- id that cannot be completed is rq_complete's error, and nothing is
-- claimed. In C (src/claim.rs): the two verbs' own code, one after the other.
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

-- The same for a job whose work failed: rq_fail, then rq_claim.
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

-- A waiting claim holds locks on the jobs table while it sleeps, and DROP
-- EXTENSION would wait behind it for as long as the wait lasts: before any
-- DROP EXTENSION starts, every waiting claim in the database is woken and
-- returns what it has, nothing (src/waiters.rs). It runs no SQL, so it has
-- no search_path to pin.
CREATE FUNCTION rq_drop_started() RETURNS event_trigger
LANGUAGE c
AS 'MODULE_PATHNAME', 'rq_drop_started';
CREATE EVENT TRIGGER rq_drop_started ON ddl_command_start
    WHEN TAG IN ('DROP EXTENSION')
    EXECUTE FUNCTION rq_drop_started();
