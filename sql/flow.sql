-- Flow control inside the claim: paused queues, a queue's concurrency and
-- rate limits, and fair groups. Every claim through rq_claim obeys them, so
-- every worker in every language does, with no coordinator. Claims made
-- outside raquel's functions (the Python library's dequeue, a hand-written
-- UPDATE) know nothing of them.
--
-- A queue has flow control while it has a row here. Each backend keeps the
-- settings in memory, so a queue without a row costs a claim nothing more
-- (src/flow.rs); the table's trigger tells every backend at commit when the
-- settings change.
CREATE TABLE queue_limits (
    queue             text    NOT NULL,
    -- No claim takes the queue's jobs while it is paused.
    paused            boolean NOT NULL DEFAULT false,
    -- At most this many of the queue's jobs claimed at once.
    max_claimed       integer,
    -- At most `rate` claims per `per`, as a token bucket: it holds up to
    -- `rate` tokens, starts full and gains rate/per continuously; each job
    -- claimed takes one.
    rate              integer,
    per               interval,
    -- At most this many claimed jobs of one group at once.
    group_max_claimed integer,
    -- The queue has had jobs with a group_key: claims take turns among its
    -- groups. Set by the first such job (rq_job_turn).
    grouped           boolean NOT NULL DEFAULT false,
    -- The state the limits keep, written by claims under the row's lock:
    -- the jobs claimed under max_claimed (those still claimed count), and
    -- the tokens left at tokens_at (ms).
    claimed           uuid[]  NOT NULL DEFAULT '{}',
    tokens            double precision,
    tokens_at         bigint,

    CONSTRAINT queue_limits_pkey PRIMARY KEY (queue),
    CONSTRAINT queue_limits_max_claimed_check CHECK (max_claimed >= 1),
    CONSTRAINT queue_limits_rate_check CHECK (rate >= 1 AND per > interval '0'),
    CONSTRAINT queue_limits_group_max_claimed_check CHECK (group_max_claimed >= 1)
);

COMMENT ON TABLE queue_limits IS
    'raquel flow control: one row per queue that is paused, limited or grouped (rq_pause, rq_set_limits).';

-- pg_dump keeps the settings (the state columns come along; they only ever
-- hold back claims for jobs that are no longer claimed, which count for nothing).
SELECT pg_catalog.pg_extension_config_dump('queue_limits', '');

-- Every backend's copy of the settings is dropped when a change to them
-- commits (src/flow.rs). The claims' own writes to the state columns do not
-- fire it. It runs no SQL, but its Rust sits beside code that does
-- (src/flow.rs), and every such function pins its search_path.
CREATE FUNCTION raquel_internal.rq_queue_limits_changed() RETURNS trigger
LANGUAGE c
SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'rq_queue_limits_changed';
CREATE TRIGGER queue_limits_changed
    AFTER INSERT OR DELETE OR TRUNCATE
       OR UPDATE OF queue, paused, max_claimed, rate, per, group_max_claimed, grouped
    ON queue_limits
    FOR EACH STATEMENT EXECUTE FUNCTION raquel_internal.rq_queue_limits_changed();

-- A grouped job's turn, set as it is inserted (however it is enqueued):
-- one past its group's last ready job's turn (the last queued or failed
-- one: two probes of jobs_group_idx), and never before the turn the
-- queue's claims have reached at its priority (its first due grouped job's),
-- so that a group that was idle takes its turn next rather than catching up
-- on turns it missed. Claims go by priority, then turn: the groups take
-- turns, a group with a million jobs and a group with ten side by side.
-- It runs as the extension's owner: a role that may only INSERT jobs may
-- not read the table the turn comes from.
CREATE FUNCTION raquel_internal.rq_job_turn() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    now_ms bigint := raquel_internal.rq_now_ms();
BEGIN
    IF NEW.status NOT IN ('queued', 'failed') THEN
        RETURN NEW;
    END IF;
    NEW.turn := greatest(
        (SELECT max(last.turn) + 1 FROM (
            (SELECT j.turn FROM @extschema@.jobs j
             WHERE j.queue = NEW.queue AND j.group_key IS NOT NULL AND j.group_key = NEW.group_key
               AND j.status = 'queued' AND j.turn IS NOT NULL
             ORDER BY j.turn DESC
             LIMIT 1)
            UNION ALL
            (SELECT j.turn FROM @extschema@.jobs j
             WHERE j.queue = NEW.queue AND j.group_key IS NOT NULL AND j.group_key = NEW.group_key
               AND j.status = 'failed' AND j.turn IS NOT NULL
             ORDER BY j.turn DESC
             LIMIT 1)) last),
        (SELECT j.turn FROM @extschema@.jobs j
         WHERE j.queue = NEW.queue AND j.priority = NEW.priority AND j.scheduled_at <= now_ms
           AND j.group_key IS NOT NULL AND j.status IN ('queued', 'failed')
         ORDER BY j.priority DESC, j.turn
         LIMIT 1),
        1);
    IF NOT EXISTS (SELECT FROM @extschema@.queue_limits l WHERE l.queue = NEW.queue AND l.grouped) THEN
        INSERT INTO @extschema@.queue_limits AS l (queue, grouped) VALUES (NEW.queue, true)
        ON CONFLICT ON CONSTRAINT queue_limits_pkey DO UPDATE SET grouped = true;
    END IF;
    RETURN NEW;
END
$$;
-- The WHEN is as small as it can be (PostgreSQL reads and plans it anew for
-- every INSERT statement); the function tests the status.
CREATE TRIGGER jobs_grouped
    BEFORE INSERT ON jobs
    FOR EACH ROW WHEN (NEW.group_key IS NOT NULL)
    EXECUTE FUNCTION raquel_internal.rq_job_turn();

-- A NOTICE when a verb that sets a queue up (rq_pause, rq_resume,
-- rq_set_limits, rq_set_history) names a queue raquel shows no sign of: no
-- job ready or grouped in it, no settings, no schedule, no metrics. A typo'd
-- name is then not set up in silence; setting up a queue before its first
-- job stays allowed. Index probes only (the jobs table has no index of
-- every job by queue), so a queue whose jobs are all claimed or finished
-- and that has no metrics (raquel.metrics off) is told of too; the message
-- says what was looked at. A role that may not read those tables gets no
-- NOTICE.
CREATE FUNCTION raquel_internal.rq_note_new_queue(queue text, verb text) RETURNS void
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    BEGIN
        IF EXISTS (SELECT FROM @extschema@.jobs j
                   WHERE j.queue = rq_note_new_queue.queue AND j.status IN ('queued', 'failed') AND j.group_key IS NULL)
           OR EXISTS (SELECT FROM @extschema@.jobs j
                      WHERE j.queue = rq_note_new_queue.queue AND j.group_key IS NOT NULL
                        AND j.status IN ('queued', 'failed', 'claimed'))
           OR EXISTS (SELECT FROM @extschema@.queue_limits l WHERE l.queue = rq_note_new_queue.queue)
           OR EXISTS (SELECT FROM @extschema@.queues_without_history h WHERE h.queue = rq_note_new_queue.queue)
           OR EXISTS (SELECT FROM @extschema@.schedules s WHERE s.queue = rq_note_new_queue.queue)
           OR EXISTS (SELECT FROM @extschema@.metrics m WHERE m.queue = rq_note_new_queue.queue) THEN
            RETURN;
        END IF;
    EXCEPTION WHEN insufficient_privilege THEN
        RETURN;
    END;
    RAISE NOTICE '% names queue "%", which has no ready jobs, no settings, no schedule and no metrics', verb, queue
        USING DETAIL = 'It is set all the same: a queue may be set up before its first job.',
              HINT = 'Check the name; rq_queues() lists the queues that have jobs.';
END
$$;

-- Stops claims of a queue's jobs; enqueues go on, and waiting claims keep
-- waiting. Idempotent; a queue may be paused before it has jobs.
CREATE FUNCTION raquel_internal.rq_pause(queue text) RETURNS queue_limits
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    settings @extschema@.queue_limits;
BEGIN
    PERFORM raquel_internal.rq_check_limits(queue, NULL, NULL, NULL, NULL);
    PERFORM raquel_internal.rq_refuse_distributed('rq_pause');
    PERFORM raquel_internal.rq_note_new_queue(queue, 'rq_pause');
    INSERT INTO @extschema@.queue_limits AS l (queue, paused) VALUES (rq_pause.queue, true)
    ON CONFLICT ON CONSTRAINT queue_limits_pkey DO UPDATE SET paused = true
    RETURNING l.* INTO settings;
    RETURN settings;
END
$$;

-- The name users call: raquel's own code calls raquel_internal.rq_pause
-- (sql/privileges.sql says why).
CREATE FUNCTION rq_pause(queue text) RETURNS queue_limits
LANGUAGE sql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT * FROM raquel_internal.rq_pause($1) $$;

-- Lets claims take a paused queue's jobs again, and wakes its waiting
-- claims at commit. Idempotent.
CREATE FUNCTION raquel_internal.rq_resume(queue text) RETURNS queue_limits
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    settings @extschema@.queue_limits;
BEGIN
    PERFORM raquel_internal.rq_check_limits(queue, NULL, NULL, NULL, NULL);
    PERFORM raquel_internal.rq_note_new_queue(queue, 'rq_resume');
    UPDATE @extschema@.queue_limits l SET paused = false
    WHERE l.queue = rq_resume.queue AND l.paused
    RETURNING l.* INTO settings;
    IF FOUND THEN
        PERFORM raquel_internal.rq_wake_claims(queue);
        settings := raquel_internal.rq_tidy_queue_limits(queue, settings);
    ELSE
        SELECT l.* INTO settings FROM @extschema@.queue_limits l WHERE l.queue = rq_resume.queue;
        IF NOT FOUND THEN
            settings.queue := queue;
            settings.paused := false;
            settings.grouped := false;
            settings.claimed := '{}';
        END IF;
    END IF;
    RETURN settings;
END
$$;

-- The name users call: raquel's own code calls raquel_internal.rq_resume
-- (sql/privileges.sql says why).
CREATE FUNCTION rq_resume(queue text) RETURNS queue_limits
LANGUAGE sql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT * FROM raquel_internal.rq_resume($1) $$;

-- Sets a queue's limits; NULL removes one. Checked first (22023 naming the
-- bad argument), so an error changes nothing. A limit lowered below what is
-- claimed now holds back new claims until enough jobs end; a limit raised
-- or removed wakes the queue's waiting claims at commit.
CREATE FUNCTION rq_set_limits(
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
    PERFORM raquel_internal.rq_check_limits(queue, max_claimed, rate, per, group_max_claimed);
    PERFORM raquel_internal.rq_refuse_distributed('rq_set_limits');
    PERFORM raquel_internal.rq_note_new_queue(queue, 'rq_set_limits');
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
    PERFORM raquel_internal.rq_wake_claims(queue);
    RETURN raquel_internal.rq_tidy_queue_limits(queue, settings);
END
$$;

-- A row that no longer sets anything is deleted, so that the queue's claims
-- go back to the plain claim; returns the row as it was.
CREATE FUNCTION raquel_internal.rq_tidy_queue_limits(queue text, settings queue_limits) RETURNS queue_limits
LANGUAGE sql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
    DELETE FROM @extschema@.queue_limits l
    WHERE l.queue = $1 AND NOT l.paused AND NOT l.grouped
      AND l.max_claimed IS NULL AND l.rate IS NULL AND l.group_max_claimed IS NULL;
    SELECT $2;
$$;

-- The state the limits of `queues` keep, their rows locked (FOR UPDATE, in
-- name order, until the claiming transaction ends), and that state written
-- after a claim took `claimed` (the jobs claimed under max_claimed) and left
-- `tokens` at `tokens_at`. They run as the extension's owner, and only
-- inside rq_claim's flow claim (src/claim/flow_claim.rs): workers read the state but may
-- not lock or write it, so no role can refill a rate's bucket or empty a
-- queue's claimed list. Not for PUBLIC: rq_grant_worker grants them.
CREATE FUNCTION raquel_internal.rq_flow_lock(queues text[]) RETURNS SETOF queue_limits
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM raquel_internal.rq_require_flow_claim('rq_flow_lock');
    RETURN QUERY
    SELECT l.* FROM @extschema@.queue_limits l
    WHERE l.queue = ANY (queues) AND (l.max_claimed IS NOT NULL OR l.rate IS NOT NULL)
    ORDER BY l.queue
    FOR UPDATE;
END
$$;

CREATE FUNCTION raquel_internal.rq_flow_took(queue text, claimed uuid[], tokens double precision, tokens_at bigint) RETURNS void
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM raquel_internal.rq_require_flow_claim('rq_flow_took');
    UPDATE @extschema@.queue_limits l
    SET claimed = CASE WHEN l.max_claimed IS NULL THEN '{}' ELSE rq_flow_took.claimed END,
        tokens = CASE WHEN l.rate IS NULL THEN NULL ELSE rq_flow_took.tokens END,
        tokens_at = CASE WHEN l.rate IS NULL THEN NULL ELSE rq_flow_took.tokens_at END
    WHERE l.queue = rq_flow_took.queue;
END
$$;
