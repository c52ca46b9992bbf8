-- The comment of every column a user reads, shown by \d+ in psql; the
-- reference pages say more (docs/src/reference/jobs-table.md and the guides
-- it links to). One block per table or view, in the order of the reference.
-- Instants stored as bigint are ms since the Unix epoch (UTC); durations are
-- ms, as in the Python library's table.

-- jobs
COMMENT ON COLUMN jobs.id IS
    'The job''s id, a time-ordered UUIDv7 (rq_uuid7()) unless the enqueue gives one; every verb names a job by it.';
COMMENT ON COLUMN jobs.queue IS
    'The name of the job''s queue, which rq_claim names; ''default'' when an INSERT gives none.';
COMMENT ON COLUMN jobs.payload IS
    'The job''s data as text, set by rq_enqueue (a jsonb payload is stored as its text); NULL: none.';
COMMENT ON COLUMN jobs.status IS
    'queued, claimed, success, failed (waiting for a retry at scheduled_at), exhausted (no retry left), cancelled, expired or blocked (waiting for the jobs it runs after).';
COMMENT ON COLUMN jobs.max_age IS
    'How long (ms) after scheduled_at the job may wait unclaimed before the expire duty expires it (rq_enqueue''s max_age); NULL: never expires.';
COMMENT ON COLUMN jobs.max_retry_count IS
    'How many retries after the first attempt (rq_enqueue''s max_retry_count); NULL: retry for ever. Attempts handed back (requeues) use up none.';
COMMENT ON COLUMN jobs.min_retry_delay IS
    'The shortest backoff after a failure, in ms (default 1000); rq_reschedule without at or delay waits this long too.';
COMMENT ON COLUMN jobs.max_retry_delay IS
    'The longest backoff after a failure, in ms (default 43200000, 12 hours).';
COMMENT ON COLUMN jobs.backoff_base IS
    'The first backoff after a failure, in ms (default 1000), doubled at each further failure and clamped to the retry delays (rq_backoff).';
COMMENT ON COLUMN jobs.enqueued_at IS
    'When the job was enqueued, ms since the Unix epoch, UTC.';
COMMENT ON COLUMN jobs.scheduled_at IS
    'When the job is due, ms since the Unix epoch, UTC: rq_enqueue''s at plus delay; after a failure, its time plus the backoff; rq_reschedule and rq_retry move it.';
COMMENT ON COLUMN jobs.attempts IS
    'Claims so far (rq_claim, rq_take), each an attempt: the fencing token that rq_complete, rq_fail and the other worker verbs require.';
COMMENT ON COLUMN jobs.error IS
    'The error of the last failed attempt (rq_fail), or why a workflow cancelled the job; kept after a later success. NULL: none.';
COMMENT ON COLUMN jobs.error_trace IS
    'The trace (say a stack trace) given with the last failure to rq_fail; NULL: none.';
COMMENT ON COLUMN jobs.claimed_by IS
    'The name of the worker that last claimed the job (rq_claim''s worker); kept after the job ends, cleared by rq_reject.';
COMMENT ON COLUMN jobs.claimed_at IS
    'When the job was last claimed, ms since the Unix epoch, UTC; kept after the job ends, cleared by rq_reject. NULL: never claimed.';
COMMENT ON COLUMN jobs.finished_at IS
    'When the job reached a final status (success, exhausted, cancelled, expired), ms since the Unix epoch, UTC; NULL while it has not.';
COMMENT ON COLUMN jobs.priority IS
    'rq_enqueue''s priority: higher runs first (default 0).';
COMMENT ON COLUMN jobs.lease_expires_at IS
    'When the current claim''s lease runs out, ms since the Unix epoch, UTC (rq_claim, rq_extend). NULL on a claimed job: claimed by hand, with a lease of a minute from claimed_at.';
COMMENT ON COLUMN jobs.requeues IS
    'Claims handed back (rq_reject, rq_reschedule, a sleep or a wait for an event), which use up no retry: retries used are attempts - requeues.';
COMMENT ON COLUMN jobs.key IS
    'rq_enqueue''s deduplication key: while a job of the same queue and key is unfinished, enqueueing that key again returns that job. NULL: none.';
COMMENT ON COLUMN jobs.group_key IS
    'rq_enqueue''s group_key: the job''s fair group in its queue (a tenant, say); claims take turns from group to group. NULL: no group.';
COMMENT ON COLUMN jobs.turn IS
    'A grouped job''s turn within its queue, set as it is inserted, which claims follow to let groups take turns; NULL without a group_key.';
COMMENT ON COLUMN jobs.blocked_by IS
    'For a blocked job, how many of the jobs it runs after (rq_enqueue''s after) have not ended yet; 0 otherwise. Only raquel''s functions write it.';
COMMENT ON COLUMN jobs.key_period IS
    'With a key: how long (ms) after the job ends its key still returns it (rq_enqueue''s key_period; held in key_holds). NULL: not held.';
COMMENT ON COLUMN jobs.result IS
    'What the job produced, as given to the verb that completed it (rq_complete and its siblings); rq_await returns it. NULL: none given, or not completed.';
COMMENT ON COLUMN jobs.past_attempts IS
    'The attempts before the current one, oldest first (the last 100): {attempt, worker, claimed_at, ended_at, outcome, error, trace}, times in ms; rq_history reads them. NULL: no earlier attempt.';

-- queue_limits
COMMENT ON COLUMN queue_limits.queue IS
    'The queue these settings are for; one row per queue that is paused, limited or grouped.';
COMMENT ON COLUMN queue_limits.paused IS
    'true: no claim takes the queue''s jobs (rq_pause) until rq_resume; enqueues go on.';
COMMENT ON COLUMN queue_limits.max_claimed IS
    'At most this many of the queue''s jobs claimed at once (rq_set_limits); NULL: no limit.';
COMMENT ON COLUMN queue_limits.rate IS
    'At most this many claims per `per`, as a token bucket that starts full (rq_set_limits); NULL: no rate limit.';
COMMENT ON COLUMN queue_limits.per IS
    'The interval of rate (rq_set_limits); NULL without a rate.';
COMMENT ON COLUMN queue_limits.group_max_claimed IS
    'At most this many claimed jobs of one group_key at once (rq_set_limits); NULL: no limit.';
COMMENT ON COLUMN queue_limits.grouped IS
    'true once the queue has had a job with a group_key (set by the first one): its claims take turns among its groups.';
COMMENT ON COLUMN queue_limits.claimed IS
    'State written by rq_claim alone: the jobs claimed under max_claimed, when the count is kept in the row rather than in shared memory.';
COMMENT ON COLUMN queue_limits.tokens IS
    'State written by rq_claim alone: the rate''s tokens left at tokens_at, when the bucket is kept in the row rather than in shared memory.';
COMMENT ON COLUMN queue_limits.tokens_at IS
    'State written by rq_claim alone: when tokens was counted, ms since the Unix epoch, UTC.';

-- queues_without_history
COMMENT ON COLUMN queues_without_history.queue IS
    'A queue whose jobs are deleted as they succeed through raquel''s verbs, instead of kept (rq_set_history(queue, false)).';

-- schedules
COMMENT ON COLUMN schedules.name IS
    'The schedule''s name, given to rq_schedule and the other schedule verbs.';
COMMENT ON COLUMN schedules.cron IS
    'The cron pattern whose slots enqueue a job each (rq_schedule).';
COMMENT ON COLUMN schedules.timezone IS
    'The time zone the cron pattern is read in (default UTC).';
COMMENT ON COLUMN schedules.queue IS
    'The queue the schedule''s jobs are enqueued into.';
COMMENT ON COLUMN schedules.payload IS
    'The payload of each job, as text (a jsonb payload is stored as its text); NULL: none.';
COMMENT ON COLUMN schedules.catch_up IS
    'What becomes of slots missed by over a minute: ''none'' skips them, ''last'' runs one job for them, ''all'' runs each (the latest 1000).';
COMMENT ON COLUMN schedules.enabled IS
    'false: paused (rq_pause_schedule), or disabled when its next slot could not be enqueued or computed; rq_resume_schedule sets it true.';
COMMENT ON COLUMN schedules.max_age IS
    'The max_age of each job, in ms; NULL: its jobs never expire.';
COMMENT ON COLUMN schedules.max_retry_count IS
    'The max_retry_count of each job; NULL: retry for ever.';
COMMENT ON COLUMN schedules.min_retry_delay IS
    'The min_retry_delay of each job, in ms; NULL: the jobs table''s default.';
COMMENT ON COLUMN schedules.max_retry_delay IS
    'The max_retry_delay of each job, in ms; NULL: the jobs table''s default.';
COMMENT ON COLUMN schedules.backoff_base IS
    'The backoff_base of each job, in ms; NULL: the jobs table''s default.';
COMMENT ON COLUMN schedules.priority IS
    'The priority of each job: higher runs first (default 0).';
COMMENT ON COLUMN schedules.next_run_at IS
    'The next slot not yet enqueued, ms since the Unix epoch, UTC; the duty rq_fire_schedules enqueues it when due and moves it on.';
COMMENT ON COLUMN schedules.last_run_at IS
    'The last slot enqueued, ms since the Unix epoch, UTC; NULL: none yet.';
COMMENT ON COLUMN schedules.last_job_id IS
    'The job enqueued for the last slot (jobs.id); NULL: none yet.';
COMMENT ON COLUMN schedules.last_error IS
    'Why the last due slot could not be enqueued (it was skipped, and the schedule goes on at its next slot); NULL once a slot is enqueued.';

-- job_dependencies
COMMENT ON COLUMN job_dependencies.parent_id IS
    'The job waited for (jobs.id); the row is deleted when it ends.';
COMMENT ON COLUMN job_dependencies.child_id IS
    'The job still waiting for parent_id (jobs.id), enqueued with it in rq_enqueue''s after.';

-- job_parents
COMMENT ON COLUMN job_parents.child_id IS
    'The job (jobs.id) enqueued to run after parent_id; its rows are deleted with it.';
COMMENT ON COLUMN job_parents.parent_id IS
    'A job named in the child''s rq_enqueue after, kept after it ends so that rq_parents can read its status and result.';

-- job_steps
COMMENT ON COLUMN job_steps.job_id IS
    'The job (jobs.id) that recorded the step; its steps are deleted with it.';
COMMENT ON COLUMN job_steps.name IS
    'The step''s name, unique within its job (rq_step, rq_sleep, rq_wait_event); a sleep or wait whose name is called again in one attempt is name#2, name#3 ….';
COMMENT ON COLUMN job_steps.result IS
    'The step''s result as given to rq_step, or what a sleep or a wait for an event recorded (its instant, the event''s payload); NULL: none given.';
COMMENT ON COLUMN job_steps.attempt IS
    'The attempt (the claim''s fencing token, jobs.attempts) that recorded the step.';
COMMENT ON COLUMN job_steps.recorded_at IS
    'When the step was recorded, ms since the Unix epoch, UTC.';
COMMENT ON COLUMN job_steps.kind IS
    'What recorded the step: step (rq_step), sleep (rq_sleep) or event (rq_wait_event); a call of another kind under its name is refused.';
COMMENT ON COLUMN job_steps.passed_by IS
    'The last attempt that went past this sleep or wait (its name called again in that attempt is the next one); NULL: none yet, or a step of rq_step.';

-- job_waits
COMMENT ON COLUMN job_waits.job_id IS
    'The job parked for an event (jobs.id), one wait a job; the row goes when the event is emitted or the wait ends.';
COMMENT ON COLUMN job_waits.queue IS
    'The parked job''s queue, for rq_stats.';
COMMENT ON COLUMN job_waits.name IS
    'The name of the step the wait is (rq_wait_event''s name), under which the event''s payload is recorded.';
COMMENT ON COLUMN job_waits.event IS
    'The name of the event waited for (rq_wait_event''s event).';
COMMENT ON COLUMN job_waits.since IS
    'When the wait began, ms since the Unix epoch, UTC: an emit kept until then or later reaches it.';
COMMENT ON COLUMN job_waits.until IS
    'When the wait times out, ms since the Unix epoch, UTC (rq_wait_event''s timeout); NULL: never.';

-- emitted_events
COMMENT ON COLUMN emitted_events.id IS
    'The emit''s number, rising in the order of the emits.';
COMMENT ON COLUMN emitted_events.name IS
    'The event''s name (rq_emit''s event).';
COMMENT ON COLUMN emitted_events.payload IS
    'rq_emit''s payload, recorded as the step of every job that waited for the event; NULL: none.';
COMMENT ON COLUMN emitted_events.emitted_at IS
    'When the event was emitted, ms since the Unix epoch, UTC.';
COMMENT ON COLUMN emitted_events.kept_until IS
    'Until when a job that starts waiting still gets the event, ms since the Unix epoch, UTC (emitted_at plus rq_emit''s keep, or raquel.event_retention for one that waits for its reader); deleted an hour later.';
COMMENT ON COLUMN emitted_events.until_read IS
    'Emitted without a keep: the event waits for its reader, and goes once a wait has read it (or the jobs parked for it when it came).';

-- event_emitters
COMMENT ON COLUMN event_emitters.role IS
    'The role (pg_roles.oid) that may emit events whose name begins with prefix (rq_grant_emitter).';
COMMENT ON COLUMN event_emitters.prefix IS
    'A prefix of the event names the role may emit; a role may emit an event that begins with any of its prefixes.';

-- metrics
COMMENT ON COLUMN metrics.queue IS
    'The queue the minute''s figures are for.';
COMMENT ON COLUMN metrics.minute IS
    'The minute''s start, ms since the Unix epoch, UTC.';
COMMENT ON COLUMN metrics.enqueued IS
    'Jobs enqueued in the minute, by any path (a plain INSERT too).';
COMMENT ON COLUMN metrics.claimed IS
    'Jobs claimed in the minute.';
COMMENT ON COLUMN metrics.succeeded IS
    'Attempts that succeeded in the minute.';
COMMENT ON COLUMN metrics.failed IS
    'Attempts that failed in the minute, the rescued ones included.';
COMMENT ON COLUMN metrics.rescued IS
    'Attempts the rescue duty failed in the minute because their lease ran out.';
COMMENT ON COLUMN metrics.expired IS
    'Jobs the expire duty expired in the minute.';
COMMENT ON COLUMN metrics.wait_histogram IS
    'Times from due (scheduled_at) to claim, as counts in 161 buckets, four per doubling of ms; rq_metrics gives its percentiles.';
COMMENT ON COLUMN metrics.run_histogram IS
    'Times from claim to the attempt''s end, as counts in 161 buckets, four per doubling of ms; rq_metrics gives its percentiles.';
COMMENT ON COLUMN metrics.backlog IS
    'Ready jobs (due, not claimed) when the minute was recorded; NULL: not recorded for this queue (kept for active queues and the 100 longest backlogs).';

-- key_holds
COMMENT ON COLUMN key_holds.queue IS
    'The queue of the job that held the key.';
COMMENT ON COLUMN key_holds.key IS
    'The key held after its job ended: enqueueing it again in the queue returns that job until `until`.';
COMMENT ON COLUMN key_holds.job_id IS
    'The ended job (jobs.id) that an enqueue of the key returns.';
COMMENT ON COLUMN key_holds.until IS
    'When the hold ends, ms since the Unix epoch, UTC: the job''s end plus its key_period; the prune duty then deletes the row.';

-- rq_jobs
COMMENT ON COLUMN rq_jobs.id IS
    'The job''s id, a time-ordered UUIDv7 (jobs.id).';
COMMENT ON COLUMN rq_jobs.queue IS
    'The name of the job''s queue.';
COMMENT ON COLUMN rq_jobs.status IS
    'queued, claimed, success, failed (waiting for a retry), exhausted (no retry left), cancelled, expired or blocked (waiting for the jobs it runs after).';
COMMENT ON COLUMN rq_jobs.priority IS
    'Higher runs first (default 0).';
COMMENT ON COLUMN rq_jobs.attempts IS
    'Claims so far, each an attempt: the fencing token the worker verbs require.';
COMMENT ON COLUMN rq_jobs.requeues IS
    'Claims handed back (rq_reject, rq_reschedule, a sleep or a wait), which use up no retry: retries used are attempts - requeues.';
COMMENT ON COLUMN rq_jobs.max_retry_count IS
    'How many retries after the first attempt; NULL: retry for ever.';
COMMENT ON COLUMN rq_jobs.payload IS
    'The job''s data as text; NULL: none.';
COMMENT ON COLUMN rq_jobs.error IS
    'The error of the last failed attempt (rq_fail), or why a workflow cancelled the job; NULL: none.';
COMMENT ON COLUMN rq_jobs.claimed_by IS
    'The name of the worker that last claimed the job (rq_claim''s worker).';
COMMENT ON COLUMN rq_jobs.enqueued_at IS
    'When the job was enqueued (timestamptz).';
COMMENT ON COLUMN rq_jobs.scheduled_at IS
    'When the job is due (timestamptz): at enqueue, at plus delay; after a failure, its time plus the backoff.';
COMMENT ON COLUMN rq_jobs.claimed_at IS
    'When the job was last claimed (timestamptz); NULL: never claimed, or handed back by rq_reject.';
COMMENT ON COLUMN rq_jobs.lease_expires_at IS
    'When the current claim''s lease runs out (timestamptz); NULL when not claimed, or claimed by hand (a lease of a minute from claimed_at).';
COMMENT ON COLUMN rq_jobs.finished_at IS
    'When the job reached a final status (timestamptz); NULL while it has not.';
COMMENT ON COLUMN rq_jobs.max_age IS
    'How long (interval) after scheduled_at the job may wait unclaimed before it expires; NULL: never expires.';
COMMENT ON COLUMN rq_jobs.min_retry_delay IS
    'The shortest backoff after a failure (interval).';
COMMENT ON COLUMN rq_jobs.max_retry_delay IS
    'The longest backoff after a failure (interval).';
COMMENT ON COLUMN rq_jobs.backoff_base IS
    'The first backoff after a failure (interval), doubled at each further failure.';
COMMENT ON COLUMN rq_jobs.error_trace IS
    'The trace given with the last failure to rq_fail; NULL: none.';
COMMENT ON COLUMN rq_jobs.result IS
    'What the job produced, as given to the verb that completed it; NULL: none given, or not completed.';

-- rq_schedules
COMMENT ON COLUMN rq_schedules.name IS
    'The schedule''s name.';
COMMENT ON COLUMN rq_schedules.cron IS
    'The cron pattern whose slots enqueue a job each.';
COMMENT ON COLUMN rq_schedules.timezone IS
    'The time zone the cron pattern is read in.';
COMMENT ON COLUMN rq_schedules.queue IS
    'The queue the schedule''s jobs are enqueued into.';
COMMENT ON COLUMN rq_schedules.enabled IS
    'false: paused (rq_pause_schedule) or disabled after an error; rq_resume_schedule sets it true.';
COMMENT ON COLUMN rq_schedules.catch_up IS
    'What becomes of slots missed by over a minute: ''none'' skips them, ''last'' runs one job for them, ''all'' runs each (the latest 1000).';
COMMENT ON COLUMN rq_schedules.next_run IS
    'The next slot not yet enqueued (timestamptz).';
COMMENT ON COLUMN rq_schedules.last_run IS
    'The last slot enqueued (timestamptz); NULL: none yet.';
COMMENT ON COLUMN rq_schedules.last_job_id IS
    'The job enqueued for the last slot; NULL: none yet.';
COMMENT ON COLUMN rq_schedules.last_error IS
    'Why the last due slot could not be enqueued (it was skipped); NULL once a slot is enqueued.';
