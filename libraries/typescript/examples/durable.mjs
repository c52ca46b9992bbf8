// A durable three-step worker with a sleep and an event, on raquel-pg.
//
//     npm install ./libraries/typescript          (from the repository's root)
//     PGHOST=/tmp/raquel-dev PGPORT=54320 PGUSER=postgres PGDATABASE=raquel node durable.mjs
//
// Enqueue an order: SELECT rq_enqueue('orders', '{"order": 42}'::jsonb);
// then pay it: SELECT rq_emit('paid:42', '{"amount": 120}');
// Each step runs once across the job's attempts (its writes on `db` commit
// with it); the sleep and the wait end the attempt, and the job comes back
// when it is due, with no worker slot held meanwhile. SIGTERM stops it
// gracefully.
import { Worker } from "raquel-pg";

// Stand-ins for your own work.
const reserve = async (db, order) => (await db.query("SELECT $1::text AS r", [`R-${order}`])).rows[0].r;
const charge = async (order, amount) => `C-${order}-${amount}`;
const ship = async (order, reservation) => `P-${order}-${reservation}`;

const handlers = {
  orders: async (job) => {
    const { order } = job.data;
    const reservation = await job.step("reserve", (db) => reserve(db, order));
    await job.sleep("cool down", "2 seconds");
    const paid = await job.waitEvent("paid", `paid:${order}`, "1 day");
    if (paid.timedOut) throw new Error(`order ${order} was never paid`);
    const payment = await job.step("charge", () => charge(order, paid.payload.amount));
    const parcel = await job.step("ship", () => ship(order, reservation));
    return { payment, parcel };
  },
};

await new Worker({ handlers, concurrency: 10 }).run();
