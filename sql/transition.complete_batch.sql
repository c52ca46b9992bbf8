-- The statement rq_complete_batch (src/finish.rs) prepares once per backend;
-- not part of the install script.
--   $1 ids uuid[], $2 their fencing tokens integer[] (or null), $3 now (ms),
--   $4 $5 $6 for each id this transaction took (src/take.rs), its attempt,
--   worker and time (null for a claimed job), $7 the queue (on Citus)
--   @jobs@, @same_queue@, @sets_off@  as in sql/transition.complete.sql
--   @was@, @taken_set@  for claimed jobs alone, or for claimed and taken ones
--   @results@  with results ($9 jsonb[], paired with the ids), `, $9::jsonb[]`,
--           and @result_set@ `, result = w.result`; otherwise nothing
-- One UPDATE for every id (on Citus one per queue, each in its shard); the
-- rows come back in id order, each with whether its end sets something off.
WITH wanted AS (
    SELECT * FROM unnest($1::uuid[], $2::integer[], $4::integer[], $5::text[], $6::bigint[]@results@)
        AS w (id, token, taken_attempt, worker, taken_at@result_column@)
), done AS (
    UPDATE @jobs@ j
    SET status = 'success', finished_at = $3, lease_expires_at = NULL@taken_set@@result_set@
    FROM wanted w
    WHERE j.id = w.id @same_queue@
      AND @was@
    RETURNING j.*@sets_off@
)
SELECT * FROM done d ORDER BY d.id
