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
