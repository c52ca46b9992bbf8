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

-- Whether some job waits for job `parent` (an edge of job_dependencies):
-- what the verbs that end a job ask, to see to its children.
CREATE FUNCTION raquel_internal.rq_has_children(parent uuid) RETURNS boolean
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT EXISTS (SELECT FROM @extschema@.job_dependencies d WHERE d.parent_id = $1)
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
        -- (the jobs that await it first, as rq_job_ended does)
        PERFORM raquel_internal.rq_deliver_job_end(parent);
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
