// Enqueue helpers and small wrappers over raquel's SQL verbs. Each takes the
// caller's `db` (a pg Client, a PoolClient inside the caller's transaction,
// or a Pool), so an enqueue made on a client in a transaction commits or
// rolls back with it: the library opens no transaction of its own here.
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
export function interval(duration: Duration): string {
  if (typeof duration === "number") {
    if (!Number.isFinite(duration)) throw new RangeError(`raquel-pg: a duration must be finite, got ${duration}`);
    return `${duration} milliseconds`;
  }
  return duration;
}

// option name → [SQL argument name, cast, conversion]
const OPTIONS: Record<string, [string, string, (value: any) => unknown]> = {
  at: ["at", "timestamptz", (v) => (v instanceof Date ? v.toISOString() : v)],
  delay: ["delay", "interval", interval],
  maxAge: ["max_age", "interval", interval],
  maxRetryCount: ["max_retry_count", "int", (v) => v],
  minRetryDelay: ["min_retry_delay", "interval", interval],
  maxRetryDelay: ["max_retry_delay", "interval", interval],
  backoffBase: ["backoff_base", "interval", interval],
  priority: ["priority", "int", (v) => v],
  key: ["key", "text", (v) => v],
  keyPeriod: ["key_period", "interval", interval],
  groupKey: ["group_key", "text", (v) => v],
  after: ["after", "uuid[]", (v) => v],
  keys: ["keys", "text[]", (v) => v],
  groupKeys: ["group_keys", "text[]", (v) => v],
};

/** Named arguments for the options given, appended to `values`. */
function namedArguments(options: object, values: unknown[]): string {
  let sql = "";
  for (const [name, value] of Object.entries(options)) {
    if (value === undefined) continue;
    const option = OPTIONS[name];
    if (!option) throw new TypeError(`raquel-pg: unknown enqueue option "${name}"`);
    values.push(option[2](value));
    sql += `, ${option[0]} => $${values.length}::${option[1]}`;
  }
  return sql;
}

/** A payload as SQL: a string is stored as it is (text), anything else as JSON (jsonb). */
function payloadArgument(payload: unknown, values: unknown[]): string {
  if (payload === undefined || payload === null) return "";
  if (typeof payload === "string") {
    values.push(payload);
    return `, payload => $${values.length}::text`;
  }
  values.push(JSON.stringify(payload));
  return `, payload => $${values.length}::jsonb`;
}

/**
 * Enqueues one job (`rq_enqueue`) on `db` and returns its row. A string
 * payload is stored as text, any other value as JSON. Given a client inside
 * a transaction, the job exists only if that transaction commits.
 */
export async function enqueue(db: Queryable, queue: string, payload?: unknown, options: EnqueueOptions = {}): Promise<JobRow> {
  const values: unknown[] = [queue];
  const sql = `SELECT * FROM rq_enqueue(queue => $1::text${payloadArgument(payload, values)}${namedArguments(options, values)})`;
  return (await db.query(sql, values)).rows[0];
}

/**
 * Enqueues one job per payload in one statement (`rq_enqueue_batch`) and
 * returns their rows in the payloads' order (a key repeated in the batch
 * makes one job, so one row). All strings (or nulls): text payloads;
 * otherwise each is stored as JSON.
 */
export async function enqueueBatch(db: Queryable, queue: string, payloads: unknown[], options: EnqueueBatchOptions = {}): Promise<JobRow[]> {
  const text = payloads.every((p) => p === null || p === undefined || typeof p === "string");
  const values: unknown[] = [
    queue,
    text ? payloads.map((p) => p ?? null) : payloads.map((p) => (p === undefined || p === null ? null : JSON.stringify(p))),
  ];
  const cast = text ? "text[]" : "jsonb[]";
  const sql = `SELECT * FROM rq_enqueue_batch(queue => $1::text, payloads => $2::${cast}${namedArguments(options, values)})`;
  return (await db.query(sql, values)).rows;
}

/** Emits an event (`rq_emit`): the jobs parked on it resume with its payload. Returns how many it resumed. */
export async function emit(db: Queryable, event: string, payload?: unknown, options: { keep?: Duration } = {}): Promise<number | null> {
  const values: unknown[] = [event, payload === undefined ? null : JSON.stringify(payload)];
  let sql = "SELECT rq_emit($1::text, $2::jsonb";
  if (options.keep !== undefined) {
    values.push(interval(options.keep));
    sql += ", keep => $3::interval";
  }
  const count = (await db.query(sql + ") AS resumed", values)).rows[0].resumed;
  return count === null ? null : Number(count);
}

/** Waits (`rq_await`) until a job has ended or the timeout passes, and returns its row (null if deleted). */
export async function awaitResult(db: Queryable, id: string, timeout: Duration = "30 seconds"): Promise<JobRow | null> {
  const row = (await db.query("SELECT * FROM rq_await($1::uuid, $2::interval)", [id, interval(timeout)])).rows[0];
  return row && row.id !== null ? row : null;
}
