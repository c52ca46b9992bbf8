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

-- The plain claim (src/claim.rs), which knows no flow settings: what
-- rq_claim_flow calls for what the settings allow. It runs only inside
-- rq_claim's flow claim (42501 otherwise, src/flow.rs): claims must go
-- through rq_claim to obey the settings.
CREATE FUNCTION raquel_internal.rq_claim_ready(queues text[], worker text, batch integer, lease_ms bigint)
RETURNS SETOF jobs
LANGUAGE c VOLATILE ROWS 1
SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'rq_claim_ready_c';

-- The state the limits of `queues` keep, their rows locked (FOR UPDATE, in
-- name order, until the claiming transaction ends), and that state written
-- after a claim took `claimed` (the jobs claimed under max_claimed) and left
-- `tokens` at `tokens_at`. They run as the extension's owner, and only
-- inside rq_claim's flow claim (src/flow.rs): workers read the state but may
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

-- rq_claim's claim for queues that have flow settings (src/claim.rs), with
-- rq_claim's arguments checked, where src/claim.rs does not claim in Rust
-- (a claim of one queue that is not paused and keeps its limits in shared
-- memory: src/claim.rs, src/fair.rs): several queues, any queue, a paused
-- queue, a queue whose limits are kept in its row. Queues NULL means any
-- queue. It and rq_claim_fair run only inside rq_claim (42501 otherwise).
--
-- Each queue with settings is claimed from on its own: a paused one not at
-- all; a limited one within its limits' state in shared memory: places
-- reserved under max_claimed (src/claim_slots.rs) and a rate's tokens
-- (src/rate_buckets.rs), taken side by side, with no row locked or
-- written. A queue whose state cannot be had there keeps it in its row,
-- under the row's lock (FOR UPDATE, held until the claiming transaction
-- ends; several are locked at once, in name order), which makes its claims
-- one at a time and lets each read how many of the jobs claimed under
-- max_claimed are still claimed, and the tokens left. The queues
-- without settings are claimed from together, by the plain claim. The
-- order in which the queues with settings and the rest take their turn to
-- fill the batch starts at a random one, so that none of them always goes
-- first. For any queue, the queues without settings are the ones with
-- ready jobs (one probe of the ready index for each).
CREATE FUNCTION raquel_internal.rq_claim_flow(queues text[], worker text, batch integer, lease_ms bigint)
RETURNS SETOF jobs
LANGUAGE plpgsql VOLATILE ROWS 1
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    wanted   integer := batch;
    limited  text[];
    others   text[];
    first    integer;
    member   integer;
    settings @extschema@.queue_limits;
    now_ms   bigint;
    allow    integer;
    live     uuid[];
    bucket   double precision;
    places   integer;
    shared   integer;
    got      uuid[];
    got_attempts integer[];
    job      @extschema@.jobs;
BEGIN
    PERFORM raquel_internal.rq_require_flow_claim('rq_claim_flow');
    IF queues IS NULL THEN
        limited := ARRAY(SELECT l.queue FROM @extschema@.queue_limits l ORDER BY l.queue);
        others := ARRAY(
            WITH RECURSIVE ready_queues AS (
                (SELECT j.queue FROM @extschema@.jobs j
                 WHERE j.status IN ('queued', 'failed') AND j.group_key IS NULL
                 ORDER BY j.queue LIMIT 1)
                UNION ALL
                SELECT (SELECT j.queue FROM @extschema@.jobs j
                        WHERE j.status IN ('queued', 'failed') AND j.group_key IS NULL AND j.queue > r.queue
                        ORDER BY j.queue LIMIT 1)
                FROM ready_queues r WHERE r.queue IS NOT NULL
            )
            SELECT r.queue FROM ready_queues r WHERE r.queue IS NOT NULL AND r.queue <> ALL (limited));
    ELSE
        limited := ARRAY(SELECT l.queue FROM @extschema@.queue_limits l WHERE l.queue = ANY (queues) ORDER BY l.queue);
        others := ARRAY(SELECT DISTINCT q.name FROM unnest(queues) q (name)
                        WHERE q.name IS NOT NULL AND q.name <> ALL (limited));
    END IF;
    -- A claim on several limited queues whose state is kept in their rows
    -- (a server without raquel preloaded, or limits shared memory cannot
    -- hold: src/claim_slots.rs) locks those rows up front, in name order: two
    -- such claims never wait for each other in a circle, however their turns
    -- below are ordered. (A queue that finds shared memory full at its turn
    -- locks its row then; the deadlock detector ends a circle there.)
    IF cardinality(limited) > 1 THEN
        PERFORM FROM raquel_internal.rq_flow_lock(ARRAY(
            SELECT l.queue FROM @extschema@.queue_limits l
            WHERE l.queue = ANY (limited)
              AND (NOT raquel_internal.rq_limits_in_shared_memory()
                   OR l.max_claimed > 256 OR octet_length(l.queue) > 64)));
    END IF;
    first := floor(random() * (cardinality(limited) + 1))::integer;
    FOR turn IN 0 .. cardinality(limited) LOOP
        EXIT WHEN wanted <= 0;
        member := (first + turn) % (cardinality(limited) + 1) + 1;
        IF member > cardinality(limited) THEN
            CONTINUE WHEN cardinality(others) = 0;
            FOR job IN SELECT * FROM raquel_internal.rq_claim_ready(others, worker, wanted, lease_ms) LOOP
                wanted := wanted - 1;
                RETURN NEXT job;
            END LOOP;
            CONTINUE;
        END IF;
        SELECT l.* INTO settings FROM @extschema@.queue_limits l WHERE l.queue = limited[member];
        CONTINUE WHEN NOT FOUND OR settings.paused;
        allow := wanted;
        places := NULL;
        shared := NULL;
        live := '{}';
        IF settings.max_claimed IS NOT NULL OR settings.rate IS NOT NULL THEN
            now_ms := raquel_internal.rq_now_ms();
            -- the limits' state in shared memory, when the queue has it
            IF settings.max_claimed IS NOT NULL THEN
                places := raquel_internal.rq_reserve_places(limited[member], settings.max_claimed, allow, now_ms);
            END IF;
            IF settings.rate IS NOT NULL AND (settings.max_claimed IS NULL OR places > 0) THEN
                shared := raquel_internal.rq_take_tokens(limited[member], settings.rate,
                    (extract(epoch FROM settings.per) * 1000)::bigint, coalesce(places, allow), now_ms);
            END IF;
            IF (settings.max_claimed IS NULL OR places IS NOT NULL)
               AND (settings.rate IS NULL OR shared IS NOT NULL OR places = 0) THEN
                allow := least(coalesce(places, allow), coalesce(shared, allow));
            ELSE
                -- kept in the queue's row: what was reserved goes back
                IF places IS NOT NULL THEN
                    PERFORM raquel_internal.rq_took_places(limited[member], places, '{}'::uuid[], '{}'::integer[]);
                    places := NULL;
                END IF;
                IF shared IS NOT NULL THEN
                    PERFORM raquel_internal.rq_give_back_tokens(limited[member], shared);
                    shared := NULL;
                END IF;
                PERFORM FROM raquel_internal.rq_flow_lock(ARRAY[limited[member]]);
                -- read again by a new statement, which sees what the claims
                -- that held the lock before committed
                SELECT l.* INTO settings FROM @extschema@.queue_limits l WHERE l.queue = limited[member];
                CONTINUE WHEN NOT FOUND OR settings.paused;
                IF settings.max_claimed IS NOT NULL THEN
                    live := ARRAY(SELECT j.id FROM @extschema@.jobs j
                                  WHERE j.id = ANY (settings.claimed) AND j.status = 'claimed');
                    allow := least(allow, settings.max_claimed - cardinality(live));
                END IF;
                IF settings.rate IS NOT NULL THEN
                    bucket := least(settings.rate::double precision,
                        coalesce(settings.tokens, settings.rate)
                        + greatest(now_ms - coalesce(settings.tokens_at, now_ms), 0)
                          * settings.rate / (extract(epoch FROM settings.per) * 1000));
                    allow := least(allow, floor(bucket)::integer);
                END IF;
            END IF;
            IF allow <= 0 THEN
                IF places > 0 THEN
                    PERFORM raquel_internal.rq_took_places(limited[member], places, '{}'::uuid[], '{}'::integer[]);
                END IF;
                IF shared > 0 THEN
                    PERFORM raquel_internal.rq_give_back_tokens(limited[member], shared);
                END IF;
                CONTINUE;
            END IF;
        END IF;
        got := '{}';
        got_attempts := '{}';
        FOR job IN
            SELECT * FROM raquel_internal.rq_claim_ready(ARRAY[limited[member]], worker, allow, lease_ms)
        LOOP
            got := got || job.id;
            got_attempts := got_attempts || job.attempts;
            RETURN NEXT job;
        END LOOP;
        IF settings.grouped AND cardinality(got) < allow THEN
            FOR job IN
                SELECT * FROM raquel_internal.rq_claim_fair(limited[member], worker, allow - cardinality(got),
                                                        lease_ms, settings.group_max_claimed)
            LOOP
                got := got || job.id;
                got_attempts := got_attempts || job.attempts;
                RETURN NEXT job;
            END LOOP;
        END IF;
        wanted := wanted - cardinality(got);
        IF places IS NOT NULL THEN
            PERFORM raquel_internal.rq_took_places(limited[member], places, got, got_attempts);
        END IF;
        IF shared IS NOT NULL AND cardinality(got) < shared THEN
            PERFORM raquel_internal.rq_give_back_tokens(limited[member], shared - cardinality(got));
        END IF;
        IF cardinality(got) > 0 AND ((settings.max_claimed IS NOT NULL AND places IS NULL)
                                     OR (settings.rate IS NOT NULL AND shared IS NULL)) THEN
            PERFORM raquel_internal.rq_flow_took(limited[member], live || got,
                CASE WHEN shared IS NULL THEN bucket - cardinality(got) END, now_ms);
        END IF;
    END LOOP;
END
$$;
