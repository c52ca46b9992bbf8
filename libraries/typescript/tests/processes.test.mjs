// Workers as real OS processes: one killed with SIGKILL mid-job, one stopped
// with SIGTERM while it holds a batch.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { once } from "node:events";
import readline from "node:readline";
import { before, after, test } from "node:test";
import pg from "pg";
import { Worker, enqueue } from "../dist/index.js";
import { freshDatabase, recordingLogger, sleep, until } from "./helpers.mjs";

let config, pool;
before(async () => {
  config = await freshDatabase("processes");
  pool = new pg.Pool({ ...config, max: 4 });
  await pool.query("CREATE TABLE effects (seq int NOT NULL, pid int NOT NULL)");
});
after(() => pool.end());

/** Starts tests/fixtures/worker-process.mjs; resolves with the child and its stdout lines (kept as they come). */
async function startProcess(settings) {
  const child = spawn(process.execPath, [new URL("./fixtures/worker-process.mjs", import.meta.url).pathname], {
    env: { ...process.env, WORKER_SETTINGS: JSON.stringify({ config, ...settings }) },
    stdio: ["ignore", "pipe", "inherit"],
  });
  const lines = [];
  readline.createInterface({ input: child.stdout }).on("line", (line) => lines.push(line));
  const exited = once(child, "exit");
  await until("the worker process ready", () => lines.includes("ready") || child.exitCode !== null, 20_000);
  assert.ok(lines.includes("ready"), "the worker process did not start");
  return { child, lines, exited, started: () => lines.filter((l) => l.startsWith("started ")).map((l) => l.split(" ")) };
}

const rows = async (sql, values = []) => (await pool.query(sql, values)).rows;

test("a worker killed mid-job (SIGKILL): its lease lapses, another worker completes the job, the dead attempt is fenced out", async () => {
  const job = await enqueue(pool, "killed", { seq: 1, ms: -1 }, { minRetryDelay: 0 });
  const dead = await startProcess({ queue: "killed", concurrency: 2, leaseMs: 1000, shutdownDeadlineMs: 1000 });
  await until("the job started", () => dead.started().length === 1);
  const [, , id, attempt] = dead.started()[0];
  assert.equal(id, job.id);
  dead.child.kill("SIGKILL");
  await dead.exited;
  // The lease (1 s) lapses; the rescue duty (run here by hand, as the launcher does every second) takes the job back.
  await until("the job rescued", async () => {
    await pool.query("SELECT rq_rescue()");
    return (await rows("SELECT status FROM jobs WHERE id = $1", [id]))[0].status !== "claimed";
  });
  const handled = [];
  const worker = new Worker({
    connection: config, concurrency: 2, handleSignals: false, logger: recordingLogger(),
    handlers: { killed: async (j) => { handled.push(j.attempt); return { by: "second" }; } },
  });
  await worker.start();
  await until("the job completed", async () => (await rows("SELECT status FROM jobs WHERE id = $1", [id]))[0].status === "success");
  await worker.stop();
  assert.deepEqual(handled, [2]);
  const [row] = await rows("SELECT status, attempts, result FROM jobs WHERE id = $1", [id]);
  assert.deepEqual(row, { status: "success", attempts: 2, result: { by: "second" } });
  // The dead worker's completion, on its attempt, is refused: 55000.
  await assert.rejects(pool.query("SELECT rq_complete($1::uuid, $2::int)", [id, Number(attempt)]), (error) => error.code === "55000");
});

test("SIGTERM while a worker holds a batch: it stops claiming, completes what finishes, hands back the rest by the deadline; a second worker completes those: none lost, none doubled", async () => {
  // Eight jobs; the first four (higher priority) are the batch in hand: 0 and 2 finish in 1 s, 1 and 3 never do.
  for (let seq = 0; seq < 8; seq++) {
    await enqueue(pool, "stopped", { seq, ms: seq < 4 ? (seq % 2 === 0 ? 1000 : -1) : 0 }, { priority: seq < 4 ? 10 : 0, minRetryDelay: 0 });
  }
  const first = await startProcess({ queue: "stopped", concurrency: 4, leaseMs: 30_000, shutdownDeadlineMs: 2500 });
  await until("four jobs started", () => first.started().length === 4);
  assert.deepEqual(first.started().map((s) => Number(s[1])).sort(), [0, 1, 2, 3]);
  const t0 = Date.now();
  first.child.kill("SIGTERM");
  await first.exited;
  const took = Date.now() - t0;
  assert.ok(took < 2500 + 2000, `the worker took ${took} ms to stop (deadline 2.5 s)`);
  assert.ok(took >= 2400, `the worker stopped after ${took} ms, before its deadline, with jobs still running`);
  assert.equal(first.started().length, 4, "claimed after SIGTERM");
  const bySeq = async () => Object.fromEntries((await rows(
    "SELECT (payload::jsonb->>'seq')::int AS seq, status, attempts FROM jobs WHERE queue = 'stopped'")).map((r) => [r.seq, `${r.status}/${r.attempts}`]));
  assert.deepEqual(await bySeq(), {
    0: "success/1", 2: "success/1", // finished within the deadline: completed
    1: "queued/1", 3: "queued/1", // still running at the deadline: handed back (rq_reject)
    4: "queued/0", 5: "queued/0", 6: "queued/0", 7: "queued/0", // never claimed
  });
  // The second worker: the handed-back jobs now finish at once.
  await pool.query("UPDATE jobs SET payload = jsonb_set(payload::jsonb, '{ms}', '0')::text WHERE queue = 'stopped' AND status = 'queued'");
  const second = await startProcess({ queue: "stopped", concurrency: 4, leaseMs: 30_000, shutdownDeadlineMs: 2500 });
  await until("all eight succeeded", async () => (await rows("SELECT count(*)::int AS n FROM jobs WHERE queue = 'stopped' AND status = 'success'"))[0].n === 8);
  second.child.kill("SIGTERM");
  await second.exited;
  const effects = await rows("SELECT seq, pid FROM effects ORDER BY seq");
  assert.deepEqual(effects.map((e) => e.seq), [0, 1, 2, 3, 4, 5, 6, 7], "each job's effect exactly once");
  assert.deepEqual(effects.filter((e) => e.pid === first.child.pid).map((e) => e.seq), [0, 2]);
  assert.deepEqual(await bySeq(), {
    0: "success/1", 2: "success/1", 1: "success/2", 3: "success/2",
    4: "success/1", 5: "success/1", 6: "success/1", 7: "success/1",
  });
});
