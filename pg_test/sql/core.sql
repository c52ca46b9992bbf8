-- The core protocol: enqueue, claim, complete, fail.
-- Ids and times differ on every run, so this file shows the columns that do
-- not, and times as differences.
\set SHOW_CONTEXT never
SET intervalstyle = postgres;  -- pg_regress picks a verbose style; show the default

-- Enqueue a job: text or jsonb payload, into a named queue.
SELECT queue, payload, status, attempts, max_retry_count, min_retry_delay,
       max_retry_delay, backoff_base, priority, scheduled_at = enqueued_at AS due_now
FROM rq_enqueue('emails', 'hello');

SELECT payload FROM rq_enqueue('emails', '{"to": "a@b.c"}'::jsonb);

-- Options are intervals at the SQL surface and milliseconds in the table.
SELECT max_age, max_retry_count, min_retry_delay, max_retry_delay, backoff_base,
       scheduled_at - enqueued_at AS delay_ms
FROM rq_enqueue('reports', 'monthly', delay => '10 minutes', max_age => '1 hour',
                max_retry_count => 3, min_retry_delay => '5 seconds',
                max_retry_delay => '1 hour', backoff_base => '2 seconds');

-- The Python library's plain INSERT enqueues a job too.
INSERT INTO jobs (queue, payload) VALUES ('emails', 'from a plain insert');

-- Claim: each claim is an attempt and a lease (default one minute).
SELECT payload, status, attempts, claimed_by, lease_expires_at - claimed_at AS lease_ms
FROM rq_claim(ARRAY['emails'], worker => 'w1', batch => 2);

-- The job scheduled ten minutes from now is not ready yet.
SELECT count(*) AS ready_reports FROM rq_claim(ARRAY['reports']);

-- Complete one claimed job, fail the other: it waits 1 s before its retry.
SELECT status, finished_at >= claimed_at AS finished
FROM rq_complete((SELECT id FROM jobs WHERE payload = 'hello'), attempt => 1);

SELECT status, attempts, error, scheduled_at - claimed_at >= 1000 AS backs_off
FROM rq_fail((SELECT id FROM jobs WHERE payload = '{"to": "a@b.c"}'), attempt => 1,
             error => 'smtp timeout', error_trace => 'Traceback …');

-- The backoff schedule: base * 2^(attempt-1), clamped to [min, max].
SELECT attempt, rq_backoff(attempt, 1000, 1000, 43200000) AS delay_ms
FROM unnest(ARRAY[1, 2, 3, 4, 10, 16, 17, 10000]) AS attempt;

-- Retries: max_retry_count => 1 allows two attempts, then the job is exhausted.
SELECT id AS retried FROM rq_enqueue('once', 'x', max_retry_count => 1) \gset
SELECT status, attempts FROM rq_claim(ARRAY['once']);
SELECT status, attempts FROM rq_fail(:'retried', 1, 'first');
UPDATE jobs SET scheduled_at = rq_now_ms() WHERE id = :'retried';  -- skip the backoff
SELECT status, attempts FROM rq_claim(ARRAY['once']);
SELECT status, attempts, finished_at IS NOT NULL AS finished FROM rq_fail(:'retried', 2, 'second');

-- Fencing: a claim's attempts value is its token; an old one is refused.
-- (A fixed id and no backoff, so the output reads the same every run.)
INSERT INTO jobs (id, queue, min_retry_delay, backoff_base)
VALUES ('00000000-0000-7000-8000-0000000000f1', 'fenced', 0, 0);
\set fenced 00000000-0000-7000-8000-0000000000f1
SELECT attempts FROM rq_claim(ARRAY['fenced']);
SELECT status FROM rq_fail(:'fenced', 1, 'lease expired');
SELECT attempts FROM rq_claim(ARRAY['fenced']);
SELECT rq_complete(:'fenced', attempt => 1);
\echo :LAST_ERROR_SQLSTATE
SELECT status, attempts FROM rq_complete(:'fenced', attempt => 2);

-- What is where.
SELECT queue, status, count(*) FROM jobs GROUP BY queue, status ORDER BY queue, status;
