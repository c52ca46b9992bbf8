-- Telling the world about new jobs: waking waiting claims (and, with
-- raquel.notify on, a NOTIFY per queue) when jobs are enqueued, and a
-- trigger function that enqueues a job for a row change.

-- The LISTEN channel of a queue: 'rq_' || queue. Channel names are at most
-- 63 bytes, so a queue name longer than 60 bytes gets 'rq_' || md5(queue).
CREATE FUNCTION rq_channel(queue text) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
AS $$
    SELECT CASE WHEN octet_length($1) <= 60 THEN 'rq_' || $1 ELSE 'rq_' || md5($1) END
$$;

-- Every INSERT into jobs (rq_enqueue, a batch, a trigger, a plain INSERT)
-- wakes, at commit, up to as many waiting claims of each queue as it made
-- jobs for it. With raquel.notify on, it also notifies each queue it
-- touched: PostgreSQL folds identical notifications of one transaction into
-- one and delivers them at commit, so one NOTIFY per queue per committed
-- transaction, none for a rolled-back one. It is off by default because
-- PostgreSQL lets only one transaction that notified commit at a time
-- (measured, rq_enqueue from 4 clients: about 3700 a second with it, 6300
-- without). The trigger is in Rust (src/enqueued.rs): it runs for every job.
CREATE FUNCTION rq_jobs_inserted() RETURNS trigger
LANGUAGE c
AS 'MODULE_PATHNAME', 'rq_jobs_inserted';

-- Only a job that can be claimed wakes anyone: a bulk load of finished
-- jobs queues no trigger events at all.
CREATE TRIGGER jobs_enqueued
    AFTER INSERT ON jobs
    FOR EACH ROW WHEN (NEW.status IN ('queued', 'failed'))
    EXECUTE FUNCTION rq_jobs_inserted();

-- CREATE TRIGGER … FOR EACH ROW EXECUTE FUNCTION rq_enqueue_trigger('queue')
-- enqueues a job for each row change, in the same transaction as the change.
-- The payload is JSON: {"op", "schema", "table", "old", "new"}, where old or
-- new is null when the operation has none.
CREATE FUNCTION rq_enqueue_trigger() RETURNS trigger
LANGUAGE plpgsql
AS $$
BEGIN
    IF TG_LEVEL <> 'ROW' THEN
        RAISE EXCEPTION 'rq_enqueue_trigger() must run FOR EACH ROW, not FOR EACH STATEMENT (trigger % on %.%)',
                TG_NAME, TG_TABLE_SCHEMA, TG_TABLE_NAME
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF TG_NARGS <> 1 THEN
        RAISE EXCEPTION 'rq_enqueue_trigger() takes the queue name as its one argument, got % arguments (trigger % on %.%)',
                TG_NARGS, TG_NAME, TG_TABLE_SCHEMA, TG_TABLE_NAME
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'EXECUTE FUNCTION rq_enqueue_trigger(''my_queue'')';
    END IF;
    PERFORM @extschema@.rq_enqueue(TG_ARGV[0], jsonb_build_object(
        'op', TG_OP,
        'schema', TG_TABLE_SCHEMA,
        'table', TG_TABLE_NAME,
        'old', CASE WHEN TG_OP IN ('UPDATE', 'DELETE') THEN to_jsonb(OLD) END,
        'new', CASE WHEN TG_OP IN ('INSERT', 'UPDATE') THEN to_jsonb(NEW) END));
    IF TG_WHEN = 'BEFORE' THEN
        RETURN CASE WHEN TG_OP = 'DELETE' THEN OLD ELSE NEW END;
    END IF;
    RETURN NULL;
END
$$;
