-- Every bad input gets a SQLSTATE, a message naming the value, and changes
-- nothing. After each error, psql's LAST_ERROR_SQLSTATE shows its code.
\set SHOW_CONTEXT never

SELECT id AS queued FROM rq_enqueue('q', 'waiting') \gset
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
SELECT rq_complete(NULL);
\echo :LAST_ERROR_SQLSTATE

-- P0002 no_data_found: no such job
SELECT rq_complete('00000000-0000-7000-8000-000000000000');
\echo :LAST_ERROR_SQLSTATE
SELECT rq_fail('00000000-0000-7000-8000-000000000000', 'boom');
\echo :LAST_ERROR_SQLSTATE

-- 55000 object_not_in_prerequisite_state: the job is not claimed
SELECT rq_complete(:'queued');
\echo :LAST_ERROR_SQLSTATE
SELECT rq_fail(:'queued');
\echo :LAST_ERROR_SQLSTATE

-- 23514 check_violation: the table refuses impossible rows
INSERT INTO jobs (queue, status) VALUES ('q', 'done');
\echo :LAST_ERROR_SQLSTATE
INSERT INTO jobs (queue, min_retry_delay) VALUES ('q', -1);
\echo :LAST_ERROR_SQLSTATE

-- Nothing changed.
SELECT count(*) = :before_jobs AS same_count,
       md5(string_agg(j::text, '' ORDER BY id)) = :'before_digest' AS same_rows
FROM jobs j;
