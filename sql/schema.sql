-- raquel's pure helpers by the names users call (src/clock.rs, src/ids.rs,
-- src/backoff.rs). Each is the same C function as its twin in
-- raquel_internal, which is the name raquel's own code calls: a role that
-- may create in this schema can plant a look-alike here that fits a call
-- better, but never in raquel_internal (sql/privileges.sql).
CREATE FUNCTION rq_now_ms() RETURNS bigint
LANGUAGE c STRICT VOLATILE PARALLEL SAFE
AS 'MODULE_PATHNAME', 'rq_now_ms_wrapper';
CREATE FUNCTION rq_uuid7() RETURNS uuid
LANGUAGE c STRICT VOLATILE PARALLEL SAFE
AS 'MODULE_PATHNAME', 'rq_uuid7_wrapper';
CREATE FUNCTION rq_ms_to_timestamptz(ms bigint) RETURNS timestamptz
LANGUAGE c IMMUTABLE STRICT PARALLEL SAFE
AS 'MODULE_PATHNAME', 'rq_ms_to_timestamptz_wrapper';
CREATE FUNCTION rq_ms_to_interval(ms bigint) RETURNS interval
LANGUAGE c IMMUTABLE STRICT PARALLEL SAFE
AS 'MODULE_PATHNAME', 'rq_ms_to_interval_wrapper';
CREATE FUNCTION rq_backoff(attempt integer, backoff_base integer, min_retry_delay integer, max_retry_delay integer)
RETURNS bigint
LANGUAGE c IMMUTABLE STRICT PARALLEL SAFE
AS 'MODULE_PATHNAME', 'rq_backoff_wrapper';

-- What a job's single values may be, as domains rather than CHECK
-- constraints of the table: PostgreSQL reads and plans a table's CHECK
-- constraints anew for every statement that writes it (about 190 000
-- instructions an UPDATE for the seven the table had, more than the UPDATE
-- itself; bench/costs), and checks a domain only for the columns a
-- statement sets, with a plan it keeps. A client sees the base types
-- (text, integer, bigint), so the Python library's table is unchanged.
-- The checks across columns are the trigger rq_job_values below.
-- Each domain's check is a C function (src/schema.rs) that refuses a bad
-- value with a message naming it and its column (23514), where
-- PostgreSQL's own says only "value for domain rq_status violates check
-- constraint" (0.6.0).
CREATE DOMAIN rq_status AS text
    CONSTRAINT rq_status_check CHECK (raquel_internal.rq_check_status(VALUE));
-- attempts, requeues, a retry count (not named rq_count: a type named as a
-- function makes rq_count('a') a cast of 'a' to that type)
CREATE DOMAIN rq_nonnegative AS integer CONSTRAINT rq_nonnegative_check CHECK (raquel_internal.rq_check_nonnegative(VALUE));
-- retry delays and the backoff base (ms)
CREATE DOMAIN rq_delay_ms AS integer CONSTRAINT rq_delay_ms_check CHECK (raquel_internal.rq_check_delay_ms(VALUE));
-- a maximum age (ms)
CREATE DOMAIN rq_max_age_ms AS bigint CONSTRAINT rq_max_age_ms_check CHECK (raquel_internal.rq_check_max_age_ms(VALUE));

-- The jobs table. Its first seventeen columns are, name for name and unit for
-- unit, those of the Python library raquel's table, so that a program written
-- for that library (or a plain INSERT) works against it unchanged. Times are
-- milliseconds since the Unix epoch (UTC); durations are milliseconds.
CREATE TABLE jobs (
    id               uuid    NOT NULL DEFAULT raquel_internal.rq_uuid7(),
    queue            text    NOT NULL DEFAULT 'default',
    payload          text,
    status           rq_status NOT NULL DEFAULT 'queued',
    max_age          rq_max_age_ms,
    max_retry_count  rq_nonnegative,
    -- 1000, 43200000 and 1000 ms, the library's defaults (src/limits.rs)
    min_retry_delay  rq_delay_ms DEFAULT raquel_internal.rq_default_min_retry_delay(),
    max_retry_delay  rq_delay_ms DEFAULT raquel_internal.rq_default_max_retry_delay(),
    backoff_base     rq_delay_ms DEFAULT raquel_internal.rq_default_backoff_base(),
    enqueued_at      bigint  NOT NULL DEFAULT raquel_internal.rq_now_ms(),
    scheduled_at     bigint  NOT NULL DEFAULT raquel_internal.rq_now_ms(),
    attempts         rq_nonnegative NOT NULL DEFAULT 0,
    error            text,
    error_trace      text,
    claimed_by       text,
    claimed_at       bigint,
    finished_at      bigint,
    -- raquel's own columns; each has a default, so older inserts still work.
    -- Higher runs first.
    priority         integer NOT NULL DEFAULT 0,
    -- When the current claim's lease runs out (ms). Null on a claimed row
    -- means a claim made by hand or by the Python library: its lease is the
    -- library's one minute (rq_default_lease_ms()) from claimed_at.
    lease_expires_at bigint,
    -- Claims a worker handed back with rq_reject / rq_reschedule. Such a claim
    -- counts in attempts (every claim is an attempt, and attempts is the
    -- fencing token, which must never repeat) but uses up no retry: retries
    -- used = attempts - requeues.
    requeues         rq_nonnegative NOT NULL DEFAULT 0,
    -- A deduplication key: while a job of the same queue and key is
    -- unfinished, enqueueing that key again returns that job.
    key              text,
    -- Fair groups (sql/flow.sql): the group a job belongs to, say a tenant,
    -- and its turn within its queue's grouped jobs, set at enqueue
    -- (rq_job_turn). Claims on a grouped queue take turns from group to group.
    group_key        text,
    turn             bigint,
    -- Workflows (sql/workflows.sql): how many of a blocked job's parents
    -- have not ended yet. Only raquel's functions write it; a CHECK on
    -- blocked_by would cost every claim and complete 15 000 instructions
    -- (bench/instructions). Whether a job has children is in
    -- job_dependencies, not on the parent's row: a child's enqueue writes
    -- nothing on (and holds no lock of) its parents.
    blocked_by       integer NOT NULL DEFAULT 0,
    -- With a key: how long after the job ends its key still gives it back
    -- (rq_enqueue's key_period, ms; sql/finish.sql keeps the hold).
    key_period       bigint,
    -- What the job produced (sql/results.sql): set by the verb that
    -- completes it, in the same UPDATE; kept with the job for the retention.
    result           jsonb,
    -- A job's history (rq_history, sql/observe.sql): the attempts before
    -- the row's current one, oldest first, as {attempt, worker, claimed_at,
    -- ended_at, outcome, error, trace} (times in ms), appended by the verbs
    -- that end an attempt without ending the job (a failure with a retry
    -- left, a lapsed lease's rescue, rq_reschedule and the sleeps and waits
    -- that park through it, rq_reject) and by rq_retry of an ended job (its
    -- end). NULL until the first such end, so a job that succeeds on its
    -- first attempt writes nothing more; the last 100 kept.
    past_attempts    jsonb,

    CONSTRAINT jobs_pkey PRIMARY KEY (id)
);

-- The checks across columns (src/schema.rs): min_retry_delay <= max_retry_delay
-- and requeues <= attempts, for every row inserted and every update that
-- sets one of them (23514, as a CHECK constraint would). In C: a row
-- trigger costs a write about 1 300 instructions where the two CHECK
-- constraints cost about 50 000.
CREATE FUNCTION raquel_internal.rq_job_values() RETURNS trigger
LANGUAGE c
AS 'MODULE_PATHNAME', 'rq_job_values';
CREATE TRIGGER jobs_values
    BEFORE INSERT OR UPDATE OF min_retry_delay, max_retry_delay, attempts, requeues ON jobs
    FOR EACH ROW EXECUTE FUNCTION raquel_internal.rq_job_values();

-- A queue table's rows churn: each job is inserted, updated at least twice
-- (claimed, finished) and deleted by the prune duty. Every update leaves a
-- dead row version and dead index entries that claims must step over until
-- vacuum removes them, so autovacuum comes after 1000 + 1% changed rows
-- instead of the default 50 + 20% (which lets a ten-million-row table gather
-- two million dead rows). The fillfactor stays 100: at 90 claims ran no
-- faster on an 11-million-row table (measured), since a page holds about 50
-- jobs and a tenth of it free takes only a few of their new versions.
ALTER TABLE jobs SET (
    autovacuum_vacuum_threshold = 1000,
    autovacuum_vacuum_scale_factor = 0.01,
    autovacuum_vacuum_insert_threshold = 1000,
    autovacuum_vacuum_insert_scale_factor = 0.01
);

COMMENT ON TABLE jobs IS
    'raquel job queue: one row a job. Times in ms since the Unix epoch (UTC), durations in ms.';

-- The claim path. Only jobs that may become ready (queued, or failed and
-- waiting for a retry) are in these indexes, so a claim costs the same with
-- ten finished jobs in the table or ten million. Their order is the claim
-- order: priority, then scheduled time, then id. Jobs of a group are in the
-- fair indexes below instead.
CREATE INDEX jobs_ready_by_queue_idx
    ON jobs (queue, priority DESC, scheduled_at, id)
    WHERE status IN ('queued', 'failed') AND group_key IS NULL;
-- A claim on any queue takes every queue's ready jobs in claim order from
-- the index below, which costs every job an entry at enqueue (and at each
-- retry): about 6 % of an rq_enqueue's instructions and 3 % of a claim and
-- its complete (docs/src/design/hot-path.md). Walking the index above queue
-- by queue instead, as 0.5.0 did, cost the claim a probe for every queue
-- with jobs, ready or not: 0.5 to 1.6 s beside 50,000 queues that each held
-- one job due later, a slowdown that any role that may enqueue could cause.
-- Its predicate holds one more condition, true of every row, that only the
-- any-queue statements state (src/claim.rs QueueFilter::Any): a claim on
-- one queue, whose statement cannot prove it, cannot pick this index and
-- walk other queues' jobs in it (the planner's choice between the two was a
-- guess, and a generic plan once guessed wrong).
CREATE INDEX jobs_ready_idx
    ON jobs (priority DESC, scheduled_at, id)
    WHERE status IN ('queued', 'failed') AND priority >= -2147483648 AND group_key IS NULL;

-- Grouped jobs (sql/flow.sql), which only jobs with a group_key pay for: the
-- fair claim order (priority, then turn, so the groups take turns), and each
-- group's jobs by status, for where its next job's turn starts (its last
-- ready turn) and for how many it has claimed (group_max_claimed). Each
-- index is work for every update of a job that is not HOT, ready or not, so
-- there are two, and their predicates test the group first: a job without
-- one is out at the first test (bench/instructions).
CREATE INDEX jobs_ready_fair_idx
    ON jobs (queue, priority DESC, turn, scheduled_at, id)
    WHERE group_key IS NOT NULL AND status IN ('queued', 'failed');
CREATE INDEX jobs_group_idx
    ON jobs (queue, group_key, status, turn)
    WHERE group_key IS NOT NULL AND status IN ('queued', 'failed', 'claimed');

-- At most one unfinished job per queue and key; rq_enqueue's ON CONFLICT
-- names this index's columns, and a condition that implies its predicate
-- (a new job is queued; it may be blocked at once, sql/transitions.sql).
CREATE UNIQUE INDEX jobs_key_idx ON jobs (queue, key)
    WHERE key IS NOT NULL AND status IN ('queued', 'claimed', 'failed', 'blocked');

-- The duties' indexes (sql/duties.sql), each of just the rows a duty is
-- after, so that a table of millions of finished jobs costs a round nothing.

-- Jobs nobody claimed before scheduled_at + max_age: rq_expire.
CREATE INDEX jobs_expiry_idx ON jobs ((scheduled_at + max_age))
    WHERE status IN ('queued', 'failed') AND max_age IS NOT NULL;

-- Claimed jobs by the end of their lease: rq_rescue. A claim without
-- lease_expires_at has the library's lease from claimed_at.
-- The IS NOT NULL in the predicate matters: rescue's `coalesce(…) <= now`
-- implies it, but rq_complete's `id = … AND status = 'claimed'` does not, so
-- the planner can never pick this index (instead of the primary key) for the
-- verbs that finish one claimed job.
CREATE INDEX jobs_lease_idx ON jobs ((coalesce(lease_expires_at, claimed_at + raquel_internal.rq_default_lease_ms())))
    WHERE status = 'claimed' AND coalesce(lease_expires_at, claimed_at + raquel_internal.rq_default_lease_ms()) IS NOT NULL;

-- Finished jobs by when they finished: rq_prune.
CREATE INDEX jobs_finished_idx ON jobs (finished_at)
    WHERE status IN ('success', 'cancelled', 'expired', 'exhausted');

-- pg_dump keeps the jobs, not just the empty table the extension creates.
SELECT pg_catalog.pg_extension_config_dump('jobs', '');

-- Keys held after their job ended: a job enqueued with a key and a
-- key_period leaves a row here when it ends, and until `until` (ms) an
-- enqueue of that queue and key gets that job back (src/enqueue.rs). The
-- prune duty deletes the rows whose time is up.
CREATE TABLE key_holds (
    queue  text   NOT NULL,
    key    text   NOT NULL,
    job_id uuid   NOT NULL,
    until  bigint NOT NULL,
    CONSTRAINT key_holds_pkey PRIMARY KEY (queue, key)
);
SELECT pg_catalog.pg_extension_config_dump('key_holds', '');
