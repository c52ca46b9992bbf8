-- Bad calls to every function of the extension. Each one must be refused with
-- a documented SQLSTATE (never XX000, which is a bug), change nothing, and
-- leave the server up.
--
-- After each call, pg_temp.outcome(intended, :'SQLSTATE') prints one line:
--   intended X, got Y, nothing changed
-- X is the SQLSTATE the call must give, Y the one it gave (00000: no error),
-- and "nothing changed" says that the jobs table (its row count and the md5
-- of every row) is still the baseline taken below. When the call gave
-- another SQLSTATE, or changed the table, the line says "jobs CHANGED"
-- and/or ends with "<-- differs": that call is a defect. A call that changed
-- the table has the baseline put back, so every call starts from it.
--
-- Values of kilobytes and more are shown by SQLSTATE only (VERBOSITY
-- sqlstate), so that their messages do not fill this file.
\set SHOW_CONTEXT never
\set VERBOSITY default
SET intervalstyle = postgres;  -- pg_regress picks a verbose style; show the default

-- Jobs with fixed ids, in every status a verb may find, with times that no
-- duty of the background worker acts on (no max_age; a lease a day long;
-- finished just now, so kept for the retention).
INSERT INTO jobs (id, queue, payload, status, attempts, claimed_by, claimed_at,
                  lease_expires_at, finished_at, key)
VALUES ('00000000-0000-7000-8000-00000000000a', 'q', 'queued', 'queued', 0, NULL, NULL, NULL, NULL, NULL),
       ('00000000-0000-7000-8000-00000000000b', 'q', 'claimed', 'claimed', 2, 'w1', rq_now_ms(),
        rq_now_ms() + 86400000, NULL, NULL),
       ('00000000-0000-7000-8000-00000000000c', 'q', 'success', 'success', 1, 'w1', rq_now_ms(),
        NULL, rq_now_ms(), NULL),
       ('00000000-0000-7000-8000-00000000000d', 'q', 'cancelled', 'cancelled', 0, NULL, NULL, NULL, rq_now_ms(), NULL),
       ('00000000-0000-7000-8000-00000000000e', 'keyed', 'old holder', 'cancelled', 0, NULL, NULL, NULL, rq_now_ms(), 'k'),
       ('00000000-0000-7000-8000-00000000000f', 'keyed', 'new holder', 'queued', 0, NULL, NULL, NULL, NULL, 'k');
\set queued    00000000-0000-7000-8000-00000000000a
\set claimed   00000000-0000-7000-8000-00000000000b
\set succeeded 00000000-0000-7000-8000-00000000000c
\set cancelled 00000000-0000-7000-8000-00000000000d
\set old_key   00000000-0000-7000-8000-00000000000e
\set unknown   00000000-0000-7000-8000-000000000000

CREATE TEMP TABLE baseline AS SELECT * FROM jobs;
-- SECURITY DEFINER: it also runs after calls made as a role that cannot
-- read jobs.
CREATE FUNCTION pg_temp.outcome(intended text, got text) RETURNS text
LANGUAGE plpgsql SECURITY DEFINER AS $$
DECLARE
    unchanged boolean;
BEGIN
    SELECT count(*) = (SELECT count(*) FROM baseline)
           AND coalesce(md5(string_agg(j::text, '' ORDER BY j.id))
                        = (SELECT md5(string_agg(b::text, '' ORDER BY b.id)) FROM baseline b), false)
    INTO unchanged
    FROM jobs j;
    IF NOT unchanged THEN
        DELETE FROM jobs;
        INSERT INTO jobs SELECT * FROM baseline;
    END IF;
    RETURN format('intended %s, got %s, %s', intended, got,
                  CASE WHEN unchanged THEN 'nothing changed' ELSE 'jobs CHANGED' END)
        || CASE WHEN unchanged AND got = ANY (string_to_array(intended, ' or ')) THEN ''
                ELSE '   <-- differs' END;
END
$$;
-- For a call that is not bad after all and adds or changes a job: whether
-- it succeeded; the baseline is put back.
CREATE FUNCTION pg_temp.accepted(got text) RETURNS text
LANGUAGE plpgsql SECURITY DEFINER AS $$
BEGIN
    DELETE FROM jobs;
    INSERT INTO jobs SELECT * FROM baseline;
    RETURN format('accepted, got %s', got) || CASE WHEN got = '00000' THEN '' ELSE '   <-- differs' END;
END
$$;
-- One line per outcome, and bare values from a bad call that returns rows.
\pset tuples_only on
\pset format unaligned

-- Names: 1001 bytes (one more than the documented maximum of 1000), 600
-- two-byte characters (1200 bytes), 3200 bytes that do not compress (past
-- what a btree index row can hold).
SELECT repeat('n', 1001) AS name1001, repeat('é', 600) AS name1200,
       string_agg(md5(i::text), '' ORDER BY i) AS name3200
FROM generate_series(1, 100) i \gset
-- A payload of 16 MB: larger than the payload limit.
\set big_payload 'repeat(\'x\', 16777216)'

--------------------------------------------------------------------------
-- rq_enqueue: NULL and empty queue; durations negative, zero, past their
-- bound and huge; infinite instants; instants whose milliseconds since the
-- epoch overflow the conversion; a due time beyond timestamptz.
SELECT status FROM rq_enqueue(NULL, 'x');
SELECT pg_temp.outcome('22023', :'SQLSTATE');
SELECT status FROM rq_enqueue(NULL::text, '{}'::jsonb);
SELECT pg_temp.outcome('22023', :'SQLSTATE');
SELECT status FROM rq_enqueue('', 'x');
SELECT pg_temp.outcome('22023', :'SQLSTATE');
SELECT status FROM rq_enqueue('q', 'x', at => 'infinity');
SELECT pg_temp.outcome('22023', :'SQLSTATE');
SELECT status FROM rq_enqueue('q', 'x', at => '-infinity');
SELECT pg_temp.outcome('22023', :'SQLSTATE');
-- PostgreSQL's last years are valid instants: such a job is due then, in
-- the far future (0.1.0 stored them wrapped round, as long past, and ran
-- them at once).
SELECT scheduled_at > rq_now_ms() + 3153600000000 * 2000 AS far_future FROM rq_enqueue('q', 'x', at => '294276-01-01');
SELECT pg_temp.accepted(:'SQLSTATE');
SELECT scheduled_at > 0 AS far_future FROM rq_enqueue('q', 'x', at => '294276-12-31 23:59:59.999999+00');
SELECT pg_temp.accepted(:'SQLSTATE');
SELECT status FROM rq_enqueue('q', 'x', at => '294200-01-01', delay => '36500 days');
SELECT pg_temp.outcome('22023', :'SQLSTATE');
SELECT status FROM rq_enqueue('q', 'x', delay => '-1 second');
SELECT pg_temp.outcome('22023', :'SQLSTATE');
SELECT status FROM rq_enqueue('q', 'x', delay => '36501 days');
SELECT pg_temp.outcome('22023', :'SQLSTATE');
SELECT status FROM rq_enqueue('q', 'x', delay => '178000000 years');
SELECT pg_temp.outcome('22023', :'SQLSTATE');
SELECT status FROM rq_enqueue('q', 'x', delay => '-178000000 years');
SELECT pg_temp.outcome('22023', :'SQLSTATE');
SELECT status FROM rq_enqueue('q', 'x', max_age => '0');
SELECT pg_temp.outcome('22023', :'SQLSTATE');
SELECT status FROM rq_enqueue('q', 'x', max_age => '-1 hour');
SELECT pg_temp.outcome('22023', :'SQLSTATE');
SELECT status FROM rq_enqueue('q', 'x', max_age => '2147483647 days');
SELECT pg_temp.outcome('22023', :'SQLSTATE');
SELECT status FROM rq_enqueue('q', 'x', max_retry_count => -1);
SELECT pg_temp.outcome('22023', :'SQLSTATE');
SELECT status FROM rq_enqueue('q', 'x', min_retry_delay => '-1 ms');
SELECT pg_temp.outcome('22023', :'SQLSTATE');
SELECT status FROM rq_enqueue('q', 'x', max_retry_delay => '25 days');
SELECT pg_temp.outcome('22023', :'SQLSTATE');
SELECT status FROM rq_enqueue('q', 'x', backoff_base => '-178000000 years');
SELECT pg_temp.outcome('22023', :'SQLSTATE');
SELECT status FROM rq_enqueue('q', 'x', min_retry_delay => '1 hour', max_retry_delay => '1 minute');
SELECT pg_temp.outcome('22023', :'SQLSTATE');

-- rq_enqueue: names past the maximum (queue, key), and a payload past the limit.
\set VERBOSITY sqlstate
SELECT status FROM rq_enqueue(:'name1001', 'x');
SELECT pg_temp.outcome('22023', :'SQLSTATE');
SELECT status FROM rq_enqueue(:'name1200', 'x');
SELECT pg_temp.outcome('22023', :'SQLSTATE');
SELECT status FROM rq_enqueue(:'name3200', 'x');
SELECT pg_temp.outcome('22023', :'SQLSTATE');
SELECT status FROM rq_enqueue('q', 'x', key => :'name1001');
SELECT pg_temp.outcome('22023', :'SQLSTATE');
SELECT status FROM rq_enqueue('q', 'x', key => :'name3200');
SELECT pg_temp.outcome('22023', :'SQLSTATE');
SELECT status FROM rq_enqueue('q', :big_payload);
SELECT pg_temp.outcome('54000 or 22023', :'SQLSTATE');
SELECT status FROM rq_enqueue('q', to_jsonb(:big_payload));
SELECT pg_temp.outcome('54000 or 22023', :'SQLSTATE');
\set VERBOSITY default

--------------------------------------------------------------------------
-- rq_enqueue_batch (text[] and jsonb[]): NULL queue and payloads; arrays of
-- two dimensions as payloads or keys; keys that do not pair with the
-- payloads; the options' checks; long names; a large payload.
SELECT count(*) FROM rq_enqueue_batch(NULL, ARRAY['x']);
SELECT pg_temp.outcome('22023', :'SQLSTATE');
SELECT count(*) FROM rq_enqueue_batch('', ARRAY['x']);
SELECT pg_temp.outcome('22023', :'SQLSTATE');
SELECT count(*) FROM rq_enqueue_batch('q', NULL::text[]);
SELECT pg_temp.outcome('22023', :'SQLSTATE');
SELECT count(*) FROM rq_enqueue_batch('q', NULL::jsonb[]);
SELECT pg_temp.outcome('22023', :'SQLSTATE');
SELECT count(*) FROM rq_enqueue_batch('q', ARRAY[['a'], ['b']]);
SELECT pg_temp.outcome('22023', :'SQLSTATE');
SELECT count(*) FROM rq_enqueue_batch('q', ARRAY[['{"a": 1}'], ['{"b": 2}']]::jsonb[]);
SELECT pg_temp.outcome('22023', :'SQLSTATE');
SELECT count(*) FROM rq_enqueue_batch('q', ARRAY['a', 'b'], keys => ARRAY[['k1'], ['k2']]);
SELECT pg_temp.outcome('22023', :'SQLSTATE');
SELECT count(*) FROM rq_enqueue_batch('q', ARRAY['a', 'b'], keys => ARRAY['k1']);
SELECT pg_temp.outcome('22023', :'SQLSTATE');
SELECT count(*) FROM rq_enqueue_batch('q', ARRAY['a'], keys => '{}');
SELECT pg_temp.outcome('22023', :'SQLSTATE');
SELECT count(*) FROM rq_enqueue_batch('q', ARRAY['a'], at => 'infinity');
SELECT pg_temp.outcome('22023', :'SQLSTATE');
SELECT count(*) FROM rq_enqueue_batch('q', ARRAY['a'], at => '-infinity');
SELECT pg_temp.outcome('22023', :'SQLSTATE');
SELECT bool_and(scheduled_at > rq_now_ms()) AS far_future FROM rq_enqueue_batch('q', ARRAY['a'], at => '294276-01-01');
SELECT pg_temp.accepted(:'SQLSTATE');
SELECT count(*) FROM rq_enqueue_batch('q', ARRAY['a'], delay => '-1 day');
SELECT pg_temp.outcome('22023', :'SQLSTATE');
SELECT count(*) FROM rq_enqueue_batch('q', ARRAY['a'], max_age => '0');
SELECT pg_temp.outcome('22023', :'SQLSTATE');
SELECT count(*) FROM rq_enqueue_batch('q', ARRAY['a'], max_retry_count => -5);
SELECT pg_temp.outcome('22023', :'SQLSTATE');
SELECT count(*) FROM rq_enqueue_batch('q', ARRAY['a'], backoff_base => '100 years');
SELECT pg_temp.outcome('22023', :'SQLSTATE');
\set VERBOSITY sqlstate
SELECT count(*) FROM rq_enqueue_batch(:'name1001', ARRAY['a']);
SELECT pg_temp.outcome('22023', :'SQLSTATE');
SELECT count(*) FROM rq_enqueue_batch(:'name3200', ARRAY['a']);
SELECT pg_temp.outcome('22023', :'SQLSTATE');
SELECT count(*) FROM rq_enqueue_batch('q', ARRAY['a'], keys => ARRAY[:'name1001']);
SELECT pg_temp.outcome('22023', :'SQLSTATE');
SELECT count(*) FROM rq_enqueue_batch('q', ARRAY['a'], keys => ARRAY[:'name3200']);
SELECT pg_temp.outcome('22023', :'SQLSTATE');
SELECT count(*) FROM rq_enqueue_batch('q', ARRAY[:big_payload]);
SELECT pg_temp.outcome('54000 or 22023', :'SQLSTATE');
\set VERBOSITY default

--------------------------------------------------------------------------
-- rq_claim: batches negative, zero, too large, NULL; leases NULL, zero,
-- negative, too long, huge; waits negative, too long; queues that are NULL,
-- empty, too long or of two dimensions; a worker name too long; a waiting
-- claim in REPEATABLE READ.
SELECT count(*) FROM rq_claim(ARRAY['q'], batch => 0);
SELECT pg_temp.outcome('22023', :'SQLSTATE');
SELECT count(*) FROM rq_claim(ARRAY['q'], batch => -1);
SELECT pg_temp.outcome('22023', :'SQLSTATE');
SELECT count(*) FROM rq_claim(ARRAY['q'], batch => 100001);
SELECT pg_temp.outcome('22023', :'SQLSTATE');
SELECT count(*) FROM rq_claim(ARRAY['q'], batch => 2147483647);
SELECT pg_temp.outcome('22023', :'SQLSTATE');
SELECT count(*) FROM rq_claim(ARRAY['q'], batch => NULL);
SELECT pg_temp.outcome('22023', :'SQLSTATE');
SELECT count(*) FROM rq_claim(ARRAY['q'], lease => NULL);
SELECT pg_temp.outcome('22023', :'SQLSTATE');
SELECT count(*) FROM rq_claim(ARRAY['q'], lease => '0');
SELECT pg_temp.outcome('22023', :'SQLSTATE');
SELECT count(*) FROM rq_claim(ARRAY['q'], lease => '-1 minute');
SELECT pg_temp.outcome('22023', :'SQLSTATE');
SELECT count(*) FROM rq_claim(ARRAY['q'], lease => '366 days');
SELECT pg_temp.outcome('22023', :'SQLSTATE');
SELECT count(*) FROM rq_claim(ARRAY['q'], lease => '178000000 years');
SELECT pg_temp.outcome('22023', :'SQLSTATE');
SELECT count(*) FROM rq_claim(ARRAY['q'], wait => '-1 second');
SELECT pg_temp.outcome('22023', :'SQLSTATE');
SELECT count(*) FROM rq_claim(ARRAY['q'], wait => '2 days');
SELECT pg_temp.outcome('22023', :'SQLSTATE');
SELECT count(*) FROM rq_claim(ARRAY['q'], wait => '-178000000 years');
SELECT pg_temp.outcome('22023', :'SQLSTATE');
SELECT count(*) FROM rq_claim(ARRAY[NULL]::text[]);
SELECT pg_temp.outcome('22023', :'SQLSTATE');
SELECT count(*) FROM rq_claim(ARRAY['q', NULL]);
SELECT pg_temp.outcome('22023', :'SQLSTATE');
SELECT count(*) FROM rq_claim(ARRAY['']);
SELECT pg_temp.outcome('22023', :'SQLSTATE');
SELECT count(*) FROM rq_claim(ARRAY[['q']]);
SELECT pg_temp.outcome('22023', :'SQLSTATE');
SELECT count(*) FROM rq_claim(ARRAY[['q'], ['r']]);
SELECT pg_temp.outcome('22023', :'SQLSTATE');
SELECT count(*) FROM rq_claim('[5:5][1:1]={{q}}'::text[]);
SELECT pg_temp.outcome('22023', :'SQLSTATE');
\set VERBOSITY sqlstate
SELECT count(*) FROM rq_claim(ARRAY[:'name1001']);
SELECT pg_temp.outcome('22023', :'SQLSTATE');
SELECT count(*) FROM rq_claim(ARRAY['q', :'name3200']);
SELECT pg_temp.outcome('22023', :'SQLSTATE');
SELECT count(*) FROM rq_claim(ARRAY['q'], worker => :'name1001');
SELECT pg_temp.outcome('22023', :'SQLSTATE');
SELECT count(*) FROM rq_claim(ARRAY['q'], worker => :'name3200');
SELECT pg_temp.outcome('22023', :'SQLSTATE');
\set VERBOSITY default
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT count(*) FROM rq_claim(ARRAY['nothing here'], wait => '1 second');
\set got :SQLSTATE
ROLLBACK;
SELECT pg_temp.outcome('22023', :'got');

--------------------------------------------------------------------------
-- rq_complete and rq_fail: a NULL id, an unknown id, a job that is queued,
-- finished or cancelled, a stale fencing token and one from the future.
SELECT status FROM rq_complete(NULL, 2);
SELECT pg_temp.outcome('22023', :'SQLSTATE');
SELECT status FROM rq_complete(:'unknown', 2);
SELECT pg_temp.outcome('P0002', :'SQLSTATE');
SELECT status FROM rq_complete(:'queued', 2);
SELECT pg_temp.outcome('55000', :'SQLSTATE');
SELECT status FROM rq_complete(:'succeeded', 2);
SELECT pg_temp.outcome('55000', :'SQLSTATE');
SELECT status FROM rq_complete(:'cancelled', 2);
SELECT pg_temp.outcome('55000', :'SQLSTATE');
SELECT status FROM rq_complete(:'claimed', attempt => 1);
SELECT pg_temp.outcome('55000', :'SQLSTATE');
SELECT status FROM rq_complete(:'claimed', attempt => 3);
SELECT pg_temp.outcome('55000', :'SQLSTATE');
SELECT status FROM rq_complete(:'claimed', attempt => -2147483648);
SELECT pg_temp.outcome('55000', :'SQLSTATE');
SELECT status FROM rq_fail(NULL, 2, 'boom');
SELECT pg_temp.outcome('22023', :'SQLSTATE');
SELECT status FROM rq_fail(:'unknown', 2, 'boom');
SELECT pg_temp.outcome('P0002', :'SQLSTATE');
SELECT status FROM rq_fail(:'queued', 2, 'boom');
SELECT pg_temp.outcome('55000', :'SQLSTATE');
SELECT status FROM rq_fail(:'succeeded', 2, 'boom');
SELECT pg_temp.outcome('55000', :'SQLSTATE');
SELECT status FROM rq_fail(:'claimed', 1, 'boom');
SELECT pg_temp.outcome('55000', :'SQLSTATE');
-- without its attempt, every verb that acts on a claimed job is refused
-- (22004), whatever else it is given, and the job stays as it was
SELECT status FROM rq_complete(:'claimed', NULL);
SELECT pg_temp.outcome('22004', :'SQLSTATE');
SELECT status FROM rq_complete(:'claimed', NULL, '{"a": 1}');
SELECT pg_temp.outcome('22004', :'SQLSTATE');
SELECT status FROM rq_fail(:'claimed', NULL, 'boom');
SELECT pg_temp.outcome('22004', :'SQLSTATE');
SELECT status FROM rq_fail(:'claimed', attempt => NULL);
SELECT pg_temp.outcome('22004', :'SQLSTATE');
SELECT count(*) FROM rq_complete_and_claim(:'claimed', NULL, ARRAY['q']);
SELECT pg_temp.outcome('22004', :'SQLSTATE');
SELECT count(*) FROM rq_fail_and_claim(:'claimed', NULL, 'boom', queues => ARRAY['q']);
SELECT pg_temp.outcome('22004', :'SQLSTATE');
SELECT status FROM rq_reschedule(:'claimed', NULL, delay => '1 minute');
SELECT pg_temp.outcome('22004', :'SQLSTATE');
SELECT status FROM rq_reject(:'claimed', NULL);
SELECT pg_temp.outcome('22004', :'SQLSTATE');
SELECT status FROM rq_extend(:'claimed', NULL);
SELECT pg_temp.outcome('22004', :'SQLSTATE');
SELECT name FROM rq_step(:'claimed', NULL, 'charge');
SELECT pg_temp.outcome('22004', :'SQLSTATE');
SELECT rq_sleep(:'claimed', NULL, 'nap', delay => '1 hour');
SELECT pg_temp.outcome('22004', :'SQLSTATE');
SELECT parked FROM rq_wait_event(:'claimed', NULL, 'w', 'e');
SELECT pg_temp.outcome('22004', :'SQLSTATE');
SELECT count(*) FROM rq_complete_batch(ARRAY[:'claimed']::uuid[], NULL);
SELECT pg_temp.outcome('22004', :'SQLSTATE');
SELECT count(*) FROM rq_complete_batch(ARRAY[:'claimed']::uuid[], ARRAY[NULL]::integer[]);
SELECT pg_temp.outcome('22004', :'SQLSTATE');
SELECT count(*) FROM rq_complete_batch_and_claim(ARRAY[:'claimed']::uuid[], NULL, ARRAY['q']);
SELECT pg_temp.outcome('22004', :'SQLSTATE');
-- and leaving it out is no call of the verb at all (42883)
SELECT status FROM rq_complete(:'claimed');
SELECT pg_temp.outcome('42883', :'SQLSTATE');
SELECT status FROM rq_fail(:'claimed', error => 'boom');
SELECT pg_temp.outcome('42883', :'SQLSTATE');

--------------------------------------------------------------------------
-- rq_complete_batch: NULL ids, an id that is NULL, unknown, not claimed or
-- with a stale token; tokens that do not pair with the ids; ids and tokens
-- of two dimensions.
SELECT count(*) FROM rq_complete_batch(NULL, NULL);
SELECT pg_temp.outcome('22023', :'SQLSTATE');
SELECT count(*) FROM rq_complete_batch(ARRAY[NULL]::uuid[], ARRAY[2]);
SELECT pg_temp.outcome('22023', :'SQLSTATE');
SELECT count(*) FROM rq_complete_batch(ARRAY[:'claimed', NULL]::uuid[], ARRAY[2, 2]);
SELECT pg_temp.outcome('22023', :'SQLSTATE');
SELECT count(*) FROM rq_complete_batch(ARRAY[:'claimed', :'unknown']::uuid[], ARRAY[2, 2]);
SELECT pg_temp.outcome('P0002', :'SQLSTATE');
SELECT count(*) FROM rq_complete_batch(ARRAY[:'claimed', :'queued']::uuid[], ARRAY[2, 2]);
SELECT pg_temp.outcome('55000', :'SQLSTATE');
SELECT count(*) FROM rq_complete_batch(ARRAY[:'succeeded']::uuid[], ARRAY[2]);
SELECT pg_temp.outcome('55000', :'SQLSTATE');
SELECT count(*) FROM rq_complete_batch(ARRAY[:'claimed']::uuid[], ARRAY[1]);
SELECT pg_temp.outcome('55000', :'SQLSTATE');
SELECT count(*) FROM rq_complete_batch(ARRAY[:'claimed']::uuid[], ARRAY[2, 2]);
SELECT pg_temp.outcome('22023', :'SQLSTATE');
SELECT count(*) FROM rq_complete_batch(ARRAY[:'claimed']::uuid[], '{}');
SELECT pg_temp.outcome('22023', :'SQLSTATE');
SELECT count(*) FROM rq_complete_batch(ARRAY[[:'claimed']]::uuid[], ARRAY[2]);
SELECT pg_temp.outcome('22023', :'SQLSTATE');
SELECT count(*) FROM rq_complete_batch(ARRAY[[:'claimed'], [:'queued']]::uuid[], ARRAY[2, 2]);
SELECT pg_temp.outcome('22023', :'SQLSTATE');
SELECT count(*) FROM rq_complete_batch(ARRAY[:'claimed']::uuid[], ARRAY[[2]]);
SELECT pg_temp.outcome('22023', :'SQLSTATE');

--------------------------------------------------------------------------
-- rq_complete_batch_and_claim: rq_complete_batch's bad ids and tokens, and
-- rq_claim's bad arguments after good ids: nothing is completed, nothing
-- claimed.
SELECT count(*) FROM rq_complete_batch_and_claim(ARRAY[:'claimed', NULL]::uuid[], ARRAY[2, 2], ARRAY['q']);
SELECT pg_temp.outcome('22023', :'SQLSTATE');
SELECT count(*) FROM rq_complete_batch_and_claim(ARRAY[:'claimed', :'unknown']::uuid[], ARRAY[2, 2], ARRAY['q']);
SELECT pg_temp.outcome('P0002', :'SQLSTATE');
SELECT count(*) FROM rq_complete_batch_and_claim(ARRAY[:'claimed']::uuid[], ARRAY[1], ARRAY['q']);
SELECT pg_temp.outcome('55000', :'SQLSTATE');
SELECT count(*) FROM rq_complete_batch_and_claim(ARRAY[:'claimed']::uuid[], ARRAY[2, 2], ARRAY['q']);
SELECT pg_temp.outcome('22023', :'SQLSTATE');
SELECT count(*) FROM rq_complete_batch_and_claim(ARRAY[[:'claimed']]::uuid[], ARRAY[2], ARRAY['q']);
SELECT pg_temp.outcome('22023', :'SQLSTATE');
SELECT count(*) FROM rq_complete_batch_and_claim(ARRAY[:'claimed']::uuid[], ARRAY[2], ARRAY['q'], batch => 0);
SELECT pg_temp.outcome('22023', :'SQLSTATE');
SELECT count(*) FROM rq_complete_batch_and_claim(ARRAY[:'claimed']::uuid[], ARRAY[2], ARRAY['q'], lease => '0');
SELECT pg_temp.outcome('22023', :'SQLSTATE');
SELECT count(*) FROM rq_complete_batch_and_claim(ARRAY[:'claimed']::uuid[], ARRAY[2], ARRAY[''], 'w');
SELECT pg_temp.outcome('22023', :'SQLSTATE');

--------------------------------------------------------------------------
-- rq_reschedule, rq_reject, rq_extend: a NULL id, an unknown id, a job that
-- is not claimed, a stale token; rescheduling to an infinite instant, to one
-- whose milliseconds overflow, past timestamptz, by a negative or huge
-- delay; a lease NULL, zero, negative or too long.
SELECT status FROM rq_reschedule(NULL, 2, delay => '1 minute');
SELECT pg_temp.outcome('22023', :'SQLSTATE');
SELECT status FROM rq_reschedule(:'unknown', 2, delay => '1 minute');
SELECT pg_temp.outcome('P0002', :'SQLSTATE');
SELECT status FROM rq_reschedule(:'queued', 2, delay => '1 minute');
SELECT pg_temp.outcome('55000', :'SQLSTATE');
SELECT status FROM rq_reschedule(:'claimed', 1, delay => '1 minute');
SELECT pg_temp.outcome('55000', :'SQLSTATE');
SELECT status FROM rq_reschedule(:'claimed', 2, at => 'infinity');
SELECT pg_temp.outcome('22023', :'SQLSTATE');
SELECT status FROM rq_reschedule(:'claimed', 2, at => '-infinity');
SELECT pg_temp.outcome('22023', :'SQLSTATE');
SELECT scheduled_at > rq_now_ms() AS far_future FROM rq_reschedule(:'claimed', 2, at => '294276-01-01');
SELECT pg_temp.accepted(:'SQLSTATE');
SELECT status FROM rq_reschedule(:'claimed', 2, at => '294200-01-01', delay => '36500 days');
SELECT pg_temp.outcome('22023', :'SQLSTATE');
SELECT status FROM rq_reschedule(:'claimed', 2, delay => '-1 second');
SELECT pg_temp.outcome('22023', :'SQLSTATE');
SELECT status FROM rq_reschedule(:'claimed', 2, delay => '178000000 years');
SELECT pg_temp.outcome('22023', :'SQLSTATE');
SELECT status FROM rq_reject(NULL, 2);
SELECT pg_temp.outcome('22023', :'SQLSTATE');
SELECT status FROM rq_reject(:'unknown', 2);
SELECT pg_temp.outcome('P0002', :'SQLSTATE');
SELECT status FROM rq_reject(:'succeeded', 2);
SELECT pg_temp.outcome('55000', :'SQLSTATE');
SELECT status FROM rq_reject(:'claimed', 1);
SELECT pg_temp.outcome('55000', :'SQLSTATE');
SELECT status FROM rq_extend(NULL, 2);
SELECT pg_temp.outcome('22023', :'SQLSTATE');
SELECT status FROM rq_extend(:'unknown', 2);
SELECT pg_temp.outcome('P0002', :'SQLSTATE');
SELECT status FROM rq_extend(:'queued', 2);
SELECT pg_temp.outcome('55000', :'SQLSTATE');
SELECT status FROM rq_extend(:'claimed', 1);
SELECT pg_temp.outcome('55000', :'SQLSTATE');
SELECT status FROM rq_extend(:'claimed', 2, lease => NULL);
SELECT pg_temp.outcome('22023', :'SQLSTATE');
SELECT status FROM rq_extend(:'claimed', 2, lease => '0');
SELECT pg_temp.outcome('22023', :'SQLSTATE');
SELECT status FROM rq_extend(:'claimed', 2, lease => '-1 second');
SELECT pg_temp.outcome('22023', :'SQLSTATE');
SELECT status FROM rq_extend(:'claimed', 2, lease => '178000000 years');
SELECT pg_temp.outcome('22023', :'SQLSTATE');

--------------------------------------------------------------------------
-- rq_cancel and rq_retry: a NULL id, an unknown id, a job in a status the
-- verb does not take, a retry whose key a newer unfinished job holds.
SELECT status FROM rq_cancel(NULL);
SELECT pg_temp.outcome('22023', :'SQLSTATE');
SELECT status FROM rq_cancel(:'unknown');
SELECT pg_temp.outcome('P0002', :'SQLSTATE');
SELECT status FROM rq_cancel(:'succeeded');
SELECT pg_temp.outcome('55000', :'SQLSTATE');
SELECT status FROM rq_cancel(:'cancelled');
SELECT pg_temp.outcome('55000', :'SQLSTATE');
SELECT status FROM rq_retry(NULL);
SELECT pg_temp.outcome('22023', :'SQLSTATE');
SELECT status FROM rq_retry(:'unknown');
SELECT pg_temp.outcome('P0002', :'SQLSTATE');
SELECT status FROM rq_retry(:'queued');
SELECT pg_temp.outcome('55000', :'SQLSTATE');
SELECT status FROM rq_retry(:'claimed');
SELECT pg_temp.outcome('55000', :'SQLSTATE');
SELECT status FROM rq_retry(:'succeeded');
SELECT pg_temp.outcome('55000', :'SQLSTATE');
SELECT status FROM rq_retry(:'old_key');
SELECT pg_temp.outcome('55000', :'SQLSTATE');

--------------------------------------------------------------------------
-- The duties: batches NULL, zero, negative, too large; a retention negative,
-- too long or huge.
SELECT rq_expire(NULL);
SELECT pg_temp.outcome('22023', :'SQLSTATE');
SELECT rq_expire(0);
SELECT pg_temp.outcome('22023', :'SQLSTATE');
SELECT rq_rescue(-1);
SELECT pg_temp.outcome('22023', :'SQLSTATE');
SELECT rq_rescue(100001);
SELECT pg_temp.outcome('22023', :'SQLSTATE');
SELECT rq_prune(0);
SELECT pg_temp.outcome('22023', :'SQLSTATE');
SELECT rq_prune(retention => '-1 day');
SELECT pg_temp.outcome('22023', :'SQLSTATE');
SELECT rq_prune(retention => '36501 days');
SELECT pg_temp.outcome('22023', :'SQLSTATE');
SELECT rq_prune(retention => '-178000000 years');
SELECT pg_temp.outcome('22023', :'SQLSTATE');

--------------------------------------------------------------------------
-- The helpers: conversions given values out of range, infinite instants and
-- instants whose milliseconds overflow; checks given NULLs; the refusal
-- helpers given what they do not know.
SELECT raquel_internal.rq_interval_ms('2 days', 'x', 0, 1000);
SELECT pg_temp.outcome('22023', :'SQLSTATE');
SELECT raquel_internal.rq_interval_ms('-178000000 years', 'x', 0, 1000);
SELECT pg_temp.outcome('22023', :'SQLSTATE');
SELECT raquel_internal.rq_timestamp_ms('infinity', 'at');
SELECT pg_temp.outcome('22023', :'SQLSTATE');
SELECT raquel_internal.rq_timestamp_ms('-infinity', 'at');
SELECT pg_temp.outcome('22023', :'SQLSTATE');
SELECT raquel_internal.rq_timestamp_ms('294276-01-01', 'at');
SELECT pg_temp.outcome('00000', :'SQLSTATE');
SELECT rq_extend('00000000-0000-7000-8000-0000000000ff', 1, lease => NULL);
SELECT pg_temp.outcome('22023', :'SQLSTATE');
SELECT rq_extend('00000000-0000-7000-8000-0000000000ff', 1, lease => '0');
SELECT pg_temp.outcome('22023', :'SQLSTATE');
SELECT raquel_internal.rq_delay_ms('-1 ms', 'delay');
SELECT pg_temp.outcome('22023', :'SQLSTATE');
SELECT raquel_internal.rq_retention_ms('36501 days');
SELECT pg_temp.outcome('22023', :'SQLSTATE');
SELECT raquel_internal.rq_check_batch(NULL);
SELECT pg_temp.outcome('22023', :'SQLSTATE');
SELECT count(*) FROM raquel_internal.rq_job_options(NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL);
SELECT pg_temp.outcome('22023', :'SQLSTATE');
SELECT due_ms > 0 AS far_future FROM raquel_internal.rq_job_options('q', '294276-01-01', NULL, NULL, NULL, NULL, NULL, NULL);
SELECT pg_temp.outcome('00000', :'SQLSTATE');
SELECT raquel_internal.rq_raise_cannot(:'unknown', NULL, 'complete', '{claimed}');
SELECT pg_temp.outcome('P0002', :'SQLSTATE');
SELECT raquel_internal.rq_refuse('no_such_refusal', '{}');
SELECT pg_temp.outcome('22023', :'SQLSTATE');
SELECT raquel_internal.rq_refuse(NULL, NULL);
SELECT pg_temp.outcome('22023', :'SQLSTATE');

--------------------------------------------------------------------------
-- The trigger functions misused: called directly; rq_enqueue_trigger FOR
-- EACH STATEMENT, with no queue or two, with an empty or too long queue, as
-- an INSTEAD OF trigger on a view, as a trigger on jobs itself, on a row
-- past the payload limit; rq_job_events as a trigger on another table.
SELECT raquel_internal.rq_job_events();
SELECT pg_temp.outcome('39P01', :'SQLSTATE');
SELECT rq_enqueue_trigger();
SELECT pg_temp.outcome('0A000', :'SQLSTATE');
CREATE TABLE bad_input_rows (n int, note text);
CREATE TRIGGER per_statement AFTER INSERT ON bad_input_rows
    FOR EACH STATEMENT EXECUTE FUNCTION rq_enqueue_trigger('q');
INSERT INTO bad_input_rows VALUES (1);
SELECT pg_temp.outcome('22023', :'SQLSTATE');
DROP TRIGGER per_statement ON bad_input_rows;
CREATE TRIGGER no_queue AFTER INSERT ON bad_input_rows
    FOR EACH ROW EXECUTE FUNCTION rq_enqueue_trigger();
INSERT INTO bad_input_rows VALUES (1);
SELECT pg_temp.outcome('22023', :'SQLSTATE');
DROP TRIGGER no_queue ON bad_input_rows;
CREATE TRIGGER two_queues AFTER INSERT ON bad_input_rows
    FOR EACH ROW EXECUTE FUNCTION rq_enqueue_trigger('q', 'r');
INSERT INTO bad_input_rows VALUES (1);
SELECT pg_temp.outcome('22023', :'SQLSTATE');
DROP TRIGGER two_queues ON bad_input_rows;
CREATE TRIGGER empty_queue AFTER INSERT ON bad_input_rows
    FOR EACH ROW EXECUTE FUNCTION rq_enqueue_trigger('');
INSERT INTO bad_input_rows VALUES (1);
SELECT pg_temp.outcome('22023', :'SQLSTATE');
DROP TRIGGER empty_queue ON bad_input_rows;
-- A trigger argument is a name (at most 63 bytes), so the longest queue a
-- trigger can name is within the maximum; the row's payload can be too large.
CREATE TRIGGER large_row AFTER INSERT ON bad_input_rows
    FOR EACH ROW EXECUTE FUNCTION rq_enqueue_trigger('q');
\set VERBOSITY sqlstate
INSERT INTO bad_input_rows VALUES (1, :big_payload);
SELECT pg_temp.outcome('54000 or 22023', :'SQLSTATE');
\set VERBOSITY default
DROP TRIGGER large_row ON bad_input_rows;
CREATE VIEW bad_input_view AS SELECT 1 AS n;
CREATE TRIGGER instead_of INSTEAD OF INSERT ON bad_input_view
    FOR EACH ROW EXECUTE FUNCTION rq_enqueue_trigger('q');
INSERT INTO bad_input_view VALUES (1);
SELECT pg_temp.outcome('22023', :'SQLSTATE');
DROP VIEW bad_input_view;
-- (On jobs itself, with a WHEN that keeps the trigger from firing for the
-- jobs it enqueues; the trigger is dropped before the outcome puts the
-- baseline back.)
CREATE TRIGGER on_jobs_insert AFTER INSERT ON jobs
    FOR EACH ROW WHEN (NEW.queue = 'q') EXECUTE FUNCTION rq_enqueue_trigger('echo');
SELECT status FROM rq_enqueue('q', 'x');
\set got :SQLSTATE
DROP TRIGGER on_jobs_insert ON jobs;
SELECT pg_temp.outcome('22023', :'got');
CREATE TRIGGER on_jobs_update AFTER UPDATE ON jobs
    FOR EACH ROW EXECUTE FUNCTION rq_enqueue_trigger('echo');
UPDATE jobs SET payload = payload WHERE id = :'queued';
\set got :SQLSTATE
DROP TRIGGER on_jobs_update ON jobs;
SELECT pg_temp.outcome('22023', :'got');
CREATE TRIGGER not_jobs AFTER INSERT ON bad_input_rows
    FOR EACH ROW EXECUTE FUNCTION raquel_internal.rq_job_events();
INSERT INTO bad_input_rows VALUES (1);
SELECT pg_temp.outcome('39P01', :'SQLSTATE');
DROP TRIGGER not_jobs ON bad_input_rows;
SELECT 'rows the refused inserts left in bad_input_rows (intended 0): ' || count(*) FROM bad_input_rows;
DROP TABLE bad_input_rows;
-- rq_job_events as a trigger on a table whose queue column is not text,
-- and FOR EACH STATEMENT on a table with a text queue column: 0.1.0's
-- trigger function crashed the server (signal 11) on both.
CREATE TABLE bad_input_int_queue (queue int);
CREATE TRIGGER not_jobs AFTER INSERT ON bad_input_int_queue
    FOR EACH ROW EXECUTE FUNCTION raquel_internal.rq_job_events();
INSERT INTO bad_input_int_queue VALUES (1);
SELECT pg_temp.outcome('39P01', :'SQLSTATE');
DROP TABLE bad_input_int_queue;
CREATE TABLE bad_input_text_queue (queue text);
CREATE TRIGGER per_statement AFTER INSERT ON bad_input_text_queue
    FOR EACH STATEMENT EXECUTE FUNCTION raquel_internal.rq_job_events();
INSERT INTO bad_input_text_queue VALUES ('q');
SELECT pg_temp.outcome('39P01', :'SQLSTATE');
DROP TABLE bad_input_text_queue;

--------------------------------------------------------------------------
-- The other functions that take arguments: a queue's channel and the
-- count, given a queue that cannot exist (empty, too long) or a status the
-- table does not have. They are pure or read-only: any text has a channel,
-- and a queue or status that cannot exist counts no job, so each answers
-- instead of refusing. (rq_stats, rq_queues, rq_now_ms, rq_uuid7,
-- rq_worker_wake and the rq_default_* functions take no argument;
-- rq_backoff is total by design.)
SELECT rq_channel('');
SELECT pg_temp.outcome('00000', :'SQLSTATE');
SELECT rq_channel(:'name1001') IS NOT NULL;
SELECT pg_temp.outcome('00000', :'SQLSTATE');
SELECT rq_count('', NULL);
SELECT pg_temp.outcome('00000', :'SQLSTATE');
SELECT rq_count('q', '{bogus}');
SELECT pg_temp.outcome('00000', :'SQLSTATE');

--------------------------------------------------------------------------
-- Privileges: the grant helpers given a NULL role, a role that does not
-- exist, an OID that is no role; the producer's and the owner's functions
-- called by a role that was not granted them.
SELECT rq_grant_producer(NULL);
SELECT pg_temp.outcome('22023', :'SQLSTATE');
SELECT rq_grant_worker(NULL);
SELECT pg_temp.outcome('22023', :'SQLSTATE');
SELECT rq_grant_producer('no_such_role');
SELECT pg_temp.outcome('42704', :'SQLSTATE');
SELECT rq_grant_worker('no_such_role');
SELECT pg_temp.outcome('42704', :'SQLSTATE');
SELECT rq_grant_producer(0::oid::regrole);
SELECT pg_temp.outcome('22023', :'SQLSTATE');
SELECT rq_grant_worker(4294967295::oid::regrole);
SELECT pg_temp.outcome('42704', :'SQLSTATE');
SET ROLE pg_monitor;  -- a role with none of raquel's privileges
SELECT status FROM rq_enqueue('q', 'x');
SELECT pg_temp.outcome('42501', :'SQLSTATE');
SELECT count(*) FROM rq_claim(ARRAY['q']);
SELECT pg_temp.outcome('42501', :'SQLSTATE');
SELECT rq_grant_producer('pg_monitor');
SELECT pg_temp.outcome('42501', :'SQLSTATE');
RESET ROLE;

--------------------------------------------------------------------------
\pset tuples_only off
\pset format aligned
-- Not bad calls: the edges that must stay accepted, each in a transaction
-- that is rolled back, each answering true. A name of exactly 1000 bytes
-- (queue, key, worker); the earliest instant PostgreSQL has, and a far one
-- whose milliseconds fit; one-dimensional arrays whose lower bound is not 1,
-- as the queues a claim takes from, as payloads and keys, as ids and tokens.
BEGIN;
SELECT count(*) = 1 AS enqueued_1000_byte_names
FROM rq_enqueue(repeat('n', 1000), 'x', key => repeat('k', 1000));
ROLLBACK;
BEGIN;
SELECT count(*) = 1 AS claimed_by_1000_byte_worker
FROM rq_claim(ARRAY['q'], worker => repeat('w', 1000));
ROLLBACK;
BEGIN;
SELECT scheduled_at = raquel_internal.rq_timestamp_ms('4714-11-24 00:00:00+00 BC', 'at') AS due_at_earliest_instant
FROM rq_enqueue('q', 'x', at => '4714-11-24 00:00:00+00 BC');
ROLLBACK;
BEGIN;
SELECT scheduled_at = raquel_internal.rq_timestamp_ms('294000-01-01', 'at') AS due_in_year_294000
FROM rq_enqueue('q', 'x', at => '294000-01-01');
ROLLBACK;
BEGIN;
SELECT count(*) = 1 AS claimed_from_queues_5_to_5
FROM rq_claim('[5:5]={q}'::text[]);
ROLLBACK;
BEGIN;
SELECT count(*) = 1 AS claimed_from_queues_0_to_1
FROM rq_claim('[0:1]={q,r}'::text[]);
ROLLBACK;
BEGIN;
SELECT array_agg(payload || '/' || key ORDER BY id) = '{a/k1,b/k2}' AS enqueued_payloads_5_to_6_keys_3_to_4
FROM rq_enqueue_batch('lower', '[5:6]={a,b}'::text[], keys => '[3:4]={k1,k2}');
ROLLBACK;
BEGIN;
SELECT count(*) = 1 AS completed_ids_2_to_2
FROM rq_complete_batch(('[2:2]={' || :'claimed' || '}')::uuid[], '{2}');
ROLLBACK;
BEGIN;
SELECT count(*) = 1 AS completed_with_attempts_7_to_7
FROM rq_complete_batch(ARRAY[:'claimed']::uuid[], '[7:7]={2}');
ROLLBACK;
-- Empty arrays do nothing (as an empty queues array claims nothing).
SELECT count(*) = 0 AS empty_payloads_enqueue_nothing FROM rq_enqueue_batch('q', '{}'::text[]);
SELECT count(*) = 0 AS empty_ids_complete_nothing FROM rq_complete_batch('{}', '{}');
SELECT count(*) = 0 AS empty_queues_claim_nothing FROM rq_claim('{}');
SELECT pg_temp.outcome('00000', :'SQLSTATE') AS after_the_edges;

--------------------------------------------------------------------------
-- Flow control (sql/flow.sql): queue names, limits below one, a rate
-- without an interval or with one that is not positive or past a day; a
-- group key too long, group keys that do not pair with the payloads or are
-- not a list; the plain claim and the flow state's helpers called outside
-- rq_claim (42501: they would pass a pause or refill a rate).
SELECT queue FROM rq_set_limits(NULL, max_claimed => 1);
SELECT pg_temp.outcome('22023', :'SQLSTATE');
SELECT queue FROM rq_set_limits('', max_claimed => 1);
SELECT pg_temp.outcome('22023', :'SQLSTATE');
SELECT queue FROM rq_set_limits(:'name1001', max_claimed => 1);
SELECT pg_temp.outcome('22023', :'SQLSTATE');
SELECT queue FROM rq_set_limits('q', max_claimed => 0);
SELECT pg_temp.outcome('22023', :'SQLSTATE');
SELECT queue FROM rq_set_limits('q', max_claimed => -5);
SELECT pg_temp.outcome('22023', :'SQLSTATE');
SELECT queue FROM rq_set_limits('q', rate => 0);
SELECT pg_temp.outcome('22023', :'SQLSTATE');
SELECT queue FROM rq_set_limits('q', rate => 10, per => NULL);
SELECT pg_temp.outcome('22023', :'SQLSTATE');
SELECT queue FROM rq_set_limits('q', rate => 10, per => '0 seconds');
SELECT pg_temp.outcome('22023', :'SQLSTATE');
SELECT queue FROM rq_set_limits('q', rate => 10, per => '-1 second');
SELECT pg_temp.outcome('22023', :'SQLSTATE');
SELECT queue FROM rq_set_limits('q', rate => 10, per => '2 days');
SELECT pg_temp.outcome('22023', :'SQLSTATE');
SELECT queue FROM rq_set_limits('q', group_max_claimed => 0);
SELECT pg_temp.outcome('22023', :'SQLSTATE');
SELECT queue FROM rq_pause(NULL);
SELECT pg_temp.outcome('22023', :'SQLSTATE');
SELECT queue FROM rq_pause('');
SELECT pg_temp.outcome('22023', :'SQLSTATE');
SELECT queue FROM rq_resume(NULL);
SELECT pg_temp.outcome('22023', :'SQLSTATE');
SELECT queue FROM rq_resume(:'name1200');
SELECT pg_temp.outcome('22023', :'SQLSTATE');
SELECT status FROM rq_enqueue('q', 'x', group_key => :'name1001');
SELECT pg_temp.outcome('22023', :'SQLSTATE');
SELECT status FROM rq_enqueue('q', '{}'::jsonb, group_key => :'name3200');
SELECT pg_temp.outcome('22023', :'SQLSTATE');
SELECT status FROM rq_enqueue_batch('q', ARRAY['a', 'b'], group_keys => ARRAY['g']);
SELECT pg_temp.outcome('22023', :'SQLSTATE');
SELECT status FROM rq_enqueue_batch('q', ARRAY['a'], group_keys => ARRAY[:'name1001']);
SELECT pg_temp.outcome('22023', :'SQLSTATE');
SELECT status FROM rq_enqueue_batch('q', ARRAY['a'], group_keys => ARRAY[['g']]);
SELECT pg_temp.outcome('22023', :'SQLSTATE');
SELECT count(*) FROM raquel_internal.rq_flow_lock(ARRAY['q']);
SELECT pg_temp.outcome('42501', :'SQLSTATE');
SELECT raquel_internal.rq_flow_took('q', '{}', 1000000, 0);
SELECT pg_temp.outcome('42501', :'SQLSTATE');
-- A refused call leaves no flow settings behind.
SELECT count(*) AS queue_limits_rows FROM queue_limits;

--------------------------------------------------------------------------
-- Workflows (sql/workflows.sql): parents that name no job, NULL parents,
-- parents not given as a list, more than 1000 parents, more than 100 000
-- dependencies in one call.
SELECT status FROM rq_enqueue('q', 'x', after => ARRAY['00000000-0000-7000-8000-0000000000ff']::uuid[]);
SELECT pg_temp.outcome('22023', :'SQLSTATE');
SELECT status FROM rq_enqueue('q', 'x', after => ARRAY[NULL]::uuid[]);
SELECT pg_temp.outcome('22023', :'SQLSTATE');
SELECT status FROM rq_enqueue('q', 'x', after => ARRAY[[:'queued']]::uuid[]);
SELECT pg_temp.outcome('22023', :'SQLSTATE');
SELECT status FROM rq_enqueue_batch('q', ARRAY['a'], after => ARRAY['00000000-0000-7000-8000-0000000000ff']::uuid[]);
SELECT pg_temp.outcome('22023', :'SQLSTATE');
SELECT status FROM rq_enqueue('q', 'x', after => ARRAY[:'queued', NULL]::uuid[]);
SELECT pg_temp.outcome('22023', :'SQLSTATE');
SELECT status FROM rq_enqueue('q', 'x', after => ARRAY(SELECT :'queued'::uuid FROM generate_series(1, 1001)));
SELECT pg_temp.outcome('22023', :'SQLSTATE');
-- 101 parents that exist (enqueued by this session), so that only the cap
-- on edges can refuse 1000 × 101
SELECT count(*) FROM rq_enqueue_batch('q', array_fill('p'::text, ARRAY[1000]),
    after => ARRAY(SELECT id FROM rq_enqueue_batch('parents', array_fill('p'::text, ARRAY[101]))));
SELECT pg_temp.outcome('54000', :'SQLSTATE');
SELECT count(*) AS job_dependencies_rows FROM job_dependencies;

--------------------------------------------------------------------------
-- Recurring jobs (sql/schedules.sql): a name too long, a payload larger
-- than raquel.max_payload_size (the duty could never enqueue it), a bad
-- catch-up; the slots' helper with NULL instants and a bad pattern. A
-- refused call leaves no schedule behind.
\set VERBOSITY sqlstate
SELECT name FROM rq_schedule(:'name1001', '@hourly', 'q');
SELECT pg_temp.outcome('22023', :'SQLSTATE');
SELECT name FROM rq_schedule('s', '@hourly', 'q', :big_payload);
SELECT pg_temp.outcome('54000', :'SQLSTATE');
SELECT name FROM rq_schedule('s', '@hourly', 'q', ('"' || repeat('x', 1048576) || '"')::jsonb);
SELECT pg_temp.outcome('54000', :'SQLSTATE');
\set VERBOSITY default
SELECT name FROM rq_schedule('s', '@hourly', 'q', catch_up => 'some');
SELECT pg_temp.outcome('22023', :'SQLSTATE');
SELECT raquel_internal.rq_schedule_slots('@hourly', 'UTC', NULL, 0, 'all');
SELECT pg_temp.outcome('22023', :'SQLSTATE');
SELECT raquel_internal.rq_schedule_slots('@never', 'UTC', 0, 0, 'all');
SELECT pg_temp.outcome('22023', :'SQLSTATE');
SELECT raquel_internal.rq_schedule_slots('@hourly', 'UTC', 0, 0, NULL);
SELECT pg_temp.outcome('22023', :'SQLSTATE');
SELECT count(*) AS schedules_rows FROM schedules;

--------------------------------------------------------------------------
-- Results (sql/results.sql): a batch's results that do not pair with its
-- ids or have two dimensions; rq_await with a NULL id, an unknown one, a
-- NULL, negative or too long timeout, and a timeout under REPEATABLE READ.
SELECT count(*) FROM rq_complete_batch(ARRAY[:'claimed']::uuid[], ARRAY[2], ARRAY['1', '2']::jsonb[]);
SELECT pg_temp.outcome('22023', :'SQLSTATE');
SELECT count(*) FROM rq_complete_batch(ARRAY[:'claimed']::uuid[], ARRAY[2], ARRAY[['1']]::jsonb[]);
SELECT pg_temp.outcome('22023', :'SQLSTATE');
SELECT status FROM rq_complete(:'queued', 2, '{"a": 1}');
SELECT pg_temp.outcome('55000', :'SQLSTATE');
SELECT status FROM rq_await(NULL);
SELECT pg_temp.outcome('22023', :'SQLSTATE');
SELECT status FROM rq_await(:'unknown', '0');
SELECT pg_temp.outcome('P0002', :'SQLSTATE');
SELECT status FROM rq_await(:'queued', NULL);
SELECT pg_temp.outcome('22023', :'SQLSTATE');
SELECT status FROM rq_await(:'queued', '-1 second');
SELECT pg_temp.outcome('22023', :'SQLSTATE');
SELECT status FROM rq_await(:'queued', '2 days');
SELECT pg_temp.outcome('22023', :'SQLSTATE');
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT status FROM rq_await(:'queued', '1 second');
\set refused :SQLSTATE
ROLLBACK;
SELECT pg_temp.outcome('22023', :'refused');

--------------------------------------------------------------------------
-- Steps (sql/steps.sql): a NULL or empty name, a name over 1000 bytes; a
-- NULL, unknown or unclaimed job; a stale attempt; a step recorded twice.
-- None of them records anything.
SELECT name FROM rq_step(:'claimed', 2, NULL);
SELECT pg_temp.outcome('22023', :'SQLSTATE');
SELECT name FROM rq_step(:'claimed', 2, '');
SELECT pg_temp.outcome('22023', :'SQLSTATE');
SELECT name FROM rq_step(:'claimed', 2, repeat('x', 1001));
SELECT pg_temp.outcome('22023', :'SQLSTATE');
SELECT name FROM rq_step(NULL, 2, 'charge');
SELECT pg_temp.outcome('22023', :'SQLSTATE');
SELECT name FROM rq_step(:'unknown', 2, 'charge');
SELECT pg_temp.outcome('P0002', :'SQLSTATE');
SELECT name FROM rq_step(:'queued', 2, 'charge');
SELECT pg_temp.outcome('55000', :'SQLSTATE');
SELECT name FROM rq_step(:'succeeded', 2, 'charge');
SELECT pg_temp.outcome('55000', :'SQLSTATE');
SELECT name FROM rq_step(:'claimed', 1, 'charge', NULL);
SELECT pg_temp.outcome('55000', :'SQLSTATE');
BEGIN;
SELECT name FROM rq_step(:'claimed', 2, 'charge', '1');
-- (terse: the DETAIL says when the first was recorded, which changes with
-- every run; tests/client/tests/errors_page.rs reads it)
\set VERBOSITY terse
SELECT name FROM rq_step(:'claimed', 2, 'charge', '2');
\set refused :SQLSTATE
\set VERBOSITY default
ROLLBACK;
SELECT pg_temp.outcome('23505', :'refused');
SELECT count(*) AS job_steps_rows FROM job_steps;

--------------------------------------------------------------------------
-- Sleep and events (sql/waits.sql): a sleep with no instant, a NULL or
-- empty step name, a negative delay; a NULL, unknown, unclaimed job or a
-- stale attempt; a wait with a NULL, empty or too long event, a negative
-- timeout; an emit with a NULL or empty event, a NULL or negative keep.
-- None of them parks a job, records a step or keeps an event.
SELECT rq_sleep(:'claimed', 2, 'nap');
SELECT pg_temp.outcome('22023', :'SQLSTATE');
SELECT rq_sleep(:'claimed', 2, NULL, delay => '1 hour');
SELECT pg_temp.outcome('22023', :'SQLSTATE');
SELECT rq_sleep(:'claimed', 2, '', delay => '1 hour');
SELECT pg_temp.outcome('22023', :'SQLSTATE');
SELECT rq_sleep(:'claimed', 2, 'nap', delay => '-1 hour');
SELECT pg_temp.outcome('22023', :'SQLSTATE');
SELECT rq_sleep(NULL, 2, 'nap', delay => '1 hour');
SELECT pg_temp.outcome('22023', :'SQLSTATE');
SELECT rq_sleep(:'unknown', 2, 'nap', delay => '1 hour');
SELECT pg_temp.outcome('P0002', :'SQLSTATE');
SELECT rq_sleep(:'queued', 2, 'nap', delay => '1 hour');
SELECT pg_temp.outcome('55000', :'SQLSTATE');
SELECT rq_sleep(:'claimed', 1, 'nap', delay => '1 hour');
SELECT pg_temp.outcome('55000', :'SQLSTATE');
SELECT parked FROM rq_wait_event(:'claimed', 2, 'w', NULL);
SELECT pg_temp.outcome('22023', :'SQLSTATE');
SELECT parked FROM rq_wait_event(:'claimed', 2, 'w', '');
SELECT pg_temp.outcome('22023', :'SQLSTATE');
SELECT parked FROM rq_wait_event(:'claimed', 2, 'w', repeat('e', 1001));
SELECT pg_temp.outcome('22023', :'SQLSTATE');
SELECT parked FROM rq_wait_event(:'claimed', 2, '', 'e');
SELECT pg_temp.outcome('22023', :'SQLSTATE');
SELECT parked FROM rq_wait_event(:'claimed', 2, 'w', 'e', timeout => '-1 second');
SELECT pg_temp.outcome('22023', :'SQLSTATE');
SELECT parked FROM rq_wait_event(:'unknown', 2, 'w', 'e');
SELECT pg_temp.outcome('P0002', :'SQLSTATE');
SELECT parked FROM rq_wait_event(:'succeeded', 2, 'w', 'e');
SELECT pg_temp.outcome('55000', :'SQLSTATE');
SELECT parked FROM rq_wait_event(:'claimed', 1, 'w', 'e');
SELECT pg_temp.outcome('55000', :'SQLSTATE');
SELECT rq_emit(NULL);
SELECT pg_temp.outcome('22023', :'SQLSTATE');
SELECT rq_emit('');
SELECT pg_temp.outcome('22023', :'SQLSTATE');
SELECT rq_emit(repeat('e', 1001));
SELECT pg_temp.outcome('22023', :'SQLSTATE');
SELECT rq_emit('e', NULL, keep => '-1 minute');
SELECT pg_temp.outcome('22023', :'SQLSTATE');
-- results, step results and event payloads are held to their settings
-- (54000, the limit in DETAIL), as payloads are; a sleep ends within a
-- century, as a delay does
SET raquel.max_result_size = '1kB';
SET raquel.max_event_size = '1kB';
SELECT status FROM rq_complete(:'claimed', 2, to_jsonb(repeat('r', 2000)));
SELECT pg_temp.outcome('54000', :'SQLSTATE');
SELECT count(*) FROM rq_complete_batch(ARRAY[:'claimed']::uuid[], ARRAY[2], ARRAY[to_jsonb(repeat('r', 2000))]);
SELECT pg_temp.outcome('54000', :'SQLSTATE');
SELECT count(*) FROM rq_complete_and_claim(:'claimed', 2, ARRAY['q'], result => to_jsonb(repeat('r', 2000)));
SELECT pg_temp.outcome('54000', :'SQLSTATE');
SELECT name FROM rq_step(:'claimed', 2, 'big', to_jsonb(repeat('r', 2000)));
SELECT pg_temp.outcome('54000', :'SQLSTATE');
SELECT rq_emit('e', to_jsonb(repeat('r', 2000)));
SELECT pg_temp.outcome('54000', :'SQLSTATE');
RESET raquel.max_result_size;
RESET raquel.max_event_size;
SELECT rq_sleep(:'claimed', 2, 'nap', at => '294276-01-01');
SELECT pg_temp.outcome('22023', :'SQLSTATE');
SELECT rq_sleep(:'claimed', 2, 'nap', at => '2200-01-01 00:00:00+00');
SELECT pg_temp.outcome('22023', :'SQLSTATE');
-- rq_parents (sql/workflows.sql) of a NULL or unknown job.
SELECT id FROM rq_parents(NULL);
SELECT pg_temp.outcome('22023', :'SQLSTATE');
SELECT id FROM rq_parents(:'unknown');
SELECT pg_temp.outcome('P0002', :'SQLSTATE');
SELECT status FROM jobs WHERE id = :'claimed';
SELECT (SELECT count(*) FROM job_steps) AS job_steps_rows, (SELECT count(*) FROM job_waits) AS job_waits_rows,
       (SELECT count(*) FROM emitted_events) AS emitted_events_rows;

--------------------------------------------------------------------------
-- Metrics (sql/metrics.sql): rq_prometheus's bound on the queues it shows.
SELECT rq_prometheus(-1);
SELECT pg_temp.outcome('22023', :'SQLSTATE');
SELECT rq_prometheus(NULL);
SELECT pg_temp.outcome('22023', :'SQLSTATE');
SELECT rq_prometheus(100001);
SELECT pg_temp.outcome('22023', :'SQLSTATE');

-- The server is up, and the table is as it was before this file: empty.
DELETE FROM jobs WHERE id IN (SELECT id FROM baseline);
SELECT count(*) AS jobs_left FROM jobs;
