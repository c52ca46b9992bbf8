-- A job's transitions, in one place (src/transitions.rs has the map): every
-- change of a job's status that raquel makes in PL/pgSQL is in this file,
-- and every one made by a statement that Rust runs is in a
-- sql/transition.*.sql file, or written directly by src/direct.rs. A test
-- (src/transitions.rs) fails when a status is written anywhere else. What
-- follows a job's end is one epilogue that every ending path calls
-- (src/ended.rs, through raquel_internal.rq_ended here).

-- Born: many jobs at once, on the planned path.
-- rq_enqueue_batch's planned path (src/enqueue_batch.rs): every batch with
-- keys, group keys or parents, and plain ones when the table is not as
-- raquel made it. Called by rq_enqueue_batch, which runs as the extension's
-- owner, so this runs as the owner too (not for PUBLIC: sql/privileges.sql);
-- the pinned search_path keeps a caller's objects from standing in for ours
-- (every reference in the body is qualified too).
CREATE FUNCTION raquel_internal.rq_enqueue_batch_planned(
    queue           text,
    payloads        text[],
    at              timestamptz DEFAULT NULL,
    delay           interval    DEFAULT NULL,
    max_age         interval    DEFAULT NULL,
    max_retry_count integer     DEFAULT NULL,
    min_retry_delay interval    DEFAULT NULL,
    max_retry_delay interval    DEFAULT NULL,
    backoff_base    interval    DEFAULT NULL,
    priority        integer     DEFAULT 0,
    keys            text[]      DEFAULT NULL,
    group_keys      text[]      DEFAULT NULL,
    after           uuid[]      DEFAULT NULL
) RETURNS SETOF jobs
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    o       record;
    new_ids  uuid[];
    missing  text;
    may_read boolean;
BEGIN
    SELECT * INTO o FROM raquel_internal.rq_job_options(rq_enqueue_batch_planned.queue, rq_enqueue_batch_planned.at,
        rq_enqueue_batch_planned.delay, rq_enqueue_batch_planned.max_age, rq_enqueue_batch_planned.max_retry_count,
        rq_enqueue_batch_planned.min_retry_delay, rq_enqueue_batch_planned.max_retry_delay, rq_enqueue_batch_planned.backoff_base);
    IF payloads IS NULL THEN
        PERFORM raquel_internal.rq_refuse('payloads_null', '{}');
    END IF;
    PERFORM raquel_internal.rq_check_arrays(ARRAY['payloads', 'keys', 'group_keys'],
        ARRAY[array_ndims(payloads), array_ndims(keys), array_ndims(group_keys)], keys || group_keys);
    IF group_keys IS NOT NULL OR after IS NOT NULL THEN
        PERFORM raquel_internal.rq_refuse_distributed('a workflow (after) or fair groups (group_keys)');
    END IF;
    -- group keys, when given, pair with the payloads by position
    IF group_keys IS NOT NULL AND cardinality(group_keys) <> cardinality(payloads) THEN
        PERFORM raquel_internal.rq_refuse('group_keys_count', ARRAY[cardinality(group_keys), cardinality(payloads)]::text[]);
    END IF;

    IF keys IS NULL AND after IS NULL THEN
        RETURN QUERY
        INSERT INTO @extschema@.jobs AS j (queue, payload, max_age, max_retry_count,
                               min_retry_delay, max_retry_delay, backoff_base,
                               enqueued_at, scheduled_at, priority, group_key)
        SELECT rq_enqueue_batch_planned.queue, p.payload, o.max_age_ms, rq_enqueue_batch_planned.max_retry_count,
               o.min_retry_delay_ms, o.max_retry_delay_ms, o.backoff_base_ms, o.now_ms, o.due_ms,
               coalesce(rq_enqueue_batch_planned.priority, 0), p.group_key
        FROM unnest(payloads, group_keys) WITH ORDINALITY AS p (payload, group_key, n)
        ORDER BY p.n
        RETURNING j.*;
        RETURN;
    END IF;

    IF keys IS NULL THEN
        -- after: the new jobs wait for those (sql/workflows.sql)
        WITH inserted AS (
            INSERT INTO @extschema@.jobs AS j (queue, payload, max_age, max_retry_count,
                                   min_retry_delay, max_retry_delay, backoff_base,
                                   enqueued_at, scheduled_at, priority, group_key)
            SELECT rq_enqueue_batch_planned.queue, p.payload, o.max_age_ms, rq_enqueue_batch_planned.max_retry_count,
                   o.min_retry_delay_ms, o.max_retry_delay_ms, o.backoff_base_ms, o.now_ms, o.due_ms,
                   coalesce(rq_enqueue_batch_planned.priority, 0), p.group_key
            FROM unnest(payloads, group_keys) WITH ORDINALITY AS p (payload, group_key, n)
            ORDER BY p.n
            RETURNING j.id
        )
        SELECT coalesce(array_agg(inserted.id), '{}') INTO new_ids FROM inserted;
        PERFORM raquel_internal.rq_hold_for_parents(new_ids, after);
        RETURN QUERY SELECT j.* FROM @extschema@.jobs j WHERE j.id = ANY (new_ids) ORDER BY j.id;
        RETURN;
    END IF;

    -- With keys: a key that an unfinished job of this queue already holds
    -- gives back that job instead of a new one. ON CONFLICT waits for a
    -- concurrent enqueue of the same key to commit or roll back, so two
    -- sessions never both insert one. The jobs that were there already are
    -- read by a second statement, whose fresh snapshot sees a job that such
    -- a concurrent session just committed.
    IF cardinality(keys) <> cardinality(payloads) THEN
        PERFORM raquel_internal.rq_refuse('keys_count', ARRAY[cardinality(keys), cardinality(payloads)]::text[]);
    END IF;
    WITH inserted AS (
        INSERT INTO @extschema@.jobs AS j (queue, payload, max_age, max_retry_count,
                               min_retry_delay, max_retry_delay, backoff_base,
                               enqueued_at, scheduled_at, priority, key, group_key)
        SELECT rq_enqueue_batch_planned.queue, p.payload, o.max_age_ms, rq_enqueue_batch_planned.max_retry_count,
               o.min_retry_delay_ms, o.max_retry_delay_ms, o.backoff_base_ms, o.now_ms, o.due_ms,
               coalesce(rq_enqueue_batch_planned.priority, 0), p.key, p.group_key
        FROM unnest(payloads, keys, group_keys) WITH ORDINALITY AS p (payload, key, group_key, n)
        ORDER BY p.n
        ON CONFLICT (queue, key) WHERE key IS NOT NULL AND status IN ('queued', 'claimed', 'failed')
        DO NOTHING
        RETURNING j.id
    )
    SELECT coalesce(array_agg(inserted.id), '{}') INTO new_ids FROM inserted;
    -- after: the new jobs (not the key holders) wait for those
    PERFORM raquel_internal.rq_hold_for_parents(new_ids, after);

    -- The jobs that held keys already: whole for a caller who may read the
    -- table, otherwise only their id, queue and key (src/privileges.rs).
    may_read := raquel_internal.rq_caller_may_read('@extschema@.jobs'::regclass);
    RETURN QUERY
    SELECT j.* FROM @extschema@.jobs j WHERE j.id = ANY (new_ids)
    UNION ALL
    SELECT (CASE WHEN may_read THEN ROW(j.*)::@extschema@.jobs
                 ELSE json_populate_record(NULL::@extschema@.jobs, json_build_object('id', j.id, 'queue', j.queue, 'key', j.key))
            END).*
    FROM @extschema@.jobs j
    WHERE j.queue = rq_enqueue_batch_planned.queue AND j.key = ANY (keys)
      AND j.status IN ('queued', 'claimed', 'failed', 'blocked') AND NOT j.id = ANY (new_ids);

    SELECT k.key INTO missing FROM unnest(keys) AS k (key)
    WHERE k.key IS NOT NULL AND NOT EXISTS (
        SELECT 1 FROM @extschema@.jobs j
        WHERE j.queue = rq_enqueue_batch_planned.queue AND j.key = k.key
          AND j.status IN ('queued', 'claimed', 'failed', 'blocked'))
    LIMIT 1;
    IF FOUND THEN
        PERFORM raquel_internal.rq_refuse('key_finished', ARRAY[missing, rq_enqueue_batch_planned.queue]);
    END IF;
END
$$;

-- Born blocked, or released (queued) or cancelled when their parents end:
-- a workflow's children (sql/workflows.sql).
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
    -- (only through children still blocked: an edge to a job that is not
    -- blocked is a running job's wait for this one, rq_wait_job, whose own
    -- children are not this workflow's)
    WITH RECURSIVE descendants AS (
        SELECT d.child_id AS id FROM @extschema@.job_dependencies d
        JOIN @extschema@.jobs b ON b.id = d.child_id AND b.status = 'blocked'
        WHERE d.parent_id = parent
        UNION
        SELECT d.child_id FROM @extschema@.job_dependencies d JOIN descendants x ON d.parent_id = x.id
        JOIN @extschema@.jobs b ON b.id = d.child_id AND b.status = 'blocked'
    ), cancelled AS (
        UPDATE @extschema@.jobs c
        SET status = 'cancelled', finished_at = now_ms,
            error = format('cancelled: job %s, which it runs after, ended %s', ended.id, ended.status)
        FROM descendants x WHERE c.id = x.id AND c.status = 'blocked'
        RETURNING c.id, c.queue,
                  c.key_period IS NOT NULL
                  OR EXISTS (SELECT FROM @extschema@.job_waits w WHERE w.event = 'raquel:job:' || c.id::text) AS sets_off
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

-- Expired: jobs nobody claimed in time (a duty: sql/duties.sql).
-- Jobs nobody claimed before scheduled_at + max_age: expired, finished now.
CREATE FUNCTION raquel_internal.rq_expire(batch integer DEFAULT 1000) RETURNS bigint
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
DECLARE
    now_ms  bigint := raquel_internal.rq_now_ms();
    changed bigint;
    queues  text[];
    ended   uuid[];
    sets_off boolean[];
BEGIN
    PERFORM raquel_internal.rq_check_batch(batch);
    IF raquel_internal.rq_distributed() THEN
        RETURN raquel_internal.rq_expire_distributed(batch, now_ms);
    END IF;
    WITH due AS (
        SELECT j.id FROM @extschema@.jobs j
        WHERE j.status IN ('queued', 'failed') AND j.max_age IS NOT NULL
          AND j.scheduled_at + j.max_age <= now_ms
        ORDER BY j.scheduled_at + j.max_age
        LIMIT batch
        FOR UPDATE SKIP LOCKED
    ), expired AS (
        UPDATE @extschema@.jobs j SET status = 'expired', finished_at = now_ms
        FROM due WHERE j.id = due.id
        RETURNING j.id, j.queue, j.key_period IS NOT NULL OR raquel_internal.rq_has_children(j.id) AS sets_off
    )
    SELECT count(*), array_agg(e.id), array_agg(e.queue), array_agg(e.sets_off)
    INTO changed, ended, queues, sets_off
    FROM expired e;
    -- what follows their ends (src/ended.rs): counted, their awaiters
    -- woken, what their ends set off (sql/finish.sql)
    PERFORM raquel_internal.rq_ended(ended, queues, 'expired', false, sets_off);
    RETURN changed;
END
$$;

-- The name users call: raquel's own code calls raquel_internal.rq_expire
-- (sql/privileges.sql says why).
CREATE FUNCTION rq_expire(batch integer DEFAULT 1000) RETURNS bigint
LANGUAGE sql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT raquel_internal.rq_expire($1) $$;

-- rq_expire on a distributed table (sql/distributed.sql says how its duties
-- go queue by queue): each queue's due jobs expired in its own shard.
CREATE FUNCTION raquel_internal.rq_expire_distributed(batch integer, now_ms bigint) RETURNS bigint
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    q       text;
    changed bigint := 0;
    more    bigint;
    ended   uuid[];
    sets_off boolean[];
BEGIN
    IF NOT citus_is_coordinator() THEN
        RETURN 0;
    END IF;
    FOR q IN
        SELECT DISTINCT j.queue FROM @extschema@.jobs j
        WHERE j.status IN ('queued', 'failed') AND j.max_age IS NOT NULL
          AND j.scheduled_at + j.max_age <= now_ms
    LOOP
        EXIT WHEN changed >= batch;
        WITH due AS (
            SELECT j.id FROM @extschema@.jobs j
            WHERE j.queue = q AND j.status IN ('queued', 'failed') AND j.max_age IS NOT NULL
              AND j.scheduled_at + j.max_age <= now_ms
            ORDER BY j.scheduled_at + j.max_age
            LIMIT batch - changed
            FOR UPDATE SKIP LOCKED
        )
        , expired AS (
            UPDATE @extschema@.jobs j SET status = 'expired', finished_at = now_ms
            FROM due WHERE j.queue = q AND j.id = due.id
            RETURNING j.id, j.key_period IS NOT NULL AS sets_off
        )
        SELECT count(*), array_agg(e.id), array_agg(e.sets_off) INTO more, ended, sets_off FROM expired e;
        changed := changed + more;
        -- what follows their ends (src/ended.rs): counted, their awaiters
        -- woken, a key enqueued with a key_period held (sql/finish.sql)
        PERFORM raquel_internal.rq_ended(ended, array_fill(q, ARRAY[more::integer]), 'expired', false, sets_off);
    END LOOP;
    RETURN changed;
END
$$;

-- The rest of a job's life. A worker holding a claim may hand the job back
-- (reschedule, reject) without using up a retry, or extend its lease; anyone
-- may cancel an unfinished job; an operator may retry a job that failed or
-- ended. Like rq_complete, each is written in Rust (src/job_verbs.rs) around
-- one kept plan, sql/transition.<verb>.sql, and explains a miss
-- (src/errors.rs). The worker verbs take the claim's attempt, the fencing
-- token, as their second argument and require it (0.6.0: sql/finish.sql).

-- A claimed job goes back to queued at `at` plus `delay` (neither: the job's
-- min_retry_delay from now). claimed_by / claimed_at stay, as in the Python
-- library, so that rescheduled jobs can be found.
CREATE FUNCTION rq_reschedule(
    id      uuid,
    attempt integer,
    at      timestamptz DEFAULT NULL,
    delay   interval    DEFAULT NULL
) RETURNS jobs
LANGUAGE c VOLATILE
SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'rq_reschedule_c';
-- The same C function by the name raquel's own code calls (rq_sleep,
-- rq_wait_event: sql/waits.sql); sql/privileges.sql says why.
CREATE FUNCTION raquel_internal.rq_reschedule(
    id      uuid,
    attempt integer,
    at      timestamptz DEFAULT NULL,
    delay   interval    DEFAULT NULL
) RETURNS jobs
LANGUAGE c VOLATILE
SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'rq_reschedule_c';

-- A claimed job goes back to queued at once, for another worker.
CREATE FUNCTION rq_reject(id uuid, attempt integer) RETURNS jobs
LANGUAGE c VOLATILE
SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'rq_reject_c';

-- The worker still holding the claim pushes its lease out to now + lease
-- (a heartbeat). A lease that ran out but was not rescued yet can be extended.
CREATE FUNCTION rq_extend(id uuid, attempt integer, lease interval DEFAULT raquel_internal.rq_default_lease())
RETURNS jobs
LANGUAGE c VOLATILE
SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'rq_extend_c';

-- Any unfinished job (queued, claimed, failed, blocked) becomes cancelled,
-- for good, and so do the jobs blocked waiting for it (rq_parent_ended, above).
-- A worker still working on a cancelled job finds out when it completes it:
-- that is an error (55000), since the job is no longer claimed.
CREATE FUNCTION rq_cancel(id uuid) RETURNS jobs
LANGUAGE c VOLATILE
SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'rq_cancel_c';
-- The same C function by the name raquel's own code calls.
CREATE FUNCTION raquel_internal.rq_cancel(id uuid) RETURNS jobs
LANGUAGE c VOLATILE
SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'rq_cancel_c';

-- An operator puts a failed, exhausted, expired or cancelled job back to
-- queued, due now, with its whole retry budget again: the attempts so far
-- stay counted (history, and fencing tokens never repeat) but no longer use
-- up retries. When a newer unfinished job holds its key, refused (55000).
CREATE FUNCTION rq_retry(id uuid) RETURNS jobs
LANGUAGE c VOLATILE
SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'rq_retry_c';
-- The same C function by the name raquel's own code calls.
CREATE FUNCTION raquel_internal.rq_retry(id uuid) RETURNS jobs
LANGUAGE c VOLATILE
SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'rq_retry_c';
