import type pg from "pg";
/** Anything that runs a query: a pg.Client, a pg.PoolClient or a pg.Pool. */
export interface Queryable {
    query(text: string, values?: unknown[]): Promise<pg.QueryResult<any>>;
}
/**
 * A duration: a number of milliseconds, or a PostgreSQL interval as text
 * (`'5 minutes'`, `'1 day 2 hours'`).
 */
export type Duration = number | string;
/** A job's row as `rq_enqueue` and the other verbs return it (times in ms since the epoch). */
export interface JobRow {
    id: string;
    queue: string;
    status: string;
    payload: string | null;
    attempts: number;
    priority: number;
    result?: unknown;
    error?: string | null;
    [column: string]: unknown;
}
/** The options of `rq_enqueue`; each one left out keeps the SQL default. */
export interface EnqueueOptions {
    /** Due at this instant (default: now). */
    at?: Date | string;
    /** Due after this delay (added to `at`). */
    delay?: Duration;
    /** The job expires when not started within this long of falling due. */
    maxAge?: Duration;
    /** Retries after the first attempt (default: for ever). */
    maxRetryCount?: number;
    minRetryDelay?: Duration;
    maxRetryDelay?: Duration;
    backoffBase?: Duration;
    /** Higher runs first (default 0). */
    priority?: number;
    /** Deduplication key: while a job of this queue and key is unfinished, enqueueing it again returns that job. */
    key?: string;
    /** With `key`: a job of that key that ended less than this long ago comes back too. */
    keyPeriod?: Duration;
    /** A fair group of the queue (flow control). */
    groupKey?: string;
    /** Job ids this job waits for (a workflow). */
    after?: string[];
}
/** The options of `rq_enqueue_batch`: as `EnqueueOptions`, with keys and group keys one per payload. */
export interface EnqueueBatchOptions extends Omit<EnqueueOptions, "key" | "keyPeriod" | "groupKey"> {
    keys?: (string | null)[];
    groupKeys?: (string | null)[];
}
/** A number of milliseconds as an interval's text; a string is passed as it is. */
export declare function interval(duration: Duration): string;
/**
 * Enqueues one job (`rq_enqueue`) on `db` and returns its row. A string
 * payload is stored as text, any other value as JSON. Given a client inside
 * a transaction, the job exists only if that transaction commits.
 */
export declare function enqueue(db: Queryable, queue: string, payload?: unknown, options?: EnqueueOptions): Promise<JobRow>;
/**
 * Enqueues one job per payload in one statement (`rq_enqueue_batch`) and
 * returns their rows in the payloads' order (a key repeated in the batch
 * makes one job, so one row). All strings (or nulls): text payloads;
 * otherwise each is stored as JSON.
 */
export declare function enqueueBatch(db: Queryable, queue: string, payloads: unknown[], options?: EnqueueBatchOptions): Promise<JobRow[]>;
/** Emits an event (`rq_emit`): the jobs parked on it resume with its payload. Returns how many it resumed. */
export declare function emit(db: Queryable, event: string, payload?: unknown, options?: {
    keep?: Duration;
}): Promise<number | null>;
/** Waits (`rq_await`) until a job has ended or the timeout passes, and returns its row (null if deleted). */
export declare function awaitResult(db: Queryable, id: string, timeout?: Duration): Promise<JobRow | null>;
