-- Finishing a claimed job. Both verbs take the claim's attempt number as an
-- optional fencing token: a worker whose lease ran out and whose job was
-- handed to someone else gets an error instead of overwriting the new
-- holder's attempt. Each is one UPDATE on the hot path; only when it matches
-- nothing does rq_raise_cannot look at the row to say why.

CREATE FUNCTION rq_complete(id uuid, attempt integer DEFAULT NULL) RETURNS jobs
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    job jobs;
BEGIN
    UPDATE jobs j
    SET status = 'success', finished_at = rq_now_ms(), lease_expires_at = NULL
    WHERE j.id = rq_complete.id
      AND j.status = 'claimed'
      AND (rq_complete.attempt IS NULL OR j.attempts = rq_complete.attempt)
    RETURNING j.* INTO job;
    IF NOT FOUND THEN
        PERFORM rq_raise_cannot(rq_complete.id, rq_complete.attempt, 'complete', '{claimed}');
    END IF;
    RETURN job;
END
$$;

-- A failed attempt: retried after rq_backoff(n, …) ms, or, with no retry
-- left (n > max_retry_count), exhausted for good; n = attempts - requeues,
-- the attempts that were not handed back.
CREATE FUNCTION rq_fail(
    id          uuid,
    error       text    DEFAULT NULL,
    error_trace text    DEFAULT NULL,
    attempt     integer DEFAULT NULL
) RETURNS jobs
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    now_ms bigint := rq_now_ms();
    job    jobs;
BEGIN
    UPDATE jobs j
    SET status = CASE WHEN j.attempts - j.requeues > j.max_retry_count THEN 'exhausted' ELSE 'failed' END,
        finished_at = CASE WHEN j.attempts - j.requeues > j.max_retry_count THEN now_ms END,
        scheduled_at = CASE WHEN j.attempts - j.requeues > j.max_retry_count THEN j.scheduled_at
                            ELSE now_ms + rq_backoff(j.attempts - j.requeues, coalesce(j.backoff_base, 1000),
                                                     coalesce(j.min_retry_delay, 1000),
                                                     coalesce(j.max_retry_delay, 43200000))
                       END,
        error = rq_fail.error,
        error_trace = rq_fail.error_trace,
        lease_expires_at = NULL
    WHERE j.id = rq_fail.id
      AND j.status = 'claimed'
      AND (rq_fail.attempt IS NULL OR j.attempts = rq_fail.attempt)
    RETURNING j.* INTO job;
    IF NOT FOUND THEN
        PERFORM rq_raise_cannot(rq_fail.id, rq_fail.attempt, 'fail', '{claimed}');
    END IF;
    RETURN job;
END
$$;
