-- Steps: what a job's run has done so far, kept across its attempts. A
-- worker records each named step of a job it holds with the step's result
-- (rq_step); on a later attempt (a retry, a rescue after its worker died)
-- it reads back what is recorded and skips what is done. A step recorded
-- inside the claim's transaction commits with the step's own writes to
-- this database, or neither does: such a step happens once. A step whose
-- effect is outside the database (an e-mail, a payment) is recorded after
-- it, so a crash between the two repeats it: make it idempotent.

-- One row a recorded step. The primary key makes a step's record unique:
-- a second record of the same step (by a stale worker, or twice in one
-- run) is refused, and so is the transaction around it.
CREATE TABLE job_steps (
    job_id      uuid    NOT NULL,
    name        text    NOT NULL,
    result      jsonb,
    -- the attempt (the claim's fencing token) that recorded it
    attempt     integer NOT NULL,
    recorded_at bigint  NOT NULL,
    -- what recorded it (0.6.0): 'step' (rq_step), 'sleep' (rq_sleep),
    -- 'event' (rq_wait_event); a call of one kind never reads a step of
    -- another (sql/waits.sql rq_step_instance)
    kind        text    NOT NULL DEFAULT 'step',
    -- the last attempt that went past this sleep or wait, so that its
    -- name called again in that attempt (a loop) is the next one, name#2
    -- … (0.6.0, sql/waits.sql rq_step_instance)
    passed_by   integer,
    CONSTRAINT job_steps_pkey PRIMARY KEY (job_id, name)
);

COMMENT ON TABLE job_steps IS
    'raquel durable jobs: the steps recorded for a job (rq_step), kept across its attempts. Times in ms since the Unix epoch (UTC).';

SELECT pg_catalog.pg_extension_config_dump('job_steps', '');

-- A step's name is checked wherever a step is recorded (rq_step, rq_sleep,
-- rq_wait_event) by raquel_internal.rq_check_step_name (src/steps.rs):
-- not NULL, not empty, at most 1000 bytes.

-- Records step `name` of the claimed job `id`, with its result. Fenced as
-- the worker verbs are: the job must be claimed on `attempt` (required),
-- and it stays locked against a rescue (FOR SHARE) until this transaction
-- ends, so a step is never recorded for an attempt that lost its claim
-- before the record committed. A step already recorded is refused (23505)
-- and nothing changes. One row written: the step's (and the job's row
-- locked, which writes nothing when this transaction claimed it). In C
-- (src/steps.rs): it runs once per step of every durable job, so it writes
-- the step directly where it may (src/direct/step.rs), and otherwise runs
-- one statement (sql/steps.record.sql).
--
-- It writes job_steps as the extension's owner: a worker may read the
-- steps but not write them (sql/privileges.sql), so that no step is
-- recorded for a job that is not claimed on that attempt. Not for PUBLIC:
-- rq_grant_worker grants it.
CREATE FUNCTION rq_step(id uuid, attempt integer, name text, result jsonb DEFAULT NULL)
RETURNS job_steps
LANGUAGE c VOLATILE
SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'rq_step_fenced_c';
