import assert from "node:assert/strict";
import { before, after, test } from "node:test";
import pg from "pg";
import { enqueue, enqueueBatch } from "../dist/index.js";
import { freshDatabase } from "./helpers.mjs";

let pool;
before(async () => {
  pool = new pg.Pool({ ...(await freshDatabase("enqueue")), max: 4 });
});
after(() => pool.end());

test("enqueue: one job with its options, JSON and text payloads", async () => {
  const job = await enqueue(pool, "mail", { to: "a@example.com" }, { priority: 5, delay: 60_000, maxRetryCount: 3, maxAge: "1 hour" });
  assert.equal(job.queue, "mail");
  assert.equal(job.status, "queued");
  assert.equal(job.priority, 5);
  assert.deepEqual(JSON.parse(job.payload), { to: "a@example.com" });
  const row = (await pool.query("SELECT max_retry_count, scheduled_at - rq_now_ms() AS due_in FROM jobs WHERE id = $1", [job.id])).rows[0];
  assert.equal(row.max_retry_count, 3);
  assert.ok(Number(row.due_in) > 55_000 && Number(row.due_in) <= 60_000, `due in ${row.due_in} ms`);
  const text = await enqueue(pool, "mail", "plain text");
  assert.equal(text.payload, "plain text");
  const bare = await enqueue(pool, "mail");
  assert.equal(bare.payload, null);
});

test("enqueue: a key deduplicates while the job is unfinished", async () => {
  const first = await enqueue(pool, "invoices", "send #7", { key: "invoice-7" });
  const again = await enqueue(pool, "invoices", "send #7 again", { key: "invoice-7" });
  assert.equal(again.id, first.id);
});

test("enqueue inside the caller's transaction: a rollback leaves no job, a commit one", async () => {
  const client = await pool.connect();
  try {
    await client.query("BEGIN");
    const job = await enqueue(client, "tx", "rolled back");
    assert.equal((await client.query("SELECT count(*)::int AS n FROM jobs WHERE id = $1", [job.id])).rows[0].n, 1);
    await client.query("ROLLBACK");
    assert.equal((await pool.query("SELECT count(*)::int AS n FROM jobs WHERE queue = 'tx'")).rows[0].n, 0);
    await client.query("BEGIN");
    await enqueue(client, "tx", "committed");
    // Not visible to another connection before the commit.
    assert.equal((await pool.query("SELECT count(*)::int AS n FROM jobs WHERE queue = 'tx'")).rows[0].n, 0);
    await client.query("COMMIT");
    assert.equal((await pool.query("SELECT count(*)::int AS n FROM jobs WHERE queue = 'tx'")).rows[0].n, 1);
  } finally {
    client.release();
  }
});

test("enqueueBatch: one job per payload, in order, with per-job keys", async () => {
  const jobs = await enqueueBatch(pool, "thumbs", [{ n: 1 }, { n: 2 }, { n: 3 }], { priority: 2, keys: ["a", "b", "a"] });
  assert.equal(jobs.length, 2, "a key repeated in the batch makes one job");
  assert.deepEqual(jobs.map((j) => JSON.parse(j.payload).n), [1, 2]);
  const again = await enqueueBatch(pool, "thumbs", [{ n: 4 }], { keys: ["b"] });
  assert.equal(again[0].id, jobs[1].id, "a key of an unfinished job returns that job");
  assert.ok(jobs.every((j) => j.priority === 2));
  const texts = await enqueueBatch(pool, "thumbs-text", ["a.png", "b.png"]);
  assert.deepEqual(texts.map((j) => j.payload), ["a.png", "b.png"]);
});

test("enqueue: a bad option is a clear error", async () => {
  await assert.rejects(enqueue(pool, "mail", "x", { delai: 5 }), /unknown enqueue option "delai"/);
  await assert.rejects(enqueue(pool, "mail", "x", { maxRetryCount: -1 }), (error) => error.code !== undefined);
});
