-- Who may do what. rq_enqueue and rq_enqueue_batch run with the extension
-- owner's rights: a producer role needs EXECUTE on them and no privilege on
-- the table, so it can enqueue and do nothing else. Workers run the claim
-- and finish verbs with their own rights: a worker role needs SELECT and
-- UPDATE on jobs, and nothing on any other table.

REVOKE EXECUTE ON FUNCTION
    rq_enqueue(text, text, timestamptz, interval, interval, integer, interval, interval, interval, integer, text),
    rq_enqueue(text, jsonb, timestamptz, interval, interval, integer, interval, interval, interval, integer, text),
    rq_enqueue_batch(text, text[], timestamptz, interval, interval, integer, interval, interval, interval, integer, text[]),
    rq_enqueue_batch(text, jsonb[], timestamptz, interval, interval, integer, interval, interval, interval, integer, text[])
FROM PUBLIC;

-- Lets `role` enqueue jobs (and nothing else).
CREATE FUNCTION rq_grant_producer(role regrole) RETURNS void
LANGUAGE plpgsql
AS $$
BEGIN
    EXECUTE format('GRANT USAGE ON SCHEMA %s TO %s', '@extschema@', role);
    EXECUTE format('GRANT EXECUTE ON FUNCTION
        %1$s.rq_enqueue(text, text, timestamptz, interval, interval, integer, interval, interval, interval, integer, text),
        %1$s.rq_enqueue(text, jsonb, timestamptz, interval, interval, integer, interval, interval, interval, integer, text),
        %1$s.rq_enqueue_batch(text, text[], timestamptz, interval, interval, integer, interval, interval, interval, integer, text[]),
        %1$s.rq_enqueue_batch(text, jsonb[], timestamptz, interval, interval, integer, interval, interval, interval, integer, text[])
        TO %2$s', '@extschema@', role);
END
$$;

-- Lets `role` claim, finish, hand back and extend jobs: SELECT and UPDATE on
-- the jobs table, and nothing on any other table.
CREATE FUNCTION rq_grant_worker(role regrole) RETURNS void
LANGUAGE plpgsql
AS $$
BEGIN
    EXECUTE format('GRANT USAGE ON SCHEMA %s TO %s', '@extschema@', role);
    EXECUTE format('GRANT SELECT, UPDATE ON %s.jobs TO %s', '@extschema@', role);
END
$$;

REVOKE EXECUTE ON FUNCTION rq_grant_producer(regrole), rq_grant_worker(regrole) FROM PUBLIC;
