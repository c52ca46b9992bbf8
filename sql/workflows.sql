-- Workflows: a job that waits for others. rq_enqueue(…, after => ids) (and
-- rq_enqueue_batch) makes jobs that stay `blocked` until every job in
-- `after` has succeeded; the last parent's completion queues them in its own
-- transaction. A parent that ends otherwise (exhausted, expired, cancelled)
-- cancels its blocked descendants, each with an error naming it. A job's
-- parents exist before it does, so no cycle can be made. `blocked` is not a
-- status any claim takes, the Python library's included.

-- The edges still pending: child_id waits for parent_id. An edge goes when
-- its parent ends, so the table holds only the dependencies of unfinished
-- jobs.
CREATE TABLE job_dependencies (
    parent_id uuid NOT NULL,
    child_id  uuid NOT NULL,
    CONSTRAINT job_dependencies_pkey PRIMARY KEY (parent_id, child_id)
);

COMMENT ON TABLE job_dependencies IS
    'raquel workflows: the jobs (child_id) still waiting for a job (parent_id) to end.';

SELECT pg_catalog.pg_extension_config_dump('job_dependencies', '');

-- Makes the jobs `ids`, just inserted (queued) by this transaction, wait
-- for the jobs `after`: blocked while any of those is unfinished, queued as
-- they were if all succeeded already, cancelled if one ended otherwise.
-- For the enqueue functions (which run as the extension's owner).
--
-- The parents are locked (FOR NO KEY UPDATE): a parent's end that is under
-- way is waited for and then seen; one that comes later waits for this
-- transaction, and then sees its edges (rq_parent_ended runs after the
-- UPDATE that ended the parent, with a new snapshot).
CREATE FUNCTION rq_hold_for_parents(ids uuid[], after uuid[]) RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    now_ms  bigint := @extschema@.rq_now_ms();
    missing text;
    ended   record;
    pending uuid[];
BEGIN
    IF after IS NULL OR cardinality(after) = 0 THEN
        RETURN;
    END IF;
    PERFORM @extschema@.rq_check_arrays(ARRAY['after'], ARRAY[array_ndims(after)], NULL);
    SELECT coalesce(a.id::text, 'NULL') INTO missing FROM unnest(after) a (id)
    WHERE a.id IS NULL OR NOT EXISTS (SELECT FROM @extschema@.jobs p WHERE p.id = a.id)
    LIMIT 1;
    IF FOUND THEN
        PERFORM @extschema@.rq_refuse('after_unknown', ARRAY[missing]);
    END IF;
    -- The parents as they are once no end of theirs is under way. NO KEY
    -- UPDATE, not SHARE: this transaction updates the rows below
    -- (has_children), and two enqueues that both held a share lock on a
    -- parent would each wait for the other to let go of it (a deadlock,
    -- seen with four sessions enqueueing children of one parent). Enqueues
    -- of children of one parent take turns on its row instead.
    PERFORM FROM @extschema@.jobs p WHERE p.id = ANY (after) ORDER BY p.id FOR NO KEY UPDATE;
    SELECT p.id, p.status INTO ended FROM @extschema@.jobs p
    WHERE p.id = ANY (after) AND p.status IN ('exhausted', 'expired', 'cancelled')
    ORDER BY p.id LIMIT 1;
    IF FOUND THEN
        UPDATE @extschema@.jobs j
        SET status = 'cancelled', finished_at = now_ms,
            error = format('cancelled: job %s, which it runs after, ended %s', ended.id, ended.status)
        WHERE j.id = ANY (ids);
        RETURN;
    END IF;
    pending := ARRAY(SELECT DISTINCT p.id FROM @extschema@.jobs p
                     WHERE p.id = ANY (after) AND p.status <> 'success');
    IF cardinality(pending) = 0 THEN
        RETURN;
    END IF;
    UPDATE @extschema@.jobs p SET has_children = true WHERE p.id = ANY (pending) AND NOT p.has_children;
    INSERT INTO @extschema@.job_dependencies (parent_id, child_id)
    SELECT p.id, c.id FROM unnest(pending) p (id) CROSS JOIN unnest(ids) c (id)
    ON CONFLICT DO NOTHING;
    UPDATE @extschema@.jobs j SET status = 'blocked', blocked_by = cardinality(pending)
    WHERE j.id = ANY (ids);
END
$$;

-- A job with children ended: on success, each child waits for one parent
-- fewer and is queued (waking a waiting claim at commit) when none is
-- left; on any other end, every blocked descendant is cancelled. Called by
-- the verbs that end a job that has children (has_children), and by the
-- background worker for parents that ended some other way (rq_settle_workflows).
CREATE FUNCTION rq_parent_ended(parent uuid) RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    now_ms   bigint := @extschema@.rq_now_ms();
    ended    record;
    released record;
BEGIN
    SELECT j.id, j.status INTO ended FROM @extschema@.jobs j WHERE j.id = parent;
    IF NOT FOUND OR ended.status NOT IN ('success', 'exhausted', 'expired', 'cancelled') THEN
        RETURN;
    END IF;
    IF ended.status = 'success' THEN
        FOR released IN
            WITH edges AS (
                DELETE FROM @extschema@.job_dependencies d WHERE d.parent_id = parent RETURNING d.child_id
            )
            UPDATE @extschema@.jobs c
            SET blocked_by = c.blocked_by - 1,
                status = CASE WHEN c.blocked_by <= 1 THEN 'queued' ELSE c.status END
            FROM edges WHERE c.id = edges.child_id AND c.status = 'blocked'
            RETURNING c.queue, c.scheduled_at, c.max_age, c.status
        LOOP
            IF released.status = 'queued' THEN
                PERFORM @extschema@.rq_job_ready_again(released.queue, released.scheduled_at, released.max_age);
            END IF;
        END LOOP;
        RETURN;
    END IF;
    WITH RECURSIVE descendants AS (
        SELECT d.child_id AS id FROM @extschema@.job_dependencies d WHERE d.parent_id = parent
        UNION
        SELECT d.child_id FROM @extschema@.job_dependencies d JOIN descendants x ON d.parent_id = x.id
    ), cancelled AS (
        UPDATE @extschema@.jobs c
        SET status = 'cancelled', finished_at = now_ms,
            error = format('cancelled: job %s, which it runs after, ended %s', ended.id, ended.status)
        FROM descendants x WHERE c.id = x.id AND c.status = 'blocked'
        RETURNING c.id
    )
    DELETE FROM @extschema@.job_dependencies d
    WHERE d.parent_id = parent OR d.parent_id IN (SELECT c.id FROM cancelled c);
END
$$;

-- The background worker's duty for parents that ended without raquel's
-- verbs (the Python library's own complete, an UPDATE by hand): what
-- rq_parent_ended would have done, for up to `batch` of them. The table of
-- pending edges is small (edges go when their parent ends), so a round that
-- finds nothing costs a scan of it.
CREATE FUNCTION rq_settle_workflows(batch integer DEFAULT 1000) RETURNS bigint
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
DECLARE
    parent  uuid;
    settled bigint := 0;
BEGIN
    PERFORM @extschema@.rq_check_batch(batch);
    FOR parent IN
        SELECT DISTINCT d.parent_id FROM @extschema@.job_dependencies d
        JOIN @extschema@.jobs p ON p.id = d.parent_id
        WHERE p.status IN ('success', 'exhausted', 'expired', 'cancelled')
        LIMIT batch
    LOOP
        PERFORM @extschema@.rq_parent_ended(parent);
        settled := settled + 1;
    END LOOP;
    RETURN settled;
END
$$;
