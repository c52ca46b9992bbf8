import pg from "pg";
import { type Duration, type EnqueueOptions } from "./sql.js";
/** Logs go here; the default sends debug and info to `NODE_DEBUG=raquel`, warnings and errors to the console. */
export interface Logger {
    debug(message: string, meta?: Record<string, unknown>): void;
    info(message: string, meta?: Record<string, unknown>): void;
    warn(message: string, meta?: Record<string, unknown>): void;
    error(message: string, meta?: Record<string, unknown>): void;
}
export declare const defaultLogger: Logger;
export type Handler = (job: Job) => unknown | Promise<unknown>;
export interface WorkerOptions {
    /** Handlers by queue: the worker claims from these queues only. */
    handlers: Record<string, Handler>;
    /** A pool to use (not ended by the worker). Needs room for concurrency + claimConnections + 1 connections. */
    pool?: pg.Pool;
    /** Otherwise the worker makes its own pool from this (a connection string or pg's config; default: libpq's PG* variables). */
    connection?: string | pg.PoolConfig;
    /** Jobs handled at once (default 10). */
    concurrency?: number;
    /** The name written in claimed_by (default host:pid). */
    name?: string;
    /** The lease a claim takes, in ms (default 60 000). */
    leaseMs?: number;
    /** How often the leases of running jobs are extended, in ms (default a third of the lease). */
    extendEveryMs?: number;
    /**
     * Claim connections (default min(concurrency, 2)): the slots are split
     * among them, and each sends its slots' completions with its next claim;
     * more keep more statements in flight, fewer batch more jobs a statement.
     */
    claimConnections?: number;
    /** How long a claim waits in the server for a job when none is ready, in ms (default 1000). */
    claimWaitMs?: number;
    /** The longest a finished job's completion waits to be sent with others, in ms (default 10). */
    completionDelayMs?: number;
    /** After stop() or SIGTERM: how long jobs in hand may still run before they are handed back, in ms (default 10 000). */
    shutdownDeadlineMs?: number;
    /** Stop gracefully on SIGTERM and SIGINT, then re-raise the signal (default true). */
    handleSignals?: boolean;
    logger?: Logger;
    /** A hook around each job (tracing): call `run()` and return its result. */
    onJob?: (job: Job, run: () => Promise<unknown>) => Promise<unknown>;
}
/** Thrown by sleep/waitEvent/awaitJob when the job parks: the attempt ends and the runtime sends nothing more for it. */
export declare class Parked extends Error {
    readonly step: string;
    constructor(step: string);
}
/** The job lost its claim (its lease lapsed and another attempt holds it, or the worker handed it back at shutdown). */
export declare class LeaseLost extends Error {
    constructor(id: string, why: string);
}
/** The job a handler gets: its row's fields and the durable context (fenced with the attempt for you). */
export declare class Job {
    private readonly pool;
    readonly id: string;
    readonly queue: string;
    /** The attempt (fencing token); the library passes it to every verb. */
    readonly attempt: number;
    /** The payload as stored (text). */
    readonly payload: string | null;
    /** Aborted when the job is lost or handed back at shutdown. */
    readonly signal: AbortSignal;
    /** @internal */ lost: string | null;
    /** @internal */ controller: AbortController;
    /** @internal */ extendedAt: number;
    private steps;
    constructor(pool: pg.Pool, row: {
        id: string;
        queue: string;
        attempts: number;
        payload: string | null;
    });
    /** The payload parsed as JSON. */
    get data(): any;
    private check;
    private call;
    /** @internal */
    lose(why: string): void;
    /**
     * A durable step: runs `fn` once for the job, across its attempts. `fn`
     * gets a client in a transaction that commits with the step's record
     * (rq_step), so its writes to this database happen exactly once; a later
     * attempt gets the recorded result (JSON) back without running `fn`.
     */
    step<T>(name: string, fn: (client: pg.PoolClient) => T | Promise<T>): Promise<T>;
    /** Sleeps durably (rq_sleep) for a duration or until a Date: the first time the job parks (the attempt ends); the attempt after, it goes on. */
    sleep(name: string, until: Duration | Date): Promise<void>;
    /** Waits durably for an event (rq_wait_event): its payload, or timedOut after the timeout (default raquel.max_event_wait). */
    waitEvent<T = unknown>(name: string, event: string, timeout?: Duration): Promise<{
        payload: T | null;
        timedOut: boolean;
    }>;
    /** Waits durably for another job's end (rq_wait_job): its status, result and error, or timedOut. */
    awaitJob<T = unknown>(jobId: string, options?: {
        name?: string;
        timeout?: Duration;
    }): Promise<{
        status: string | null;
        result: T | null;
        error: string | null;
        timedOut: boolean;
    }>;
    /** Enqueues a child job once (as a step named `name`) and returns its id, the same on every attempt. */
    spawn(name: string, queue: string, payload?: unknown, options?: EnqueueOptions): Promise<string>;
}
export declare class Worker {
    readonly name: string;
    readonly pool: pg.Pool;
    private readonly ownPool;
    private readonly handlers;
    private readonly queues;
    private readonly concurrency;
    private readonly lanes;
    private readonly leaseMs;
    private readonly extendEveryMs;
    private readonly claimWaitMs;
    private readonly completionDelayMs;
    private readonly shutdownDeadlineMs;
    private readonly handleSignals;
    private readonly log;
    private readonly onJob?;
    private readonly inHand;
    private flushes;
    private started;
    private extendTimer;
    private stopping;
    private stopped;
    private signalHandler;
    /** Jobs handled (completed, failed or parked) since start. */
    handled: number;
    constructor(options: WorkerOptions);
    /** Connects and starts claiming; resolves once the worker runs. */
    start(): Promise<void>;
    /** Starts and resolves when the worker has stopped (stop() or a signal). */
    run(): Promise<void>;
    private connect;
    /** Waits until the lane's claim round is due: a free slot, and its completions sent together unless one has waited its bound. */
    private roundDue;
    private claimLoop;
    private startJob;
    private runJob;
    private fail;
    private reject;
    /** Completions that waited their bound while the lane's connection is held by a waiting claim go through the pool. */
    private scheduleFlush;
    private flushAside;
    /** After a batch was refused (all or nothing): each completion on its own, so one stale token refuses only its job. */
    private completeOneByOne;
    private extendLeases;
    /**
     * Stops: claims no more, lets the jobs in hand run until the shutdown
     * deadline, hands back (rq_reject) those still running then, sends every
     * completion, and closes the worker's connections.
     */
    stop(): Promise<void>;
}
