-- Explaining a refusal. The argument checks themselves are in Rust
-- (src/checks.rs), shared by the verbs written in Rust and, through
-- rq_check_batch, by the duties.

-- Explains why a verb matched no row: the id is null, no such job, the job's
-- status is not one the verb takes, or the caller's claim is stale (fencing).
-- Called only after the verb's UPDATE matched nothing; it always raises.
CREATE FUNCTION rq_raise_cannot(id uuid, attempt integer, verb text, allowed text[]) RETURNS void
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    job @extschema@.jobs;
BEGIN
    IF rq_raise_cannot.id IS NULL THEN
        RAISE EXCEPTION 'cannot % a job: id must not be null', verb
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT * INTO job FROM @extschema@.jobs j WHERE j.id = rq_raise_cannot.id;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'cannot % job %: no such job', verb, rq_raise_cannot.id
            USING ERRCODE = 'no_data_found';
    ELSIF NOT job.status = ANY (allowed) THEN
        RAISE EXCEPTION 'cannot % job %: its status is %', verb, job.id, job.status
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = format('rq_%s takes a job whose status is %s.', verb, array_to_string(allowed, ' or '));
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
