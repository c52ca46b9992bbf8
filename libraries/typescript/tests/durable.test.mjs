import assert from "node:assert/strict";
import { before, after, test } from "node:test";
import pg from "pg";
import { Worker, enqueue, emit } from "../dist/index.js";
import { freshDatabase, recordingLogger, sleep, until } from "./helpers.mjs";

let config, pool;
before(async () => {
  config = await freshDatabase("durable");
  pool = new pg.Pool({ ...config, max: 4 });
  await pool.query("CREATE TABLE stock (order_id text PRIMARY KEY)");
});
after(() => pool.end());

const job = async (id) => (await pool.query("SELECT status, attempts, result, error FROM jobs WHERE id = $1", [id])).rows[0];

test("a step's result is not recomputed on the retry, and its writes commit once with it", async () => {
  const ran = { reserve: 0, charge: 0 };
  const worker = new Worker({
    connection: config, concurrency: 2, handleSignals: false, logger: recordingLogger(),
    handlers: {
      orders: async (j) => {
        const reservation = await j.step("reserve", async (client) => {
          ran.reserve++;
          await client.query("INSERT INTO stock VALUES ($1)", [j.id]); // a second run would violate the key
          return { reservation: `R-${ran.reserve}` };
        });
        const payment = await j.step("charge", async () => {
          ran.charge++;
          if (j.attempt === 1) throw new Error("payment service timed out");
          return "P-3";
        });
        return { ...reservation, payment };
      },
    },
  });
  const order = await enqueue(pool, "orders", { order: 42 }, { minRetryDelay: 0, backoffBase: 0, maxRetryCount: 3 });
  await worker.start();
  await until("the order done", async () => (await job(order.id)).status === "success");
  await worker.stop();
  const done = await job(order.id);
  assert.deepEqual({ ...done, error: undefined }, { status: "success", attempts: 2, result: { reservation: "R-1", payment: "P-3" }, error: undefined });
  assert.deepEqual(ran, { reserve: 1, charge: 2 });
});

test("sleep, an event waited and emitted, and await of a child job: a durable three-step worker", async () => {
  const calls = [];
  const worker = new Worker({
    connection: config, concurrency: 4, handleSignals: false, logger: recordingLogger(),
    handlers: {
      signup: async (j) => {
        calls.push(`attempt ${j.attempt}`);
        const user = await j.step("create user", () => { calls.push("create"); return { user: j.data.email }; });
        await j.sleep("cool down", 700);
        const { payload, timedOut } = await j.waitEvent("confirmed", `confirm:${user.user}`, "1 minute");
        const child = await j.spawn("welcome mail", "mail", { to: user.user });
        const mail = await j.awaitJob(child, { timeout: "1 minute" });
        return { user: user.user, confirmed: payload, timedOut, mail: mail.status, sent: mail.result };
      },
      mail: async (j) => ({ sentTo: j.data.to }),
    },
  });
  const signup = await enqueue(pool, "signup", { email: "a@example.com" }, { maxRetryCount: 0 });
  await worker.start();
  const t0 = Date.now();
  // Parked on the sleep, then on the event: queued, no worker slot held.
  await until("parked on the event", async () =>
    (await pool.query("SELECT count(*)::int AS n FROM job_waits WHERE job_id = $1 AND event = 'confirm:a@example.com'", [signup.id])).rows[0].n === 1);
  assert.ok(Date.now() - t0 >= 600, "the sleep did not last");
  assert.equal((await job(signup.id)).status, "queued");
  await sleep(300);
  assert.equal((await job(signup.id)).status, "queued", "ran on before the event");
  await emit(pool, "confirm:a@example.com", { at: "web" });
  await until("the signup done", async () => (await job(signup.id)).status === "success");
  await worker.stop();
  const done = await job(signup.id);
  assert.deepEqual(done.result, { user: "a@example.com", confirmed: { at: "web" }, timedOut: false, mail: "success", sent: { sentTo: "a@example.com" } });
  assert.equal(calls.filter((c) => c === "create").length, 1, "the step ran again");
  assert.ok(calls.filter((c) => c.startsWith("attempt")).length >= 3, `attempts: ${calls}`);
  assert.equal((await pool.query("SELECT count(*)::int AS n FROM jobs WHERE queue = 'mail'")).rows[0].n, 1, "one child, not one per attempt");
});

test("a wait for an event times out", async () => {
  const worker = new Worker({
    connection: config, concurrency: 1, handleSignals: false, logger: recordingLogger(),
    handlers: { lonely: async (j) => j.waitEvent("never", "nobody-emits", 300) },
  });
  const lonely = await enqueue(pool, "lonely", "x");
  await worker.start();
  await until("timed out", async () => (await job(lonely.id)).status === "success", 15_000);
  await worker.stop();
  assert.deepEqual((await job(lonely.id)).result, { payload: null, timedOut: true });
});

test("examples/durable.mjs, the README's durable worker, runs an order to its end and stops on SIGTERM", async () => {
  const { spawn } = await import("node:child_process");
  const { once } = await import("node:events");
  const order = await enqueue(pool, "orders", { order: 42 });
  const child = spawn(process.execPath, [new URL("../examples/durable.mjs", import.meta.url).pathname], {
    env: { ...process.env, PGHOST: config.host, PGPORT: String(config.port), PGUSER: config.user, PGDATABASE: config.database, ...(config.password ? { PGPASSWORD: config.password } : {}) },
    stdio: ["ignore", "inherit", "inherit"],
  });
  const exited = once(child, "exit");
  try {
    await until("parked on the payment", async () =>
      (await pool.query("SELECT count(*)::int AS n FROM job_waits WHERE job_id = $1", [order.id])).rows[0].n === 1, 20_000);
    await emit(pool, "paid:42", { amount: 120 });
    await until("the order done", async () => (await job(order.id)).status === "success", 10_000);
  } finally {
    child.kill("SIGTERM");
    await exited;
  }
  assert.deepEqual((await job(order.id)).result, { payment: "C-42-120", parcel: "P-42-R-42" });
});
