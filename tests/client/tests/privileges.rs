//! A producer role that may only enqueue, and a worker role that may claim
//! and finish jobs but read no other table, each on its own connection; and
//! the whole matrix: every function of the extension and every kind of
//! access to its table, as a producer, a worker and a role with no grant.

use raquel_client_tests::{connect, connect_as, fresh_db, sqlstate};
use postgres::{Client, SimpleQueryMessage};
use std::collections::BTreeMap;

#[test]
fn producers_only_enqueue_and_workers_only_work_the_queue() {
    let db = fresh_db("rq_it_privileges");
    let mut admin = connect(&db);
    admin
        .batch_execute(
            "DROP ROLE IF EXISTS rq_it_producer; DROP ROLE IF EXISTS rq_it_worker; \
             CREATE ROLE rq_it_producer LOGIN; CREATE ROLE rq_it_worker LOGIN; \
             SELECT rq_grant_producer('rq_it_producer'); SELECT rq_grant_worker('rq_it_worker'); \
             CREATE TABLE secrets (s text); INSERT INTO secrets VALUES ('x')",
        )
        .unwrap();

    let mut producer = connect_as(&db, "rq_it_producer");
    let id: String = producer
        .query_one("SELECT id::text FROM rq_enqueue('q', 'from the producer')", &[])
        .unwrap()
        .get(0);
    producer.batch_execute("SELECT rq_enqueue('q', '{\"a\": 1}'::jsonb, key => 'k')").unwrap();
    producer.batch_execute("SELECT rq_enqueue_batch('q', ARRAY['b1', 'b2'])").unwrap();
    for forbidden in [
        "SELECT * FROM jobs",
        "INSERT INTO jobs (queue) VALUES ('q')",
        "SELECT * FROM rq_claim(ARRAY['q'])",
        "SELECT * FROM secrets",
    ] {
        assert_eq!(sqlstate(producer.batch_execute(forbidden)), "42501", "producer: {forbidden}");
    }
    // a worker's verb called by a producer: refused with the grant it lacks
    for verb in [
        "SELECT * FROM rq_claim(ARRAY['q'])",
        "SELECT * FROM rq_take(ARRAY['q'])",
        "SELECT * FROM rq_claim(ARRAY['q'], wait => '1 second')",
        &format!("SELECT * FROM rq_complete('{id}', 1)"),
        &format!("SELECT * FROM rq_fail('{id}', 1, 'e')"),
        &format!("SELECT * FROM rq_complete_batch(ARRAY['{id}']::uuid[], ARRAY[1])"),
    ] {
        let error = producer.batch_execute(verb).unwrap_err();
        let error = error.as_db_error().unwrap_or_else(|| panic!("{verb}: {error}"));
        assert_eq!(error.code().code(), "42501", "{verb}");
        assert!(error.message().starts_with("permission denied for table "), "{verb}: {}", error.message());
        let hint = error.hint().unwrap_or_default();
        assert!(hint.contains("rq_grant_worker('rq_it_producer')"), "{verb}: the HINT names the grant: {hint:?}");
    }

    let mut worker = connect_as(&db, "rq_it_worker");
    let claimed: Vec<String> = worker
        .query("SELECT id::text FROM rq_claim(ARRAY['q'], worker => 'w', batch => 10)", &[])
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(claimed.len(), 4);
    assert!(claimed.contains(&id));
    // each claimed once: attempt 1
    worker.batch_execute(&format!("SELECT rq_complete('{id}', 1)")).unwrap();
    worker.batch_execute(&format!("SELECT rq_fail('{}', 1, 'boom')", claimed[1])).unwrap();
    worker.batch_execute(&format!("SELECT rq_reject('{}', 1)", claimed[2])).unwrap();
    for forbidden in [
        "SELECT * FROM secrets",
        "SELECT rq_enqueue('q', 'from the worker')",
        "DELETE FROM jobs",
        "SELECT rq_grant_worker('rq_it_worker')",
    ] {
        assert_eq!(sqlstate(worker.batch_execute(forbidden)), "42501", "worker: {forbidden}");
    }

    drop(producer);
    drop(worker);
    admin
        .batch_execute(
            "DROP OWNED BY rq_it_producer, rq_it_worker; \
             DROP ROLE rq_it_producer; DROP ROLE rq_it_worker",
        )
        .unwrap();
}

// ---------------------------------------------------------------------------
// The matrix.

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum May {
    /// Runs, or fails only for its deliberately bad arguments (22023, P0002,
    /// 55000, …): never 42501.
    Yes,
    /// Refused with 42501 (insufficient_privilege), by the function's
    /// EXECUTE privilege or by the table's.
    No,
}
use May::{No, Yes};

/// The policy, one row per function of the extension (its signature, as
/// `regprocedure` with `integer` written `int` and `timestamp with time
/// zone` written `timestamptz`) or per kind of access to the table, then
/// what a role with no grant ("nobody"), a producer (rq_grant_producer) and
/// a worker (rq_grant_worker) may do, and the call that tries it. Every call
/// runs in a transaction that is rolled back, and uses ids no job has or
/// arguments that are refused, so that it changes nothing.
///
/// Decisions the README leaves open, taken here:
/// - A worker may rq_cancel and rq_retry. With SELECT and UPDATE on jobs it
///   can make the same change by hand, so refusing the functions would
///   protect nothing; rq_cancel is "anyone may cancel" in sql/transitions.sql.
/// - A producer may use rq_enqueue_trigger: CREATE TRIGGER needs EXECUTE on
///   it, and "a table with rq_enqueue_trigger enqueues as the role that
///   changes the table, so that role needs the producer's rights" (README);
///   called directly it only refuses (0A000).
/// - The pure helpers (conversions, limits, refusals, rq_caller_may_read)
///   read no table and start nothing: anyone may call them.
/// - What starts work in the server or touches jobs outside a verb is for
///   the owner alone: the duties, rq_next_duty_ms, rq_worker_wake, the
///   jobs table's own trigger functions, rq_grant_*.
const MATRIX: &[(&str, May, May, May, &str)] = &[
    // function or access                                        nobody producer worker  call
    // -- pure helpers: anyone
    ("rq_backoff(int,int,int,int)",                               Yes, Yes, Yes, "SELECT rq_backoff(1, 1000, 1000, 60000)"),
    ("rq_now_ms()",                                               Yes, Yes, Yes, "SELECT rq_now_ms()"),
    ("rq_uuid7()",                                                Yes, Yes, Yes, "SELECT rq_uuid7()"),
    ("rq_channel(text)",                                          Yes, Yes, Yes, "SELECT rq_channel('q')"),
    ("raquel_internal.rq_interval_ms(interval,text,bigint,bigint)", Yes, Yes, Yes, "SELECT raquel_internal.rq_interval_ms('1 second', 'v', 0, 10000)"),
    ("raquel_internal.rq_timestamp_ms(timestamptz,text)",         Yes, Yes, Yes, "SELECT raquel_internal.rq_timestamp_ms('2020-01-01 00:00:00+00', 'at')"),
    // the checks of the jobs table's domains (src/schema.rs)
    ("raquel_internal.rq_check_status(text)",                     Yes, Yes, Yes, "SELECT raquel_internal.rq_check_status('queued')"),
    ("raquel_internal.rq_check_nonnegative(int)",                 Yes, Yes, Yes, "SELECT raquel_internal.rq_check_nonnegative(0)"),
    ("raquel_internal.rq_check_delay_ms(int)",                    Yes, Yes, Yes, "SELECT raquel_internal.rq_check_delay_ms(0)"),
    ("raquel_internal.rq_check_max_age_ms(bigint)",               Yes, Yes, Yes, "SELECT raquel_internal.rq_check_max_age_ms(1)"),
    ("raquel_internal.rq_delay_ms(interval,text)",                Yes, Yes, Yes, "SELECT raquel_internal.rq_delay_ms('1 second', 'delay')"),
    ("raquel_internal.rq_retention_ms(interval)",                 Yes, Yes, Yes, "SELECT raquel_internal.rq_retention_ms(NULL)"),
    ("rq_ms_to_interval(bigint)",                                 Yes, Yes, Yes, "SELECT rq_ms_to_interval(1000)"),
    ("rq_ms_to_timestamptz(bigint)",                              Yes, Yes, Yes, "SELECT rq_ms_to_timestamptz(0)"),
    ("raquel_internal.rq_default_lease()",                        Yes, Yes, Yes, "SELECT raquel_internal.rq_default_lease()"),
    ("raquel_internal.rq_default_lease_ms()",                     Yes, Yes, Yes, "SELECT raquel_internal.rq_default_lease_ms()"),
    ("raquel_internal.rq_default_min_retry_delay()",              Yes, Yes, Yes, "SELECT raquel_internal.rq_default_min_retry_delay()"),
    ("raquel_internal.rq_default_max_retry_delay()",              Yes, Yes, Yes, "SELECT raquel_internal.rq_default_max_retry_delay()"),
    ("raquel_internal.rq_default_backoff_base()",                 Yes, Yes, Yes, "SELECT raquel_internal.rq_default_backoff_base()"),
    ("raquel_internal.rq_check_batch(int)",                       Yes, Yes, Yes, "SELECT raquel_internal.rq_check_batch(10)"),
    ("raquel_internal.rq_check_arrays(text[],int[],text[])",      Yes, Yes, Yes, "SELECT raquel_internal.rq_check_arrays(ARRAY['a'], ARRAY[1], NULL)"),
    ("raquel_internal.rq_job_options(text,timestamptz,interval,interval,int,interval,interval,interval)",
                                                                  Yes, Yes, Yes, "SELECT * FROM raquel_internal.rq_job_options('q', NULL, NULL, NULL, NULL, NULL, NULL, NULL)"),
    ("raquel_internal.rq_refuse(text,text[])",                    Yes, Yes, Yes, "SELECT raquel_internal.rq_refuse('ids_null', '{}')"),
    ("raquel_internal.rq_caller_may_read(oid)",                   Yes, Yes, Yes, "SELECT raquel_internal.rq_caller_may_read('jobs'::regclass)"),
    ("raquel_internal.rq_check_limits(text,int,int,interval,int)", Yes, Yes, Yes, "SELECT raquel_internal.rq_check_limits('q', 1, NULL, NULL, NULL)"),
    // (reads what the caller may read; a role that may not gets no NOTICE)
    ("raquel_internal.rq_note_new_queue(text,text)",              Yes, Yes, Yes, "SELECT raquel_internal.rq_note_new_queue('q', 'rq_pause')"),
    ("raquel_internal.rq_cron_next(text,text,bigint)",            Yes, Yes, Yes, "SELECT raquel_internal.rq_cron_next('@hourly', 'UTC', 0)"),
    ("raquel_internal.rq_schedule_slots(text,text,bigint,bigint,text)", Yes, Yes, Yes, "SELECT raquel_internal.rq_schedule_slots('@hourly', 'UTC', 0, 7200000, 'all')"),
    ("raquel_internal.rq_check_schedule_options(text,text,text,text)", Yes, Yes, Yes, "SELECT raquel_internal.rq_check_schedule_options('s', 'last', 'q', 'p')"),
    ("rq_metrics_lost()",                                         Yes, Yes, Yes, "SELECT rq_metrics_lost()"),
    // it starts a round of the background worker: for roles that may
    // change schedules (0.4.0 let any role ask)
    ("raquel_internal.rq_schedule_due(bigint)",                   No,  No,  No,  "SELECT raquel_internal.rq_schedule_due(0)"),
    // -- enqueueing: producers
    ("rq_enqueue(text,text,timestamptz,interval,interval,int,interval,interval,interval,int,text,text,uuid[],interval)",
                                                                  No,  Yes, No,  "SELECT id FROM rq_enqueue('m', 'text')"),
    ("rq_enqueue(text,jsonb,timestamptz,interval,interval,int,interval,interval,interval,int,text,text,uuid[],interval)",
                                                                  No,  Yes, No,  "SELECT id FROM rq_enqueue('m', '{}'::jsonb)"),
    ("rq_enqueue_batch(text,text[],timestamptz,interval,interval,int,interval,interval,interval,int,text[],text[],uuid[])",
                                                                  No,  Yes, No,  "SELECT id FROM rq_enqueue_batch('m', ARRAY['a'])"),
    ("rq_enqueue_batch(text,jsonb[],timestamptz,interval,interval,int,interval,interval,interval,int,text[],text[],uuid[])",
                                                                  No,  Yes, No,  "SELECT id FROM rq_enqueue_batch('m', ARRAY['{}']::jsonb[])"),
    ("rq_enqueue_trigger()",                                      No,  Yes, No,  "SELECT rq_enqueue_trigger()"),
    // -- working the queue: workers
    ("rq_claim(text[],text,int,interval,interval)",               No,  No,  Yes, "SELECT id FROM rq_claim(ARRAY['m'], 'w')"),
    ("rq_take(text[],text,int,boolean,interval)",                 No,  No,  Yes, "SELECT id FROM rq_take(ARRAY['m'], 'w')"),
    ("rq_complete_and_claim(uuid,int,text[],text,int,interval,interval,jsonb)",
                                                                  No,  No,  Yes, "SELECT id FROM rq_complete_and_claim(NULL, NULL, ARRAY['m'], 'w')"),
    ("rq_complete_batch_and_claim(uuid[],int[],text[],text,int,interval,interval,jsonb[])",
                                                                  No,  No,  Yes, "SELECT id FROM rq_complete_batch_and_claim(NULL, NULL, ARRAY['m'], 'w')"),
    ("rq_fail_and_claim(uuid,int,text,text,text[],text,int,interval,interval)",
                                                                  No,  No,  Yes, "SELECT id FROM rq_fail_and_claim(NULL, NULL, NULL, NULL, ARRAY['m'], 'w')"),
    // the flow state's helpers run only inside rq_claim (0.4.0 let a
    // worker refill a rate's bucket by updating queue_limits)
    ("raquel_internal.rq_flow_lock(text[])",                      No,  No,  No,  "SELECT * FROM raquel_internal.rq_flow_lock(ARRAY['m'])"),
    ("raquel_internal.rq_flow_took(text,uuid[],double precision,bigint)", No,  No,  No,  "SELECT raquel_internal.rq_flow_took('m', '{}', 1000, 0)"),
    ("raquel_internal.rq_require_flow_claim(text)",               No,  No,  No,  "SELECT raquel_internal.rq_require_flow_claim('x')"),
    ("rq_complete(uuid,int,jsonb)",                               No,  No,  Yes, "SELECT id FROM rq_complete('00000000-0000-7000-8000-000000000000', 1)"),
    ("rq_fail(uuid,int,text,text)",                               No,  No,  Yes, "SELECT id FROM rq_fail('00000000-0000-7000-8000-000000000000', 1, 'e')"),
    ("rq_complete_batch(uuid[],int[],jsonb[])",                   No,  No,  Yes, "SELECT id FROM rq_complete_batch(ARRAY['00000000-0000-7000-8000-000000000000']::uuid[], ARRAY[1])"),
    ("rq_reschedule(uuid,int,timestamptz,interval)",              No,  No,  Yes, "SELECT id FROM rq_reschedule('00000000-0000-7000-8000-000000000000', 1)"),
    ("rq_reject(uuid,int)",                                       No,  No,  Yes, "SELECT id FROM rq_reject('00000000-0000-7000-8000-000000000000', 1)"),
    ("rq_extend(uuid,int,interval)",                              No,  No,  Yes, "SELECT id FROM rq_extend('00000000-0000-7000-8000-000000000000', 1)"),
    ("rq_cancel(uuid)",                                           No,  No,  Yes, "SELECT id FROM rq_cancel('00000000-0000-7000-8000-000000000000')"),
    ("rq_retry(uuid)",                                            No,  No,  Yes, "SELECT id FROM rq_retry('00000000-0000-7000-8000-000000000000')"),
    // results and steps (sql/results.sql, sql/steps.sql): awaiting a job
    // reads it, as its caller; recording a step is a worker's
    ("rq_await(uuid,interval)",                                   No,  No,  Yes, "SELECT id FROM rq_await('00000000-0000-7000-8000-000000000000', '0')"),
    ("rq_step(uuid,int,text,jsonb)",                              No,  No,  Yes, "SELECT name FROM rq_step('00000000-0000-7000-8000-000000000000', 1, 's')"),
    // durable sleep and events (sql/waits.sql): parking a job is a
    // worker's; emitting runs as the owner, for the roles granted EXECUTE
    // on it alone (the test below); the duty and delivery are the owner's
    ("rq_parents(uuid)",                                          No,  No,  Yes, "SELECT id FROM rq_parents('00000000-0000-7000-8000-000000000000')"),
    // a job's history reads the jobs table as its caller: whoever may read jobs
    ("rq_history(uuid)",                                          No,  No,  Yes, "SELECT attempt FROM rq_history('00000000-0000-7000-8000-000000000000')"),
    ("rq_sleep(uuid,int,text,timestamptz,interval)",              No,  No,  Yes, "SELECT rq_sleep('00000000-0000-7000-8000-000000000000', 1, 's', delay => '1 second')"),
    ("rq_wait_event(uuid,int,text,text,interval)",                No,  No,  Yes, "SELECT * FROM rq_wait_event('00000000-0000-7000-8000-000000000000', 1, 's', 'e')"),
    ("rq_wait_job(uuid,int,text,uuid,interval)",                  No,  No,  Yes, "SELECT * FROM rq_wait_job('00000000-0000-7000-8000-000000000000', 1, 's', '00000000-0000-7000-8000-000000000001')"),
    // hands a job's end on, as the owner: for the roles that end jobs
    ("raquel_internal.rq_deliver_job_end(uuid)",                  No,  No,  Yes, "SELECT raquel_internal.rq_deliver_job_end('00000000-0000-7000-8000-000000000000')"),
    // records a resumed wait's step, as the owner: for its callers alone
    ("raquel_internal.rq_resume_waiter(job_waits,jsonb,text,bigint)", No, No, No, "SELECT raquel_internal.rq_resume_waiter(w, '{}', 'event', 0) FROM job_waits w"),
    // end and park a wait as the owner, for rq_wait_event and rq_wait_job alone
    ("raquel_internal.rq_end_wait(uuid,text,jsonb,int,bigint,text)", No, No, No, "SELECT raquel_internal.rq_end_wait(w.job_id, w.name, '{}', 1, 0, 'event') FROM job_waits w"),
    ("raquel_internal.rq_park(uuid,int,text,text,bigint,bigint)", No, No, No, "SELECT raquel_internal.rq_park('00000000-0000-7000-8000-000000000000', 1, 's', 'e', 0, 1)"),
    ("rq_emit(text,jsonb,interval)",                              No,  No,  No,  "SELECT rq_emit('e')"),
    ("raquel_internal.rq_hold(uuid,int,text)",                    No,  No,  Yes, "SELECT raquel_internal.rq_hold('00000000-0000-7000-8000-000000000000', 1, 'sleep')"),
    ("raquel_internal.rq_require_attempt(uuid,int,text)",         Yes, Yes, Yes, "SELECT raquel_internal.rq_require_attempt(NULL, 1, 'complete')"),
    ("rq_grant_emitter(regrole,text)",                            No,  No,  No,  "SELECT rq_grant_emitter('pg_monitor', 'x:')"),
    ("raquel_internal.rq_caller()",                               Yes, Yes, Yes, "SELECT raquel_internal.rq_caller()"),
    ("raquel_internal.rq_event_keep_ms(interval)",                Yes, Yes, Yes, "SELECT raquel_internal.rq_event_keep_ms('1 minute')"),
    ("raquel_internal.rq_event_retention_ms()",                   Yes, Yes, Yes, "SELECT raquel_internal.rq_event_retention_ms()"),
    ("raquel_internal.rq_max_event_wait_ms()",                    Yes, Yes, Yes, "SELECT raquel_internal.rq_max_event_wait_ms()"),
    // reads job_steps: a worker's
    ("raquel_internal.rq_step_instance(uuid,text,text,int)",      No,  No,  Yes, "SELECT * FROM raquel_internal.rq_step_instance('00000000-0000-7000-8000-000000000000', 's', 'sleep', 1)"),
    ("raquel_internal.rq_check_emit_scope(text)",                 No,  No,  No,  "SELECT raquel_internal.rq_check_emit_scope('e')"),
    ("SELECT on event_emitters",                                  No,  No,  No,  "SELECT * FROM event_emitters"),
    ("INSERT on event_emitters",                                  No,  No,  No,  "INSERT INTO event_emitters VALUES (0, 'x')"),
    ("raquel_internal.rq_check_event_payload(text,int)",          Yes, Yes, Yes, "SELECT raquel_internal.rq_check_event_payload('e', 10)"),
    ("raquel_internal.rq_due_within_ms(timestamptz,interval,text)", Yes, Yes, Yes, "SELECT raquel_internal.rq_due_within_ms(NULL, '1 second', 'rq_sleep')"),
    ("raquel_internal.rq_check_step_name(uuid,text,text)",        Yes, Yes, Yes, "SELECT raquel_internal.rq_check_step_name(NULL, 's', 'park')"),
    ("raquel_internal.rq_check_event_name(text,text)",            Yes, Yes, Yes, "SELECT raquel_internal.rq_check_event_name('e', 'rq_emit')"),
    ("raquel_internal.rq_event_turn(text,boolean)",               Yes, Yes, Yes, "SELECT raquel_internal.rq_event_turn('e', true)"),
    ("raquel_internal.rq_waiting_by_queue()",                     Yes, Yes, Yes, "SELECT * FROM raquel_internal.rq_waiting_by_queue()"),
    ("raquel_internal.rq_forever_ms()",                           Yes, Yes, Yes, "SELECT raquel_internal.rq_forever_ms()"),
    ("raquel_internal.rq_look_in_at_commit()",                    No,  No,  Yes, "SELECT raquel_internal.rq_look_in_at_commit()"),
    ("raquel_internal.rq_deliver(emitted_events)",                No,  No,  No,  "SELECT raquel_internal.rq_deliver(e) FROM emitted_events e"),
    ("raquel_internal.rq_settle_waits(int)",                      No,  No,  No,  "SELECT raquel_internal.rq_settle_waits(10)"),
    // what follows jobs' ends (src/ended.rs): counts them in the metrics,
    // wakes their awaiters and claims of a limited queue; for the roles
    // that could have ended them (0.6.0: before, any role could wake)
    ("raquel_internal.rq_ended(uuid[],text[],text,boolean,boolean[])", No, No, Yes, "SELECT raquel_internal.rq_ended(ARRAY['00000000-0000-7000-8000-000000000000']::uuid[], ARRAY['m'], 'cancelled', false, NULL)"),
    // this backend's own kept plans (src/statements.rs)
    ("raquel_internal.rq_kept_plans()",                           Yes, Yes, Yes, "SELECT * FROM raquel_internal.rq_kept_plans()"),
    ("raquel_internal.rq_kept_statements()",                      Yes, Yes, Yes, "SELECT * FROM raquel_internal.rq_kept_statements()"),
    // a rate's tokens (src/rate_buckets.rs): taken and given back only
    // inside rq_claim's flow claim; their counts, for an operator
    ("raquel_internal.rq_rate_bucket_counts()",                   Yes, Yes, Yes, "SELECT * FROM raquel_internal.rq_rate_bucket_counts()"),
    // the places claimed under max_claimed (src/claim_slots.rs): reserved
    // and named only inside rq_claim's flow claim; their counts
    ("raquel_internal.rq_claim_slot_counts()",                    Yes, Yes, Yes, "SELECT * FROM raquel_internal.rq_claim_slot_counts()"),
    // the server's claim cursors' counts (src/cursors.rs), for an operator
    ("raquel_internal.rq_cursor_counts()",                        Yes, Yes, Yes, "SELECT * FROM raquel_internal.rq_cursor_counts()"),
    ("raquel_internal.rq_cursor_state(oid,text)",                 Yes, Yes, Yes, "SELECT raquel_internal.rq_cursor_state(0, 'q')"),
    ("raquel_internal.rq_raise_cannot(uuid,int,text,text[])",     No,  No,  Yes, "SELECT raquel_internal.rq_raise_cannot('00000000-0000-7000-8000-000000000000', NULL, 'complete', '{claimed}')"),
    ("rq_stats()",                                                No,  No,  Yes, "SELECT * FROM rq_stats()"),
    ("rq_queues()",                                               No,  No,  Yes, "SELECT * FROM rq_queues()"),
    ("rq_count(text,text[])",                                     No,  No,  Yes, "SELECT rq_count()"),
    // -- the owner's alone: work in the server, the table's triggers, grants
    ("rq_worker_wake()",                                          No,  No,  No,  "SELECT rq_worker_wake()"),
    ("rq_expire(int)",                                            No,  No,  No,  "SELECT rq_expire()"),
    ("rq_rescue(int)",                                            No,  No,  No,  "SELECT rq_rescue()"),
    ("rq_prune(int,interval)",                                    No,  No,  No,  "SELECT rq_prune()"),
    ("raquel_internal.rq_next_duty_ms(interval)",                 No,  No,  No,  "SELECT raquel_internal.rq_next_duty_ms('1 day')"),
    ("raquel_internal.rq_job_events()",                           No,  No,  No,  "SELECT raquel_internal.rq_job_events()"),
    ("raquel_internal.rq_job_values()",                           No,  No,  No,  "SELECT raquel_internal.rq_job_values()"),
    ("raquel_internal.rq_job_turn()",                             No,  No,  No,  "SELECT raquel_internal.rq_job_turn()"),
    ("raquel_internal.rq_queue_limits_changed()",                 No,  No,  No,  "SELECT raquel_internal.rq_queue_limits_changed()"),
    // -- schedules: the owner's, or roles given INSERT, UPDATE and DELETE on schedules
    ("rq_schedule(text,text,text,text,text,text,interval,int,interval,interval,interval,int)",
                                                                  No,  No,  No,  "SELECT rq_schedule('m', '@hourly', 'm')"),
    ("rq_schedule(text,text,text,jsonb,text,text,interval,int,interval,interval,interval,int)",
                                                                  No,  No,  No,  "SELECT rq_schedule('m', '@hourly', 'm', '{}'::jsonb)"),
    ("rq_unschedule(text)",                                       No,  No,  No,  "SELECT rq_unschedule('m')"),
    ("rq_pause_schedule(text)",                                   No,  No,  No,  "SELECT rq_pause_schedule('m')"),
    ("rq_resume_schedule(text)",                                  No,  No,  No,  "SELECT rq_resume_schedule('m')"),
    ("rq_fire_schedules(int)",                                    No,  No,  No,  "SELECT rq_fire_schedules()"),
    ("SELECT on schedules",                                       No,  No,  No,  "SELECT * FROM schedules"),
    ("SELECT on rq_schedules",                                    No,  No,  No,  "SELECT * FROM rq_schedules"),
    ("raquel_internal.rq_hold_for_parents(uuid[],uuid[])",        No,  No,  No,  "SELECT raquel_internal.rq_hold_for_parents('{}', '{}')"),
    ("raquel_internal.rq_check_parents(int,uuid[])",              No,  No,  No,  "SELECT raquel_internal.rq_check_parents(1, '{}')"),
    ("raquel_internal.rq_has_children(uuid)",                     No,  No,  Yes, "SELECT raquel_internal.rq_has_children('00000000-0000-7000-8000-000000000000')"),
    ("rq_settle_workflows(int)",                                  No,  No,  No,  "SELECT rq_settle_workflows()"),
    // -- the distributed mode: making it is the owner's; the verbs ask whether it is on
    ("rq_distribute(int)",                                        No,  No,  No,  "SELECT rq_distribute()"),
    ("raquel_internal.rq_lapsed(int,bigint)",                     No,  No,  No,  "SELECT * FROM raquel_internal.rq_lapsed(1, 0)"),
    ("raquel_internal.rq_expire_distributed(int,bigint)",         No,  No,  No,  "SELECT raquel_internal.rq_expire_distributed(1, 0)"),
    ("raquel_internal.rq_lapsed_distributed(int,bigint)",         No,  No,  No,  "SELECT * FROM raquel_internal.rq_lapsed_distributed(1, 0)"),
    ("raquel_internal.rq_prune_distributed(int,bigint)",          No,  No,  No,  "SELECT raquel_internal.rq_prune_distributed(1, 0)"),
    ("rq_distributed()",                                          Yes, Yes, Yes, "SELECT rq_distributed()"),
    // -- metrics: recording is the worker's (the owner's); reading is for roles that may read them
    ("raquel_internal.rq_take_metrics()",                         No,  No,  No,  "SELECT * FROM raquel_internal.rq_take_metrics()"),
    ("raquel_internal.rq_record_metrics()",                       No,  No,  No,  "SELECT raquel_internal.rq_record_metrics()"),
    ("raquel_internal.rq_note_metric(text,text,bigint)",          No,  No,  Yes, "SELECT raquel_internal.rq_note_metric('m', 'claimed', 1)"),
    ("rq_metrics(text,interval)",                                 No,  No,  Yes, "SELECT * FROM rq_metrics()"),
    ("rq_prometheus(int)",                                        No,  No,  Yes, "SELECT rq_prometheus()"),
    ("raquel_internal.rq_prometheus_label(text)",                 Yes, Yes, Yes, "SELECT raquel_internal.rq_prometheus_label('m')"),
    ("raquel_internal.rq_histogram_percentile(int[],double precision)", Yes, Yes, Yes, "SELECT raquel_internal.rq_histogram_percentile('{1}', 0.5)"),
    ("raquel_internal.rq_histogram_add(int[],int[])",             Yes, Yes, Yes, "SELECT raquel_internal.rq_histogram_add('{1}', '{2}')"),
    ("SELECT on metrics",                                         No,  No,  Yes, "SELECT * FROM metrics"),
    ("raquel_internal.rq_refuse_distributed(text)",               Yes, Yes, Yes, "SELECT raquel_internal.rq_refuse_distributed('x')"),
    // -- flow settings: the owner's, or roles given INSERT and UPDATE on queue_limits
    ("rq_pause(text)",                                            No,  No,  No,  "SELECT rq_pause('m')"),
    ("rq_resume(text)",                                           No,  No,  No,  "SELECT rq_resume('m')"),
    ("rq_set_limits(text,int,int,interval,int)",                  No,  No,  No,  "SELECT rq_set_limits('m', 1)"),
    ("raquel_internal.rq_tidy_queue_limits(text,queue_limits)",   No,  No,  No,  "SELECT raquel_internal.rq_tidy_queue_limits('m', NULL)"),
    // -- history: the owner's, or roles given INSERT and DELETE on queues_without_history
    ("rq_set_history(text,boolean)",                              No,  No,  No,  "SELECT rq_set_history('m', false)"),
    ("raquel_internal.rq_drop_started()",                         No,  No,  No,  "SELECT raquel_internal.rq_drop_started()"),
    // for roles that may update jobs: the verbs a worker calls use it
    ("raquel_internal.rq_job_ready_again(text,bigint,bigint,int,uuid)", No,  No,  Yes, "SELECT raquel_internal.rq_job_ready_again('m', 0, NULL)"),
    ("raquel_internal.rq_job_ended(uuid)",                        No,  No,  Yes, "SELECT raquel_internal.rq_job_ended((SELECT id FROM jobs LIMIT 1))"),
    ("raquel_internal.rq_parent_ended(uuid)",                     No,  No,  Yes, "SELECT raquel_internal.rq_parent_ended((SELECT id FROM jobs LIMIT 1))"),
    ("raquel_internal.rq_wake_claims(text)",                      No,  No,  Yes, "SELECT raquel_internal.rq_wake_claims('m')"),
    ("rq_grant_producer(regrole)",                                No,  No,  No,  "SELECT rq_grant_producer(current_user::regrole)"),
    ("rq_grant_worker(regrole)",                                  No,  No,  No,  "SELECT rq_grant_worker(current_user::regrole)"),
    // -- the table and the view
    ("SELECT on jobs",                                            No,  No,  Yes, "SELECT * FROM jobs"),
    ("INSERT on jobs",                                            No,  No,  No,  "INSERT INTO jobs (queue) VALUES ('m')"),
    ("UPDATE on jobs",                                            No,  No,  Yes, "UPDATE jobs SET priority = 1 WHERE id = '00000000-0000-7000-8000-000000000000'"),
    ("DELETE on jobs",                                            No,  No,  No,  "DELETE FROM jobs WHERE id = '00000000-0000-7000-8000-000000000000'"),
    ("SELECT on rq_jobs",                                         No,  No,  Yes, "SELECT * FROM rq_jobs"),
    ("SELECT of settings on queue_limits",                        Yes, Yes, Yes, "SELECT queue, paused, max_claimed, rate, per, group_max_claimed, grouped FROM queue_limits"),
    ("SELECT on queue_limits",                                    No,  No,  Yes, "SELECT * FROM queue_limits"),
    ("UPDATE of state on queue_limits",                           No,  No,  No,  "UPDATE queue_limits SET tokens = NULL WHERE queue = 'm'"),
    ("UPDATE of settings on queue_limits",                        No,  No,  No,  "UPDATE queue_limits SET paused = true WHERE queue = 'm'"),
    ("INSERT on queue_limits",                                    No,  No,  No,  "INSERT INTO queue_limits (queue) VALUES ('m')"),
    ("SELECT on queues_without_history",                          Yes, Yes, Yes, "SELECT * FROM queues_without_history"),
    ("INSERT on queues_without_history",                          No,  No,  No,  "INSERT INTO queues_without_history VALUES ('m')"),
    ("DELETE on queues_without_history",                          No,  No,  No,  "DELETE FROM queues_without_history"),
    ("INSERT on key_holds",                                       No,  No,  Yes, "INSERT INTO key_holds VALUES ('m', 'k', '00000000-0000-7000-8000-000000000000', 0)"),
    ("DELETE on key_holds",                                       No,  No,  No,  "DELETE FROM key_holds"),
    ("SELECT on job_steps",                                       No,  No,  Yes, "SELECT * FROM job_steps"),
    // the durable tables are written only by the verbs, as the owner (0.6.0)
    ("INSERT on job_steps",                                       No,  No,  No,  "INSERT INTO job_steps VALUES ('00000000-0000-7000-8000-000000000000', 's', NULL, 1, 0)"),
    ("UPDATE on job_steps",                                       No,  No,  No,  "UPDATE job_steps SET result = NULL"),
    ("DELETE on job_steps",                                       No,  No,  No,  "DELETE FROM job_steps"),
    ("SELECT on job_parents",                                     No,  No,  Yes, "SELECT * FROM job_parents"),
    ("INSERT on job_parents",                                     No,  No,  No,  "INSERT INTO job_parents VALUES ('00000000-0000-7000-8000-000000000000', '00000000-0000-7000-8000-000000000000')"),
    ("SELECT on job_waits",                                       No,  No,  Yes, "SELECT * FROM job_waits"),
    ("INSERT on job_waits",                                       No,  No,  No,  "INSERT INTO job_waits VALUES ('00000000-0000-7000-8000-000000000000', 'q', 's', 'e', 0, NULL)"),
    ("UPDATE on job_waits",                                       No,  No,  No,  "UPDATE job_waits SET until = NULL"),
    ("DELETE on job_waits",                                       No,  No,  No,  "DELETE FROM job_waits"),
    ("SELECT on emitted_events",                                  No,  No,  Yes, "SELECT * FROM emitted_events"),
    ("INSERT on emitted_events",                                  No,  No,  No,  "INSERT INTO emitted_events (name, emitted_at, kept_until) VALUES ('e', 0, 0)"),
    ("DELETE on emitted_events",                                  No,  No,  No,  "DELETE FROM emitted_events"),
    ("SELECT on job_dependencies",                                No,  No,  Yes, "SELECT * FROM job_dependencies"),
    ("DELETE on job_dependencies",                                No,  No,  Yes, "DELETE FROM job_dependencies WHERE parent_id = '00000000-0000-7000-8000-000000000000'"),
    // -- the schema of the internal helpers: anyone may look in (the verbs call
    // -- its functions as their caller), nobody but the owner may plant in it
    ("USAGE on raquel_internal",                                  Yes, Yes, Yes, "DO $$ BEGIN IF NOT pg_catalog.has_schema_privilege('raquel_internal', 'USAGE') THEN RAISE insufficient_privilege; END IF; END $$"),
    ("CREATE in raquel_internal",                                 No,  No,  No,  "CREATE FUNCTION raquel_internal.rq_planted() RETURNS int LANGUAGE sql AS 'SELECT 1'"),
    ("INSERT on job_dependencies",                                No,  No,  No,  "INSERT INTO job_dependencies VALUES ('00000000-0000-7000-8000-000000000000', '00000000-0000-7000-8000-000000000000')"),
    // -- what an operator should fix (sql/warnings.sql): anyone may ask
    ("rq_warnings()",                                             Yes, Yes, Yes, "SELECT * FROM rq_warnings()"),
    ("rq_help(text)",                                             Yes, Yes, Yes, "SELECT * FROM rq_help()"),
    ("raquel_internal.rq_warnings()",                             Yes, Yes, Yes, "SELECT * FROM raquel_internal.rq_warnings()"),
    ("raquel_internal.rq_schema_writers()",                       Yes, Yes, Yes, "SELECT * FROM raquel_internal.rq_schema_writers()"),
    // -- the twins raquel itself calls (sql/privileges.sql): as their public names
    ("raquel_internal.rq_backoff(int,int,int,int)",
                                                                  Yes, Yes, Yes, "SELECT raquel_internal.rq_backoff(1, 1000, 1000, 60000)"),
    ("raquel_internal.rq_cancel(uuid)",
                                                                  No, No, Yes, "SELECT id FROM raquel_internal.rq_cancel('00000000-0000-7000-8000-000000000000')"),
    ("raquel_internal.rq_distributed()",
                                                                  Yes, Yes, Yes, "SELECT raquel_internal.rq_distributed()"),
    ("raquel_internal.rq_enqueue(text,jsonb,timestamptz,interval,interval,int,interval,interval,interval,int,text,text,uuid[],interval)",
                                                                  No, Yes, No, "SELECT id FROM raquel_internal.rq_enqueue('m', '{}'::jsonb)"),
    ("raquel_internal.rq_enqueue(text,text,timestamptz,interval,interval,int,interval,interval,interval,int,text,text,uuid[],interval)",
                                                                  No, Yes, No, "SELECT id FROM raquel_internal.rq_enqueue('m', 'text')"),
    ("raquel_internal.rq_enqueue_batch(text,text[],timestamptz,interval,interval,int,interval,interval,interval,int,text[],text[],uuid[])",
                                                                  No, Yes, No, "SELECT id FROM raquel_internal.rq_enqueue_batch('m', ARRAY['a'])"),
    // its planned path: only as the owner, whom rq_enqueue_batch runs as
    ("raquel_internal.rq_enqueue_batch_planned(text,text[],timestamptz,interval,interval,int,interval,interval,interval,int,text[],text[],uuid[])",
                                                                  No, No, No, "SELECT id FROM raquel_internal.rq_enqueue_batch_planned('m', ARRAY['a'])"),
    ("raquel_internal.rq_expire(int)",
                                                                  No, No, No, "SELECT raquel_internal.rq_expire()"),
    ("raquel_internal.rq_fail(uuid,int,text,text)",
                                                                  No, No, Yes, "SELECT id FROM raquel_internal.rq_fail('00000000-0000-7000-8000-000000000000', 1, 'e', NULL)"),
    ("raquel_internal.rq_fire_schedules(int)",
                                                                  No, No, No, "SELECT raquel_internal.rq_fire_schedules()"),
    ("raquel_internal.rq_metrics_lost()",
                                                                  Yes, Yes, Yes, "SELECT raquel_internal.rq_metrics_lost()"),
    ("raquel_internal.rq_ms_to_interval(bigint)",
                                                                  Yes, Yes, Yes, "SELECT raquel_internal.rq_ms_to_interval(1000)"),
    ("raquel_internal.rq_ms_to_timestamptz(bigint)",
                                                                  Yes, Yes, Yes, "SELECT raquel_internal.rq_ms_to_timestamptz(0)"),
    ("raquel_internal.rq_now_ms()",
                                                                  Yes, Yes, Yes, "SELECT raquel_internal.rq_now_ms()"),
    ("raquel_internal.rq_pause(text)",
                                                                  No, No, No, "SELECT raquel_internal.rq_pause('m')"),
    ("raquel_internal.rq_pause_schedule(text)",
                                                                  No, No, No, "SELECT raquel_internal.rq_pause_schedule('m')"),
    ("raquel_internal.rq_resume_schedule(text)",
                                                                  No, No, No, "SELECT raquel_internal.rq_resume_schedule('m')"),
    ("raquel_internal.rq_history(uuid)",
                                                                  No, No, Yes, "SELECT attempt FROM raquel_internal.rq_history('00000000-0000-7000-8000-000000000000')"),
    ("raquel_internal.rq_prune(int,interval)",
                                                                  No, No, No, "SELECT raquel_internal.rq_prune()"),
    ("raquel_internal.rq_reschedule(uuid,int,timestamptz,interval)",
                                                                  No, No, Yes, "SELECT id FROM raquel_internal.rq_reschedule('00000000-0000-7000-8000-000000000000', 1)"),
    ("raquel_internal.rq_rescue(int)",
                                                                  No, No, No, "SELECT raquel_internal.rq_rescue()"),
    ("raquel_internal.rq_resume(text)",
                                                                  No, No, No, "SELECT raquel_internal.rq_resume('m')"),
    ("raquel_internal.rq_retry(uuid)",
                                                                  No, No, Yes, "SELECT id FROM raquel_internal.rq_retry('00000000-0000-7000-8000-000000000000')"),
    ("raquel_internal.rq_schedule(text,text,text,text,text,text,interval,int,interval,interval,interval,int)",
                                                                  No, No, No, "SELECT raquel_internal.rq_schedule('m', '@hourly', 'm')"),
    ("raquel_internal.rq_settle_workflows(int)",
                                                                  No, No, No, "SELECT raquel_internal.rq_settle_workflows()"),
    ("raquel_internal.rq_uuid7()",
                                                                  Yes, Yes, Yes, "SELECT raquel_internal.rq_uuid7()"),
    ("raquel_internal.rq_worker_wake()",
                                                                  No, No, No, "SELECT raquel_internal.rq_worker_wake()"),
];

/// SQLSTATEs that say the row's call itself is wrong (no such function,
/// table or schema; a syntax error), so it tested nothing.
const BROKEN_CALL: &[&str] = &["42883", "42P01", "42601", "3F000", "42725", "42804"];

/// A signature as the matrix writes it.
fn short_signature(regprocedure: &str) -> String {
    regprocedure.replace("timestamp with time zone", "timestamptz").replace("integer", "int")
}

/// The SQLSTATE `sql` ends with ("00000": it ran), in a transaction rolled back.
fn outcome(client: &mut Client, sql: &str) -> (String, String) {
    client.batch_execute("BEGIN").unwrap();
    let result = client.simple_query(sql);
    client.batch_execute("ROLLBACK").unwrap();
    match result {
        Ok(_) => ("00000".into(), String::new()),
        Err(e) => (
            e.code().map_or_else(|| "no SQLSTATE".to_string(), |c| c.code().to_string()),
            e.as_db_error().map_or_else(|| e.to_string(), |d| d.message().to_string()),
        ),
    }
}

#[test]
fn every_function_and_table_access_follows_the_producer_worker_nobody_policy() {
    let db = fresh_db("rq_it_privilege_matrix");
    let (producer, worker, nobody) = ("rq_pm_producer", "rq_pm_worker", "rq_pm_nobody");
    let mut admin = connect(&db);
    admin
        .batch_execute(&format!(
            "DROP ROLE IF EXISTS {producer}; DROP ROLE IF EXISTS {worker}; DROP ROLE IF EXISTS {nobody};
             CREATE ROLE {producer} LOGIN; CREATE ROLE {worker} LOGIN; CREATE ROLE {nobody} LOGIN;
             SELECT rq_grant_producer('{producer}'); SELECT rq_grant_worker('{worker}');
             SELECT rq_enqueue('m', 'a job to claim')"
        ))
        .unwrap();

    // Every function of the extension, from the catalog, so that a new one
    // cannot be missed (pgrx's #[pg_test] functions, in schema tests, exist
    // only in test builds).
    let functions: Vec<String> = admin
        .query(
            "SELECT p.oid::regprocedure::text FROM pg_depend d
             JOIN pg_proc p ON p.oid = d.objid
             WHERE d.classid = 'pg_proc'::regclass AND d.refclassid = 'pg_extension'::regclass
               AND d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'raquel')
               AND d.deptype = 'e' AND p.pronamespace::regnamespace::text <> 'tests'
             ORDER BY 1",
            &[],
        )
        .unwrap()
        .iter()
        .map(|r| short_signature(r.get(0)))
        .collect();
    assert!(functions.len() >= 30, "found only {} functions in the extension", functions.len());
    let rows: BTreeMap<&str, (May, May, May, &str)> =
        MATRIX.iter().map(|&(what, n, p, w, call)| (what, (n, p, w, call))).collect();
    let mut wrong: Vec<String> = functions
        .iter()
        .filter(|f| !rows.contains_key(f.as_str()))
        .map(|f| format!("{f} is not in the matrix: add its row (who may call it, and a call)"))
        .collect();

    let mut sessions = [
        ("nobody", connect_as(&db, nobody)),
        ("producer", connect_as(&db, producer)),
        ("worker", connect_as(&db, worker)),
    ];
    for &(what, n, p, w, call) in MATRIX {
        let is_function = what.contains('(');
        if is_function && !functions.iter().any(|f| f == what) {
            wrong.push(format!("{what} is in the matrix but not in the extension: remove its row"));
            continue;
        }
        for (i, (role, client)) in sessions.iter_mut().enumerate() {
            let expected = [n, p, w][i];
            let (state, message) = outcome(client, call);
            if BROKEN_CALL.contains(&state.as_str()) {
                wrong.push(format!("{role:8} {what}: the call `{call}` is broken: {state} {message}"));
                continue;
            }
            let got = if state == "42501" { No } else { Yes };
            if got != expected {
                let said = if state == "00000" { "it ran".to_string() } else { format!("{state} {message}") };
                wrong.push(format!(
                    "{role:8} {what}: expected {}, got {} ({said})",
                    if expected == Yes { "allowed" } else { "refused (42501)" },
                    if got == Yes { "allowed" } else { "refused" },
                ));
            }
        }
    }

    drop(sessions);
    admin
        .batch_execute(&format!(
            "DROP OWNED BY {producer}, {worker}, {nobody}; DROP ROLE {producer}; DROP ROLE {worker}; DROP ROLE {nobody}"
        ))
        .unwrap();
    assert!(wrong.is_empty(), "{} cells differ from the policy:\n{}", wrong.len(), wrong.join("\n"));
}

/// A producer that enqueues a key an unfinished job holds gets that job
/// back (so that it knows the job exists), but nothing of it that it could
/// not read otherwise: it has no privilege on the table.
#[test]
fn a_producer_learns_nothing_from_the_job_that_holds_its_key() {
    let db = fresh_db("rq_it_privilege_key_holder");
    let producer = "rq_pk_producer";
    let mut admin = connect(&db);
    admin
        .batch_execute(&format!(
            "DROP ROLE IF EXISTS {producer}; CREATE ROLE {producer} LOGIN; SELECT rq_grant_producer('{producer}')"
        ))
        .unwrap();
    // The holder: a failed job with a payload, an error, a trace and a worker.
    let holder: String = admin
        .query_one("SELECT id::text FROM rq_enqueue('secret', 'secret payload', key => 'k')", &[])
        .unwrap()
        .get(0);
    admin.batch_execute("SELECT rq_claim(ARRAY['secret'], worker => 'secret worker')").unwrap();
    admin.batch_execute(&format!("SELECT rq_fail('{holder}', 1, 'secret error', 'secret trace')")).unwrap();
    let status: String = admin
        .query_one(
            "SELECT status FROM jobs WHERE id = $1::text::uuid AND payload IS NOT NULL AND error IS NOT NULL
             AND error_trace IS NOT NULL AND claimed_by IS NOT NULL",
            &[&holder],
        )
        .unwrap()
        .get(0);
    assert_eq!(status, "failed", "the holder is unfinished and has everything to hide");

    let mut p = connect_as(&db, producer);
    let mut leaks = Vec::new();
    for call in [
        "SELECT * FROM rq_enqueue('secret', 'mine', key => 'k')",
        "SELECT * FROM rq_enqueue('secret', '{\"mine\": true}'::jsonb, key => 'k')",
        "SELECT * FROM rq_enqueue_batch('secret', ARRAY['mine'], keys => ARRAY['k'])",
        "SELECT * FROM rq_enqueue_batch('secret', ARRAY['{\"mine\": true}']::jsonb[], keys => ARRAY['k'])",
    ] {
        let messages = p.simple_query(call).unwrap_or_else(|e| panic!("{call}: {e}"));
        let rows: Vec<_> = messages
            .iter()
            .filter_map(|m| if let SimpleQueryMessage::Row(r) = m { Some(r) } else { None })
            .collect();
        assert_eq!(rows.len(), 1, "{call}: one row, the holder");
        let row = rows[0];
        assert_eq!(row.get("id"), Some(holder.as_str()), "{call}: the job that holds the key comes back");
        for column in ["payload", "error", "error_trace", "claimed_by"] {
            if let Some(value) = row.get(column) {
                leaks.push(format!("{call}: {column} = {value:?}"));
            }
        }
    }
    drop(p);
    admin.batch_execute(&format!("DROP OWNED BY {producer}; DROP ROLE {producer}")).unwrap();
    assert!(
        leaks.is_empty(),
        "a producer, which may not read jobs, read the holder of its key through its enqueue:\n{}",
        leaks.join("\n")
    );
}

/// raquel_internal has USAGE for PUBLIC, so that every role that may call
/// a verb keeps calling it (the verbs name their helpers as their caller).
/// A database that takes it back to hide the helpers keeps its producers and
/// workers (rq_grant_producer and rq_grant_worker give USAGE on it), its
/// plain INSERTs into jobs (column defaults and triggers call their
/// functions by OID); a role without it cannot name a helper (42501).
#[test]
fn producers_and_workers_keep_working_when_public_may_not_use_raquel_internal() {
    let db = fresh_db("rq_it_privileges_hidden");
    let (producer, worker, inserter) = ("rq_hi_producer", "rq_hi_worker", "rq_hi_inserter");
    let mut admin = connect(&db);
    admin
        .batch_execute(&format!(
            "REVOKE USAGE ON SCHEMA raquel_internal FROM PUBLIC;
             DROP ROLE IF EXISTS {producer}; DROP ROLE IF EXISTS {worker}; DROP ROLE IF EXISTS {inserter};
             CREATE ROLE {producer} LOGIN; CREATE ROLE {worker} LOGIN; CREATE ROLE {inserter} LOGIN;
             SELECT rq_grant_producer('{producer}'); SELECT rq_grant_worker('{worker}');
             GRANT USAGE ON SCHEMA public TO {inserter}; GRANT INSERT ON jobs TO {inserter};
             SELECT rq_set_limits('limited', max_claimed => 5)"
        ))
        .unwrap();

    let mut p = connect_as(&db, producer);
    let parent: String = p.query_one("SELECT id::text FROM rq_enqueue('limited', 'parent')", &[]).unwrap().get(0);
    p.batch_execute(&format!(
        "SELECT rq_enqueue('limited', 'child', after => ARRAY['{parent}']::uuid[]);
         SELECT rq_enqueue_batch('q', ARRAY['a', 'b', 'c'])"
    ))
    .unwrap();
    let mut i = connect_as(&db, inserter);
    i.batch_execute("INSERT INTO jobs (queue, payload) VALUES ('q', 'inserted')").unwrap();

    let mut w = connect_as(&db, worker);
    // the flow claim (src/claim/flow_claim.rs, as the worker)
    let claimed = w.query("SELECT id::text, attempts FROM rq_claim(ARRAY['limited'], 'w', 5)", &[]).unwrap();
    assert_eq!(claimed.len(), 1, "the parent; its child waits");
    // a complete that releases the child (raquel_internal.rq_job_ended)
    w.batch_execute(&format!("SELECT rq_complete('{parent}', 1)")).unwrap();
    assert_eq!(w.query("SELECT id FROM rq_claim(ARRAY['limited'], 'w', 5)", &[]).unwrap().len(), 1, "the child");
    // the verbs written in PL/pgSQL, which name their helpers
    let ids: Vec<String> =
        w.query("SELECT id::text FROM rq_claim(ARRAY['q'], 'w', 4)", &[]).unwrap().iter().map(|r| r.get(0)).collect();
    assert_eq!(ids.len(), 4, "three enqueued by the producer, one inserted");
    w.batch_execute(&format!(
        "SELECT rq_extend('{0}', 1, '1 hour'); SELECT rq_reschedule('{0}', 1, delay => '0');
         SELECT rq_reject('{1}', 1); SELECT rq_fail('{2}', 1, 'boom');
         SELECT rq_cancel('{3}'); SELECT rq_retry('{3}')",
        ids[0], ids[1], ids[2], ids[3]
    ))
    .unwrap();

    // a role without USAGE cannot name a helper, though PUBLIC may execute it
    let named = i.batch_execute("SELECT raquel_internal.rq_histogram_add('{1}', '{2}')");
    assert_eq!(sqlstate(named), "42501");

    drop((p, i, w));
    admin
        .batch_execute(&format!(
            "DROP OWNED BY {producer}, {worker}, {inserter}; DROP ROLE {producer}; DROP ROLE {worker}; DROP ROLE {inserter}"
        ))
        .unwrap();
}

#[test]
fn only_a_role_granted_execute_on_rq_emit_may_emit_and_its_emit_resumes_a_workers_job() {
    let db = fresh_db("rq_it_emitter");
    let mut admin = connect(&db);
    admin
        .batch_execute(
            "DROP ROLE IF EXISTS rq_it_e_producer; DROP ROLE IF EXISTS rq_it_e_worker; DROP ROLE IF EXISTS rq_it_emitter; \
             CREATE ROLE rq_it_e_producer LOGIN; CREATE ROLE rq_it_e_worker LOGIN; CREATE ROLE rq_it_emitter LOGIN; \
             SELECT rq_grant_producer('rq_it_e_producer'); SELECT rq_grant_worker('rq_it_e_worker'); \
             GRANT USAGE ON SCHEMA public TO rq_it_emitter; GRANT EXECUTE ON FUNCTION rq_emit(text, jsonb, interval) TO rq_it_emitter",
        )
        .unwrap();
    connect_as(&db, "rq_it_e_producer").batch_execute("SELECT rq_enqueue('w', 'wait for it')").unwrap();
    let mut worker = connect_as(&db, "rq_it_e_worker");
    let row = worker.query_one("SELECT id::text, attempts FROM rq_claim(ARRAY['w'])", &[]).unwrap();
    let (id, attempt): (String, i32) = (row.get(0), row.get(1));
    let parked: bool = worker
        .query_one("SELECT parked FROM rq_wait_event($1::text::uuid, $2, 'signal', 'go')", &[&id, &attempt])
        .unwrap()
        .get(0);
    assert!(parked);
    for role in ["rq_it_e_producer", "rq_it_e_worker"] {
        let refused = connect_as(&db, role).batch_execute("SELECT rq_emit('go', '1')");
        assert_eq!(sqlstate(refused), "42501", "{role} may not emit");
    }
    // an emitter that may not read jobs is not told how many waited
    let resumed: Option<i64> = connect_as(&db, "rq_it_emitter").query_one("SELECT rq_emit('go', '\"now\"')", &[]).unwrap().get(0);
    assert_eq!(resumed, None);
    let row = worker.query_one("SELECT id::text, attempts FROM rq_claim(ARRAY['w'])", &[]).unwrap();
    assert_eq!(row.get::<_, String>(0), id);
    let payload: String = worker
        .query_one("SELECT payload::text FROM rq_wait_event($1::text::uuid, $2, 'signal', 'go')", &[&id, &row.get::<_, i32>(1)])
        .unwrap()
        .get(0);
    assert_eq!(payload, r#""now""#);
}

#[test]
fn an_emitter_given_a_prefix_emits_only_events_it_begins_and_keeps_them_no_longer_than_the_setting() {
    let db = fresh_db("rq_it_emit_scope");
    let mut admin = connect(&db);
    admin
        .batch_execute(
            "DROP ROLE IF EXISTS rq_it_payments; DROP ROLE IF EXISTS rq_it_reader; \
             CREATE ROLE rq_it_payments LOGIN; CREATE ROLE rq_it_reader LOGIN; \
             SELECT rq_grant_emitter('rq_it_payments', 'payment:'); SELECT rq_grant_emitter('rq_it_payments', 'refund:'); \
             SELECT rq_grant_emitter('rq_it_reader'); GRANT SELECT ON jobs TO rq_it_reader",
        )
        .unwrap();
    let emitted = |c: &mut Client| -> i64 { c.query_one("SELECT count(*) FROM emitted_events", &[]).unwrap().get(0) };
    let before = emitted(&mut admin);
    let mut payments = connect_as(&db, "rq_it_payments");
    payments.batch_execute("SELECT rq_emit('payment:42', '1')").unwrap();
    payments.batch_execute("SELECT rq_emit('refund:7')").unwrap();
    for outside in ["SELECT rq_emit('shipment:1')", "SELECT rq_emit('payment')", "SELECT rq_emit('x-payment:1')"] {
        assert_eq!(sqlstate(payments.batch_execute(outside)), "42501", "{outside}");
    }
    assert_eq!(emitted(&mut admin), before + 2, "a refused emit keeps nothing");
    // keep is capped by raquel.max_event_keep (a day by default)
    assert_eq!(sqlstate(payments.batch_execute("SELECT rq_emit('payment:1', keep => '2 days')")), "22023");
    payments.batch_execute("SELECT rq_emit('payment:1', keep => '1 day')").unwrap();
    // a role without prefixes emits any event, and one that may read jobs
    // is told how many jobs resumed
    let mut reader = connect_as(&db, "rq_it_reader");
    let resumed: Option<i64> = reader.query_one("SELECT rq_emit('anything')", &[]).unwrap().get(0);
    assert_eq!(resumed, Some(0));
    let told: Option<i64> = payments.query_one("SELECT rq_emit('payment:2')", &[]).unwrap().get(0);
    assert_eq!(told, None, "a role that may not read jobs learns nothing of who waits");
    drop((payments, reader));
    admin
        .batch_execute(
            "DELETE FROM event_emitters; DROP OWNED BY rq_it_payments, rq_it_reader; \
             DROP ROLE rq_it_payments; DROP ROLE rq_it_reader",
        )
        .unwrap();
}
