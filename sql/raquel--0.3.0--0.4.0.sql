-- raquel 0.3.0 → 0.4.0, run by ALTER EXTENSION raquel UPDATE.
--
-- What changes, and why:
-- * The distributed mode on Citus (issue 14, sql/distributed.sql): new
--   rq_distribute(shard_count), which makes the jobs table a Citus table
--   distributed by queue, rq_distributed(), rq_refuse_distributed(), and
--   the duties' statements for a distributed table, with rq_lapsed, the
--   rescue duty's choice of jobs, in one place for both modes.
--   - The verbs written in PL/pgSQL that called rq_now_ms() inside an
--     UPDATE (rq_extend, rq_cancel, rq_retry, rq_complete_batch, the prune
--     of key holds) take the time into a variable first: Citus refuses
--     volatile calls inside a statement it sends to a shard.
--   - rq_count and rq_next_duty_ms are PL/pgSQL instead of SQL: Citus
--     plans no SQL function's parameters.
--   - rq_enqueue_batch returns a key holder
--     as ROW(j.*)::jobs; rq_pause, rq_set_limits, and group keys or `after`
--     in a batch are refused on a distributed table (0A000).
--   - The duties rq_expire, rq_rescue and rq_prune go queue by queue on a
--     distributed table.
--   - rq_fail, rq_reschedule, rq_reject, rq_extend, rq_cancel, rq_retry
--     and rq_complete_batch name the job's queue in their UPDATE (new
--     rq_shard_queue(id) and rq_shard_queues(ids); NULL on one server), so
--     that on Citus it runs in one shard instead of locking every shard.
-- * Metrics over time (issue 15, sql/metrics.sql): the table metrics (one
--   row per queue and minute), rq_record_metrics (the background worker's
--   new duty), rq_metrics, rq_prometheus and their helpers. The verbs
--   written in SQL count what they do (rq_note_metric): rq_fail,
--   rq_complete_batch, rq_expire, rq_rescue; rq_prune deletes old metrics;
--   rq_grant_worker grants SELECT on metrics.
-- * rq_hold_for_parents locks the parents FOR NO KEY UPDATE instead of FOR
--   SHARE: sessions enqueueing children of one parent at once could
--   deadlock on its row (each held a share lock, then updated it).
-- The Rust functions keep their signatures; their statements change with
-- the library. The jobs table does not change; no job is rewritten.


-- Distributed mode on Citus (README "Scaling out with Citus"). After
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
CREATE FUNCTION rq_distributed() RETURNS boolean
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
    IF @extschema@.rq_distributed() THEN
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
       OR EXISTS (SELECT 1 FROM @extschema@.job_dependencies) THEN
        RAISE EXCEPTION 'rq_distribute cannot move fair groups, workflows or flow settings'
            USING ERRCODE = 'feature_not_supported',
                  DETAIL = 'The distributed mode does not offer flow control, fair groups or workflows yet.',
                  HINT = 'Let those jobs finish and remove the queue_limits rows (rq_set_limits, rq_resume) first.';
    END IF;
    ALTER TABLE @extschema@.jobs DROP CONSTRAINT jobs_pkey;
    ALTER TABLE @extschema@.jobs ADD CONSTRAINT jobs_pkey PRIMARY KEY (id, queue);
    PERFORM create_distributed_table('@extschema@.jobs', 'queue', shard_count => rq_distribute.shard_count);
    PERFORM create_distributed_table('@extschema@.key_holds', 'queue', colocate_with => '@extschema@.jobs');
END
$$;

-- The refusal of what the distributed mode does not offer (0A000).
CREATE FUNCTION rq_refuse_distributed(what text) RETURNS void
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF @extschema@.rq_distributed() THEN
        RAISE EXCEPTION '% is not available on a distributed jobs table', what
            USING ERRCODE = 'feature_not_supported',
                  HINT = 'README "Scaling out with Citus" lists what the distributed mode offers.';
    END IF;
END
$$;

-- The duties on a distributed table (sql/duties.sql calls them). Citus runs
-- FOR UPDATE only in a statement of one shard, so each duty goes queue by
-- queue: one statement across the shards finds the queues with work (no
-- lock), then each queue's rows are taken as on one server, in its own
-- shard, skipping rows others hold. Only the coordinator runs them, so the
-- background workers of the worker nodes do not walk the same rows; a row
-- is changed once whoever runs them, since each UPDATE re-checks its status.
CREATE FUNCTION rq_expire_distributed(batch integer, now_ms bigint) RETURNS bigint
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    q       text;
    changed bigint := 0;
    more    bigint;
    held    uuid[];
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
        SELECT count(*), array_agg(e.id) FILTER (WHERE e.sets_off) INTO more, held FROM expired e;
        changed := changed + more;
        PERFORM @extschema@.rq_note_metric(q, 'expired', NULL) FROM generate_series(1, more);
        -- a key enqueued with a key_period stays held (sql/finish.sql)
        PERFORM @extschema@.rq_job_ended(h.id) FROM unnest(held) h (id);
    END LOOP;
    RETURN changed;
END
$$;

-- Up to `batch` claimed jobs whose lease ran out, locked, for rq_rescue
-- (through rq_lapsed) to fail one by one.
CREATE FUNCTION rq_lapsed_distributed(batch integer, now_ms bigint)
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
          AND coalesce(j.lease_expires_at, j.claimed_at + @extschema@.rq_default_lease_ms()) <= now_ms
    LOOP
        EXIT WHEN taken >= batch;
        RETURN QUERY
            SELECT j.id, j.attempts, j.claimed_by FROM @extschema@.jobs j
            WHERE j.queue = q AND j.status = 'claimed'
              AND coalesce(j.lease_expires_at, j.claimed_at + @extschema@.rq_default_lease_ms()) <= now_ms
            ORDER BY coalesce(j.lease_expires_at, j.claimed_at + @extschema@.rq_default_lease_ms())
            LIMIT batch - taken
            FOR UPDATE SKIP LOCKED;
        GET DIAGNOSTICS more = ROW_COUNT;
        taken := taken + more;
    END LOOP;
END
$$;

CREATE FUNCTION rq_prune_distributed(batch integer, cutoff bigint) RETURNS bigint
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


-- raquel::distributed::rq_shard_queue
CREATE  FUNCTION "rq_shard_queue"(
	"id" uuid /* Option < pgrx :: Uuid > */
) RETURNS TEXT /* Option < String > */
VOLATILE PARALLEL UNSAFE
SET search_path TO pg_catalog, pg_temp
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'rq_shard_queue_wrapper';

-- raquel::distributed::rq_shard_queues
CREATE  FUNCTION "rq_shard_queues"(
	"ids" uuid[] /* :: std :: option :: Option < pgrx :: Array < pgrx :: Uuid > > */
) RETURNS TEXT[] /* :: std :: option :: Option < Vec < Option < String > > > */
VOLATILE PARALLEL UNSAFE
SET search_path TO pg_catalog, pg_temp
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'rq_shard_queues_wrapper';

-- raquel::metrics::rq_histogram_add
CREATE  FUNCTION "rq_histogram_add"(
	"a" INT[], /* :: std :: option :: Option < Vec < Option < i32 > > > */
	"b" INT[] /* :: std :: option :: Option < Vec < Option < i32 > > > */
) RETURNS INT[] /* :: std :: option :: Option < Vec < i32 > > */
IMMUTABLE PARALLEL SAFE
SET search_path TO pg_catalog, pg_temp
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'rq_histogram_add_wrapper';

-- raquel::metrics::rq_histogram_percentile
CREATE  FUNCTION "rq_histogram_percentile"(
	"histogram" INT[], /* :: std :: option :: Option < Vec < Option < i32 > > > */
	"fraction" double precision /* f64 */
) RETURNS double precision /* Option < f64 > */
IMMUTABLE PARALLEL SAFE
SET search_path TO pg_catalog, pg_temp
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'rq_histogram_percentile_wrapper';

-- raquel::metrics::rq_note_metric
CREATE  FUNCTION "rq_note_metric"(
	"queue" TEXT, /* Option < & str > */
	"event" TEXT, /* & str */
	"ms" bigint /* Option < i64 > */
) RETURNS void
VOLATILE PARALLEL UNSAFE
SET search_path TO pg_catalog, pg_temp
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'rq_note_metric_wrapper';

-- raquel::metrics::rq_take_metrics
CREATE  FUNCTION "rq_take_metrics"() RETURNS TABLE (
	"queue" TEXT,  /* String */
	"minute" bigint,  /* i64 */
	"enqueued" bigint,  /* i64 */
	"claimed" bigint,  /* i64 */
	"succeeded" bigint,  /* i64 */
	"failed" bigint,  /* i64 */
	"rescued" bigint,  /* i64 */
	"expired" bigint,  /* i64 */
	"wait_histogram" INT[],  /* Vec < i32 > */
	"run_histogram" INT[]  /* Vec < i32 > */
)
STRICT VOLATILE PARALLEL UNSAFE
SET search_path TO pg_catalog, pg_temp
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'rq_take_metrics_wrapper';

-- Metrics over time (src/metrics.rs): per queue and minute, what the verbs
-- did and how long jobs waited and ran. The verbs count in memory; the
-- background worker adds the counts to this table (rq_record_metrics) each
-- round and soon after every minute with activity; the prune duty deletes
-- rows older than the retention, as it does finished jobs.
CREATE TABLE metrics (
    queue          text      NOT NULL,
    -- the minute's start, ms since the Unix epoch
    minute         bigint    NOT NULL,
    enqueued       bigint    NOT NULL DEFAULT 0,
    claimed        bigint    NOT NULL DEFAULT 0,
    -- every attempt that ended: succeeded, failed (rescued ones too), and
    -- of the failed ones those the rescue duty failed when a lease ran out
    succeeded      bigint    NOT NULL DEFAULT 0,
    failed         bigint    NOT NULL DEFAULT 0,
    rescued        bigint    NOT NULL DEFAULT 0,
    expired        bigint    NOT NULL DEFAULT 0,
    -- From due (scheduled_at) to claim, and from claim to its end (success
    -- or failure), as counts in 161 buckets, four per doubling of ms
    -- (rq_histogram_percentile reads them): minutes add up exactly.
    wait_histogram integer[] NOT NULL DEFAULT '{}',
    run_histogram  integer[] NOT NULL DEFAULT '{}',
    -- ready jobs (due, not claimed) when the minute was recorded
    backlog        bigint,
    CONSTRAINT metrics_pkey PRIMARY KEY (queue, minute)
);
CREATE INDEX metrics_minute_idx ON metrics (minute);
SELECT pg_catalog.pg_extension_config_dump('metrics', '');

-- What the worker runs: the figures counted since its last round, added to
-- their rows, and each queue's ready backlog in the row of the minute that
-- just ended (once a minute). Returns how many rows it touched.
CREATE FUNCTION rq_record_metrics() RETURNS bigint
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    touched bigint;
    now_ms  bigint := @extschema@.rq_now_ms();
    ended   bigint := (now_ms / 60000 - 1) * 60000;
    more    bigint;
BEGIN
    INSERT INTO @extschema@.metrics AS m (queue, minute, enqueued, claimed, succeeded, failed, rescued, expired,
                                           wait_histogram, run_histogram)
    SELECT t.queue, t.minute, t.enqueued, t.claimed, t.succeeded, t.failed, t.rescued, t.expired,
           t.wait_histogram, t.run_histogram
    FROM @extschema@.rq_take_metrics() t
    ON CONFLICT ON CONSTRAINT metrics_pkey DO UPDATE
    SET enqueued = m.enqueued + excluded.enqueued, claimed = m.claimed + excluded.claimed,
        succeeded = m.succeeded + excluded.succeeded, failed = m.failed + excluded.failed,
        rescued = m.rescued + excluded.rescued, expired = m.expired + excluded.expired,
        wait_histogram = @extschema@.rq_histogram_add(m.wait_histogram, excluded.wait_histogram),
        run_histogram = @extschema@.rq_histogram_add(m.run_histogram, excluded.run_histogram);
    GET DIAGNOSTICS touched = ROW_COUNT;
    -- The backlog once a minute: it reads every ready job's index entry.
    IF NOT EXISTS (SELECT 1 FROM @extschema@.metrics m WHERE m.minute = ended AND m.backlog IS NOT NULL) THEN
        INSERT INTO @extschema@.metrics AS m (queue, minute, backlog)
        SELECT j.queue, ended, count(*) FROM @extschema@.jobs j
        WHERE j.status IN ('queued', 'failed') AND j.scheduled_at <= now_ms
        GROUP BY j.queue
        ON CONFLICT ON CONSTRAINT metrics_pkey DO UPDATE SET backlog = excluded.backlog;
        GET DIAGNOSTICS more = ROW_COUNT;
        touched := touched + more;
    END IF;
    RETURN touched;
END
$$;

-- The figures per queue and minute since `since` ago (one queue, or all),
-- with the percentiles of wait and run time in ms.
CREATE FUNCTION rq_metrics(queue text DEFAULT NULL, since interval DEFAULT '1 hour')
RETURNS TABLE (
    queue text, minute timestamptz,
    enqueued bigint, claimed bigint, succeeded bigint, failed bigint, rescued bigint, expired bigint,
    wait_p50_ms double precision, wait_p95_ms double precision, wait_p99_ms double precision,
    run_p50_ms double precision, run_p95_ms double precision, run_p99_ms double precision,
    backlog bigint
)
-- (SQL, not PL/pgSQL: the argument queue and the result column queue
-- would be one variable twice there.)
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT m.queue, @extschema@.rq_ms_to_timestamptz(m.minute),
           m.enqueued, m.claimed, m.succeeded, m.failed, m.rescued, m.expired,
           @extschema@.rq_histogram_percentile(m.wait_histogram, 0.5),
           @extschema@.rq_histogram_percentile(m.wait_histogram, 0.95),
           @extschema@.rq_histogram_percentile(m.wait_histogram, 0.99),
           @extschema@.rq_histogram_percentile(m.run_histogram, 0.5),
           @extschema@.rq_histogram_percentile(m.run_histogram, 0.95),
           @extschema@.rq_histogram_percentile(m.run_histogram, 0.99),
           m.backlog
    FROM @extschema@.metrics m
    WHERE m.minute >= @extschema@.rq_now_ms() - (extract(epoch FROM coalesce($2, interval '1 hour')) * 1000)::bigint
      AND ($1 IS NULL OR m.queue = $1)
    ORDER BY m.queue, m.minute
$$;

-- The current figures in the Prometheus text format, for a scraper that
-- runs SQL: jobs by queue and status now, and per queue over the last five
-- minutes recorded, the events and the wait and run percentiles (seconds).
CREATE FUNCTION rq_prometheus() RETURNS text
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    out      text := '';
    r        record;
    q        text;
    wait     integer[];
    run      integer[];
    fraction double precision;
    waits    text;
    runs     text;
    since    bigint := (@extschema@.rq_now_ms() / 60000 - 5) * 60000;
BEGIN
    out := out || E'# HELP raquel_jobs Jobs in the jobs table by queue and status.\n# TYPE raquel_jobs gauge\n';
    FOR r IN SELECT j.queue, j.status, count(*) AS n FROM @extschema@.jobs j GROUP BY 1, 2 ORDER BY 1, 2 LOOP
        out := out || format(E'raquel_jobs{queue="%s",status="%s"} %s\n',
                             @extschema@.rq_prometheus_label(r.queue), r.status, r.n);
    END LOOP;
    out := out || E'# HELP raquel_events_5m Events in the last five recorded minutes, by queue.\n# TYPE raquel_events_5m gauge\n';
    FOR r IN
        SELECT m.queue, e.event, e.n
        FROM (SELECT m.queue, sum(m.enqueued) AS enqueued, sum(m.claimed) AS claimed, sum(m.succeeded) AS succeeded,
                     sum(m.failed) AS failed, sum(m.rescued) AS rescued, sum(m.expired) AS expired
              FROM @extschema@.metrics m WHERE m.minute >= since GROUP BY m.queue) m
        CROSS JOIN LATERAL (VALUES ('enqueued', m.enqueued), ('claimed', m.claimed), ('succeeded', m.succeeded),
                                   ('failed', m.failed), ('rescued', m.rescued), ('expired', m.expired)) e (event, n)
        ORDER BY 1, 2
    LOOP
        out := out || format(E'raquel_events_5m{queue="%s",event="%s"} %s\n',
                             @extschema@.rq_prometheus_label(r.queue), r.event, r.n);
    END LOOP;
    -- each metric's lines form one group, as the format asks
    waits := E'# HELP raquel_wait_seconds Wait from due to claim over the last five recorded minutes.\n# TYPE raquel_wait_seconds gauge\n';
    runs := E'# HELP raquel_run_seconds Run from claim to end over the last five recorded minutes.\n# TYPE raquel_run_seconds gauge\n';
    FOR q IN SELECT DISTINCT m.queue FROM @extschema@.metrics m WHERE m.minute >= since ORDER BY 1 LOOP
        wait := NULL;
        run := NULL;
        FOR r IN SELECT m.wait_histogram, m.run_histogram FROM @extschema@.metrics m
                 WHERE m.queue = q AND m.minute >= since LOOP
            wait := @extschema@.rq_histogram_add(wait, r.wait_histogram);
            run := @extschema@.rq_histogram_add(run, r.run_histogram);
        END LOOP;
        FOREACH fraction IN ARRAY ARRAY[0.5, 0.95, 0.99] LOOP
            IF @extschema@.rq_histogram_percentile(wait, fraction) IS NOT NULL THEN
                waits := waits || format(E'raquel_wait_seconds{queue="%s",quantile="%s"} %s\n',
                                         @extschema@.rq_prometheus_label(q), fraction,
                                         @extschema@.rq_histogram_percentile(wait, fraction) / 1000);
            END IF;
            IF @extschema@.rq_histogram_percentile(run, fraction) IS NOT NULL THEN
                runs := runs || format(E'raquel_run_seconds{queue="%s",quantile="%s"} %s\n',
                                       @extschema@.rq_prometheus_label(q), fraction,
                                       @extschema@.rq_histogram_percentile(run, fraction) / 1000);
            END IF;
        END LOOP;
    END LOOP;
    out := out || waits || runs;
    RETURN out;
END
$$;

-- A label value as the Prometheus text format writes it: backslash, double
-- quote and newline escaped.
CREATE FUNCTION rq_prometheus_label(value text) RETURNS text
LANGUAGE sql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT replace(replace(replace($1, E'\\', E'\\\\'), '"', E'\\"'), E'\n', E'\\n')
$$;


CREATE OR REPLACE FUNCTION rq_lapsed(batch integer, now_ms bigint)
RETURNS TABLE (id uuid, attempts integer, claimed_by text)
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
BEGIN
    IF @extschema@.rq_distributed() THEN
        RETURN QUERY SELECT * FROM @extschema@.rq_lapsed_distributed(batch, now_ms);
        RETURN;
    END IF;
    RETURN QUERY
        SELECT j.id, j.attempts, j.claimed_by FROM @extschema@.jobs j
        WHERE j.status = 'claimed'
          AND coalesce(j.lease_expires_at, j.claimed_at + @extschema@.rq_default_lease_ms()) <= now_ms
        ORDER BY coalesce(j.lease_expires_at, j.claimed_at + @extschema@.rq_default_lease_ms())
        LIMIT batch
        FOR UPDATE SKIP LOCKED;
END
$$;

CREATE OR REPLACE FUNCTION rq_expire(batch integer DEFAULT 1000) RETURNS bigint
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
DECLARE
    now_ms  bigint := @extschema@.rq_now_ms();
    changed bigint;
    parents uuid[];
    queues  text[];
BEGIN
    PERFORM @extschema@.rq_check_batch(batch);
    IF @extschema@.rq_distributed() THEN
        RETURN @extschema@.rq_expire_distributed(batch, now_ms);
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
        RETURNING j.id, j.queue, j.has_children OR j.key_period IS NOT NULL AS sets_off
    )
    SELECT count(*), array_agg(e.id) FILTER (WHERE e.sets_off), array_agg(e.queue) INTO changed, parents, queues
    FROM expired e;
    PERFORM @extschema@.rq_note_metric(q, 'expired', NULL) FROM unnest(queues) q;
    -- what their ends set off (sql/finish.sql)
    PERFORM @extschema@.rq_job_ended(p.id) FROM unnest(parents) p (id);
    RETURN changed;
END
$$;

CREATE OR REPLACE FUNCTION rq_rescue(batch integer DEFAULT 1000) RETURNS bigint
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
DECLARE
    now_ms  bigint := @extschema@.rq_now_ms();
    job     record;
    changed bigint := 0;
    failed  @extschema@.jobs;
BEGIN
    PERFORM @extschema@.rq_check_batch(batch);
    FOR job IN SELECT l.id, l.attempts, l.claimed_by FROM @extschema@.rq_lapsed(batch, now_ms) l
    LOOP
        failed := @extschema@.rq_fail(job.id,
                        format('lease expired: %s did not finish attempt %s in time',
                               coalesce('worker ' || job.claimed_by, 'the worker'), job.attempts),
                        NULL, job.attempts);
        PERFORM @extschema@.rq_note_metric(failed.queue, 'rescued', NULL);
        changed := changed + 1;
    END LOOP;
    RETURN changed;
END
$$;

CREATE OR REPLACE FUNCTION rq_prune(batch integer DEFAULT 1000, retention interval DEFAULT NULL) RETURNS bigint
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
DECLARE
    -- A value, not rq_now_ms() in the statements: a volatile call cannot
    -- bound an index scan (the prune below then read the index of every
    -- finished job: 2.6 s a round with 10 million of them, measured), and
    -- Citus refuses volatile calls in a statement it sends to a shard.
    now_ms  bigint := @extschema@.rq_now_ms();
    keep_ms bigint;
    cutoff  bigint;
    changed bigint;
BEGIN
    PERFORM @extschema@.rq_check_batch(batch);
    -- keys whose hold after their job's end is over (sql/schema.sql)
    DELETE FROM @extschema@.key_holds h WHERE h.until <= now_ms;
    keep_ms := @extschema@.rq_retention_ms(retention);
    IF keep_ms = 0 THEN
        RETURN 0;
    END IF;
    cutoff := now_ms - keep_ms;
    -- the metrics of minutes older than the retention (sql/metrics.sql)
    DELETE FROM @extschema@.metrics m WHERE m.minute < cutoff;
    IF @extschema@.rq_distributed() THEN
        RETURN @extschema@.rq_prune_distributed(batch, cutoff);
    END IF;
    WITH old AS (
        SELECT j.id FROM @extschema@.jobs j
        WHERE j.status IN ('success', 'cancelled', 'expired', 'exhausted')
          AND j.finished_at < cutoff
        ORDER BY j.finished_at
        LIMIT batch
        FOR UPDATE SKIP LOCKED
    )
    DELETE FROM @extschema@.jobs j USING old WHERE j.id = old.id;
    GET DIAGNOSTICS changed = ROW_COUNT;
    RETURN changed;
END
$$;

CREATE OR REPLACE FUNCTION rq_next_duty_ms(retention interval DEFAULT NULL) RETURNS bigint
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
DECLARE
    keep_ms bigint := @extschema@.rq_retention_ms(retention);
BEGIN
    RETURN least(
        (SELECT coalesce(j.lease_expires_at, j.claimed_at + @extschema@.rq_default_lease_ms())
         FROM @extschema@.jobs j
         WHERE j.status = 'claimed'
           AND coalesce(j.lease_expires_at, j.claimed_at + @extschema@.rq_default_lease_ms()) IS NOT NULL
         ORDER BY coalesce(j.lease_expires_at, j.claimed_at + @extschema@.rq_default_lease_ms())
         LIMIT 1),
        (SELECT j.scheduled_at + j.max_age
         FROM @extschema@.jobs j
         WHERE j.status IN ('queued', 'failed') AND j.max_age IS NOT NULL
         ORDER BY j.scheduled_at + j.max_age
         LIMIT 1),
        (SELECT j.finished_at + keep_ms
         FROM @extschema@.jobs j
         WHERE j.status IN ('success', 'cancelled', 'expired', 'exhausted') AND keep_ms > 0
         ORDER BY j.finished_at
         LIMIT 1),
        (SELECT s.next_run_at FROM @extschema@.schedules s
         WHERE s.enabled
         ORDER BY s.next_run_at
         LIMIT 1));
END
$$;

CREATE OR REPLACE FUNCTION rq_count(queue text DEFAULT NULL, statuses text[] DEFAULT NULL) RETURNS bigint
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN (SELECT count(*) FROM @extschema@.jobs j
            WHERE (rq_count.queue IS NULL OR j.queue = rq_count.queue)
              AND (rq_count.statuses IS NULL OR j.status = ANY (rq_count.statuses)));
END
$$;

CREATE OR REPLACE FUNCTION rq_pause(queue text) RETURNS queue_limits
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    settings @extschema@.queue_limits;
BEGIN
    PERFORM @extschema@.rq_check_limits(queue, NULL, NULL, NULL, NULL);
    PERFORM @extschema@.rq_refuse_distributed('rq_pause');
    INSERT INTO @extschema@.queue_limits AS l (queue, paused) VALUES (rq_pause.queue, true)
    ON CONFLICT ON CONSTRAINT queue_limits_pkey DO UPDATE SET paused = true
    RETURNING l.* INTO settings;
    RETURN settings;
END
$$;

CREATE OR REPLACE FUNCTION rq_set_limits(
    queue             text,
    max_claimed       integer  DEFAULT NULL,
    rate              integer  DEFAULT NULL,
    per               interval DEFAULT '1 second',
    group_max_claimed integer  DEFAULT NULL
) RETURNS queue_limits
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    settings @extschema@.queue_limits;
BEGIN
    PERFORM @extschema@.rq_check_limits(queue, max_claimed, rate, per, group_max_claimed);
    PERFORM @extschema@.rq_refuse_distributed('rq_set_limits');
    INSERT INTO @extschema@.queue_limits AS l (queue, max_claimed, rate, per, group_max_claimed)
    VALUES (rq_set_limits.queue, rq_set_limits.max_claimed, rq_set_limits.rate,
            CASE WHEN rq_set_limits.rate IS NULL THEN NULL ELSE rq_set_limits.per END,
            rq_set_limits.group_max_claimed)
    ON CONFLICT ON CONSTRAINT queue_limits_pkey DO UPDATE
    SET max_claimed = excluded.max_claimed, rate = excluded.rate, per = excluded.per,
        group_max_claimed = excluded.group_max_claimed,
        -- a new rate starts with a full bucket
        tokens = CASE WHEN l.rate IS NOT DISTINCT FROM excluded.rate AND l.per IS NOT DISTINCT FROM excluded.per
                      THEN l.tokens END,
        tokens_at = CASE WHEN l.rate IS NOT DISTINCT FROM excluded.rate AND l.per IS NOT DISTINCT FROM excluded.per
                         THEN l.tokens_at END
    RETURNING l.* INTO settings;
    PERFORM @extschema@.rq_wake_claims(queue);
    RETURN @extschema@.rq_tidy_queue_limits(queue, settings);
END
$$;

CREATE OR REPLACE FUNCTION rq_reschedule(
    id      uuid,
    at      timestamptz DEFAULT NULL,
    delay   interval    DEFAULT NULL,
    attempt integer     DEFAULT NULL
) RETURNS jobs
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    now_ms bigint := @extschema@.rq_now_ms();
    due_ms bigint := @extschema@.rq_due_ms(rq_reschedule.at, rq_reschedule.delay);
    -- on Citus, the job's queue: the UPDATE runs in its shard alone (src/distributed.rs)
    shard_queue text := @extschema@.rq_shard_queue(rq_reschedule.id);
    job    @extschema@.jobs;
BEGIN
    UPDATE @extschema@.jobs j
    SET status = 'queued',
        scheduled_at = coalesce(due_ms, now_ms + coalesce(j.min_retry_delay, @extschema@.rq_default_min_retry_delay())),
        requeues = j.requeues + 1,
        lease_expires_at = NULL,
        finished_at = NULL
    WHERE j.id = rq_reschedule.id AND j.queue = coalesce(shard_queue, j.queue)
      AND j.status = 'claimed'
      AND (rq_reschedule.attempt IS NULL OR j.attempts = rq_reschedule.attempt)
    RETURNING j.* INTO job;
    IF NOT FOUND THEN
        PERFORM @extschema@.rq_raise_cannot(rq_reschedule.id, rq_reschedule.attempt, 'reschedule', '{claimed}');
    END IF;
    -- ready again: wake a waiting claim at commit (src/events.rs)
    PERFORM @extschema@.rq_job_ready_again(job.queue, job.scheduled_at, job.max_age);
    RETURN job;
END
$$;

CREATE OR REPLACE FUNCTION rq_reject(id uuid, attempt integer DEFAULT NULL) RETURNS jobs
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    -- on Citus, the job's queue: the UPDATE runs in its shard alone (src/distributed.rs)
    shard_queue text := @extschema@.rq_shard_queue(rq_reject.id);
    job @extschema@.jobs;
BEGIN
    UPDATE @extschema@.jobs j
    SET status = 'queued', claimed_by = NULL, claimed_at = NULL,
        requeues = j.requeues + 1, lease_expires_at = NULL
    WHERE j.id = rq_reject.id AND j.queue = coalesce(shard_queue, j.queue)
      AND j.status = 'claimed'
      AND (rq_reject.attempt IS NULL OR j.attempts = rq_reject.attempt)
    RETURNING j.* INTO job;
    IF NOT FOUND THEN
        PERFORM @extschema@.rq_raise_cannot(rq_reject.id, rq_reject.attempt, 'reject', '{claimed}');
    END IF;
    -- ready again: wake a waiting claim at commit (src/events.rs)
    PERFORM @extschema@.rq_job_ready_again(job.queue, job.scheduled_at, job.max_age);
    RETURN job;
END
$$;

CREATE OR REPLACE FUNCTION rq_extend(id uuid, lease interval DEFAULT rq_default_lease(), attempt integer DEFAULT NULL)
RETURNS jobs
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    -- a value, not a call in the UPDATE: Citus refuses volatile calls there
    now_ms bigint := @extschema@.rq_now_ms();
    lease_ms bigint := @extschema@.rq_lease_ms(rq_extend.lease);
    -- on Citus, the job's queue: the UPDATE runs in its shard alone (src/distributed.rs)
    shard_queue text := @extschema@.rq_shard_queue(rq_extend.id);
    job      @extschema@.jobs;
BEGIN
    UPDATE @extschema@.jobs j
    SET lease_expires_at = now_ms + lease_ms
    WHERE j.id = rq_extend.id AND j.queue = coalesce(shard_queue, j.queue)
      AND j.status = 'claimed'
      AND (rq_extend.attempt IS NULL OR j.attempts = rq_extend.attempt)
    RETURNING j.* INTO job;
    IF NOT FOUND THEN
        PERFORM @extschema@.rq_raise_cannot(rq_extend.id, rq_extend.attempt, 'extend', '{claimed}');
    END IF;
    RETURN job;
END
$$;

CREATE OR REPLACE FUNCTION rq_cancel(id uuid) RETURNS jobs
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    -- a value, not a call in the UPDATE: Citus refuses volatile calls there
    now_ms bigint := @extschema@.rq_now_ms();
    -- on Citus, the job's queue: the UPDATE runs in its shard alone (src/distributed.rs)
    shard_queue text := @extschema@.rq_shard_queue(rq_cancel.id);
    job @extschema@.jobs;
BEGIN
    UPDATE @extschema@.jobs j
    SET status = 'cancelled', finished_at = now_ms, lease_expires_at = NULL
    WHERE j.id = rq_cancel.id AND j.queue = coalesce(shard_queue, j.queue)
      AND j.status IN ('queued', 'claimed', 'failed', 'blocked')
    RETURNING j.* INTO job;
    IF NOT FOUND THEN
        PERFORM @extschema@.rq_raise_cannot(rq_cancel.id, NULL, 'cancel', '{queued,claimed,failed,blocked}');
    END IF;
    -- when it was claimed, a slot freed under a concurrency limit (src/flow.rs)
    PERFORM @extschema@.rq_claim_ended(job.queue);
    IF job.has_children OR job.key_period IS NOT NULL THEN
        -- what its end sets off (sql/finish.sql)
        PERFORM @extschema@.rq_job_ended(job.id);
    END IF;
    RETURN job;
END
$$;

CREATE OR REPLACE FUNCTION rq_retry(id uuid) RETURNS jobs
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    -- a value, not a call in the UPDATE: Citus refuses volatile calls there
    now_ms bigint := @extschema@.rq_now_ms();
    -- on Citus, the job's queue: the UPDATE runs in its shard alone (src/distributed.rs)
    shard_queue text := @extschema@.rq_shard_queue(rq_retry.id);
    job @extschema@.jobs;
BEGIN
    UPDATE @extschema@.jobs j
    SET status = 'queued', scheduled_at = now_ms, finished_at = NULL,
        lease_expires_at = NULL, requeues = j.attempts
    WHERE j.id = rq_retry.id AND j.queue = coalesce(shard_queue, j.queue)
      AND j.status IN ('failed', 'exhausted', 'expired', 'cancelled')
    RETURNING j.* INTO job;
    IF NOT FOUND THEN
        PERFORM @extschema@.rq_raise_cannot(rq_retry.id, NULL, 'retry', '{failed,exhausted,expired,cancelled}');
    END IF;
    -- ready again: wake a waiting claim at commit (src/events.rs)
    PERFORM @extschema@.rq_job_ready_again(job.queue, job.scheduled_at, job.max_age);
    RETURN job;
EXCEPTION WHEN unique_violation THEN
    -- an ended job's key was taken by a newer job that is still unfinished
    PERFORM @extschema@.rq_refuse('retry_key_taken', ARRAY[rq_retry.id::text]);
END
$$;

CREATE OR REPLACE FUNCTION rq_fail(
    id          uuid,
    error       text    DEFAULT NULL,
    error_trace text    DEFAULT NULL,
    attempt     integer DEFAULT NULL
) RETURNS jobs
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    now_ms bigint := @extschema@.rq_now_ms();
    -- on Citus, the job's queue: the UPDATE runs in its shard alone (src/distributed.rs)
    shard_queue text := @extschema@.rq_shard_queue(rq_fail.id);
    job    @extschema@.jobs;
BEGIN
    UPDATE @extschema@.jobs j
    SET status = CASE WHEN j.attempts - j.requeues > j.max_retry_count THEN 'exhausted' ELSE 'failed' END,
        finished_at = CASE WHEN j.attempts - j.requeues > j.max_retry_count THEN now_ms END,
        scheduled_at = CASE WHEN j.attempts - j.requeues > j.max_retry_count THEN j.scheduled_at
                            ELSE now_ms + @extschema@.rq_backoff(j.attempts - j.requeues,
                                    coalesce(j.backoff_base, @extschema@.rq_default_backoff_base()),
                                    coalesce(j.min_retry_delay, @extschema@.rq_default_min_retry_delay()),
                                    coalesce(j.max_retry_delay, @extschema@.rq_default_max_retry_delay()))
                       END,
        error = rq_fail.error,
        error_trace = rq_fail.error_trace,
        lease_expires_at = NULL
    WHERE j.id = rq_fail.id AND j.queue = coalesce(shard_queue, j.queue)
      AND j.status = 'claimed'
      AND (rq_fail.attempt IS NULL OR j.attempts = rq_fail.attempt)
    RETURNING j.* INTO job;
    IF NOT FOUND THEN
        PERFORM @extschema@.rq_raise_cannot(rq_fail.id, rq_fail.attempt, 'fail', '{claimed}');
    END IF;
    -- the attempt's run time, for the metrics (src/metrics.rs)
    PERFORM @extschema@.rq_note_metric(job.queue, 'failed', now_ms - job.claimed_at);
    IF job.status = 'failed' THEN
        -- to be retried: wake a waiting claim at commit (src/events.rs)
        PERFORM @extschema@.rq_job_ready_again(job.queue, job.scheduled_at, job.max_age);
    ELSE
        -- a slot freed under a concurrency limit (src/flow.rs)
        PERFORM @extschema@.rq_claim_ended(job.queue);
        IF job.has_children OR job.key_period IS NOT NULL THEN
            -- exhausted: what its end sets off (rq_job_ended)
            PERFORM @extschema@.rq_job_ended(job.id);
        END IF;
    END IF;
    RETURN job;
END
$$;

CREATE OR REPLACE FUNCTION rq_complete_batch(ids uuid[], attempts integer[] DEFAULT NULL) RETURNS SETOF jobs
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    -- a value, not a call in the UPDATE: Citus refuses volatile calls there
    now_ms bigint := @extschema@.rq_now_ms();
    done @extschema@.jobs[];
    miss record;
    shard_queues   text[];
    shard_queue    text;
    queue_ids      uuid[];
    queue_attempts integer[];
    queue_done     @extschema@.jobs[];
BEGIN
    IF ids IS NULL THEN
        PERFORM @extschema@.rq_refuse('ids_null', '{}');
    END IF;
    PERFORM @extschema@.rq_check_arrays(ARRAY['ids', 'attempts'], ARRAY[array_ndims(ids), array_ndims(attempts)], NULL);
    IF attempts IS NOT NULL AND cardinality(attempts) <> cardinality(ids) THEN
        PERFORM @extschema@.rq_refuse('attempts_count', ARRAY[cardinality(attempts), cardinality(ids)]::text[]);
    END IF;
    -- The completed rows are kept as they come out of the UPDATE, not read
    -- again from the table. One UPDATE in all on one server; on Citus one
    -- per queue, each in the queue's shard alone (src/distributed.rs).
    shard_queues := @extschema@.rq_shard_queues(ids);
    FOR shard_queue, queue_ids, queue_attempts IN
        SELECT NULL, ids, attempts WHERE shard_queues IS NULL
        UNION ALL
        SELECT shard_queues[w.n], array_agg(w.id), array_agg(w.attempt)
        FROM unnest(ids, attempts) WITH ORDINALITY AS w (id, attempt, n)
        WHERE shard_queues IS NOT NULL
        GROUP BY 1
    LOOP
        WITH wanted AS (
            SELECT w.id, w.attempt FROM unnest(queue_ids, queue_attempts) AS w (id, attempt)
        ), completed AS (
            UPDATE @extschema@.jobs j
            SET status = 'success', finished_at = now_ms, lease_expires_at = NULL
            FROM wanted w
            WHERE j.id = w.id AND j.queue = coalesce(shard_queue, j.queue)
              AND j.status = 'claimed' AND (w.attempt IS NULL OR j.attempts = w.attempt)
            RETURNING j AS job
        )
        SELECT array_agg(c.job ORDER BY (c.job).id) INTO queue_done FROM completed c;
        -- added to `done` here, not in the statement: on Citus that runs in
        -- the shard, where `done` is not of the shard's row type (|| with
        -- a NULL array gives the other)
        done := done || queue_done;
    END LOOP;
    IF shard_queues IS NOT NULL THEN
        SELECT array_agg(d ORDER BY d.id) INTO done FROM unnest(done) d;
    END IF;

    -- Fewer rows than ids: an id this call could not complete (raise, which
    -- undoes the rest), or the same id given twice (fine).
    IF coalesce(cardinality(done), 0) < cardinality(ids) THEN
        SELECT w.id, w.attempt INTO miss
        FROM unnest(ids, attempts) WITH ORDINALITY AS w (id, attempt, n)
        WHERE w.id IS NULL OR w.id NOT IN (SELECT d.id FROM unnest(done) d)
        ORDER BY w.n
        LIMIT 1;
        IF FOUND THEN
            PERFORM @extschema@.rq_raise_cannot(miss.id, miss.attempt, 'complete', '{claimed}');
        END IF;
    END IF;
    -- slots freed under concurrency limits (src/flow.rs), and the metrics
    PERFORM @extschema@.rq_claim_ended(d.queue) FROM (SELECT DISTINCT d.queue FROM unnest(done) d) d;
    PERFORM @extschema@.rq_note_metric(d.queue, 'succeeded', now_ms - d.claimed_at) FROM unnest(done) d;
    -- what their ends set off (rq_job_ended)
    PERFORM @extschema@.rq_job_ended(d.id) FROM unnest(done) d WHERE d.has_children OR d.key_period IS NOT NULL;
    RETURN QUERY SELECT * FROM unnest(done);
END
$$;

CREATE OR REPLACE FUNCTION rq_hold_for_parents(ids uuid[], after uuid[]) RETURNS void
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

CREATE OR REPLACE FUNCTION rq_grant_worker(role regrole) RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF role IS NULL OR role::oid = 0 THEN
        PERFORM @extschema@.rq_refuse('role_null', ARRAY['rq_grant_worker']);
    END IF;
    IF NOT EXISTS (SELECT FROM pg_roles r WHERE r.oid = role) THEN
        PERFORM @extschema@.rq_refuse('role_unknown', ARRAY['rq_grant_worker', role::oid::text]);
    END IF;
    EXECUTE format('GRANT USAGE ON SCHEMA %s TO %s', '@extschema@', role);
    EXECUTE format('GRANT SELECT, UPDATE ON %s.jobs TO %s', '@extschema@', role);
    EXECUTE format('GRANT SELECT ON %s.rq_jobs TO %s', '@extschema@', role);
    EXECUTE format('GRANT SELECT ON %s.metrics TO %s', '@extschema@', role);
    EXECUTE format('GRANT SELECT, UPDATE (claimed, tokens, tokens_at) ON %s.queue_limits TO %s', '@extschema@', role);
    EXECUTE format('GRANT SELECT, DELETE ON %s.job_dependencies TO %s', '@extschema@', role);
    EXECUTE format('GRANT SELECT, INSERT, UPDATE ON %s.key_holds TO %s', '@extschema@', role);
END
$$;

CREATE OR REPLACE FUNCTION rq_enqueue_batch(
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
-- A producer needs no privilege on the table, only EXECUTE on this function
-- (see rq_grant_producer); the pinned search_path keeps a caller's objects
-- from standing in for ours (every reference in the body is qualified too).
SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    o       record;
    new_ids  uuid[];
    missing  text;
    may_read boolean;
BEGIN
    SELECT * INTO o FROM @extschema@.rq_job_options(rq_enqueue_batch.queue, rq_enqueue_batch.at,
        rq_enqueue_batch.delay, rq_enqueue_batch.max_age, rq_enqueue_batch.max_retry_count,
        rq_enqueue_batch.min_retry_delay, rq_enqueue_batch.max_retry_delay, rq_enqueue_batch.backoff_base);
    IF payloads IS NULL THEN
        PERFORM @extschema@.rq_refuse('payloads_null', '{}');
    END IF;
    PERFORM @extschema@.rq_check_arrays(ARRAY['payloads', 'keys', 'group_keys'],
        ARRAY[array_ndims(payloads), array_ndims(keys), array_ndims(group_keys)], keys || group_keys);
    IF group_keys IS NOT NULL OR after IS NOT NULL THEN
        PERFORM @extschema@.rq_refuse_distributed('a workflow (after) or fair groups (group_keys)');
    END IF;
    -- group keys, when given, pair with the payloads by position
    IF group_keys IS NOT NULL AND cardinality(group_keys) <> cardinality(payloads) THEN
        PERFORM @extschema@.rq_refuse('group_keys_count', ARRAY[cardinality(group_keys), cardinality(payloads)]::text[]);
    END IF;

    IF keys IS NULL AND after IS NULL THEN
        RETURN QUERY
        INSERT INTO @extschema@.jobs AS j (queue, payload, max_age, max_retry_count,
                               min_retry_delay, max_retry_delay, backoff_base,
                               enqueued_at, scheduled_at, priority, group_key)
        SELECT rq_enqueue_batch.queue, p.payload, o.max_age_ms, rq_enqueue_batch.max_retry_count,
               o.min_retry_delay_ms, o.max_retry_delay_ms, o.backoff_base_ms, o.now_ms, o.due_ms,
               coalesce(rq_enqueue_batch.priority, 0), p.group_key
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
            SELECT rq_enqueue_batch.queue, p.payload, o.max_age_ms, rq_enqueue_batch.max_retry_count,
                   o.min_retry_delay_ms, o.max_retry_delay_ms, o.backoff_base_ms, o.now_ms, o.due_ms,
                   coalesce(rq_enqueue_batch.priority, 0), p.group_key
            FROM unnest(payloads, group_keys) WITH ORDINALITY AS p (payload, group_key, n)
            ORDER BY p.n
            RETURNING j.id
        )
        SELECT coalesce(array_agg(inserted.id), '{}') INTO new_ids FROM inserted;
        PERFORM @extschema@.rq_hold_for_parents(new_ids, after);
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
        PERFORM @extschema@.rq_refuse('keys_count', ARRAY[cardinality(keys), cardinality(payloads)]::text[]);
    END IF;
    WITH inserted AS (
        INSERT INTO @extschema@.jobs AS j (queue, payload, max_age, max_retry_count,
                               min_retry_delay, max_retry_delay, backoff_base,
                               enqueued_at, scheduled_at, priority, key, group_key)
        SELECT rq_enqueue_batch.queue, p.payload, o.max_age_ms, rq_enqueue_batch.max_retry_count,
               o.min_retry_delay_ms, o.max_retry_delay_ms, o.backoff_base_ms, o.now_ms, o.due_ms,
               coalesce(rq_enqueue_batch.priority, 0), p.key, p.group_key
        FROM unnest(payloads, keys, group_keys) WITH ORDINALITY AS p (payload, key, group_key, n)
        ORDER BY p.n
        ON CONFLICT (queue, key) WHERE key IS NOT NULL AND status IN ('queued', 'claimed', 'failed')
        DO NOTHING
        RETURNING j.id
    )
    SELECT coalesce(array_agg(inserted.id), '{}') INTO new_ids FROM inserted;
    -- after: the new jobs (not the key holders) wait for those
    PERFORM @extschema@.rq_hold_for_parents(new_ids, after);

    -- The jobs that held keys already: whole for a caller who may read the
    -- table, otherwise only their id, queue and key (src/privileges.rs).
    may_read := @extschema@.rq_caller_may_read('@extschema@.jobs'::regclass);
    RETURN QUERY
    SELECT j.* FROM @extschema@.jobs j WHERE j.id = ANY (new_ids)
    UNION ALL
    SELECT (CASE WHEN may_read THEN ROW(j.*)::@extschema@.jobs
                 ELSE json_populate_record(NULL::@extschema@.jobs, json_build_object('id', j.id, 'queue', j.queue, 'key', j.key))
            END).*
    FROM @extschema@.jobs j
    WHERE j.queue = rq_enqueue_batch.queue AND j.key = ANY (keys)
      AND j.status IN ('queued', 'claimed', 'failed', 'blocked') AND NOT j.id = ANY (new_ids);

    SELECT k.key INTO missing FROM unnest(keys) AS k (key)
    WHERE k.key IS NOT NULL AND NOT EXISTS (
        SELECT 1 FROM @extschema@.jobs j
        WHERE j.queue = rq_enqueue_batch.queue AND j.key = k.key
          AND j.status IN ('queued', 'claimed', 'failed', 'blocked'))
    LIMIT 1;
    IF FOUND THEN
        PERFORM @extschema@.rq_refuse('key_finished', ARRAY[missing, rq_enqueue_batch.queue]);
    END IF;
END
$$;

REVOKE EXECUTE ON FUNCTION
    rq_distribute(integer), rq_lapsed(integer, bigint), rq_expire_distributed(integer, bigint),
    rq_lapsed_distributed(integer, bigint), rq_prune_distributed(integer, bigint),
    rq_take_metrics(), rq_record_metrics()
FROM PUBLIC;
