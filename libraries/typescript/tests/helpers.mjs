// Shared by the tests: the server from RAQUEL_TEST_DSN (libpq key=value, as
// bin/test gives it), a fresh database per test file, and small waits.
import pg from "pg";

/** RAQUEL_TEST_DSN's key=value pairs as node-postgres's config (pg reads URLs only). */
export function serverConfig() {
  const dsn = process.env.RAQUEL_TEST_DSN;
  if (!dsn) throw new Error("RAQUEL_TEST_DSN is not set (e.g. 'host=/tmp/x port=25321 user=postgres')");
  const config = {};
  for (const match of dsn.matchAll(/(\w+)\s*=\s*('(?:[^'\\]|\\.)*'|\S+)/g)) {
    const value = match[2].startsWith("'") ? match[2].slice(1, -1).replace(/\\(.)/g, "$1") : match[2];
    const key = { dbname: "database", host: "host", port: "port", user: "user", password: "password" }[match[1]];
    if (key) config[key] = key === "port" ? Number(value) : value;
  }
  return config;
}

/** Drops and creates database rq_lib_ts_NAME with raquel in it; returns its config. */
export async function freshDatabase(name) {
  const database = `rq_lib_ts_${name}`;
  const admin = new pg.Client({ ...serverConfig(), database: "postgres" });
  await admin.connect();
  try {
    await admin.query(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`);
    await admin.query(`CREATE DATABASE ${database}`);
  } finally {
    await admin.end();
  }
  const config = { ...serverConfig(), database };
  const client = new pg.Client(config);
  await client.connect();
  await client.query("CREATE EXTENSION raquel");
  await client.end();
  return config;
}

export const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** Polls `check` every 50 ms until it returns a truthy value or `ms` pass (then throws `what`). */
export async function until(what, check, ms = 10000) {
  const end = Date.now() + ms;
  for (;;) {
    const value = await check();
    if (value) return value;
    if (Date.now() > end) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await sleep(50);
  }
}

/** A quiet logger that keeps what it was told, for assertions. */
export function recordingLogger() {
  const lines = [];
  const keep = (level) => (message, meta) => lines.push({ level, message, meta });
  return { lines, debug: keep("debug"), info: keep("info"), warn: keep("warn"), error: keep("error") };
}
