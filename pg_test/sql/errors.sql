-- Every bad input gets a SQLSTATE, a message naming the value, and changes
-- nothing. After each error, psql's LAST_ERROR_SQLSTATE shows its code.
\set SHOW_CONTEXT never
SET intervalstyle = postgres;  -- pg_regress picks a verbose style; show the default

-- A waiting job with a fixed id, so that messages naming it read the same every run.
INSERT INTO jobs (id, queue, payload) VALUES ('00000000-0000-7000-8000-00000000000a', 'q', 'waiting');
\set queued 00000000-0000-7000-8000-00000000000a
SELECT count(*) AS jobs, md5(string_agg(j::text, '' ORDER BY id)) AS digest FROM jobs j \gset before_

-- 22023 invalid_parameter_value
SELECT rq_enqueue(NULL, 'x');
\echo :LAST_ERROR_SQLSTATE
SELECT rq_enqueue('', 'x');
\echo :LAST_ERROR_SQLSTATE
SELECT rq_enqueue('q', 'x', delay => '-1 second');
\echo :LAST_ERROR_SQLSTATE
SELECT rq_enqueue('q', 'x', delay => '200 years');
\echo :LAST_ERROR_SQLSTATE
SELECT rq_enqueue('q', 'x', at => 'infinity');
\echo :LAST_ERROR_SQLSTATE
SELECT rq_enqueue('q', 'x', max_age => '0');
\echo :LAST_ERROR_SQLSTATE
SELECT rq_enqueue('q', 'x', max_retry_count => -1);
\echo :LAST_ERROR_SQLSTATE
SELECT rq_enqueue('q', 'x', max_retry_delay => '30 days');
\echo :LAST_ERROR_SQLSTATE
SELECT rq_enqueue('q', 'x', min_retry_delay => '1 hour', max_retry_delay => '1 minute');
\echo :LAST_ERROR_SQLSTATE
SELECT rq_claim(ARRAY['q'], batch => 0);
\echo :LAST_ERROR_SQLSTATE
SELECT rq_claim(ARRAY['q'], lease => '-1 minute');
\echo :LAST_ERROR_SQLSTATE
SELECT rq_claim(ARRAY['q'], lease => '5 years');
\echo :LAST_ERROR_SQLSTATE
SELECT rq_claim(ARRAY['q', NULL]);
\echo :LAST_ERROR_SQLSTATE
SELECT rq_complete(NULL, 1);
\echo :LAST_ERROR_SQLSTATE

-- 22004 null_value_not_allowed: a verb on a claimed job without its attempt
SELECT rq_complete('00000000-0000-7000-8000-000000000000', NULL);
\echo :LAST_ERROR_SQLSTATE

-- P0002 no_data_found: no such job
SELECT rq_complete('00000000-0000-7000-8000-000000000000', 1);
\echo :LAST_ERROR_SQLSTATE
SELECT rq_fail('00000000-0000-7000-8000-000000000000', 1, 'boom');
\echo :LAST_ERROR_SQLSTATE

-- 55000 object_not_in_prerequisite_state: the job is not claimed
SELECT rq_complete(:'queued', 1);
\echo :LAST_ERROR_SQLSTATE
SELECT rq_fail(:'queued', 1);
\echo :LAST_ERROR_SQLSTATE

-- 23514 check_violation: the table refuses impossible rows, inserted or
-- updated: a single value by its column's domain, values that contradict
-- each other by the table's trigger (sql/schema.sql)
INSERT INTO jobs (id, queue, status, enqueued_at, scheduled_at)
VALUES ('00000000-0000-7000-8000-00000000000b', 'q', 'done', 0, 0);
\echo :LAST_ERROR_SQLSTATE
INSERT INTO jobs (id, queue, min_retry_delay, enqueued_at, scheduled_at)
VALUES ('00000000-0000-7000-8000-00000000000c', 'q', -1, 0, 0);
\echo :LAST_ERROR_SQLSTATE
INSERT INTO jobs (queue, max_age) VALUES ('q', 0);
\echo :LAST_ERROR_SQLSTATE
INSERT INTO jobs (queue, min_retry_delay, max_retry_delay) VALUES ('q', 5000, 1000);
\echo :LAST_ERROR_SQLSTATE
UPDATE jobs SET status = 'done' WHERE id = :'queued';
\echo :LAST_ERROR_SQLSTATE
UPDATE jobs SET attempts = -1 WHERE id = :'queued';
\echo :LAST_ERROR_SQLSTATE
UPDATE jobs SET requeues = attempts + 1 WHERE id = :'queued';
\echo :LAST_ERROR_SQLSTATE
UPDATE jobs SET max_retry_delay = 10 WHERE id = :'queued';
\echo :LAST_ERROR_SQLSTATE
SELECT raquel_internal.rq_job_values();
\echo :LAST_ERROR_SQLSTATE

-- Nothing changed.
SELECT count(*) = :before_jobs AS same_count,
       md5(string_agg(j::text, '' ORDER BY id)) = :'before_digest' AS same_rows
FROM jobs j;
