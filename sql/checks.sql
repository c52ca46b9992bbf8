-- Argument checks shared by the verbs. Each raises before anything is
-- written, with a SQLSTATE and a message that names the bad value.

-- A queue name: not null, not empty.
CREATE FUNCTION rq_check_queue(queue text) RETURNS void
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
AS $$
BEGIN
    IF queue IS NULL THEN
        RAISE EXCEPTION 'queue must not be null'
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Name a queue, or leave the argument out for ''default''.';
    ELSIF queue = '' THEN
        RAISE EXCEPTION 'queue must not be an empty name'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
END
$$;

-- Explains why a job could not be finished, completed, failed…: it does not
-- exist, it is not claimed, or the caller's claim is stale (fencing). Called
-- only after the verb's UPDATE matched no row; it always raises.
CREATE FUNCTION rq_raise_not_claimed(id uuid, attempt integer, verb text) RETURNS void
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    job jobs;
BEGIN
    IF rq_raise_not_claimed.id IS NULL THEN
        RAISE EXCEPTION 'cannot % a job: id must not be null', verb
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT * INTO job FROM jobs j WHERE j.id = rq_raise_not_claimed.id;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'cannot % job %: no such job', verb, rq_raise_not_claimed.id
            USING ERRCODE = 'no_data_found';
    ELSIF job.status <> 'claimed' THEN
        RAISE EXCEPTION 'cannot % job %: its status is %, not claimed', verb, job.id, job.status
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = 'Only a job that a worker holds (status claimed) can be finished.';
    ELSIF attempt IS NOT NULL AND attempt <> job.attempts THEN
        RAISE EXCEPTION 'cannot % job %: the claim on attempt % is stale, the job is on attempt %',
                verb, job.id, attempt, job.attempts
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = 'The lease ran out and the job was handed out again; this worker''s result no longer counts.';
    ELSE
        RAISE EXCEPTION 'cannot % job %: it changed while this call ran', verb, job.id
            USING ERRCODE = 'serialization_failure', HINT = 'Try again.';
    END IF;
END
$$;
