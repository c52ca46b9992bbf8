-- rq_complete_batch where some queue keeps no history (sql/history.sql;
-- src/finish.rs runs it as the jobs table's owner, src/history.rs): the
-- jobs of such queues are deleted, and come back as they ended; the others,
-- and those whose end sets something off, are completed as in
-- sql/transition.complete_batch.sql. The two writes take disjoint rows.
-- Parameters as there, and $8 the queues without history.
-- @kept_rows_gone@: on a 0.5.0 table, CTEs that delete the steps and parents
-- (sql/steps.sql, sql/workflows.sql) of the deleted jobs, as the prune duty
-- does; otherwise nothing.
WITH wanted AS (
    SELECT * FROM unnest($1::uuid[], $2::integer[], $4::integer[], $5::text[], $6::bigint[])
        AS w (id, token, taken_attempt, worker, taken_at)
), gone AS (
    DELETE FROM @jobs@ j USING wanted w
    WHERE j.id = w.id AND @was@
      AND j.queue = ANY ($8) AND NOT (@sets_off_condition@)
    RETURNING j AS job, w.taken_attempt, w.worker, w.taken_at
)@kept_rows_gone@, kept AS (
    UPDATE @jobs@ j
    SET status = 'success', finished_at = $3, lease_expires_at = NULL@taken_set@
    FROM wanted w
    WHERE j.id = w.id
      AND @was@
      AND NOT (j.queue = ANY ($8) AND NOT (@sets_off_condition@))
    RETURNING j.*@sets_off@
), ended AS (
    -- each deleted row as it ended, made once per row in FROM (as
    -- (f(…)).* in a RETURNING list, the function ran once per column)
    SELECT e.*, false AS sets_off
    FROM gone g, LATERAL pg_catalog.jsonb_populate_record(g.job, pg_catalog.jsonb_build_object(
        'status', 'success', 'finished_at', $3, 'lease_expires_at', NULL,
        'attempts', coalesce(g.taken_attempt, (g.job).attempts),
        'claimed_by', CASE WHEN g.taken_attempt IS NULL THEN (g.job).claimed_by ELSE g.worker END,
        'claimed_at', coalesce(g.taken_at, (g.job).claimed_at))) e
)
SELECT * FROM (SELECT * FROM ended UNION ALL SELECT * FROM kept) d ORDER BY d.id
