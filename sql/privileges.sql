-- Who may do what. rq_enqueue and rq_enqueue_batch run with the extension
-- owner's rights: a producer needs EXECUTE on them and no privilege on the
-- table, so it can enqueue and do nothing else (a keyed enqueue that finds
-- its key taken shows a producer only the job's id, queue and key:
-- src/privileges.rs). Workers run the claim and finish verbs with their own
-- rights: a worker role needs SELECT and UPDATE on jobs, SELECT on
-- queue_limits, SELECT and DELETE on job_dependencies (a job it
-- ends releases the jobs waiting for it), SELECT, INSERT and UPDATE on
-- key_holds (a job it ends may hold its key), SELECT on job_steps,
-- job_waits and emitted_events, and EXECUTE on rq_step, rq_sleep and
-- rq_wait_event (which write those tables as the owner, fenced by the
-- attempt), and nothing else.
-- rq_emit runs with the owner's rights and is not for PUBLIC: who may emit
-- is rq_grant_emitter's grant (limited to event-name prefixes when given
-- them: event_emitters, sql/waits.sql) or a grant of EXECUTE on it by hand
-- (a producer or a worker may not, unless granted). What starts work in the server
-- is not for PUBLIC: the duties (the background worker runs them as the
-- extension's owner), rq_worker_wake, and the trigger functions.
--
-- The helpers in raquel_internal (src/lib.rs says what goes there) keep
-- the EXECUTE grants they had in the extension's schema: who may call a
-- function is its EXECUTE grant, never the schema it is in. The verbs call
-- them by name as their caller, so the schema has USAGE for PUBLIC (as a
-- schema public has), and the grant helpers below give USAGE on it too: a
-- database that revokes PUBLIC's USAGE to hide the helpers keeps its
-- producers and workers working (other roles that call the verbs then need
-- USAGE on raquel_internal as well). No role but the owner may CREATE in it.
-- Triggers, column defaults, index expressions and views call their
-- functions by OID and need no USAGE.
--
-- raquel calls its own functions only in raquel_internal, never by a name
-- in the extension's schema. A role that may create in that schema (public,
-- by default) can plant a function of a raquel name there whose argument
-- types fit a call exactly where raquel's own needs a cast, and the exact
-- one wins even when the call names the schema; or add an overload with one
-- more defaulted argument, and the call becomes ambiguous (42725). Either
-- would run as whoever made the call: the background worker runs the duties
-- as the extension's owner. So every public function that raquel itself
-- calls (the duties, rq_reschedule, rq_enqueue, rq_now_ms …) has its body,
-- or its C symbol, in raquel_internal too, and the public name is an entry
-- point to it; the background worker, the dashboard and the Rust statements
-- call the raquel_internal names as well. Nobody else can create there.
GRANT USAGE ON SCHEMA raquel_internal TO PUBLIC;

REVOKE EXECUTE ON FUNCTION
    rq_enqueue(text, text, timestamptz, interval, interval, integer, interval, interval, interval, integer, text, text, uuid[], interval),
    rq_enqueue(text, jsonb, timestamptz, interval, interval, integer, interval, interval, interval, integer, text, text, uuid[], interval),
    rq_enqueue_batch(text, text[], timestamptz, interval, interval, integer, interval, interval, interval, integer, text[], text[], uuid[]),
    rq_enqueue_batch(text, jsonb[], timestamptz, interval, interval, integer, interval, interval, interval, integer, text[], text[], uuid[]),
    rq_expire(integer), rq_rescue(integer), rq_prune(integer, interval), raquel_internal.rq_next_duty_ms(interval),
    rq_worker_wake(),
    rq_enqueue_trigger(), raquel_internal.rq_job_events(), raquel_internal.rq_job_values(), raquel_internal.rq_drop_started(),
    raquel_internal.rq_job_turn(), raquel_internal.rq_queue_limits_changed(),
    raquel_internal.rq_hold_for_parents(uuid[], uuid[]), rq_settle_workflows(integer),
    raquel_internal.rq_enqueue_batch_planned(text, text[], timestamptz, interval, interval, integer, interval, interval, interval, integer, text[], text[], uuid[]),
    rq_fire_schedules(integer),
    rq_distribute(integer), raquel_internal.rq_lapsed(integer, bigint), raquel_internal.rq_expire_distributed(integer, bigint),
    raquel_internal.rq_lapsed_distributed(integer, bigint), raquel_internal.rq_prune_distributed(integer, bigint),
    raquel_internal.rq_take_metrics(), raquel_internal.rq_record_metrics(),
    raquel_internal.rq_check_parents(integer, uuid[]),
    raquel_internal.rq_flow_lock(text[]), raquel_internal.rq_flow_took(text, uuid[], double precision, bigint),
    rq_emit(text, jsonb, interval), rq_grant_emitter(regrole, text),
    raquel_internal.rq_deliver(emitted_events), raquel_internal.rq_settle_waits(integer),
    raquel_internal.rq_look_in_at_commit(),
    -- the twins raquel's own code calls (sql/schema.sql): as their public names
    raquel_internal.rq_enqueue(text, text, timestamptz, interval, interval, integer, interval, interval, interval, integer, text, text, uuid[], interval),
    raquel_internal.rq_enqueue(text, jsonb, timestamptz, interval, interval, integer, interval, interval, interval, integer, text, text, uuid[], interval),
    raquel_internal.rq_enqueue_batch(text, text[], timestamptz, interval, interval, integer, interval, interval, interval, integer, text[], text[], uuid[]),
    raquel_internal.rq_expire(integer), raquel_internal.rq_rescue(integer), raquel_internal.rq_prune(integer, interval),
    raquel_internal.rq_settle_workflows(integer), raquel_internal.rq_fire_schedules(integer), raquel_internal.rq_worker_wake(),
    -- the durable verbs write their tables as the owner: for workers
    rq_step(uuid, integer, text, jsonb), rq_sleep(uuid, integer, text, timestamptz, interval),
    rq_wait_event(uuid, integer, text, text, interval), rq_wait_job(uuid, integer, text, uuid, interval),
    raquel_internal.rq_deliver_job_end(uuid), raquel_internal.rq_resume_waiter(job_waits, jsonb, text, bigint),
    raquel_internal.rq_end_wait(uuid, text, jsonb, integer, bigint, text),
    raquel_internal.rq_park(uuid, integer, text, text, bigint, bigint)
FROM PUBLIC;

-- Every claim and every finish reads the flow settings (src/flow.rs), so
-- anyone may read them; the state the limits keep is for workers
-- (rq_grant_worker), and changing the settings (rq_pause, rq_resume,
-- rq_set_limits) for roles given INSERT and UPDATE on the table.
GRANT SELECT (queue, paused, max_claimed, rate, per, group_max_claimed, grouped) ON queue_limits TO PUBLIC;
-- Every complete reads which queues keep no history (src/history.rs).
GRANT SELECT ON queues_without_history TO PUBLIC;

-- Lets `role` enqueue jobs (and nothing else), also from a row trigger of its
-- tables (CREATE TRIGGER needs EXECUTE on rq_enqueue_trigger).
CREATE FUNCTION rq_grant_producer(role regrole) RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF role IS NULL OR role::oid = 0 THEN
        PERFORM raquel_internal.rq_refuse('role_null', ARRAY['rq_grant_producer']);
    END IF;
    IF NOT EXISTS (SELECT FROM pg_roles r WHERE r.oid = role) THEN
        PERFORM raquel_internal.rq_refuse('role_unknown', ARRAY['rq_grant_producer', role::oid::text]);
    END IF;
    EXECUTE format('GRANT USAGE ON SCHEMA %s, raquel_internal TO %s', '@extschema@', role);
    EXECUTE format('GRANT EXECUTE ON FUNCTION
        %1$s.rq_enqueue(text, text, timestamptz, interval, interval, integer, interval, interval, interval, integer, text, text, uuid[], interval),
        %1$s.rq_enqueue(text, jsonb, timestamptz, interval, interval, integer, interval, interval, interval, integer, text, text, uuid[], interval),
        %1$s.rq_enqueue_batch(text, text[], timestamptz, interval, interval, integer, interval, interval, interval, integer, text[], text[], uuid[]),
        %1$s.rq_enqueue_batch(text, jsonb[], timestamptz, interval, interval, integer, interval, interval, interval, integer, text[], text[], uuid[]),
        %1$s.rq_enqueue_trigger(),
        raquel_internal.rq_enqueue(text, text, timestamptz, interval, interval, integer, interval, interval, interval, integer, text, text, uuid[], interval),
        raquel_internal.rq_enqueue(text, jsonb, timestamptz, interval, interval, integer, interval, interval, interval, integer, text, text, uuid[], interval),
        raquel_internal.rq_enqueue_batch(text, text[], timestamptz, interval, interval, integer, interval, interval, interval, integer, text[], text[], uuid[])
        TO %2$s', '@extschema@', role);
END
$$;

-- Lets `role` claim, finish, hand back and extend jobs, and look at them:
-- SELECT and UPDATE on the jobs table, SELECT on the rq_jobs view, and
-- SELECT on queue_limits (the state the limits keep is written by the flow
-- claim as the owner: sql/flow.sql rq_flow_took).
CREATE FUNCTION rq_grant_worker(role regrole) RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF role IS NULL OR role::oid = 0 THEN
        PERFORM raquel_internal.rq_refuse('role_null', ARRAY['rq_grant_worker']);
    END IF;
    IF NOT EXISTS (SELECT FROM pg_roles r WHERE r.oid = role) THEN
        PERFORM raquel_internal.rq_refuse('role_unknown', ARRAY['rq_grant_worker', role::oid::text]);
    END IF;
    EXECUTE format('GRANT USAGE ON SCHEMA %s, raquel_internal TO %s', '@extschema@', role);
    EXECUTE format('GRANT SELECT, UPDATE ON %s.jobs TO %s', '@extschema@', role);
    EXECUTE format('GRANT SELECT ON %s.rq_jobs TO %s', '@extschema@', role);
    EXECUTE format('GRANT SELECT ON %s.metrics TO %s', '@extschema@', role);
    EXECUTE format('GRANT SELECT ON %s.queue_limits TO %s', '@extschema@', role);
    -- the flow claim's helpers, which write the limits' state as the owner
    -- and refuse to run outside rq_claim (src/flow.rs)
    EXECUTE format('GRANT EXECUTE ON FUNCTION raquel_internal.rq_flow_lock(text[]),
        raquel_internal.rq_flow_took(text, uuid[], double precision, bigint) TO %s', role);
    EXECUTE format('GRANT SELECT, DELETE ON %s.job_dependencies TO %s', '@extschema@', role);
    -- rq_parents reads what a job's parents produced (sql/workflows.sql)
    EXECUTE format('GRANT SELECT ON %s.job_parents TO %s', '@extschema@', role);
    EXECUTE format('GRANT SELECT, INSERT, UPDATE ON %s.key_holds TO %s', '@extschema@', role);
    -- rq_step records a job's steps (sql/steps.sql); rq_sleep,
    -- rq_wait_event and rq_wait_job park the job they hold (sql/waits.sql).
    -- They write job_steps and job_waits as the owner, fenced by the
    -- attempt: a worker reads them, and writes them only through the verbs.
    EXECUTE format('GRANT EXECUTE ON FUNCTION %1$s.rq_step(uuid, integer, text, jsonb),
        %1$s.rq_sleep(uuid, integer, text, timestamptz, interval),
        %1$s.rq_wait_event(uuid, integer, text, text, interval),
        %1$s.rq_wait_job(uuid, integer, text, uuid, interval),
        raquel_internal.rq_deliver_job_end(uuid) TO %2$s', '@extschema@', role);
    EXECUTE format('GRANT SELECT ON %s.job_steps TO %s', '@extschema@', role);
    EXECUTE format('GRANT SELECT ON %s.job_waits TO %s', '@extschema@', role);
    EXECUTE format('GRANT SELECT ON %s.emitted_events TO %s', '@extschema@', role);
    EXECUTE format('GRANT EXECUTE ON FUNCTION raquel_internal.rq_look_in_at_commit() TO %s', role);
END
$$;

REVOKE EXECUTE ON FUNCTION rq_grant_producer(regrole), rq_grant_worker(regrole) FROM PUBLIC;
