-- Results: a job completed with a result (rq_complete's `result`, and the
-- batch and one-call verbs' `results` / `result`) keeps it in the jobs
-- table's `result` column, written by the UPDATE that completes it. A job
-- completed with a result is kept for the retention even in a queue
-- without history, so that the result can be read. Whoever may read jobs
-- may read results.

-- Waits until job `id` has ended (success, exhausted, cancelled, expired)
-- or `timeout` passes, and returns its row as it then is: the caller reads
-- status, result and error. Woken at the commit that ends the job when a
-- verb of raquel's ends it (rq_complete, rq_fail, rq_cancel, the expire
-- duty, …); an end written by other SQL is seen within 5 seconds. NULL when
-- the job was deleted while it waited. Needs READ COMMITTED (each look has
-- a new snapshot). In C (src/results.rs).
CREATE FUNCTION rq_await(id uuid, timeout interval DEFAULT '30 seconds') RETURNS jobs
LANGUAGE c VOLATILE
SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'rq_await_c';
