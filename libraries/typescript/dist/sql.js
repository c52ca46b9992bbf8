/** A number of milliseconds as an interval's text; a string is passed as it is. */
export function interval(duration) {
    if (typeof duration === "number") {
        if (!Number.isFinite(duration))
            throw new RangeError(`raquel-pg: a duration must be finite, got ${duration}`);
        return `${duration} milliseconds`;
    }
    return duration;
}
// option name → [SQL argument name, cast, conversion]
const OPTIONS = {
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
function namedArguments(options, values) {
    let sql = "";
    for (const [name, value] of Object.entries(options)) {
        if (value === undefined)
            continue;
        const option = OPTIONS[name];
        if (!option)
            throw new TypeError(`raquel-pg: unknown enqueue option "${name}"`);
        values.push(option[2](value));
        sql += `, ${option[0]} => $${values.length}::${option[1]}`;
    }
    return sql;
}
/** A payload as SQL: a string is stored as it is (text), anything else as JSON (jsonb). */
function payloadArgument(payload, values) {
    if (payload === undefined || payload === null)
        return "";
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
export async function enqueue(db, queue, payload, options = {}) {
    const values = [queue];
    const sql = `SELECT * FROM rq_enqueue(queue => $1::text${payloadArgument(payload, values)}${namedArguments(options, values)})`;
    return (await db.query(sql, values)).rows[0];
}
/**
 * Enqueues one job per payload in one statement (`rq_enqueue_batch`) and
 * returns their rows in the payloads' order (a key repeated in the batch
 * makes one job, so one row). All strings (or nulls): text payloads;
 * otherwise each is stored as JSON.
 */
export async function enqueueBatch(db, queue, payloads, options = {}) {
    const text = payloads.every((p) => p === null || p === undefined || typeof p === "string");
    const values = [
        queue,
        text ? payloads.map((p) => p ?? null) : payloads.map((p) => (p === undefined || p === null ? null : JSON.stringify(p))),
    ];
    const cast = text ? "text[]" : "jsonb[]";
    const sql = `SELECT * FROM rq_enqueue_batch(queue => $1::text, payloads => $2::${cast}${namedArguments(options, values)})`;
    return (await db.query(sql, values)).rows;
}
/** Emits an event (`rq_emit`): the jobs parked on it resume with its payload. Returns how many it resumed. */
export async function emit(db, event, payload, options = {}) {
    const values = [event, payload === undefined ? null : JSON.stringify(payload)];
    let sql = "SELECT rq_emit($1::text, $2::jsonb";
    if (options.keep !== undefined) {
        values.push(interval(options.keep));
        sql += ", keep => $3::interval";
    }
    const count = (await db.query(sql + ") AS resumed", values)).rows[0].resumed;
    return count === null ? null : Number(count);
}
/** Waits (`rq_await`) until a job has ended or the timeout passes, and returns its row (null if deleted). */
export async function awaitResult(db, id, timeout = "30 seconds") {
    const row = (await db.query("SELECT * FROM rq_await($1::uuid, $2::interval)", [id, interval(timeout)])).rows[0];
    return row && row.id !== null ? row : null;
}
