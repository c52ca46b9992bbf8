// The worker runtime: a connection or a few claim (a waiting claim, the
// SQL's own wait), completions of every handler are sent together with the
// next claim (rq_complete_batch_and_claim), and the rest (failures, lease extensions,
// durable steps, completions that cannot wait for the claim) go through the
// pool.
import os from "node:os";
import util from "node:util";
import pg from "pg";
import { interval, enqueue } from "./sql.js";
const debuglog = util.debuglog("raquel");
export const defaultLogger = {
    debug: (message, meta) => debuglog("%s %j", message, meta ?? {}),
    info: (message, meta) => debuglog("%s %j", message, meta ?? {}),
    warn: (message, meta) => console.warn(`raquel: ${message}`, meta ?? ""),
    error: (message, meta) => console.error(`raquel: ${message}`, meta ?? ""),
};
/** Thrown by sleep/waitEvent/awaitJob when the job parks: the attempt ends and the runtime sends nothing more for it. */
export class Parked extends Error {
    step;
    constructor(step) {
        super(`raquel-pg: the job parked at step "${step}" (this attempt ends; do not catch this)`);
        this.step = step;
        this.name = "Parked";
    }
}
/** The job lost its claim (its lease lapsed and another attempt holds it, or the worker handed it back at shutdown). */
export class LeaseLost extends Error {
    constructor(id, why) {
        super(`raquel-pg: job ${id} is no longer held by this attempt: ${why}`);
        this.name = "LeaseLost";
    }
}
/** The job a handler gets: its row's fields and the durable context (fenced with the attempt for you). */
export class Job {
    pool;
    id;
    queue;
    /** The attempt (fencing token); the library passes it to every verb. */
    attempt;
    /** The payload as stored (text). */
    payload;
    /** Aborted when the job is lost or handed back at shutdown. */
    signal;
    /** @internal */ lost = null;
    /** @internal */ controller;
    /** @internal */ extendedAt = Date.now();
    steps = null;
    constructor(pool, row) {
        this.pool = pool;
        this.id = row.id;
        this.queue = row.queue;
        this.attempt = row.attempts;
        this.payload = row.payload;
        this.controller = new AbortController();
        this.signal = this.controller.signal;
    }
    /** The payload parsed as JSON. */
    get data() {
        return this.payload === null ? null : JSON.parse(this.payload);
    }
    check() {
        if (this.lost !== null)
            throw new LeaseLost(this.id, this.lost);
    }
    async call(sql, values) {
        this.check();
        try {
            return (await this.pool.query(sql, values)).rows[0];
        }
        catch (error) {
            if (error?.code === "55000")
                this.lose(error.message);
            throw error;
        }
    }
    /** @internal */
    lose(why) {
        if (this.lost === null) {
            this.lost = why;
            this.controller.abort(new LeaseLost(this.id, why));
        }
    }
    /**
     * A durable step: runs `fn` once for the job, across its attempts. `fn`
     * gets a client in a transaction that commits with the step's record
     * (rq_step), so its writes to this database happen exactly once; a later
     * attempt gets the recorded result (JSON) back without running `fn`.
     */
    async step(name, fn) {
        this.check();
        if (this.steps === null) {
            const rows = (await this.pool.query("SELECT name, result FROM job_steps WHERE job_id = $1", [this.id])).rows;
            this.steps = new Map(rows.map((row) => [row.name, row.result]));
        }
        if (this.steps.has(name))
            return this.steps.get(name);
        const client = await this.pool.connect();
        try {
            await client.query("BEGIN");
            const result = await fn(client);
            this.check();
            await client.query("SELECT 1 FROM rq_step($1::uuid, $2::int, $3::text, $4::jsonb)", [
                this.id, this.attempt, name, JSON.stringify(result === undefined ? null : result),
            ]);
            await client.query("COMMIT");
            this.steps.set(name, result);
            return result;
        }
        catch (error) {
            await client.query("ROLLBACK").catch(() => { });
            if (error?.code === "55000")
                this.lose(error.message);
            throw error;
        }
        finally {
            client.release();
        }
    }
    /** Sleeps durably (rq_sleep) for a duration or until a Date: the first time the job parks (the attempt ends); the attempt after, it goes on. */
    async sleep(name, until) {
        const sql = until instanceof Date
            ? "SELECT rq_sleep($1::uuid, $2::int, $3::text, at => $4::timestamptz) AS sleeping"
            : "SELECT rq_sleep($1::uuid, $2::int, $3::text, delay => $4::interval) AS sleeping";
        const row = await this.call(sql, [this.id, this.attempt, name, until instanceof Date ? until.toISOString() : interval(until)]);
        if (row.sleeping)
            throw new Parked(name);
    }
    /** Waits durably for an event (rq_wait_event): its payload, or timedOut after the timeout (default raquel.max_event_wait). */
    async waitEvent(name, event, timeout) {
        const row = await this.call("SELECT parked, payload, timed_out FROM rq_wait_event($1::uuid, $2::int, $3::text, $4::text, $5::interval)", [this.id, this.attempt, name, event, timeout === undefined ? null : interval(timeout)]);
        if (row.parked)
            throw new Parked(name);
        return { payload: row.payload, timedOut: row.timed_out === true };
    }
    /** Waits durably for another job's end (rq_wait_job): its status, result and error, or timedOut. */
    async awaitJob(jobId, options = {}) {
        const name = options.name ?? `await ${jobId}`;
        const row = await this.call("SELECT parked, status, result, error, timed_out FROM rq_wait_job($1::uuid, $2::int, $3::text, $4::uuid, $5::interval)", [this.id, this.attempt, name, jobId, options.timeout === undefined ? null : interval(options.timeout)]);
        if (row.parked)
            throw new Parked(name);
        return { status: row.status, result: row.result, error: row.error, timedOut: row.timed_out === true };
    }
    /** Enqueues a child job once (as a step named `name`) and returns its id, the same on every attempt. */
    async spawn(name, queue, payload, options) {
        return this.step(name, async (client) => (await enqueue(client, queue, payload, options)).id);
    }
}
/**
 * One claim connection and the slots it fills. A worker has one lane or a
 * few: each lane's statement carries its slots' completions and claims,
 * and several lanes keep several statements in flight.
 */
class Lane {
    slots;
    client = null;
    pid = null;
    inHand = 0;
    pending = [];
    waker = null;
    waiting = false; // in a waiting claim (the server holds the statement)
    flushTimer = null;
    loop = null;
    constructor(slots) {
        this.slots = slots;
    }
    wake() {
        const waker = this.waker;
        this.waker = null;
        waker?.();
    }
    nap(ms) {
        return new Promise((resolve) => {
            const timer = Number.isFinite(ms) ? setTimeout(() => this.wake(), ms) : null;
            this.waker = () => {
                if (timer)
                    clearTimeout(timer);
                resolve();
            };
        });
    }
}
const CLAIM = "SELECT id, queue, attempts, payload FROM rq_complete_batch_and_claim($1::uuid[], $2::int[], $3::text[], $4::text, " +
    "batch => $5::int, lease => $6::interval, wait => $7::interval, results => $8::jsonb[])";
const COMPLETE_BATCH = "SELECT count(*) FROM rq_complete_batch($1::uuid[], $2::int[], $3::jsonb[])";
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
export class Worker {
    name;
    pool;
    ownPool;
    handlers;
    queues;
    concurrency;
    lanes;
    leaseMs;
    extendEveryMs;
    claimWaitMs;
    completionDelayMs;
    shutdownDeadlineMs;
    handleSignals;
    log;
    onJob;
    inHand = new Map();
    flushes = new Set();
    started = false;
    extendTimer = null;
    stopping = false;
    stopped = null;
    signalHandler = null;
    /** Jobs handled (completed, failed or parked) since start. */
    handled = 0;
    constructor(options) {
        this.handlers = options.handlers;
        this.queues = Object.keys(options.handlers);
        if (this.queues.length === 0)
            throw new TypeError("raquel-pg: a worker needs at least one handler");
        this.concurrency = options.concurrency ?? 10;
        if (!Number.isInteger(this.concurrency) || this.concurrency < 1)
            throw new RangeError("raquel-pg: concurrency must be an integer ≥ 1");
        const lanes = options.claimConnections ?? Math.min(this.concurrency, 2);
        if (!Number.isInteger(lanes) || lanes < 1 || lanes > this.concurrency) {
            throw new RangeError("raquel-pg: claimConnections must be an integer from 1 to concurrency");
        }
        // The slots split as evenly as they go: 10 over 4 lanes is 3, 3, 2, 2.
        this.lanes = Array.from({ length: lanes }, (_, i) => new Lane(Math.floor(this.concurrency / lanes) + (i < this.concurrency % lanes ? 1 : 0)));
        this.name = options.name ?? `${os.hostname()}:${process.pid}`;
        this.leaseMs = options.leaseMs ?? 60_000;
        this.extendEveryMs = options.extendEveryMs ?? Math.max(1, Math.floor(this.leaseMs / 3));
        this.claimWaitMs = options.claimWaitMs ?? 1000;
        this.completionDelayMs = options.completionDelayMs ?? 10;
        this.shutdownDeadlineMs = options.shutdownDeadlineMs ?? 10_000;
        this.handleSignals = options.handleSignals ?? true;
        this.log = options.logger ?? defaultLogger;
        this.onJob = options.onJob;
        if (options.pool) {
            this.pool = options.pool;
            this.ownPool = false;
        }
        else {
            const config = typeof options.connection === "string" ? { connectionString: options.connection } : (options.connection ?? {});
            this.pool = new pg.Pool({ max: this.concurrency + lanes + 1, ...config });
            this.ownPool = true;
        }
        // An idle pooled client's error (say, the server restarting) must not crash the process.
        this.pool.on("error", (error) => this.log.warn("idle connection error", { error: error.message }));
    }
    /** Connects and starts claiming; resolves once the worker runs. */
    async start() {
        if (this.started)
            return;
        this.started = true;
        await Promise.all(this.lanes.map((lane) => this.connect(lane)));
        for (const lane of this.lanes)
            lane.loop = this.claimLoop(lane);
        this.extendTimer = setInterval(() => this.extendLeases(), Math.max(1, Math.floor(this.extendEveryMs / 2)));
        if (this.handleSignals) {
            this.signalHandler = (signal) => {
                this.log.info("signal: stopping", { signal });
                this.stop().finally(() => {
                    process.kill(process.pid, signal); // the default action, now that our listener is gone
                });
            };
            process.once("SIGTERM", this.signalHandler);
            process.once("SIGINT", this.signalHandler);
        }
        this.log.info("worker started", { name: this.name, queues: this.queues, concurrency: this.concurrency, claimConnections: this.lanes.length });
    }
    /** Starts and resolves when the worker has stopped (stop() or a signal). */
    async run() {
        await this.start();
        await Promise.all(this.lanes.map((lane) => lane.loop));
        if (this.stopped)
            await this.stopped;
    }
    async connect(lane) {
        lane.client = await this.pool.connect();
        lane.pid = lane.client.processID ?? null;
    }
    /** Waits until the lane's claim round is due: a free slot, and its completions sent together unless one has waited its bound. */
    async roundDue(lane) {
        for (;;) {
            if (this.stopping)
                return;
            const free = lane.slots - lane.inHand;
            if (free <= 0) {
                await lane.nap(Infinity);
                continue;
            }
            if (lane.pending.length === 0 || free >= lane.slots)
                return;
            const age = Date.now() - lane.pending[0].at;
            if (age >= this.completionDelayMs)
                return;
            await lane.nap(this.completionDelayMs - age);
        }
    }
    async claimLoop(lane) {
        let failures = 0;
        while (!this.stopping) {
            await this.roundDue(lane);
            if (this.stopping)
                break;
            const batch = lane.pending.splice(0, lane.pending.length);
            const free = lane.slots - lane.inHand;
            // A claim that completes must not wait: the completions commit only when the statement ends.
            const wait = batch.length > 0 ? 0 : this.claimWaitMs;
            let rows;
            try {
                if (!lane.client)
                    await this.connect(lane);
                lane.waiting = wait > 0;
                rows = (await lane.client.query(CLAIM, [
                    batch.length ? batch.map((c) => c.id) : null,
                    batch.length ? batch.map((c) => c.attempt) : null,
                    this.queues,
                    this.name,
                    free,
                    interval(this.leaseMs),
                    interval(wait),
                    batch.some((c) => c.result !== null) ? batch.map((c) => c.result) : null,
                ])).rows;
                failures = 0;
            }
            catch (error) {
                lane.waiting = false;
                if (this.stopping && error?.code === "57014")
                    break; // our own cancel at stop(); nothing was claimed
                if (batch.length)
                    await this.completeOneByOne(batch);
                if (error?.code === "55000" || error?.code === "22004")
                    continue; // a stale token: the batch was sent one by one above
                failures++;
                this.log.error("claim failed", { error: error?.message, code: error?.code });
                if (!error?.code || error.code.startsWith("08") || error.code.startsWith("57")) {
                    lane.client?.release(error);
                    lane.client = null;
                }
                if (!this.stopping)
                    await sleep(Math.min(5000, 100 * 2 ** failures));
                continue;
            }
            finally {
                lane.waiting = false;
            }
            if (this.stopping) {
                // Claimed while stopping: hand them back at once.
                await Promise.all(rows.map((row) => this.reject(row.id, row.attempts)));
                break;
            }
            for (const row of rows)
                this.startJob(row, lane);
        }
    }
    startJob(row, lane) {
        const job = new Job(this.pool, row);
        const entry = { job, done: Promise.resolve() };
        this.inHand.set(job.id, entry);
        lane.inHand++;
        entry.done = this.runJob(job, lane);
    }
    async runJob(job, lane) {
        const handler = this.handlers[job.queue];
        const started = Date.now();
        try {
            const run = async () => handler(job);
            const result = this.onJob ? await this.onJob(job, run) : await run();
            if (job.lost !== null) {
                this.log.warn("job finished after losing its claim: not completed", { id: job.id, why: job.lost });
            }
            else {
                lane.pending.push({ id: job.id, attempt: job.attempt, result: result === undefined ? null : JSON.stringify(result), at: Date.now() });
                this.scheduleFlush(lane);
            }
        }
        catch (error) {
            if (error instanceof Parked) {
                this.log.debug("job parked", { id: job.id, step: error.step });
            }
            else if (job.lost !== null) {
                this.log.warn("job failed after losing its claim: not recorded", { id: job.id, error: error?.message });
            }
            else {
                await this.fail(job, error);
            }
        }
        finally {
            this.handled++;
            this.inHand.delete(job.id);
            lane.inHand--;
            this.log.debug("job done", { id: job.id, queue: job.queue, ms: Date.now() - started });
            lane.wake();
        }
    }
    async fail(job, error) {
        const message = error instanceof Error ? error.message : String(error);
        const trace = error instanceof Error ? (error.stack ?? null) : null;
        this.log.warn("job failed", { id: job.id, queue: job.queue, error: message });
        try {
            await this.pool.query("SELECT 1 FROM rq_fail($1::uuid, $2::int, $3::text, $4::text)", [job.id, job.attempt, message, trace]);
        }
        catch (refused) {
            this.log.warn("failure not recorded", { id: job.id, error: refused?.message });
        }
    }
    async reject(id, attempt) {
        try {
            await this.pool.query("SELECT 1 FROM rq_reject($1::uuid, $2::int)", [id, attempt]);
        }
        catch (error) {
            this.log.warn("hand back refused", { id, error: error?.message });
        }
    }
    /** Completions that waited their bound while the lane's connection is held by a waiting claim go through the pool. */
    scheduleFlush(lane) {
        if (lane.flushTimer)
            return;
        lane.flushTimer = setTimeout(() => {
            lane.flushTimer = null;
            if (lane.pending.length === 0)
                return;
            if (lane.waiting || this.stopping)
                this.flushAside(lane);
            else
                lane.wake();
            if (lane.pending.length)
                this.scheduleFlush(lane);
        }, this.completionDelayMs);
    }
    flushAside(lane) {
        const batch = lane.pending.splice(0, lane.pending.length);
        if (batch.length === 0)
            return Promise.resolve();
        const flush = (async () => {
            try {
                await this.pool.query(COMPLETE_BATCH, [
                    batch.map((c) => c.id),
                    batch.map((c) => c.attempt),
                    batch.some((c) => c.result !== null) ? batch.map((c) => c.result) : null,
                ]);
            }
            catch {
                await this.completeOneByOne(batch);
            }
        })();
        this.flushes.add(flush);
        flush.finally(() => this.flushes.delete(flush));
        return flush;
    }
    /** After a batch was refused (all or nothing): each completion on its own, so one stale token refuses only its job. */
    async completeOneByOne(batch) {
        for (const c of batch) {
            try {
                await this.pool.query("SELECT 1 FROM rq_complete($1::uuid, $2::int, $3::jsonb)", [c.id, c.attempt, c.result]);
            }
            catch (error) {
                this.log.warn("completion refused", { id: c.id, attempt: c.attempt, error: error?.message });
            }
        }
    }
    extendLeases() {
        const now = Date.now();
        for (const { job } of this.inHand.values()) {
            if (job.lost !== null || now - job.extendedAt < this.extendEveryMs)
                continue;
            job.extendedAt = now;
            this.pool
                .query("SELECT 1 FROM rq_extend($1::uuid, $2::int, $3::interval)", [job.id, job.attempt, interval(this.leaseMs)])
                .then(() => this.log.debug("lease extended", { id: job.id }))
                .catch((error) => {
                if (error?.code === "55000")
                    job.lose(`lease extension refused: ${error.message}`);
                this.log.warn("lease extension failed", { id: job.id, error: error?.message });
            });
        }
    }
    /**
     * Stops: claims no more, lets the jobs in hand run until the shutdown
     * deadline, hands back (rq_reject) those still running then, sends every
     * completion, and closes the worker's connections.
     */
    stop() {
        if (this.stopped)
            return this.stopped;
        this.stopping = true;
        this.stopped = (async () => {
            if (this.signalHandler) {
                process.removeListener("SIGTERM", this.signalHandler);
                process.removeListener("SIGINT", this.signalHandler);
            }
            for (const lane of this.lanes)
                lane.wake();
            // A claim waiting in the server would hold the stop for its wait: cancel it (a cancelled claim claims nothing).
            await Promise.all(this.lanes.filter((lane) => lane.waiting && lane.pid !== null).map((lane) => this.pool.query("SELECT pg_cancel_backend($1)", [lane.pid]).catch(() => { })));
            const deadline = sleep(this.shutdownDeadlineMs).then(() => "deadline");
            const running = [...this.inHand.values()].map((entry) => entry.done);
            const outcome = await Promise.race([Promise.all(running).then(() => "done"), deadline]);
            if (outcome === "deadline") {
                const left = [...this.inHand.values()].map((entry) => entry.job);
                this.log.warn("shutdown deadline: handing back the jobs still running", { jobs: left.length });
                await Promise.all(left.map((job) => {
                    job.lose("handed back at shutdown");
                    return this.reject(job.id, job.attempt);
                }));
            }
            await Promise.all(this.lanes.map((lane) => lane.loop));
            for (const lane of this.lanes) {
                if (lane.flushTimer)
                    clearTimeout(lane.flushTimer);
                lane.flushTimer = null;
                await this.flushAside(lane);
            }
            await Promise.all([...this.flushes]);
            if (this.extendTimer)
                clearInterval(this.extendTimer);
            for (const lane of this.lanes) {
                // Destroyed, not returned to the pool: a cancel sent just as its claim ended must not reach another query.
                lane.client?.release(true);
                lane.client = null;
            }
            if (this.ownPool)
                await this.pool.end();
            this.log.info("worker stopped", { name: this.name, handled: this.handled });
        })();
        return this.stopped;
    }
}
