// A raquel worker in Node.js (node-postgres), through plain SQL.
//
// Works one job at a time from a queue, one round trip a job: each
// transaction does the job in hand's work, then completes it (or fails it)
// and claims the next in one call (rq_complete_and_claim), so work done in
// the database commits exactly once, with its completion. When the queue is
// empty the claim waits (no polling) until an enqueue commits or a
// scheduled job falls due.
//
//     PGHOST=/tmp/raquel-dev PGPORT=54320 PGUSER=postgres PGDATABASE=raquel \
//         node examples/node/worker.mjs emails
//
// The connection comes from libpq's environment variables (PGHOST, PGPORT,
// PGUSER, PGDATABASE, PGPASSWORD), which node-postgres reads.
// Options: --worker NAME (claimed_by), --idle-exit SECONDS (stop after that
// long without work; default: run forever).
import { parseArgs } from "node:util";
import pg from "pg";

// The job's work. Here: refuse payloads that say so, accept the rest.
async function handle(client, payload) {
  if (payload === "fail") throw new Error("this payload always fails");
}

const CLAIM = "SELECT id, attempts, payload FROM rq_complete_and_claim(NULL, NULL, ARRAY[$1], $2, wait => '1 second')";
const COMPLETE_AND_CLAIM = "SELECT id, attempts, payload FROM rq_complete_and_claim($1, $2, ARRAY[$3], $4, wait => '1 second')";
const FAIL_AND_CLAIM = "SELECT id, attempts, payload FROM rq_fail_and_claim($1, $2, $3, $4, ARRAY[$5], $6, wait => '1 second')";

async function main() {
  const { values, positionals } = parseArgs({
    allowPositionals: true,
    options: { worker: { type: "string", default: `node-${process.pid}` }, "idle-exit": { type: "string" } },
  });
  const [queue] = positionals;
  if (!queue) throw new Error("usage: node worker.mjs QUEUE [--worker NAME] [--idle-exit SECONDS]");
  const worker = values.worker;
  const idleExit = values["idle-exit"] === undefined ? null : Number(values["idle-exit"]) * 1000;

  const client = new pg.Client();
  await client.connect();
  let idleSince = Date.now();
  let job = null; // the job in hand: { id, attempts, payload }
  try {
    for (;;) {
      // One transaction, one round trip a job: the work of the job in hand,
      // then its completion (or failure) and the claim of the next.
      await client.query("BEGIN");
      try {
        if (job === null) {
          job = (await client.query(CLAIM, [queue, worker])).rows[0] ?? null;
        } else {
          let failure = null;
          await client.query("SAVEPOINT work"); // the work's writes go if it fails
          try {
            await handle(client, job.payload);
            await client.query("RELEASE SAVEPOINT work");
          } catch (error) {
            await client.query("ROLLBACK TO SAVEPOINT work");
            failure = error;
          }
          const next = failure === null
            ? await client.query(COMPLETE_AND_CLAIM, [job.id, job.attempts, queue, worker])
            : await client.query(FAIL_AND_CLAIM, [job.id, job.attempts, failure.message, failure.stack ?? null, queue, worker]);
          job = next.rows[0] ?? null;
        }
        await client.query("COMMIT");
      } catch (error) {
        await client.query("ROLLBACK");
        throw error;
      }
      if (job !== null) {
        idleSince = Date.now();
      } else if (idleExit !== null && Date.now() - idleSince >= idleExit) {
        return;
      }
    }
  } finally {
    await client.end();
  }
}

await main();
