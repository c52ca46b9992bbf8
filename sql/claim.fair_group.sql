-- A fair claim under group_max_claimed (src/fair.rs): the candidates $5,
-- one of each group, whose groups' locks this transaction holds, claimed
-- when still ready and due and when their group has fewer than $6 jobs
-- claimed. The statement starts after the locks were taken, so its
-- snapshot sees every claim of those groups that committed before
-- (a claim holds its group's lock until its transaction ends). The
-- candidates are grouped jobs; the statement does not say so, so that no
-- partial index of grouped jobs matches it and the plan finds the
-- candidates by their primary key rather than walking the queue's jobs.
--   $1 queue text, $2 worker text, $3 now (ms), $4 lease (ms),
--   $5 the candidates uuid[], $6 group_max_claimed integer
--   @jobs@     the jobs table, schema-qualified
--   (claimed)  sql/transition.claim.sql, written between at signs below
WITH ready AS (
    SELECT j.id FROM @jobs@ j
    WHERE j.id = ANY ($5) AND j.queue = $1 AND j.status IN ('queued', 'failed')
      AND j.scheduled_at <= $3 AND (j.max_age IS NULL OR j.scheduled_at + j.max_age > $3)
      AND (SELECT count(*) FROM @jobs@ c
           WHERE c.queue = $1 AND c.group_key IS NOT NULL AND c.group_key = j.group_key
             AND c.status = 'claimed') < $6
    FOR UPDATE SKIP LOCKED
), @claimed@
SELECT * FROM claimed c ORDER BY c.priority DESC, c.turn, c.scheduled_at, c.id
