-- A job's history (rq_history, past_attempts): every attempt that ended
-- without ending the job is kept in its row, through the direct writer
-- and through the statement (raquel.direct_writes off). Times vary from
-- run to run: only their presence and order are shown.
\pset null '(null)'
\set SHOW_CONTEXT never

CREATE FUNCTION pg_temp.story(id uuid) RETURNS TABLE (attempt integer, worker text, claimed boolean,
    ended boolean, in_order boolean, outcome text, error text, trace text)
LANGUAGE sql AS $$
    SELECT h.attempt, h.worker, h.claimed_at IS NOT NULL, h.ended_at IS NOT NULL,
           h.ended_at >= h.claimed_at, h.outcome, h.error, h.trace
    FROM rq_history(id) h
$$;

-- Failed (E1), then its lease lapsed and rescued, then completed: three
-- attempts, the first error intact. Retries are due at once (no backoff).
SELECT id AS failed_rescued FROM rq_enqueue('hist-direct', 'x', min_retry_delay => '0', backoff_base => '0') \gset
SELECT f.status, f.error FROM rq_claim(ARRAY['hist-direct'], 'w1') c, rq_fail(c.id, c.attempts, 'E1', 'trace of E1') f;
SELECT jsonb_array_length(past_attempts) AS kept FROM jobs WHERE id = :'failed_rescued';
SELECT status, attempts FROM rq_claim(ARRAY['hist-direct'], 'w2', lease => '10 milliseconds');
SELECT pg_sleep(0.05);
SELECT rq_rescue() <= 1 AS rescued;   -- (or the background worker did)
SELECT status FROM jobs WHERE id = :'failed_rescued';
SELECT d.status FROM rq_claim(ARRAY['hist-direct'], 'w3') c, rq_complete(c.id, c.attempts) d;
SELECT * FROM pg_temp.story(:'failed_rescued');

-- The same through the statement.
SET raquel.direct_writes = off;
SELECT id AS failed_rescued FROM rq_enqueue('hist-statement', 'x', min_retry_delay => '0', backoff_base => '0') \gset
SELECT f.status, f.error FROM rq_claim(ARRAY['hist-statement'], 'w1') c, rq_fail(c.id, c.attempts, 'E1', 'trace of E1') f;
SELECT status, attempts FROM rq_claim(ARRAY['hist-statement'], 'w2', lease => '10 milliseconds');
SELECT pg_sleep(0.05);
SELECT rq_rescue() <= 1 AS rescued;
SELECT d.status FROM rq_claim(ARRAY['hist-statement'], 'w3') c, rq_complete(c.id, c.attempts) d;
SELECT * FROM pg_temp.story(:'failed_rescued');
-- A job this transaction took (rq_take) and failed: its attempt, worker
-- and claim are the take's.
BEGIN;
SELECT id AS taken FROM rq_enqueue('hist-take', 'x') \gset
SELECT f.status FROM rq_take(ARRAY['hist-take'], 'taker') t, rq_fail(t.id, t.attempts, 'E taken') f;
COMMIT;
SELECT * FROM pg_temp.story(:'taken');
RESET raquel.direct_writes;

-- A first-attempt success writes no history.
SELECT id AS first_time FROM rq_enqueue('hist-once', 'x') \gset
SELECT d.status FROM rq_claim(ARRAY['hist-once'], 'w') c, rq_complete(c.id, c.attempts) d;
SELECT past_attempts FROM jobs WHERE id = :'first_time';
SELECT * FROM pg_temp.story(:'first_time');

-- Rescheduled, rejected, exhausted, retried, running again.
SELECT id AS moved FROM rq_enqueue('hist-moves', 'x', max_retry_count => 0) \gset
SELECT r.status FROM rq_claim(ARRAY['hist-moves'], 'w1') c, rq_reschedule(c.id, c.attempts, at => now() - interval '1 second') r;
SELECT r.status FROM rq_claim(ARRAY['hist-moves'], 'w2') c, rq_reject(c.id, c.attempts) r;
SELECT f.status FROM rq_claim(ARRAY['hist-moves'], 'w3') c, rq_fail(c.id, c.attempts, 'E3', 'trace of E3') f;
SELECT status FROM rq_retry(:'moved');
SELECT status, attempts FROM rq_claim(ARRAY['hist-moves'], 'w4');
SELECT * FROM pg_temp.story(:'moved');

-- A sleep parks its job through rq_reschedule: 'rescheduled'.
SELECT id AS slept FROM rq_enqueue('hist-sleep', 'x') \gset
SELECT rq_sleep(c.id, c.attempts, 'nap', delay => '1 hour') AS sleeps FROM rq_claim(ARRAY['hist-sleep'], 'w1') c;
SELECT * FROM pg_temp.story(:'slept');
DELETE FROM job_steps WHERE job_id = :'slept';   -- (bad_input counts them)

-- Cancelled while claimed: its attempt's end. Cancelled while it waited
-- after a reschedule, then retried: the cancel has no worker or claim.
SELECT id AS cancelled FROM rq_enqueue('hist-cancel', 'x') \gset
SELECT c.attempts FROM rq_claim(ARRAY['hist-cancel'], 'w1') c;
SELECT status FROM rq_cancel(:'cancelled');
SELECT * FROM pg_temp.story(:'cancelled');
SELECT id AS waited FROM rq_enqueue('hist-cancel', 'x') \gset
SELECT r.status FROM rq_claim(ARRAY['hist-cancel'], 'w1') c, rq_reschedule(c.id, c.attempts, delay => '1 hour') r;
SELECT status FROM rq_cancel(:'waited');
SELECT * FROM pg_temp.story(:'waited');
SELECT status FROM rq_retry(:'waited');
SELECT * FROM pg_temp.story(:'waited');
-- never claimed
SELECT id AS never FROM rq_enqueue('hist-cancel', 'x', delay => '1 hour') \gset
SELECT status FROM rq_cancel(:'never');
SELECT * FROM pg_temp.story(:'never');

-- Retried for ever: the last 100 earlier attempts are kept, through both paths.
SELECT id AS forever FROM rq_enqueue('hist-cap', 'x', min_retry_delay => '0', backoff_base => '0') \gset
DO $$
BEGIN
    FOR i IN 1..105 LOOP
        IF i = 60 THEN
            SET LOCAL raquel.direct_writes = off;
        END IF;
        PERFORM rq_fail(c.id, c.attempts, 'E' || i) FROM rq_claim(ARRAY['hist-cap'], 'w') c;
    END LOOP;
END
$$;
SELECT jsonb_array_length(past_attempts) AS kept, past_attempts -> 0 ->> 'attempt' AS oldest,
       past_attempts -> -1 ->> 'attempt' AS newest, past_attempts -> -1 ->> 'error' AS last_error
FROM jobs WHERE id = :'forever';
SELECT count(*), min(attempt), max(attempt) FROM rq_history(:'forever');

-- Errors and traces are kept as given (quotes, backslashes, control characters).
SELECT id AS odd FROM rq_enqueue('hist-odd', 'x', min_retry_delay => '0', backoff_base => '0') \gset
SELECT f.status FROM rq_claim(ARRAY['hist-odd'], 'w') c,
    rq_fail(c.id, c.attempts, E'say "hi"\\ \t\n\u00e9 \x01', NULL) f;
SELECT error = E'say "hi"\\ \t\n\u00e9 \x01' AS intact, trace FROM rq_history(:'odd');

-- An unknown id and NULL are refused.
SELECT * FROM rq_history('00000000-0000-7000-8000-000000000000');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM rq_history(NULL);
\echo :LAST_ERROR_SQLSTATE
