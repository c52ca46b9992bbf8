-- What rq_take(complete => true) does with the ready jobs it locked (a part
-- of sql/claim.ready.sql and sql/claim.ready_several.sql): each is taken
-- and completed in this one write, an attempt that succeeded; this
-- transaction's commit is their completion, and its rollback leaves them
-- ready, as a DELETE … RETURNING queue does. Each row comes back with
-- whether its end sets something off (sql/transition.complete.sql).
--   $2 worker text, $3 now (ms)
claimed AS (
UPDATE @jobs@ j
SET status = 'success', attempts = j.attempts + 1, claimed_by = $2,
    claimed_at = $3, lease_expires_at = NULL, finished_at = $3
FROM ready WHERE j.id = ready.id
RETURNING j.*@sets_off@
)
