-- Distributed mode on Citus (docs/src/guides/citus.md). After
-- `CREATE EXTENSION citus, raquel` on the coordinator (with the worker nodes
-- added), `SELECT rq_distribute()` makes the jobs table a Citus table
-- distributed by queue: each queue's jobs live in one shard, so a claim on
-- one queue is a statement of one shard, run on the node that holds it,
-- whose FOR UPDATE SKIP LOCKED keeps "never the same job twice" as on one
-- server. The verbs notice the mode (rq_distributed) and use statements
-- Citus can route (src/distributed.rs); what the mode does not offer yet
-- (flow control, fair groups, workflows) is refused with SQLSTATE 0A000.

-- Whether the jobs table beside this function is a Citus distributed
-- table. False without Citus. The second statement is planned only when
-- reached, so a server without Citus never sees its catalog's name.
CREATE FUNCTION raquel_internal.rq_distributed() RETURNS boolean
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF pg_catalog.to_regclass('pg_catalog.pg_dist_partition') IS NULL THEN
        RETURN false;
    END IF;
    RETURN EXISTS (SELECT 1 FROM pg_catalog.pg_dist_partition p
                   WHERE p.logicalrelid = '@extschema@.jobs'::pg_catalog.regclass);
END
$$;

-- The name users call: raquel's own code calls raquel_internal.rq_distributed
-- (sql/privileges.sql says why).
CREATE FUNCTION rq_distributed() RETURNS boolean
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT raquel_internal.rq_distributed() $$;

-- Makes the tables distributed, once, on the coordinator:
--   jobs       distributed by queue, in `shard_count` shards; its primary key
--              becomes (id, queue), since Citus needs the distribution
--              column in every unique index;
--   key_holds  distributed by queue beside jobs (colocated), so a key's
--              hold and its jobs are in one shard.
-- schedules stays a table of the coordinator, whose background worker
-- fires them; queue_limits and job_dependencies stay empty there, since the
-- mode refuses flow control and workflows.
-- raquel's functions are not made Citus distributed functions: Citus
-- 13.2.2 crashes the backend (signal 11, and the server restarts) when a
-- delegated call's distribution argument is NULL, as rq_enqueue(NULL, …)
-- would be. That costs a verb two round trips to the node (README), not
-- its planning, where its time goes. The jobs table's triggers run on the
-- shards, which Citus allows with citus.enable_unsafe_triggers on every
-- node (README). Existing jobs move into the shards.
CREATE FUNCTION rq_distribute(shard_count integer DEFAULT 32) RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF pg_catalog.to_regclass('pg_catalog.pg_dist_partition') IS NULL THEN
        RAISE EXCEPTION 'rq_distribute needs the citus extension in this database'
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = 'Add citus to shared_preload_libraries, then CREATE EXTENSION citus before CREATE EXTENSION raquel.';
    END IF;
    IF shard_count IS NULL OR shard_count < 1 OR shard_count > 64000 THEN
        RAISE EXCEPTION 'shard_count must be 1 to 64000, got %', coalesce(shard_count::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF raquel_internal.rq_distributed() THEN
        RAISE EXCEPTION 'the jobs table is distributed already'
            USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    IF NOT pg_catalog.current_setting('citus.enable_unsafe_triggers')::boolean THEN
        RAISE EXCEPTION 'rq_distribute needs citus.enable_unsafe_triggers = on'
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  DETAIL = 'The jobs table''s triggers (sql/events.sql, sql/flow.sql) run on its shards.',
                  HINT = 'Set it in postgresql.conf of the coordinator and of every worker node, and reload.';
    END IF;
    IF EXISTS (SELECT 1 FROM @extschema@.jobs j WHERE j.group_key IS NOT NULL OR j.status = 'blocked')
       OR EXISTS (SELECT 1 FROM @extschema@.queue_limits)
       OR EXISTS (SELECT 1 FROM @extschema@.job_dependencies)
       OR EXISTS (SELECT 1 FROM @extschema@.queues_without_history) THEN
        RAISE EXCEPTION 'rq_distribute cannot move fair groups, workflows, flow settings or queues without history'
            USING ERRCODE = 'feature_not_supported',
                  DETAIL = 'The distributed mode does not offer flow control, fair groups, workflows or queues without history yet.',
                  HINT = 'Let those jobs finish, remove the queue_limits rows (rq_set_limits, rq_resume) and the queues_without_history rows (rq_set_history) first.';
    END IF;
    ALTER TABLE @extschema@.jobs DROP CONSTRAINT jobs_pkey;
    ALTER TABLE @extschema@.jobs ADD CONSTRAINT jobs_pkey PRIMARY KEY (id, queue);
    PERFORM create_distributed_table('@extschema@.jobs', 'queue', shard_count => rq_distribute.shard_count);
    PERFORM create_distributed_table('@extschema@.key_holds', 'queue', colocate_with => '@extschema@.jobs');
END
$$;

-- The refusal of what the distributed mode does not offer (0A000).
CREATE FUNCTION raquel_internal.rq_refuse_distributed(what text) RETURNS void
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF raquel_internal.rq_distributed() THEN
        RAISE EXCEPTION '% is not available on a distributed jobs table', what
            USING ERRCODE = 'feature_not_supported',
                  HINT = 'The Citus guide (docs/src/guides/citus.md) lists what the distributed mode offers.';
    END IF;
END
$$;

-- The duties on a distributed table (sql/duties.sql and sql/transitions.sql's
-- rq_expire call them). Citus runs
-- FOR UPDATE only in a statement of one shard, so each duty goes queue by
-- queue: one statement across the shards finds the queues with work (no
-- lock), then each queue's rows are taken as on one server, in its own
-- shard, skipping rows others hold. Only the coordinator runs them, so the
-- background workers of the worker nodes do not walk the same rows; a row
-- is changed once whoever runs them, since each UPDATE re-checks its status.

-- Up to `batch` claimed jobs whose lease ran out, locked, for rq_rescue
-- (through rq_lapsed) to fail one by one.
CREATE FUNCTION raquel_internal.rq_lapsed_distributed(batch integer, now_ms bigint)
RETURNS TABLE (id uuid, attempts integer, claimed_by text)
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    q     text;
    taken bigint := 0;
    more  bigint;
BEGIN
    IF NOT citus_is_coordinator() THEN
        RETURN;
    END IF;
    FOR q IN
        SELECT DISTINCT j.queue FROM @extschema@.jobs j
        WHERE j.status = 'claimed'
          AND coalesce(j.lease_expires_at, j.claimed_at + raquel_internal.rq_default_lease_ms()) <= now_ms
    LOOP
        EXIT WHEN taken >= batch;
        RETURN QUERY
            -- (attempts is a domain over integer; RETURN QUERY wants the type declared)
            SELECT j.id, j.attempts::integer, j.claimed_by FROM @extschema@.jobs j
            WHERE j.queue = q AND j.status = 'claimed'
              AND coalesce(j.lease_expires_at, j.claimed_at + raquel_internal.rq_default_lease_ms()) <= now_ms
            ORDER BY coalesce(j.lease_expires_at, j.claimed_at + raquel_internal.rq_default_lease_ms())
            LIMIT batch - taken
            FOR UPDATE SKIP LOCKED;
        GET DIAGNOSTICS more = ROW_COUNT;
        taken := taken + more;
    END LOOP;
END
$$;

CREATE FUNCTION raquel_internal.rq_prune_distributed(batch integer, cutoff bigint) RETURNS bigint
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    q       text;
    changed bigint := 0;
    more    bigint;
BEGIN
    IF NOT citus_is_coordinator() THEN
        RETURN 0;
    END IF;
    FOR q IN
        SELECT DISTINCT j.queue FROM @extschema@.jobs j
        WHERE j.status IN ('success', 'cancelled', 'expired', 'exhausted') AND j.finished_at < cutoff
    LOOP
        EXIT WHEN changed >= batch;
        WITH old AS (
            SELECT j.id FROM @extschema@.jobs j
            WHERE j.queue = q AND j.status IN ('success', 'cancelled', 'expired', 'exhausted')
              AND j.finished_at < cutoff
            ORDER BY j.finished_at
            LIMIT batch - changed
            FOR UPDATE SKIP LOCKED
        )
        DELETE FROM @extschema@.jobs j USING old WHERE j.queue = q AND j.id = old.id;
        GET DIAGNOSTICS more = ROW_COUNT;
        changed := changed + more;
    END LOOP;
    RETURN changed;
END
$$;
