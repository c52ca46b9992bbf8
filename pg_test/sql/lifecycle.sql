-- The rest of a job's life: reschedule, reject, extend, cancel, retry.
\set SHOW_CONTEXT never
SET intervalstyle = postgres;  -- pg_regress picks a verbose style; show the default

-- Jobs with fixed ids, so that the output reads the same every run.
INSERT INTO jobs (id, queue, payload, max_retry_count) VALUES
    ('00000000-0000-7000-8000-000000000001', 'mail', 'not yet', 0),
    ('00000000-0000-7000-8000-000000000002', 'mail', 'not me', 0),
    ('00000000-0000-7000-8000-000000000003', 'mail', 'slow', NULL),
    ('00000000-0000-7000-8000-000000000004', 'mail', 'unwanted', NULL);
\set later  00000000-0000-7000-8000-000000000001
\set other  00000000-0000-7000-8000-000000000002
\set slow   00000000-0000-7000-8000-000000000003
\set unwanted 00000000-0000-7000-8000-000000000004

SELECT payload, status, attempts FROM rq_claim(ARRAY['mail'], worker => 'w1', batch => 3);

-- Reschedule: back to queued at a later time; the claim counts as an
-- attempt, but uses up no retry (requeues counts such claims).
SELECT status, attempts, requeues, claimed_by, scheduled_at - rq_now_ms() > 590000 AS in_ten_minutes
FROM rq_reschedule(:'later', 1, delay => '10 minutes');

-- Reject: back to queued at once, for another worker.
SELECT status, attempts, requeues, claimed_by, claimed_at FROM rq_reject(:'other', 1);
SELECT payload, attempts, claimed_by FROM rq_claim(ARRAY['mail'], worker => 'w2');
-- max_retry_count 0, yet the job failing now is its first failure: exhausted
-- only because no retry is allowed, not because the rejected claim used one.
SELECT status, attempts, requeues FROM rq_fail(:'other', 2, 'boom');

-- Extend: a heartbeat pushes the lease out.
SELECT lease_expires_at - rq_now_ms() > 290000 AS five_minutes_left
FROM rq_extend(:'slow', 1, lease => '5 minutes');

-- Cancel: any unfinished job, for good.
SELECT status, finished_at IS NOT NULL AS finished FROM rq_cancel(:'unwanted');
SELECT rq_cancel(:'unwanted');
\echo :LAST_ERROR_SQLSTATE

-- Retry: an operator puts an ended job back, due now, with its retry budget.
SELECT status, attempts, requeues, finished_at FROM rq_retry(:'other');
SELECT status FROM rq_retry(:'unwanted');

-- Wrong states are errors that change nothing.
SELECT rq_reject(:'later', 1);
\echo :LAST_ERROR_SQLSTATE
SELECT rq_retry(:'slow');
\echo :LAST_ERROR_SQLSTATE
SELECT rq_extend('00000000-0000-7000-8000-0000000000ff', 1);
\echo :LAST_ERROR_SQLSTATE

SELECT payload, status, attempts, requeues FROM jobs WHERE queue = 'mail' ORDER BY id;
