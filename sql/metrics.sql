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
CREATE FUNCTION raquel_internal.rq_record_metrics() RETURNS bigint
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    touched bigint;
    now_ms  bigint := raquel_internal.rq_now_ms();
    ended   bigint := (now_ms / 60000 - 1) * 60000;
    more    bigint;
BEGIN
    -- One recorder at a time: a call waits for the one before it to commit,
    -- so that what it leaves is visible once it returns (figures taken from
    -- shared memory by a round not yet committed would otherwise be in
    -- neither). 7311: this function's own class of advisory lock.
    PERFORM pg_catalog.pg_advisory_xact_lock(7311, 0);
    INSERT INTO @extschema@.metrics AS m (queue, minute, enqueued, claimed, succeeded, failed, rescued, expired,
                                           wait_histogram, run_histogram)
    SELECT t.queue, t.minute, t.enqueued, t.claimed, t.succeeded, t.failed, t.rescued, t.expired,
           t.wait_histogram, t.run_histogram
    FROM raquel_internal.rq_take_metrics() t
    ON CONFLICT ON CONSTRAINT metrics_pkey DO UPDATE
    SET enqueued = m.enqueued + excluded.enqueued, claimed = m.claimed + excluded.claimed,
        succeeded = m.succeeded + excluded.succeeded, failed = m.failed + excluded.failed,
        rescued = m.rescued + excluded.rescued, expired = m.expired + excluded.expired,
        wait_histogram = raquel_internal.rq_histogram_add(m.wait_histogram, excluded.wait_histogram),
        run_histogram = raquel_internal.rq_histogram_add(m.run_histogram, excluded.run_histogram);
    GET DIAGNOSTICS touched = ROW_COUNT;
    -- The backlog once a minute: it reads every ready job's index entry.
    -- Kept for the queues that had something counted that minute (at most
    -- the slots of shared memory) and the 100 longest backlogs, so that a
    -- database of 200 000 idle queues with jobs waiting adds 100 rows a
    -- minute, not 200 000.
    IF NOT EXISTS (SELECT 1 FROM @extschema@.metrics m WHERE m.minute = ended AND m.backlog IS NOT NULL) THEN
        INSERT INTO @extschema@.metrics AS m (queue, minute, backlog)
        SELECT b.queue, ended, b.n
        FROM (SELECT j.queue, count(*) AS n FROM @extschema@.jobs j
              WHERE j.status IN ('queued', 'failed') AND j.scheduled_at <= now_ms
              GROUP BY j.queue) b
        WHERE b.queue IN (SELECT a.queue FROM @extschema@.metrics a WHERE a.minute = ended)
           OR b.queue IN (SELECT t.queue FROM (SELECT j.queue, count(*) AS n FROM @extschema@.jobs j
                                               WHERE j.status IN ('queued', 'failed') AND j.scheduled_at <= now_ms
                                               GROUP BY j.queue ORDER BY 2 DESC, 1 LIMIT 100) t)
        ON CONFLICT ON CONSTRAINT metrics_pkey DO UPDATE SET backlog = excluded.backlog;
        GET DIAGNOSTICS more = ROW_COUNT;
        touched := touched + more;
    END IF;
    RETURN touched;
END
$$;

-- Events the metrics could not count, by its public name (src/metrics.rs):
-- the same C function as raquel_internal.rq_metrics_lost, which raquel calls.
CREATE FUNCTION rq_metrics_lost() RETURNS bigint
LANGUAGE c STRICT VOLATILE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'rq_metrics_lost_wrapper';

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
    SELECT m.queue, raquel_internal.rq_ms_to_timestamptz(m.minute),
           m.enqueued, m.claimed, m.succeeded, m.failed, m.rescued, m.expired,
           raquel_internal.rq_histogram_percentile(m.wait_histogram, 0.5),
           raquel_internal.rq_histogram_percentile(m.wait_histogram, 0.95),
           raquel_internal.rq_histogram_percentile(m.wait_histogram, 0.99),
           raquel_internal.rq_histogram_percentile(m.run_histogram, 0.5),
           raquel_internal.rq_histogram_percentile(m.run_histogram, 0.95),
           raquel_internal.rq_histogram_percentile(m.run_histogram, 0.99),
           m.backlog
    FROM @extschema@.metrics m
    WHERE m.minute >= raquel_internal.rq_now_ms() - (extract(epoch FROM coalesce($2, interval '1 hour')) * 1000)::bigint
      AND ($1 IS NULL OR m.queue = $1)
    ORDER BY m.queue, m.minute
$$;

-- The current figures in the Prometheus text format, for a scraper that
-- runs SQL. Per queue, for the `max_queues` queues with the most unfinished
-- jobs (then the most events in the last five recorded minutes, then by
-- name): jobs by status now, and over the last five recorded minutes the
-- events and the wait and run percentiles (seconds). Over every queue: jobs
-- by status and events, how many queues there are, and the events the
-- metrics could not count (raquel_metrics_lost_total). Its cost is one read
-- of the jobs table and of five minutes of metrics, plus the histograms of
-- the queues shown: 10 000 queues are as cheap as 100.
CREATE FUNCTION rq_prometheus(max_queues integer DEFAULT 100) RETURNS text
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    since   bigint := (raquel_internal.rq_now_ms() / 60000 - 5) * 60000;
    out     text;
    waiting bigint;
BEGIN
    IF max_queues IS NULL OR max_queues < 0 OR max_queues > 100000 THEN
        PERFORM raquel_internal.rq_refuse('max_queues', ARRAY[max_queues::text]);
    END IF;
    WITH jobs AS (
        SELECT j.queue, j.status, count(*) AS n FROM @extschema@.jobs j GROUP BY 1, 2
    ), events AS (
        SELECT m.queue, e.event, sum(e.n) AS n
        FROM @extschema@.metrics m
        CROSS JOIN LATERAL (VALUES ('enqueued', m.enqueued), ('claimed', m.claimed), ('succeeded', m.succeeded),
                                   ('failed', m.failed), ('rescued', m.rescued), ('expired', m.expired)) e (event, n)
        WHERE m.minute >= since
        GROUP BY 1, 2
    ), queues AS (
        SELECT coalesce(j.queue, e.queue) AS queue, coalesce(j.unfinished, 0) AS unfinished, coalesce(e.events, 0) AS events
        FROM (SELECT t.queue, sum(t.n) FILTER (WHERE t.status NOT IN ('success', 'cancelled', 'expired', 'exhausted')) AS unfinished
              FROM jobs t GROUP BY 1) j
        FULL JOIN (SELECT t.queue, sum(t.n) AS events FROM events t GROUP BY 1) e ON e.queue = j.queue
    ), shown AS (
        SELECT q.queue, row_number() OVER (ORDER BY q.unfinished DESC, q.events DESC, q.queue) AS rank
        FROM queues q
        ORDER BY q.unfinished DESC, q.events DESC, q.queue
        LIMIT max_queues
    ), histograms AS (
        SELECT s.queue, s.rank,
               (SELECT array_agg(b.n ORDER BY b.i) FROM (
                    SELECT u.i, sum(u.n)::integer AS n
                    FROM @extschema@.metrics m, unnest(m.wait_histogram) WITH ORDINALITY u (n, i)
                    WHERE m.queue = s.queue AND m.minute >= since GROUP BY u.i) b) AS wait,
               (SELECT array_agg(b.n ORDER BY b.i) FROM (
                    SELECT u.i, sum(u.n)::integer AS n
                    FROM @extschema@.metrics m, unnest(m.run_histogram) WITH ORDINALITY u (n, i)
                    WHERE m.queue = s.queue AND m.minute >= since GROUP BY u.i) b) AS run
        FROM shown s
    ), quantiles AS (
        SELECT w.which, w.metric, h.queue, h.rank, f.fraction,
               raquel_internal.rq_histogram_percentile(CASE w.which WHEN 0 THEN h.wait ELSE h.run END, f.fraction) AS ms
        FROM (VALUES (0, 'raquel_wait_seconds'), (1, 'raquel_run_seconds')) w (which, metric)
        CROSS JOIN histograms h
        CROSS JOIN (VALUES (0.5), (0.95), (0.99)) f (fraction)
    )
    SELECT string_agg(x.part, '' ORDER BY x.k) INTO out FROM (
        SELECT 1 AS k, E'# HELP raquel_jobs Jobs by queue and status, for the queues shown (rq_prometheus(max_queues)).\n# TYPE raquel_jobs gauge\n'
               || coalesce(string_agg(format(E'raquel_jobs{queue="%s",status="%s"} %s\n',
                                             raquel_internal.rq_prometheus_label(t.queue), t.status, t.n),
                                      '' ORDER BY s.rank, t.status), '') AS part
        FROM jobs t JOIN shown s ON s.queue = t.queue
        UNION ALL
        SELECT 2, E'# HELP raquel_jobs_all Jobs of every queue by status.\n# TYPE raquel_jobs_all gauge\n'
               || coalesce(string_agg(format(E'raquel_jobs_all{status="%s"} %s\n', a.status, a.n), '' ORDER BY a.status), '')
        FROM (SELECT t.status, sum(t.n) AS n FROM jobs t GROUP BY 1) a
        UNION ALL
        SELECT 3, format(E'# HELP raquel_queues Queues with jobs or events in the last five recorded minutes.\n# TYPE raquel_queues gauge\nraquel_queues %s\n',
                         (SELECT count(*) FROM queues))
        UNION ALL
        SELECT 4, E'# HELP raquel_events_5m Events in the last five recorded minutes, for the queues shown.\n# TYPE raquel_events_5m gauge\n'
               || coalesce(string_agg(format(E'raquel_events_5m{queue="%s",event="%s"} %s\n',
                                             raquel_internal.rq_prometheus_label(e.queue), e.event, e.n),
                                      '' ORDER BY s.rank, e.event), '')
        FROM events e JOIN shown s ON s.queue = e.queue
        UNION ALL
        SELECT 5, E'# HELP raquel_events_5m_all Events of every queue in the last five recorded minutes.\n# TYPE raquel_events_5m_all gauge\n'
               || coalesce(string_agg(format(E'raquel_events_5m_all{event="%s"} %s\n', a.event, a.n), '' ORDER BY a.event), '')
        FROM (SELECT e.event, sum(e.n) AS n FROM events e GROUP BY 1) a
        UNION ALL
        SELECT 6 + w.which,
               format(E'# HELP %1$s %2$s over the last five recorded minutes, for the queues shown.\n# TYPE %1$s gauge\n',
                      w.metric, CASE w.which WHEN 0 THEN 'Wait from due to claim' ELSE 'Run from claim to end' END)
               || coalesce((SELECT string_agg(format(E'%s{queue="%s",quantile="%s"} %s\n', q.metric,
                                                     raquel_internal.rq_prometheus_label(q.queue), q.fraction, q.ms / 1000),
                                              '' ORDER BY q.rank, q.fraction)
                            FROM quantiles q WHERE q.which = w.which AND q.ms IS NOT NULL), '')
        FROM (VALUES (0, 'raquel_wait_seconds'), (1, 'raquel_run_seconds')) w (which, metric)
        UNION ALL
        SELECT 8, format(E'# HELP raquel_metrics_lost_total Events the metrics could not count since the server started.\n# TYPE raquel_metrics_lost_total counter\nraquel_metrics_lost_total %s\n',
                         raquel_internal.rq_metrics_lost())
        UNION ALL
        -- the claim cursors (src/cursors.rs), server-wide since it started
        SELECT 9, format(E'# HELP raquel_cursor_claims_total One-queue claims since the server started, by whether they started at the queue\'s cursors or walked from the start.\n# TYPE raquel_cursor_claims_total counter\n'
                         || E'raquel_cursor_claims_total{cursors="used"} %s\nraquel_cursor_claims_total{cursors="walked"} %s\n'
                         || E'# HELP raquel_cursor_limits_total Claims of a queue name too long for a cursor, queues with too many priorities, and places given to another queue, since the server started.\n# TYPE raquel_cursor_limits_total counter\n'
                         || E'raquel_cursor_limits_total{limit="name_bytes"} %s\nraquel_cursor_limits_total{limit="priorities"} %s\nraquel_cursor_limits_total{limit="places"} %s\n',
                         c.claims_with_cursors, c.claims_without_cursors, c.long_names, c.too_many_priorities, c.places_given_up)
        FROM raquel_internal.rq_cursor_counts() c
    ) x;
    -- the jobs parked for an event (sql/waits.sql), for a role that may read
    -- them: a role given only jobs and metrics keeps its series
    IF pg_catalog.has_table_privilege('@extschema@.job_waits', 'SELECT') THEN
        SELECT count(*) INTO waiting FROM @extschema@.job_waits;
        out := out || format(E'# HELP raquel_jobs_waiting_for_event_all Jobs parked for an event (rq_wait_event), of every queue.\n'
                             || E'# TYPE raquel_jobs_waiting_for_event_all gauge\nraquel_jobs_waiting_for_event_all %s\n', waiting);
    END IF;
    RETURN out;
END
$$;

-- A label value as the Prometheus text format writes it: backslash, double
-- quote and newline escaped.
CREATE FUNCTION raquel_internal.rq_prometheus_label(value text) RETURNS text
LANGUAGE sql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT replace(replace(replace($1, E'\\', E'\\\\'), '"', E'\\"'), E'\n', E'\\n')
$$;
