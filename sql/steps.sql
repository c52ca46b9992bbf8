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
    CONSTRAINT job_steps_pkey PRIMARY KEY (job_id, name)
);

COMMENT ON TABLE job_steps IS
    'raquel durable jobs: the steps recorded for a job (rq_step), kept across its attempts. Times in ms since the Unix epoch (UTC).';

SELECT pg_catalog.pg_extension_config_dump('job_steps', '');

-- The checks a step's name passes wherever a step is recorded (rq_step,
-- rq_sleep, rq_wait_event): `verb` says what the refused call was doing
-- ("record a step of", "put to sleep", "park").
CREATE FUNCTION raquel_internal.rq_check_step_name(id uuid, name text, verb text) RETURNS void
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF name IS NULL OR name = '' THEN
        PERFORM raquel_internal.rq_refuse('step_name_empty', ARRAY[id::text, verb]);
    END IF;
    IF octet_length(name) > 1000 THEN
        PERFORM raquel_internal.rq_refuse('step_name_long', ARRAY[octet_length(name)::text, left(name, 20)]);
    END IF;
END
$$;

-- Records step `name` of the claimed job `id`, with its result. Fenced as
-- the worker verbs are: the job must be claimed (on `attempt`, when given),
-- and it stays locked against a rescue (FOR SHARE) until this transaction
-- ends, so a step is never recorded for an attempt that lost its claim
-- before the record committed. A step already recorded is refused (23505)
-- and nothing changes. One row written: the step's.
CREATE FUNCTION rq_step(id uuid, name text, result jsonb DEFAULT NULL, attempt integer DEFAULT NULL)
RETURNS job_steps
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    holder integer;
    done   @extschema@.job_steps;
    step   @extschema@.job_steps;
BEGIN
    PERFORM raquel_internal.rq_refuse_distributed('rq_step');
    PERFORM raquel_internal.rq_check_step_name(rq_step.id, rq_step.name, 'record a step of');
    SELECT j.attempts INTO holder FROM @extschema@.jobs j
    WHERE j.id = rq_step.id AND j.status = 'claimed'
      AND (rq_step.attempt IS NULL OR j.attempts = rq_step.attempt)
    FOR SHARE OF j;
    IF NOT FOUND THEN
        PERFORM raquel_internal.rq_raise_cannot(rq_step.id, rq_step.attempt, 'step', '{claimed}');
    END IF;
    INSERT INTO @extschema@.job_steps AS s (job_id, name, result, attempt, recorded_at)
    VALUES (rq_step.id, rq_step.name, rq_step.result, holder, @extschema@.rq_now_ms())
    ON CONFLICT ON CONSTRAINT job_steps_pkey DO NOTHING
    RETURNING s.* INTO step;
    IF NOT FOUND THEN
        SELECT s.* INTO done FROM @extschema@.job_steps s WHERE s.job_id = rq_step.id AND s.name = rq_step.name;
        PERFORM raquel_internal.rq_refuse('step_recorded',
            ARRAY[rq_step.name, rq_step.id::text, done.attempt::text]);
    END IF;
    RETURN step;
END
$$;
