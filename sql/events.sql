-- Telling the world about new jobs: waking waiting claims (and, with
-- raquel.notify on, a NOTIFY per queue) when jobs are enqueued.

-- The LISTEN channel of a queue: 'rq_' || queue. Channel names are at most
-- 63 bytes, so a queue name longer than 60 bytes gets 'rq_' || md5(queue).
CREATE FUNCTION rq_channel(queue text) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT CASE WHEN octet_length($1) <= 60 THEN 'rq_' || $1 ELSE 'rq_' || md5($1) END
$$;

-- Every job enqueued (rq_enqueue, a batch, a trigger, a plain INSERT) that
-- can be claimed wakes, at commit, a waiting claim of its queue: a commit
-- wakes up to as many waiting claims of each queue as it enqueued jobs in
-- it. (The verbs that make a job ready again do the same through
-- rq_job_ready_again: sql/finish.sql, sql/transitions.sql.) With
-- raquel.notify on, it also notifies each queue it touched: PostgreSQL
-- folds identical notifications of one transaction into one and delivers
-- them at commit, so one NOTIFY per queue per committed transaction, none
-- for a rolled-back one. It is off by default because PostgreSQL lets only
-- one transaction that notified commit at a time (measured, rq_enqueue from
-- 4 clients: about 3700 a second with it, 6300 without). An enqueue's
-- payload is held to raquel.max_payload_size here, the one place every
-- enqueue passes, and a job with a max_age tells the background worker
-- when it expires (src/deadlines.rs). The trigger is in Rust
-- (src/events.rs): it runs for every job. It runs no SQL, so it has no
-- search_path to pin.
CREATE FUNCTION raquel_internal.rq_job_events() RETURNS trigger
LANGUAGE c
AS 'MODULE_PATHNAME', 'rq_job_events';

-- Only a job that can be claimed wakes anyone; the trigger tests that
-- itself, without a WHEN, which PostgreSQL would read and plan anew for
-- every INSERT statement (about a fifth of an rq_enqueue's instructions).
CREATE TRIGGER jobs_enqueued
    AFTER INSERT ON jobs
    FOR EACH ROW
    EXECUTE FUNCTION raquel_internal.rq_job_events();
