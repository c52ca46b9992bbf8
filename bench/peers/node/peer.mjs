// The peers-benchmark driver for the Node.js queues from npm.
//
//     PEER_URL=postgresql://postgres@127.0.0.1:54330/peer_x \
//         node bench/peers/node/peer.mjs SYSTEM COMMAND [OPTIONS]
//
// SYSTEM: graphile-worker or pg-boss, at the versions pinned in package.json
// (`npm ci --prefix bench/peers/node`), or raquel-pg-ts, raquel's
// TypeScript library from this repository (libraries/typescript, a file:
// dependency, its build committed; bench/run installs its pg). The protocol
// (commands, options, output) is bench/peers/README.md's. Each system is an
// object in SYSTEMS:
//   describe() -> {version, settings}; setup(); producer() -> {one(seq),
//   many(seqs), close()} on one connection; work(W, stats): starts the
//   system's own runtime, calling stats.start(seq) and stats.done() in the
//   handler, and resolves once it has started.

import { EventEmitter } from "node:events";
import fs from "node:fs";
import { parseArgs } from "node:util";

const URL_ = process.env.PEER_URL ?? "";
const QUEUE = "bench";
const FILL_CHUNK = 5000; // jobs per batch call in `fill`

const nowUs = () => Math.round((performance.timeOrigin + performance.now()) * 1000);
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
// Unbuffered writes (fd 1 and the trace's O_APPEND fd), so that nothing is
// lost to process.exit() and each trace line lands whole at once.
const say = (line) => fs.writeSync(1, line + "\n");
const versionOf = (pkg) =>
  JSON.parse(fs.readFileSync(new URL(`./node_modules/${pkg}/package.json`, import.meta.url))).version;
// Both libraries' docs: a pool of at least 10, or concurrency + 2 when larger.
const poolSize = (workers) => Math.max(10, workers + 2);
// Logs warnings and errors only: graphile-worker logs a line per completed job at info.
const quietLog = (level, message) => (level === "error" || level === "warning") && console.error(`[${level}] ${message}`);

// --- graphile-worker ---------------------------------------------------------

const graphileWorker = {
  describe: () => ({
    version: versionOf("graphile-worker"),
    settings:
      "run({taskList: {bench}, concurrency: W}): W concurrency slots in one process sharing one pg pool of " +
      "max(10, W+2) (its docs' advice); idle slots are woken by LISTEN \"jobs:insert\" (one dedicated connection) " +
      "and poll every 2 s (pollInterval, default); each slot fetches one job at a time (no localQueue, " +
      "which would lock more than W jobs); a finished job is DELETEd at once, one statement per job " +
      "(completeJobBatchDelay -1, default), the slot not waiting for it; jobs in no named queue (a named queue " +
      "runs its jobs one at a time); info logging off; " +
      `pg ${versionOf("pg")}`,
  }),

  async utils() {
    const { makeWorkerUtils, Logger } = await import("graphile-worker");
    return makeWorkerUtils({ connectionString: URL_, maxPoolSize: 1, logger: new Logger(() => quietLog) });
  },

  async setup() {
    const utils = await this.utils();
    await utils.migrate(); // its installer, as `graphile-worker --schema-only` runs
    await utils.release();
  },

  async producer() {
    const utils = await this.utils();
    await utils.withPgClient((client) => client.query("SELECT 1")); // connect before the clock starts
    return {
      one: (seq) => utils.addJob(QUEUE, { seq }),
      // addJobs: its batch call (marked experimental in its types), one statement per call.
      many: (seqs) => utils.addJobs(seqs.map((seq) => ({ identifier: QUEUE, payload: { seq } }))),
      close: () => utils.release(),
    };
  },

  async work(workers, stats) {
    const { run, Logger } = await import("graphile-worker");
    const events = new EventEmitter();
    // "pool:listen:success" is emitted just before its LISTEN query is sent on
    // that client; a query queued after it on the same client returns once
    // the LISTEN has run.
    const listening = new Promise((resolve) =>
      events.once("pool:listen:success", ({ client }) => setImmediate(() => client.query("SELECT 1").then(resolve))),
    );
    const runner = run({
      connectionString: URL_,
      concurrency: workers,
      maxPoolSize: poolSize(workers),
      noHandleSignals: true, // SIGTERM ends the process at once (main below)
      crontab: "",
      events,
      logger: new Logger(() => quietLog),
      taskList: {
        [QUEUE]: async (payload) => {
          stats.start(payload.seq);
          stats.done();
        },
      },
    });
    await Promise.all([runner, listening]);
  },
};

// --- pg-boss ---------------------------------------------------------------

// Polling floors and burst: see work() below.
const PGBOSS_WORK = { batchSize: 1, pollingIntervalSeconds: 0.5, notifyPollingIntervalSeconds: 0.5, burstWhenReadyExceeds: 1 };
const PGBOSS_STATS = { monitorIntervalSeconds: 1, superviseIntervalSeconds: 1, queueCacheIntervalSeconds: 1 };

const pgBoss = {
  describe: () => ({
    version: versionOf("pg-boss"),
    settings:
      "start() + work('bench', {localConcurrency: W, batchSize: 1}): W polling workers in one process sharing one " +
      "pg pool of max(10, W+2); useListenNotify: true with the queue created notify: true (NOTIFY wakes the " +
      "workers; one dedicated LISTEN connection); pollingIntervalSeconds and notifyPollingIntervalSeconds 0.5 " +
      "(its minimum; a worker waits that long after every fetch unless notified or bursting); " +
      "burstWhenReadyExceeds: 1 (fetch again at once while the cached ready count shows a backlog), that count " +
      "refreshed every 1 s (monitor-, supervise- and queueCacheIntervalSeconds at their minimum, 1); queue " +
      "policy standard; a finished job is UPDATEd to state completed (kept deleteAfterSeconds, 7 days, default), " +
      `awaited before the worker's next fetch; pg ${versionOf("pg")}`,
  }),

  async boss(options = {}) {
    const { PgBoss } = await import("pg-boss");
    const boss = new PgBoss({ connectionString: URL_, ...options });
    boss.on("error", (error) => console.error("pg-boss error:", error?.message ?? error));
    return boss;
  },

  async setup() {
    const boss = await this.boss();
    await boss.start(); // runs its migrator (migrate: true, default)
    await boss.createQueue(QUEUE, { notify: true });
    await boss.stop({ graceful: false });
  },

  async producer() {
    // A producer only: no maintenance or cron passes in this process.
    const boss = await this.boss({ max: 1, supervise: false, schedule: false });
    await boss.start();
    return {
      one: (seq) => boss.send(QUEUE, { seq }),
      many: (seqs) => boss.insert(QUEUE, seqs.map((seq) => ({ data: { seq } }))),
      close: () => boss.stop({ graceful: false }),
    };
  },

  async work(workers, stats) {
    const boss = await this.boss({ max: poolSize(workers), useListenNotify: true, ...PGBOSS_STATS });
    // Its monitor warns of the backlog on every pass during a drain; other warnings (say, LISTEN unavailable) show.
    boss.on("warning", (w) => w?.data?.queuedCount === undefined && console.error("pg-boss warning:", w?.message));
    await boss.start();
    // With batchSize 1 a worker sleeps its polling interval after each job
    // (burstWhenBatchFull needs batchSize > 1, which would hand a slot more
    // than one job); burstWhenReadyExceeds is its way to keep fetching
    // while there is a backlog.
    await boss.work(QUEUE, { localConcurrency: workers, ...PGBOSS_WORK }, async ([job]) => {
      stats.start(job.data.seq);
      stats.done();
    });
  },
};

// --- raquel-pg (raquel's TypeScript library, libraries/typescript) -------------

const raquelPg = {
  describe: () => ({
    version: versionOf("raquel-pg"),
    settings:
      "new Worker({handlers: {bench}, concurrency: W}): W concurrency slots in one process sharing one pg pool " +
      "of max(10, W+2); min(W, 2) connections claim (claimConnections, default), the slots split among them: " +
      "each a waiting claim (rq_complete_batch_and_claim, wait 1 s, the server's wait, no polling or LISTEN) of " +
      "as many jobs as its slots have free, the completions of its slots sent together with its next claim, " +
      "in one statement, waiting at most 10 ms (completionDelayMs, default) for the other slots; lease 60 s, " +
      "extended every 20 s while a job runs; a finished job is " +
      `UPDATEd to success (history kept); pg ${versionOf("pg")}`,
  }),

  async pool(max = 1) {
    const pg = (await import("pg")).default;
    return new pg.Pool({ connectionString: URL_, max });
  },

  async setup() {
    const pool = await this.pool();
    await pool.query("CREATE EXTENSION IF NOT EXISTS raquel");
    await pool.end();
  },

  async producer() {
    const { enqueue, enqueueBatch } = await import("raquel-pg");
    const pool = await this.pool();
    await pool.query("SELECT 1"); // connect before the clock starts
    return {
      one: (seq) => enqueue(pool, QUEUE, String(seq)),
      many: (seqs) => enqueueBatch(pool, QUEUE, seqs.map(String)),
      close: () => pool.end(),
    };
  },

  async work(workers, stats) {
    const { Worker } = await import("raquel-pg");
    const worker = new Worker({
      pool: await this.pool(poolSize(workers)),
      concurrency: workers,
      handleSignals: false, // SIGTERM ends the process at once (main below)
      handlers: {
        [QUEUE]: (job) => {
          stats.start(Number(job.payload));
          stats.done();
        },
      },
    });
    await worker.start();
  },
};

const SYSTEMS = { "graphile-worker": graphileWorker, "pg-boss": pgBoss, "raquel-pg-ts": raquelPg };

// --- the commands ------------------------------------------------------------

function makeStats(opts) {
  const trace = opts.trace ? fs.openSync(opts.trace, "a") : null; // O_APPEND
  const expect = opts.expect === undefined ? null : Number(opts.expect);
  let handled = 0, first = 0, last = 0;
  const report = () => {
    say(JSON.stringify({ jobs: handled, seconds: handled ? (last - first) / 1e6 : 0 }));
    process.exit(0);
  };
  return {
    start(seq) {
      const t = nowUs();
      if (trace !== null) fs.writeSync(trace, `${seq} ${t}\n`);
      if (!first) {
        first = t;
        if (expect !== null && opts["max-seconds"] !== undefined) setTimeout(report, Number(opts["max-seconds"]) * 1000);
      }
    },
    done() {
      handled++;
      last = nowUs();
      if (expect !== null && handled >= expect) report();
    },
  };
}

async function main() {
  const [systemName, command, ...rest] = process.argv.slice(2);
  const system = SYSTEMS[systemName];
  if (!system || !command) {
    console.error(`usage: peer.mjs {${Object.keys(SYSTEMS).join(",")}} COMMAND [OPTIONS]`);
    process.exit(2);
  }
  const { values: opts } = parseArgs({
    args: rest,
    options: Object.fromEntries(
      ["jobs", "batch", "rate", "seconds", "trace", "workers", "expect", "max-seconds"].map((k) => [k, { type: "string" }]),
    ),
  });
  const int = (k) => Number.parseInt(opts[k], 10);

  if (command === "describe") {
    say(JSON.stringify(system.describe()));
  } else if (command === "setup") {
    await system.setup();
  } else if (command === "enqueue") {
    const [jobs, batch] = [int("jobs"), int("batch")];
    const p = await system.producer();
    const t0 = performance.now();
    if (batch === 1) {
      for (let seq = 0; seq < jobs; seq++) await p.one(seq);
    } else {
      for (let seq = 0; seq < jobs; seq += batch) await p.many(range(seq, Math.min(jobs, seq + batch)));
    }
    const seconds = (performance.now() - t0) / 1000;
    await p.close();
    say(JSON.stringify({ jobs, seconds }));
  } else if (command === "fill") {
    const jobs = int("jobs");
    const p = await system.producer();
    for (let seq = 0; seq < jobs; seq += FILL_CHUNK) await p.many(range(seq, Math.min(jobs, seq + FILL_CHUNK)));
    await p.close();
    say(JSON.stringify({ jobs }));
  } else if (command === "produce") {
    const [rate, total] = [Number(opts.rate), Math.round(Number(opts.rate) * Number(opts.seconds))];
    const trace = fs.openSync(opts.trace, "a");
    const p = await system.producer();
    const t0 = performance.now();
    for (let seq = 0; seq < total; seq++) {
      const wait = t0 + (seq * 1000) / rate - performance.now();
      if (wait > 0) await sleep(wait); // at once when behind
      await p.one(seq);
      fs.writeSync(trace, `${seq} ${nowUs()}\n`);
    }
    await p.close();
    say(JSON.stringify({ jobs: total }));
  } else if (command === "work") {
    for (const signal of ["SIGTERM", "SIGINT"]) process.on(signal, () => process.exit(0));
    await system.work(int("workers"), makeStats(opts));
    say("ready"); // the runtime has started; the handlers keep the process alive
    return;
  } else {
    console.error(`unknown command ${command}`);
    process.exit(2);
  }
  process.exit(0); // the libraries' timers and pools must not keep a finished command alive
}

const range = (from, to) => Array.from({ length: to - from }, (_, i) => from + i);

main().catch((error) => {
  console.error(error?.stack ?? error);
  process.exit(1);
});
