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

-- Every job that becomes claimable, enqueued (rq_enqueue, a batch, a
-- trigger, a plain INSERT) or made ready again (a failure with a retry left,
-- a rescue, rq_reschedule, rq_reject, rq_retry, an UPDATE by hand), wakes at
-- commit a waiting claim of its queue: a commit wakes up to as many waiting
-- claims of each queue as it made jobs ready in it. A job made ready for
-- later wakes one too, which looks again and then sleeps until the job is
-- due. With raquel.notify on, an enqueue also notifies each queue it
-- touched: PostgreSQL folds identical notifications of one transaction into
-- one and delivers them at commit, so one NOTIFY per queue per committed
-- transaction, none for a rolled-back one. It is off by default because
-- PostgreSQL lets only one transaction that notified commit at a time
-- (measured, rq_enqueue from 4 clients: about 3700 a second with it, 6300
-- without). An enqueue's payload is held to raquel.max_payload_size here,
-- the one place every enqueue passes. A job with a max_age, and a job
-- claimed outside rq_claim (by the Python library), tell the background
-- worker when it has work to do (src/deadlines.rs). The trigger is in Rust
-- (src/events.rs): it runs for every job. It runs no SQL, so it has no
-- search_path to pin.
CREATE FUNCTION rq_job_events() RETURNS trigger
LANGUAGE c
AS 'MODULE_PATHNAME', 'rq_job_events';

-- Only a job that can be claimed wakes anyone: a bulk load of finished
-- jobs queues no trigger events at all.
CREATE TRIGGER jobs_enqueued
    AFTER INSERT ON jobs
    FOR EACH ROW WHEN (NEW.status IN ('queued', 'failed'))
    EXECUTE FUNCTION rq_job_events();

-- The updates of every job, a claim by rq_claim (which sets a lease) and a
-- finish, are not let through by these WHENs: a comparison a row, and no
-- trigger event queued.
CREATE TRIGGER jobs_ready_again
    AFTER UPDATE OF status, scheduled_at ON jobs
    FOR EACH ROW WHEN (NEW.status IN ('queued', 'failed')
                       AND (OLD.status NOT IN ('queued', 'failed') OR NEW.scheduled_at < OLD.scheduled_at))
    EXECUTE FUNCTION rq_job_events();
CREATE TRIGGER jobs_claimed_elsewhere
    AFTER UPDATE OF status ON jobs
    FOR EACH ROW WHEN (NEW.status = 'claimed' AND OLD.status <> 'claimed' AND NEW.lease_expires_at IS NULL)
    EXECUTE FUNCTION rq_job_events();
