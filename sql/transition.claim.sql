-- What a claim does with the ready jobs it locked (a part of
-- sql/claim.ready.sql and sql/claim.ready_several.sql): each is claimed, an
-- attempt under a lease, and comes back as it now is.
--   $2 worker text, $3 now (ms), $4 lease (ms)
claimed AS (
UPDATE @jobs@ j
SET status = 'claimed', attempts = j.attempts + 1, claimed_by = $2,
    claimed_at = $3, lease_expires_at = $3 + $4, finished_at = NULL
FROM ready WHERE j.id = ready.id
RETURNING j.*
)
