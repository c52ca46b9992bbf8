-- What each public object is for, in the catalog (\df+, \dv+, \dt+ and
-- obj_description show it): every function of the extension's schema
-- (each overload), its views and tables, and the schema raquel_internal.
-- Last in the install script (all of them exist by then); the update
-- script ends with the same statements.

COMMENT ON SCHEMA raquel_internal IS
    'raquel''s internal helpers (called by its verbs, triggers, column defaults and background worker): not an API, they change without notice between versions. Call the functions of the extension''s schema instead.';

-- Enqueueing
COMMENT ON FUNCTION rq_enqueue(text, text, timestamptz, interval, interval, integer, interval, interval, interval, integer, text, text, uuid[], interval) IS
    'raquel: enqueues one job with a text payload into queue (due now, at `at` or after `delay`) and returns its row; key, group_key, after and key_period make it unique, fairly grouped, wait for other jobs, or hold its key.';
COMMENT ON FUNCTION rq_enqueue(text, jsonb, timestamptz, interval, interval, integer, interval, interval, interval, integer, text, text, uuid[], interval) IS
    'raquel: enqueues one job with a jsonb payload (stored as its text); otherwise as rq_enqueue with a text payload.';
COMMENT ON FUNCTION rq_enqueue_batch(text, text[], timestamptz, interval, interval, integer, interval, interval, interval, integer, text[], text[], uuid[]) IS
    'raquel: enqueues one job per text payload into queue in one statement, with the same options for all (keys and group_keys per job), and returns their rows.';
COMMENT ON FUNCTION rq_enqueue_batch(text, jsonb[], timestamptz, interval, interval, integer, interval, interval, interval, integer, text[], text[], uuid[]) IS
    'raquel: enqueues one job per jsonb payload into queue in one statement; otherwise as rq_enqueue_batch with text payloads.';
COMMENT ON FUNCTION rq_enqueue_trigger() IS
    'raquel: a row trigger function that enqueues a job for each changed row (the row as jsonb payload) into the queue named by its one argument: EXECUTE FUNCTION rq_enqueue_trigger(''my_queue'').';

-- Claiming and finishing
COMMENT ON FUNCTION rq_claim(text[], text, integer, interval, interval) IS
    'raquel: claims up to batch ready jobs of the named queues (NULL: any queue) for a lease, obeying pauses and limits, and returns them; with wait, waits that long for a job to become ready.';
COMMENT ON FUNCTION rq_take(text[], text, integer, boolean, interval) IS
    'raquel: takes up to batch ready jobs by locking them for the work of this transaction (no lease is written; complete => true completes them at once); finish them with rq_complete or rq_fail before commit.';
COMMENT ON FUNCTION rq_complete(uuid, integer, jsonb) IS
    'raquel: marks a claimed (or taken) job succeeded, with its result if given; attempt (required), the value the claim returned, fences out a worker whose lease ran out.';
COMMENT ON FUNCTION rq_complete_batch(uuid[], integer[], jsonb[]) IS
    'raquel: completes several claimed jobs at once, all or nothing (attempts[i] is the fencing token of ids[i], results[i] its result), and returns their rows.';
COMMENT ON FUNCTION rq_fail(uuid, integer, text, text) IS
    'raquel: records a failed attempt (the fencing token the claim returned) of a claimed job with its error: queued again after the backoff, or exhausted when no retry is left.';
COMMENT ON FUNCTION rq_complete_and_claim(uuid, integer, text[], text, integer, interval, interval, jsonb) IS
    'raquel: completes a job (as rq_complete) and claims the next (as rq_claim) in one call: a worker''s loop in one statement.';
COMMENT ON FUNCTION rq_fail_and_claim(uuid, integer, text, text, text[], text, integer, interval, interval) IS
    'raquel: fails a job (as rq_fail) and claims the next (as rq_claim) in one call.';
COMMENT ON FUNCTION rq_complete_batch_and_claim(uuid[], integer[], text[], text, integer, interval, interval, jsonb[]) IS
    'raquel: completes several jobs (as rq_complete_batch) and claims the next batch (as rq_claim) in one call.';

-- Results and steps
COMMENT ON FUNCTION rq_await(uuid, interval) IS
    'raquel: waits until a job has ended (success, exhausted, cancelled, expired) or the timeout passes, woken at the ending commit, and returns its row: status, result, error.';
COMMENT ON FUNCTION rq_step(uuid, integer, text, jsonb) IS
    'raquel: records a named step of a claimed job with its result, kept across attempts (job_steps); a step already recorded is refused (23505).';
COMMENT ON FUNCTION rq_parents(uuid) IS
    'raquel: the jobs a job was enqueued to run after (after), as they are now: a child reads its parents'' status and result.';
COMMENT ON FUNCTION rq_sleep(uuid, integer, text, timestamptz, interval) IS
    'raquel: puts the claimed job to sleep until at plus delay, as a step; true: it sleeps (end the attempt), false: the sleep is over. Uses up no retry.';
COMMENT ON FUNCTION rq_wait_event(uuid, integer, text, text, interval) IS
    'raquel: parks the claimed job until the event is emitted or the timeout passes, as a step; parked: end the attempt; otherwise the payload, or timed_out.';
COMMENT ON FUNCTION rq_wait_job(uuid, integer, text, uuid, interval) IS
    'raquel: parks the claimed job until another job ends or the timeout passes, as a step; parked: end the attempt; otherwise the job''s status, result and error, or timed_out.';
COMMENT ON FUNCTION rq_emit(text, jsonb, interval) IS
    'raquel: emits an event: the jobs parked for it resume with its payload; without a keep, the first wait for it reads it (within raquel.event_retention), with one, every wait that starts within keep. Not for PUBLIC.';
COMMENT ON FUNCTION rq_grant_emitter(regrole, text) IS
    'raquel: lets a role emit events (rq_emit), only those whose name begins with prefix when one is given; for the extension''s owner.';

-- A job's life after its claim
COMMENT ON FUNCTION rq_reschedule(uuid, integer, timestamptz, interval) IS
    'raquel: hands a claimed job back to be run again at `at` or after `delay` (default: its min_retry_delay), without counting a failed attempt.';
COMMENT ON FUNCTION rq_reject(uuid, integer) IS
    'raquel: hands a claimed job back to its queue at once, without counting a failed attempt.';
COMMENT ON FUNCTION rq_extend(uuid, integer, interval) IS
    'raquel: extends the lease of a claimed job to now + lease.';
COMMENT ON FUNCTION rq_cancel(uuid) IS
    'raquel: cancels a job that has not ended (queued, claimed, failed or blocked); jobs waiting for it are cancelled too.';
COMMENT ON FUNCTION rq_retry(uuid) IS
    'raquel: queues an ended job (failed, exhausted, expired or cancelled) again, due now, with its retries counted afresh.';
COMMENT ON FUNCTION rq_set_history(text, boolean) IS
    'raquel: whether a queue keeps its succeeded jobs (keep => true, the default) or deletes them when they succeed (keep => false).';

-- Notifications, looking at the queue
COMMENT ON FUNCTION rq_channel(text) IS
    'raquel: the LISTEN channel of a queue, notified at commit when raquel.notify is on.';
COMMENT ON FUNCTION rq_stats() IS
    'raquel: a row per queue: jobs in each status, how many are ready, the oldest ready job''s wait, the queue''s flow settings, how many jobs are parked for an event, and whether its claims start at claim cursors (in use) or why not. Reads the whole table.';
COMMENT ON FUNCTION rq_queues() IS
    'raquel: the names of the queues that have jobs.';
COMMENT ON FUNCTION rq_help(text) IS
    'raquel: the functions a user calls, one line each (name, arguments, this comment); those whose names hold name_contains when given.';
COMMENT ON FUNCTION rq_count(text, text[]) IS
    'raquel: how many jobs a queue (NULL: every queue) has in the given statuses (NULL: any status).';
COMMENT ON FUNCTION rq_history(uuid) IS
    'raquel: every attempt of a job, oldest first: its worker, claim time, end, outcome (failed, rescheduled, rejected, running, success, exhausted, cancelled, expired), error and trace; kept with the job (past_attempts).';
COMMENT ON VIEW rq_jobs IS
    'raquel: the jobs table for people: instants as timestamptz and durations as intervals.';

-- Small helpers
COMMENT ON FUNCTION rq_backoff(integer, integer, integer, integer) IS
    'raquel: the delay in ms after attempt fails: backoff_base * 2^(attempt-1), clamped to [min_retry_delay, max_retry_delay].';
COMMENT ON FUNCTION rq_now_ms() IS
    'raquel: the wall clock (clock_timestamp()) in ms since the Unix epoch, the jobs table''s unit of time.';
COMMENT ON FUNCTION rq_uuid7() IS
    'raquel: a new time-ordered UUIDv7, the default job id.';
COMMENT ON FUNCTION rq_ms_to_timestamptz(bigint) IS
    'raquel: an instant of the jobs table (ms since the Unix epoch) as a timestamptz.';
COMMENT ON FUNCTION rq_ms_to_interval(bigint) IS
    'raquel: a duration of the jobs table (ms) as an interval.';
COMMENT ON FUNCTION rq_worker_wake() IS
    'raquel: asks the background worker to run the duties in this database now (at most a round a second); false when no worker runs.';

-- Flow control
COMMENT ON FUNCTION rq_pause(text) IS
    'raquel: pauses a queue: claims take none of its jobs until rq_resume; enqueues go on.';
COMMENT ON FUNCTION rq_resume(text) IS
    'raquel: resumes a paused queue and wakes its waiting claims.';
COMMENT ON FUNCTION rq_set_limits(text, integer, integer, interval, integer) IS
    'raquel: sets a queue''s limits: at most max_claimed jobs claimed at once, rate claims per `per`, group_max_claimed per group_key (NULL removes a limit).';

-- Recurring jobs
COMMENT ON FUNCTION rq_schedule(text, text, text, text, text, text, interval, integer, interval, interval, interval, integer) IS
    'raquel: creates or replaces the schedule `name`: a job with a text payload enqueued into queue at each slot of the cron pattern, in timezone; catch_up says what becomes of missed slots.';
COMMENT ON FUNCTION rq_schedule(text, text, text, jsonb, text, text, interval, integer, interval, interval, interval, integer) IS
    'raquel: creates or replaces a schedule whose jobs have a jsonb payload; otherwise as rq_schedule with a text payload.';
COMMENT ON FUNCTION rq_unschedule(text) IS
    'raquel: removes a schedule; true when there was one.';
COMMENT ON FUNCTION rq_pause_schedule(text) IS
    'raquel: pauses a schedule: no jobs are enqueued for it until rq_resume_schedule.';
COMMENT ON FUNCTION rq_resume_schedule(text) IS
    'raquel: resumes a paused schedule from its next slot after now.';
COMMENT ON VIEW rq_schedules IS
    'raquel: the schedules for people: next and last run as timestamptz, and why the last slot could not be enqueued.';

-- Duties (the background worker runs them; callable by the owner)
COMMENT ON FUNCTION rq_expire(integer) IS
    'raquel duty: expires up to batch jobs that waited past their max_age; returns how many.';
COMMENT ON FUNCTION rq_rescue(integer) IS
    'raquel duty: fails up to batch claimed jobs whose lease ran out (retried or exhausted as rq_fail); returns how many.';
COMMENT ON FUNCTION rq_prune(integer, interval) IS
    'raquel duty: deletes up to batch jobs that ended longer ago than retention (NULL: raquel.retention), and old metrics; returns how many.';
COMMENT ON FUNCTION rq_fire_schedules(integer) IS
    'raquel duty: enqueues the jobs of the schedules whose slots are due (up to batch schedules); returns how many fired.';
COMMENT ON FUNCTION rq_settle_workflows(integer) IS
    'raquel duty: releases or cancels up to batch jobs still waiting for parents that have ended; returns how many.';

-- Workflows, metrics, Citus, privileges
COMMENT ON FUNCTION rq_metrics(text, interval) IS
    'raquel: per queue (NULL: every queue) and minute since `since`: jobs enqueued, claimed, succeeded, failed, rescued and expired, wait and run percentiles, backlog.';
COMMENT ON FUNCTION rq_metrics_lost() IS
    'raquel: how many events the metrics could not count since the server started (shared memory full).';
COMMENT ON FUNCTION rq_warnings() IS
    'raquel: what an operator should fix, with a hint each (roles other than raquel''s owner that may create in its schema); no rows when nothing.';
COMMENT ON FUNCTION rq_prometheus(integer) IS
    'raquel: the metrics in the Prometheus text format: series for the max_queues busiest queues and totals for all.';
COMMENT ON FUNCTION rq_distribute(integer) IS
    'raquel: distributes the jobs table over shard_count shards with Citus (once; needs citus.enable_unsafe_triggers).';
COMMENT ON FUNCTION rq_distributed() IS
    'raquel: whether the jobs table is distributed with Citus (rq_distribute).';
COMMENT ON FUNCTION rq_grant_producer(regrole) IS
    'raquel: lets a role enqueue jobs (rq_enqueue, rq_enqueue_batch, rq_enqueue_trigger) and nothing else.';
COMMENT ON FUNCTION rq_grant_worker(regrole) IS
    'raquel: lets a role claim, finish, hand back, extend, cancel and retry jobs, and read jobs, rq_jobs and the metrics.';

-- Tables (jobs, job_dependencies, queue_limits, queues_without_history and
-- schedules have theirs beside their CREATE TABLE)
COMMENT ON TABLE key_holds IS
    'raquel: keys held for a period after their job ended (rq_enqueue''s key_period): enqueueing such a key again returns that job.';
COMMENT ON TABLE metrics IS
    'raquel metrics: per queue and minute, the events counted, wait and run histograms and the backlog (rq_metrics, rq_prometheus).';
