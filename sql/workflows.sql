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

-- Every parent a job was enqueued to run after, kept while the child is
-- (job_dependencies forgets an edge when its parent ends): what rq_parents
-- reads, so that a child reads its parents' results. A child's rows go
-- with it: deleted by the prune duty (rq_prune) and by a complete that
-- deletes the child (a queue without history, src/finish.rs).
CREATE TABLE job_parents (
    child_id  uuid NOT NULL,
    parent_id uuid NOT NULL,
    CONSTRAINT job_parents_pkey PRIMARY KEY (child_id, parent_id)
);

COMMENT ON TABLE job_parents IS
    'raquel workflows: every job (parent_id) a job (child_id) was enqueued to run after (rq_parents).';

SELECT pg_catalog.pg_extension_config_dump('job_parents', '');

-- Makes the jobs `ids`, just inserted (queued) by this transaction, wait
-- for the jobs `after`: blocked while any of those is unfinished, queued as
-- they were if all succeeded already, cancelled if one ended otherwise.
-- For the enqueue functions (which run as the extension's owner);
-- rq_check_parents (src/workflows.rs) says what `after` may name: at most
-- 1000 jobs and 100 000 edges, and for a caller who may not read jobs only
-- jobs its own session enqueued, so that a producer learns nothing about
-- other jobs.
--
-- The parents are read, never locked or written: a producer's open
-- transaction holds up nobody's verbs on them, and claims do not pass them
-- over. A parent that ends while this transaction is open does not see
-- its edges (not committed yet); rq_check_parents asks the background
-- worker to look in at commit, and its duty rq_settle_workflows releases
-- (or cancels) such children then.
CREATE FUNCTION raquel_internal.rq_hold_for_parents(ids uuid[], after uuid[]) RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    now_ms  bigint := raquel_internal.rq_now_ms();
    missing text;
    ended   record;
    pending uuid[];
BEGIN
    IF after IS NULL OR cardinality(after) = 0 THEN
        RETURN;
    END IF;
    PERFORM raquel_internal.rq_check_arrays(ARRAY['after'], ARRAY[array_ndims(after)], NULL);
    PERFORM raquel_internal.rq_check_parents(cardinality(ids), after);
    SELECT a.id::text INTO missing FROM unnest(after) a (id)
    WHERE NOT EXISTS (SELECT FROM @extschema@.jobs p WHERE p.id = a.id)
    LIMIT 1;
    IF FOUND THEN
        PERFORM raquel_internal.rq_refuse('after_unknown', ARRAY[missing]);
    END IF;
    INSERT INTO @extschema@.job_parents (child_id, parent_id)
    SELECT c.id, p.id FROM unnest(ids) c (id) CROSS JOIN (SELECT DISTINCT a.id FROM unnest(after) a (id)) p
    ON CONFLICT DO NOTHING;
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
    INSERT INTO @extschema@.job_dependencies (parent_id, child_id)
    SELECT p.id, c.id FROM unnest(pending) p (id) CROSS JOIN unnest(ids) c (id)
    ON CONFLICT DO NOTHING;
    UPDATE @extschema@.jobs j SET status = 'blocked', blocked_by = cardinality(pending)
    WHERE j.id = ANY (ids);
END
$$;

-- Whether some job waits for job `parent` (an edge of job_dependencies):
-- what the verbs that end a job ask, to see to its children.
CREATE FUNCTION raquel_internal.rq_has_children(parent uuid) RETURNS boolean
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT EXISTS (SELECT FROM @extschema@.job_dependencies d WHERE d.parent_id = $1)
$$;

-- A job with children ended: on success, each child waits for one parent
-- fewer and is queued (waking a waiting claim at commit) when none is
-- left; on any other end, every blocked descendant is cancelled. Called by
-- the verbs that end a job that has children (rq_has_children), and by the
-- background worker for parents that ended some other way (rq_settle_workflows).
CREATE FUNCTION raquel_internal.rq_parent_ended(parent uuid) RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    now_ms   bigint := raquel_internal.rq_now_ms();
    ended    record;
    released record;
    cancelled_ids uuid[];
    cancelled_queues text[];
    cancelled_sets_off boolean[];
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
            RETURNING c.queue, c.scheduled_at, c.max_age, c.status, c.priority, c.id
        LOOP
            IF released.status = 'queued' THEN
                PERFORM raquel_internal.rq_job_ready_again(released.queue, released.scheduled_at, released.max_age, released.priority, released.id);
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
        RETURNING c.id, c.queue, c.key_period IS NOT NULL AS sets_off
    ), gone AS (
        DELETE FROM @extschema@.job_dependencies d
        WHERE d.parent_id = parent OR d.parent_id IN (SELECT c.id FROM cancelled c)
    )
    SELECT array_agg(c.id), array_agg(c.queue), array_agg(c.sets_off) INTO cancelled_ids, cancelled_queues, cancelled_sets_off
    FROM cancelled c;
    -- what follows their ends (src/ended.rs): their awaiters woken, a key
    -- enqueued with a key_period held (their own children are among them)
    PERFORM raquel_internal.rq_ended(cancelled_ids, cancelled_queues, 'cancelled', false, cancelled_sets_off);
END
$$;

-- The background worker's duty for parents that ended without raquel's
-- verbs (the Python library's own complete, an UPDATE by hand): what
-- rq_parent_ended would have done, for up to `batch` of them. The table of
-- pending edges is small (edges go when their parent ends), so a round that
-- finds nothing costs a scan of it.
CREATE FUNCTION raquel_internal.rq_settle_workflows(batch integer DEFAULT 1000) RETURNS bigint
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
DECLARE
    parent  uuid;
    settled bigint := 0;
BEGIN
    PERFORM raquel_internal.rq_check_batch(batch);
    FOR parent IN
        SELECT DISTINCT d.parent_id FROM @extschema@.job_dependencies d
        JOIN @extschema@.jobs p ON p.id = d.parent_id
        WHERE p.status IN ('success', 'exhausted', 'expired', 'cancelled')
        LIMIT batch
    LOOP
        PERFORM raquel_internal.rq_parent_ended(parent);
        settled := settled + 1;
    END LOOP;
    RETURN settled;
END
$$;

-- The name users call: raquel's own code calls raquel_internal.rq_settle_workflows
-- (sql/privileges.sql says why).
CREATE FUNCTION rq_settle_workflows(batch integer DEFAULT 1000) RETURNS bigint
LANGUAGE sql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT raquel_internal.rq_settle_workflows($1) $$;

-- The jobs job `id` was enqueued to run after, as they are now (their
-- status, result and error): a child reads what its parents produced. A
-- parent pruned after the retention is not there any more. Reads the jobs
-- table as its caller.
CREATE FUNCTION rq_parents(id uuid) RETURNS SETOF jobs
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF rq_parents.id IS NULL THEN
        PERFORM raquel_internal.rq_refuse('parents_of_null', '{}');
    END IF;
    IF NOT EXISTS (SELECT FROM @extschema@.jobs j WHERE j.id = rq_parents.id) THEN
        PERFORM raquel_internal.rq_refuse('parents_of_unknown', ARRAY[rq_parents.id::text]);
    END IF;
    RETURN QUERY
        SELECT p.* FROM @extschema@.job_parents e JOIN @extschema@.jobs p ON p.id = e.parent_id
        WHERE e.child_id = rq_parents.id
        ORDER BY p.id;
END
$$;
