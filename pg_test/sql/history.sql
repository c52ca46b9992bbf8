-- Queues without history (sql/history.sql): a job that succeeds through
-- raquel's verbs is deleted, and the verb returns it as it ended; jobs that
-- end otherwise, or whose end sets something off, are kept. Several workers
-- at once: tests/client/tests/take.rs.
\pset null '(null)'

SELECT rq_set_history('gone', false);
SELECT rq_set_history('gone', false);        -- again: no error
SELECT queue FROM queues_without_history;

-- Every verb that completes: the rows come back 'success', none is left.
SELECT count(rq_enqueue('gone', 'g' || i)) FROM generate_series(1, 9) i;
SELECT d.payload, d.status, d.attempts, d.finished_at IS NOT NULL AS finished, d.lease_expires_at
FROM rq_claim(ARRAY['gone'], 'w') c, rq_complete(c.id, c.attempts) d;
WITH c AS (SELECT id, attempts FROM rq_claim(ARRAY['gone'], 'w', 2))
SELECT payload, status, attempts FROM rq_complete_batch(ARRAY(SELECT id FROM c ORDER BY id), ARRAY(SELECT attempts FROM c ORDER BY id));
SELECT d.payload, d.status FROM rq_claim(ARRAY['gone'], 'w') c, rq_complete_and_claim(c.id, c.attempts, ARRAY['gone'], 'w') d;
SELECT count(*) AS in_hand FROM jobs WHERE queue = 'gone' AND status = 'claimed';
SELECT count(*) AS completed_and_claimed
FROM rq_complete_batch_and_claim(ARRAY(SELECT id FROM jobs WHERE queue = 'gone' AND status = 'claimed' ORDER BY id),
                                 ARRAY(SELECT attempts FROM jobs WHERE queue = 'gone' AND status = 'claimed' ORDER BY id),
                                 ARRAY['gone'], 'w', 2);
SELECT count(*) FROM rq_complete_batch(ARRAY(SELECT id FROM jobs WHERE queue = 'gone' AND status = 'claimed' ORDER BY id),
                                       ARRAY(SELECT attempts FROM jobs WHERE queue = 'gone' AND status = 'claimed' ORDER BY id));
BEGIN;
SELECT payload, status, attempts, claimed_by FROM rq_take(ARRAY['gone'], 'w', 1, true);
SELECT d.payload, d.status, d.attempts, d.claimed_by FROM rq_take(ARRAY['gone'], 'taker') c, rq_complete(c.id, c.attempts) d;
COMMIT;
SELECT count(*) AS left_in_gone FROM jobs WHERE queue = 'gone';

-- A stale token deletes nothing (the complete's own error).
SELECT id AS stale FROM rq_enqueue('gone', 'stale') \gset
SELECT attempts FROM rq_claim(ARRAY['gone'], 'w');
\set VERBOSITY sqlstate
SELECT rq_complete(:'stale', 7);
SELECT rq_complete_batch(ARRAY[:'stale']::uuid[], ARRAY[7]);
\set VERBOSITY default
SELECT status FROM jobs WHERE id = :'stale';
SELECT status FROM rq_complete(:'stale', 1);

-- A failure is not a success: a retry stays, an exhausted job is kept.
SELECT id AS failing FROM rq_enqueue('gone', 'failing', max_retry_count => 0) \gset
SELECT d.status FROM rq_claim(ARRAY['gone'], 'w') c, rq_fail(c.id, c.attempts, 'boom') d;
SELECT payload, status FROM jobs WHERE queue = 'gone';

-- A job that others wait for is kept until they are released; so is one
-- that holds its key for a period. Their ends set off what they always do.
SELECT id AS parent FROM rq_enqueue('gone', 'parent') \gset
SELECT id AS child FROM rq_enqueue('kept', 'child', after => ARRAY[:'parent']::uuid[]) \gset
SELECT status FROM jobs WHERE id = :'child';
SELECT d.payload, d.status FROM rq_claim(ARRAY['gone'], 'w') c, rq_complete(c.id, c.attempts) d;
SELECT status FROM jobs WHERE id IN (:'parent', :'child') ORDER BY payload;
SELECT count(rq_enqueue('gone', 'period', key => 'k', key_period => '1 hour'));
SELECT d.payload, d.status FROM rq_claim(ARRAY['gone'], 'w') c, rq_complete(c.id, c.attempts) d;
SELECT payload, status, key FROM jobs WHERE queue = 'gone' AND payload = 'period';

-- Only raquel's verbs delete: a plain UPDATE (the Python library's) keeps.
SELECT id AS plain FROM rq_enqueue('gone', 'plain') \gset
UPDATE jobs SET status = 'success', finished_at = rq_now_ms() WHERE id = :'plain';
SELECT status FROM jobs WHERE id = :'plain';

-- History on again: the next success is kept.
SELECT rq_set_history('gone', true);
SELECT count(*) AS rows FROM queues_without_history;
SELECT count(rq_enqueue('gone', 'kept again'));
SELECT d.payload, d.status FROM rq_claim(ARRAY['gone'], 'w') c, rq_complete(c.id, c.attempts) d;
SELECT count(*) AS kept FROM jobs WHERE queue = 'gone' AND payload = 'kept again';

-- The metrics count each success, deleted or not: the 16 of this file
-- (recorded now, as the background worker would). Whether raquel shows a
-- sign of 'gone' here (its NOTICE, pg_test/sql/flow.sql) depends on whether
-- the background worker has recorded its metrics yet: not shown.
SET client_min_messages = warning;
SELECT rq_set_history('gone', false);
RESET client_min_messages;
SELECT count(rq_enqueue('gone', 'counted' || i)) FROM generate_series(1, 3) i;
WITH c AS (SELECT id, attempts FROM rq_claim(ARRAY['gone'], 'w', 3))
SELECT count(*) FROM rq_complete_batch(ARRAY(SELECT id FROM c ORDER BY id), ARRAY(SELECT attempts FROM c ORDER BY id));
SELECT raquel_internal.rq_record_metrics() IS NOT NULL AS recorded;
SELECT sum(succeeded) AS succeeded FROM rq_metrics('gone', '1 hour');

-- A worker role completes (so deletes) a job of such a queue without the
-- DELETE privilege; a role that may not update jobs deletes nothing.
CREATE ROLE history_worker;
SELECT rq_grant_worker('history_worker');
SELECT id AS worked FROM rq_enqueue('gone', 'by a worker role') \gset
SET ROLE history_worker;
SELECT d.payload, d.status FROM rq_claim(ARRAY['gone'], 'w') c, rq_complete(c.id, c.attempts) d;
RESET ROLE;
SELECT count(*) AS left FROM jobs WHERE id = :'worked';
SELECT id AS looked FROM rq_enqueue('gone', 'looked at') \gset
SELECT attempts FROM rq_claim(ARRAY['gone'], 'w');
SET ROLE pg_monitor;
\set VERBOSITY sqlstate
SELECT rq_complete(:'looked', 1);
SELECT rq_set_history('gone', true);
\set VERBOSITY default
RESET ROLE;
SELECT status FROM jobs WHERE id = :'looked';
SELECT status FROM rq_complete(:'looked', 1);
REVOKE ALL ON ALL TABLES IN SCHEMA public FROM history_worker;
REVOKE ALL ON ALL SEQUENCES IN SCHEMA public FROM history_worker;
REVOKE ALL ON ALL FUNCTIONS IN SCHEMA public FROM history_worker;
REVOKE ALL ON SCHEMA public FROM history_worker;
-- rq_grant_worker's grants on the helpers it may call (rq_flow_lock,
-- rq_flow_took) and on their schema
REVOKE ALL ON ALL FUNCTIONS IN SCHEMA raquel_internal FROM history_worker;
REVOKE ALL ON SCHEMA raquel_internal FROM history_worker;
DROP ROLE history_worker;

-- Bad arguments change nothing.
\set VERBOSITY default
SELECT rq_set_history('gone', NULL);
SELECT rq_set_history(NULL, false);
SELECT rq_set_history('', false);
SELECT queue FROM queues_without_history;
SELECT rq_set_history('gone', true);
