-- Flow control in one session (sql/flow.sql): what each setting does to a
-- claim, shown by the payloads claimed. Concurrency is tested by
-- tests/client/tests/flow.rs.
\pset null '(null)'

-- A paused queue is left out of one-queue, several-queue and any-queue
-- claims; enqueues go on.
SELECT queue, paused FROM rq_pause('p');
SELECT count(rq_enqueue('p', 'p' || i)) FROM generate_series(1, 3) i;
SELECT count(rq_enqueue('o', 'o' || i)) FROM generate_series(1, 3) i;
SELECT payload FROM rq_claim(ARRAY['p']);
SELECT payload FROM rq_claim(ARRAY['p', 'o']) ORDER BY payload;
-- (any queue: rolled back, since it also takes what earlier files left)
BEGIN;
SELECT count(*) FILTER (WHERE queue = 'p') AS from_p, count(*) FILTER (WHERE queue = 'o') AS from_o
FROM rq_claim(NULL, 'w', 100);
ROLLBACK;
SELECT queue, paused FROM rq_pause('p');     -- again: no error
SELECT queue, paused FROM rq_resume('p');
SELECT queue, paused FROM rq_resume('p');    -- again: no error
SELECT payload FROM rq_claim(ARRAY['p'], 'w', 10) ORDER BY payload;
SELECT count(*) AS rows_left FROM queue_limits;   -- a resumed queue without limits has no row

-- max_claimed: a batch takes only the free slots, highest priority first;
-- a completion frees one.
SELECT queue, max_claimed FROM rq_set_limits('m', max_claimed => 2);
SELECT count(rq_enqueue('m', 'low' || i)) FROM generate_series(1, 3) i;
SELECT count(rq_enqueue('m', 'high' || i, priority => 5)) FROM generate_series(1, 3) i;
SELECT payload FROM rq_claim(ARRAY['m'], 'w', 10) ORDER BY payload;
SELECT payload FROM rq_claim(ARRAY['m'], 'w', 10);
SELECT (rq_complete(id, attempts)).status FROM jobs WHERE queue = 'm' AND payload = 'high1';
SELECT payload FROM rq_claim(ARRAY['m'], 'w', 10);

-- rate: the bucket starts full with `rate` tokens; each job takes one.
SELECT queue, rate, per FROM rq_set_limits('r', rate => 3, per => '1 hour');
SELECT count(rq_enqueue('r', 'r' || i)) FROM generate_series(1, 5) i;
SELECT count(*) AS claimed FROM rq_claim(ARRAY['r'], 'w', 10);
SELECT count(*) AS claimed FROM rq_claim(ARRAY['r'], 'w', 10);

-- Fair groups: a group with many jobs and one with few take turns; jobs
-- without a group go first.
INSERT INTO jobs (queue, payload, group_key) SELECT 'f', 'a' || i, 'A' FROM generate_series(1, 5) i;
SELECT count(rq_enqueue('f', 'b' || i, group_key => 'B')) FROM generate_series(1, 2) i;
SELECT count(*) FROM rq_enqueue_batch('f', ARRAY['c1', 'c2'], group_keys => ARRAY['C', 'C']);
SELECT count(rq_enqueue('f', 'plain')) FROM generate_series(1, 1);
SELECT queue, grouped FROM queue_limits WHERE queue = 'f';
SELECT payload, group_key, turn FROM rq_claim(ARRAY['f'], 'w', 6);
-- group_max_claimed = 1: each group with a claimed job waits for it.
SELECT queue, group_max_claimed FROM rq_set_limits('f', group_max_claimed => 1);
SELECT payload FROM rq_claim(ARRAY['f'], 'w', 6);
SELECT count(rq_complete(id, attempts)) FROM jobs WHERE queue = 'f' AND status = 'claimed' AND group_key = 'A';
SELECT payload FROM rq_claim(ARRAY['f'], 'w', 6);

-- rq_stats shows the settings, a paused queue without jobs too.
SELECT queue, paused FROM rq_pause('empty');
SELECT queue, total, claimed, paused, max_claimed, rate, per, group_max_claimed FROM rq_stats();

-- Removing every limit of an ungrouped queue deletes its row.
SELECT queue, max_claimed FROM rq_set_limits('m');
SELECT queue FROM queue_limits ORDER BY queue;

-- Leave the database as this file found it.
DELETE FROM jobs WHERE queue IN ('p', 'o', 'm', 'r', 'f');
DELETE FROM queue_limits;

-- A verb that sets a queue up and names one raquel shows no sign of (no
-- ready job, no settings, no schedule, no metrics: a typo, most likely)
-- says so in a NOTICE, and does it all the same; a queue with jobs or
-- settings gets no NOTICE.
SELECT queue, paused FROM rq_pause('emials');
SELECT queue, paused FROM rq_resume('emials');
SELECT count(rq_enqueue('emails', 'hello'));
SELECT queue, paused FROM rq_pause('emails');
SELECT queue, paused FROM rq_resume('emails');
SELECT queue, max_claimed FROM rq_set_limits('emials', max_claimed => 3);
SELECT queue, max_claimed FROM rq_set_limits('emials', max_claimed => NULL);
SELECT rq_set_history('emials', false);
SELECT rq_set_history('emials', true);
SELECT count(*) AS left_behind FROM queue_limits WHERE queue IN ('emials', 'emails');
