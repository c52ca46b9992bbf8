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
    lease  interval DEFAULT raquel_internal.rq_default_lease(),
    wait   interval DEFAULT '0'
) RETURNS SETOF jobs
LANGUAGE c VOLATILE ROWS 1
SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'rq_claim_c';

-- A claim that only locks, for work done inside this transaction
-- (src/take.rs): up to `batch` ready jobs, locked (FOR UPDATE SKIP LOCKED)
-- and written nothing; each comes back as a claim would make it (claimed,
-- its attempts + 1 the fencing token, no lease). This transaction finishes
-- them with rq_complete or rq_fail, in one write each; its commit lets go
-- of those it did not finish, and its rollback (a crash) leaves every one
-- ready at once with no attempt counted. With `complete`, each is completed
-- in the same write as it is taken: the transaction's commit is their
-- success, as with a DELETE … RETURNING queue. Refused (0A000) for a queue
-- with flow settings and on Citus. In C (src/claim.rs), as rq_claim.
CREATE FUNCTION rq_take(
    queues   text[]   DEFAULT NULL,
    worker   text     DEFAULT NULL,
    batch    integer  DEFAULT 1,
    complete boolean  DEFAULT false,
    wait     interval DEFAULT '0'
) RETURNS SETOF jobs
LANGUAGE c VOLATILE ROWS 1
SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'rq_take_c';

-- A worker's loop in one round trip: completes the job in hand (as
-- rq_complete, the attempt its fencing token, with its result) and claims
-- the next (as rq_claim), in one statement, so one transaction and one commit where the
-- two-call loop has two. A NULL id only claims (the loop's first call); an
-- id needs its attempt (22004 without). An id that cannot be completed is
-- rq_complete's error, and nothing is claimed. In C (src/claim.rs): the two verbs' own code, one after the other.
CREATE FUNCTION rq_complete_and_claim(
    id      uuid     DEFAULT NULL,
    attempt integer  DEFAULT NULL,
    queues  text[]   DEFAULT NULL,
    worker  text     DEFAULT NULL,
    batch   integer  DEFAULT 1,
    lease   interval DEFAULT raquel_internal.rq_default_lease(),
    wait    interval DEFAULT '0',
    result  jsonb    DEFAULT NULL
) RETURNS SETOF jobs
LANGUAGE c VOLATILE ROWS 1
SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'rq_complete_and_claim_fenced_c';

-- A worker's loop in batches: completes the jobs in hand (as
-- rq_complete_batch: all or nothing, attempts[i] the fencing token of
-- ids[i], one for every id) and claims the next `batch` (as rq_claim),
-- in one statement: one round trip and one commit serve a whole batch. NULL
-- or empty ids only claim (the loop's first call). In C (src/claim.rs).
CREATE FUNCTION rq_complete_batch_and_claim(
    ids      uuid[]    DEFAULT NULL,
    attempts integer[] DEFAULT NULL,
    queues   text[]    DEFAULT NULL,
    worker   text      DEFAULT NULL,
    batch    integer   DEFAULT 1,
    lease    interval  DEFAULT raquel_internal.rq_default_lease(),
    wait     interval  DEFAULT '0',
    results  jsonb[]   DEFAULT NULL
) RETURNS SETOF jobs
LANGUAGE c VOLATILE ROWS 1
SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'rq_complete_batch_and_claim_fenced_c';

-- The same for a job whose work failed: rq_fail, then rq_claim.
CREATE FUNCTION rq_fail_and_claim(
    id          uuid     DEFAULT NULL,
    attempt     integer  DEFAULT NULL,
    error       text     DEFAULT NULL,
    error_trace text     DEFAULT NULL,
    queues      text[]   DEFAULT NULL,
    worker      text     DEFAULT NULL,
    batch       integer  DEFAULT 1,
    lease       interval DEFAULT raquel_internal.rq_default_lease(),
    wait        interval DEFAULT '0'
) RETURNS SETOF jobs
LANGUAGE c VOLATILE ROWS 1
SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'rq_fail_and_claim_fenced_c';

-- A waiting claim holds locks on the jobs table while it sleeps, and DROP
-- EXTENSION would wait behind it for as long as the wait lasts: before any
-- DROP EXTENSION starts, every waiting claim in the database is woken and
-- returns what it has, nothing (src/waiters.rs). It runs no SQL, so it has
-- no search_path to pin.
CREATE FUNCTION raquel_internal.rq_drop_started() RETURNS event_trigger
LANGUAGE c
AS 'MODULE_PATHNAME', 'rq_drop_started';
CREATE EVENT TRIGGER rq_drop_started ON ddl_command_start
    WHEN TAG IN ('DROP EXTENSION')
    EXECUTE FUNCTION raquel_internal.rq_drop_started();
