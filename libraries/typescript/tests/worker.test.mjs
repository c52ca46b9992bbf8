import assert from "node:assert/strict";
import { before, after, test } from "node:test";
import pg from "pg";
import { Worker, enqueue, enqueueBatch } from "../dist/index.js";
import { freshDatabase, recordingLogger, sleep, until } from "./helpers.mjs";

let config, pool;
before(async () => {
  config = await freshDatabase("worker");
  pool = new pg.Pool({ ...config, max: 4 });
});
after(() => pool.end());

const count = async (sql, values = []) => Number((await pool.query(sql, values)).rows[0].n);

test("a worker with concurrency 8 over 3 claim connections drains 2000 jobs, each handled exactly once, none lost", async () => {
  const jobs = await enqueueBatch(pool, "drain", Array.from({ length: 2000 }, (_, seq) => ({ seq })));
  const seen = new Map();
  let running = 0, most = 0;
  const worker = new Worker({
    connection: config, concurrency: 8, claimConnections: 3, handleSignals: false, logger: recordingLogger(),
    handlers: {
      drain: async (job) => {
        running++;
        most = Math.max(most, running);
        seen.set(job.id, (seen.get(job.id) ?? 0) + 1);
        await sleep(job.data.seq % 3); // some handlers yield, so several run at once
        running--;
        return job.data.seq % 100 === 0 ? { seq: job.data.seq } : undefined;
      },
    },
  });
  await worker.start();
  await until("2000 jobs handled", () => seen.size >= 2000, 60_000);
  await worker.stop();
  assert.equal(seen.size, 2000);
  assert.ok([...seen.values()].every((n) => n === 1), "a job handled twice");
  assert.ok(jobs.every((j) => seen.has(j.id)), "a job not handled");
  assert.ok(most > 1 && most <= 8, `at most 8 at once, and more than 1: ${most}`);
  assert.equal(await count("SELECT count(*) AS n FROM jobs WHERE queue = 'drain' AND status = 'success' AND attempts = 1"), 2000);
  assert.equal(await count("SELECT count(*) AS n FROM jobs WHERE queue = 'drain' AND result->>'seq' = '100'"), 1, "a returned value is the job's result");
});

test("a thrown error is recorded with its message and trace (rq_fail)", async () => {
  const job = await enqueue(pool, "failing", { card: 4 }, { maxRetryCount: 0 });
  const worker = new Worker({
    connection: config, concurrency: 2, handleSignals: false, logger: recordingLogger(),
    handlers: {
      failing: async function chargeCard() {
        throw new Error("card declined");
      },
    },
  });
  await worker.start();
  const row = await until("the failure recorded", async () =>
    (await pool.query("SELECT status, error, error_trace FROM jobs WHERE id = $1 AND status = 'exhausted'", [job.id])).rows[0]);
  await worker.stop();
  assert.equal(row.error, "card declined");
  assert.match(row.error_trace, /^Error: card declined\n\s+at chargeCard/);
});

test("the lease is extended while a slow handler runs: the rescue duty does not take its job", async () => {
  const logger = recordingLogger();
  const run = async (queue, extendEveryMs) => {
    const job = await enqueue(pool, queue, "slow", { minRetryDelay: 0, maxRetryCount: 5 });
    const worker = new Worker({
      connection: config, concurrency: 1, leaseMs: 1200, extendEveryMs, shutdownDeadlineMs: 100, handleSignals: false, logger,
      handlers: { [queue]: async () => sleep(3500) },
    });
    await worker.start();
    const t0 = Date.now();
    while (Date.now() - t0 < 3800) {
      await pool.query("SELECT rq_rescue()"); // the duty, by hand, as often as it likes
      await sleep(200);
    }
    await worker.stop();
    return (await pool.query("SELECT status, attempts FROM jobs WHERE id = $1", [job.id])).rows[0];
  };
  const extended = await run("slow-extended", 400);
  assert.deepEqual(extended, { status: "success", attempts: 1 });
  // The same without extension (every 60 s): rescued, and the late completion refused.
  const notExtended = await run("slow-not-extended", 60_000);
  assert.ok(notExtended.attempts >= 2, `rescued and claimed again: ${JSON.stringify(notExtended)}`);
  assert.ok(logger.lines.some((l) => l.message === "completion refused" || l.message.includes("losing its claim")));
});

test("a completion waits no longer than completionDelayMs, even while the claim waits in the server", async () => {
  const worker = new Worker({
    connection: config, concurrency: 3, claimWaitMs: 5000, completionDelayMs: 50, handleSignals: false, logger: recordingLogger(),
    handlers: { bound: async (job) => sleep(job.data.ms) },
  });
  const slow = await enqueue(pool, "bound", { ms: 4000 });
  const quick = await enqueue(pool, "bound", { ms: 300 });
  await worker.start();
  // Both claimed at once; the third slot's claim now waits up to 5 s in the server.
  await until("both claimed", async () => (await count("SELECT count(*) AS n FROM jobs WHERE queue = 'bound' AND status = 'claimed'")) === 2);
  const t0 = Date.now();
  await until("the quick job completed", async () => (await pool.query("SELECT status FROM jobs WHERE id = $1", [quick.id])).rows[0].status === "success", 3000);
  const took = Date.now() - t0;
  assert.ok(took < 1300, `completed ${took} ms after both were claimed (handler 300 ms, bound 50 ms)`);
  assert.equal((await pool.query("SELECT status FROM jobs WHERE id = $1", [slow.id])).rows[0].status, "claimed");
  // A new job wakes the waiting claim; its completion goes with the next claim round within the bound too.
  const third = await enqueue(pool, "bound", { ms: 0 });
  await until("the third job completed", async () => (await pool.query("SELECT status FROM jobs WHERE id = $1", [third.id])).rows[0].status === "success", 1000);
  await worker.stop();
  assert.equal((await pool.query("SELECT status FROM jobs WHERE id = $1", [slow.id])).rows[0].status, "success");
});

test("the tracing hook wraps each job", async () => {
  const traced = [];
  const worker = new Worker({
    connection: config, concurrency: 2, handleSignals: false, logger: recordingLogger(),
    onJob: async (job, run) => {
      traced.push(`start ${job.data.n}`);
      const result = await run();
      traced.push(`end ${job.data.n} ${JSON.stringify(result)}`);
      return result;
    },
    handlers: { traced: async (job) => ({ double: job.data.n * 2 }) },
  });
  await enqueue(pool, "traced", { n: 21 });
  await worker.start();
  await until("traced", () => traced.length === 2);
  await worker.stop();
  assert.deepEqual(traced, ["start 21", 'end 21 {"double":42}']);
  assert.equal(await count("SELECT count(*) AS n FROM jobs WHERE queue = 'traced' AND result = '{\"double\": 42}'"), 1);
});
