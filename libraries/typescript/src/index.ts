// raquel-pg: a worker library for raquel (the PostgreSQL job queue
// extension) over its SQL verbs, with node-postgres.
export { enqueue, enqueueBatch, emit, awaitResult, interval } from "./sql.js";
export type { Queryable, Duration, JobRow, EnqueueOptions, EnqueueBatchOptions } from "./sql.js";
export { Worker, Job, Parked, LeaseLost, defaultLogger } from "./worker.js";
export type { WorkerOptions, Handler, Logger } from "./worker.js";
