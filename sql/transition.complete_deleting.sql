-- rq_complete where some queue keeps no history (sql/history.sql; src/finish.rs
-- runs it as the jobs table's owner, src/history.rs): a job of such a
-- queue is deleted, and comes back as it ended; any other job, or one whose
-- end sets something off, is completed as in sql/transition.complete.sql. The
-- two writes take disjoint rows, and the same conditions (@was@) as that
-- statement. Parameters as there, and $10 the queues without history.
-- @kept_rows_gone@: on a 0.5.0 table, CTEs that delete the steps and parents
-- (sql/steps.sql, sql/workflows.sql) of the deleted job, as the prune duty
-- does; otherwise nothing.
WITH gone AS (
    DELETE FROM @jobs@ j
    WHERE j.id = $1 AND @was@
      AND j.queue = ANY ($10) AND NOT (@sets_off_condition@)
    RETURNING pg_catalog.jsonb_populate_record(j, pg_catalog.jsonb_build_object(
        'status', 'success', 'finished_at', $3, 'lease_expires_at', NULL@taken_json@)),
        j.queue, coalesce($6, j.claimed_at) AS claimed_at, false AS sets_off
)@kept_rows_gone@, kept AS (
    UPDATE @jobs@ j
    SET status = 'success', finished_at = $3, lease_expires_at = NULL@taken_set@
    WHERE j.id = $1
      AND @was@
      AND NOT (j.queue = ANY ($10) AND NOT (@sets_off_condition@))
    RETURNING j, j.queue, j.claimed_at@sets_off@
)
SELECT * FROM gone UNION ALL SELECT * FROM kept
