-- rq_complete_batch where some queue keeps no history (sql/history.sql;
-- src/finish.rs runs it as the jobs table's owner, src/history.rs): the
-- jobs of such queues are deleted, and come back as they ended; the others,
-- and those whose end sets something off, are completed as in
-- sql/finish.complete_batch.sql. The two writes take disjoint rows.
-- Parameters as there, and $8 the queues without history.
WITH wanted AS (
    SELECT * FROM unnest($1::uuid[], $2::integer[], $4::integer[], $5::text[], $6::bigint[])
        AS w (id, token, taken_attempt, worker, taken_at)
), gone AS (
    DELETE FROM @jobs@ j USING wanted w
    WHERE j.id = w.id AND @was@
      AND j.queue = ANY ($8) AND NOT (@sets_off_condition@)
    RETURNING (pg_catalog.jsonb_populate_record(j, pg_catalog.jsonb_build_object(
        'status', 'success', 'finished_at', $3, 'lease_expires_at', NULL,
        'attempts', coalesce(w.taken_attempt, j.attempts),
        'claimed_by', CASE WHEN w.taken_attempt IS NULL THEN j.claimed_by ELSE w.worker END,
        'claimed_at', coalesce(w.taken_at, j.claimed_at)))).*, false AS sets_off
), kept AS (
    UPDATE @jobs@ j
    SET status = 'success', finished_at = $3, lease_expires_at = NULL@taken_set@
    FROM wanted w
    WHERE j.id = w.id
      AND @was@
      AND NOT (j.queue = ANY ($8) AND NOT (@sets_off_condition@))
    RETURNING j.*@sets_off@
)
SELECT * FROM (SELECT * FROM gone UNION ALL SELECT * FROM kept) d ORDER BY d.id
