-- What rq_take(complete => true) does with the ready jobs it locked when
-- some queue keeps no history (sql/history.sql; a part of
-- sql/claim.ready.sql and sql/claim.ready_several.sql): a job of such a
-- queue is deleted in this one write, and comes back as it ended; any other
-- job, or one whose end sets something off, is completed as in
-- sql/transition.take_complete.sql. The two writes take disjoint rows.
--   $2 worker text, $3 now (ms), $5 the queues without history text[]
gone AS (
    DELETE FROM @jobs@ j USING ready
    WHERE j.id = ready.id AND j.queue = ANY ($5) AND NOT (@sets_off_condition@)
    RETURNING j AS job
), kept AS (
    UPDATE @jobs@ j
    SET status = 'success', attempts = j.attempts + 1, claimed_by = $2,
        claimed_at = $3, lease_expires_at = NULL, finished_at = $3
    FROM ready WHERE j.id = ready.id AND NOT (j.queue = ANY ($5) AND NOT (@sets_off_condition@))
    RETURNING j.*@sets_off@
), claimed AS (
    -- the deleted row as it ended, made once per row in FROM: as
    -- (f(…)).* in a RETURNING list, the function ran once per column
    SELECT ended.*, false AS sets_off
    FROM gone, LATERAL pg_catalog.jsonb_populate_record(gone.job, pg_catalog.jsonb_build_object(
        'status', 'success', 'attempts', (gone.job).attempts + 1, 'claimed_by', $2, 'claimed_at', $3,
        'lease_expires_at', NULL, 'finished_at', $3)) ended
    UNION ALL SELECT * FROM kept
)
