-- The limits' state of a queue that keeps it in its queue_limits row ($1),
-- read after the row was locked (src/claim/flow_claim.rs): whether it is
-- paused, its limits, its rate's tokens, and which of the jobs it lists as
-- claimed under max_claimed still are.
--   @queue_limits@, @jobs@  the tables, schema-qualified
SELECT l.paused, l.max_claimed, l.rate, (extract(epoch FROM l.per) * 1000)::bigint,
       l.tokens, l.tokens_at,
       ARRAY(SELECT j.id FROM @jobs@ j WHERE j.id = ANY (l.claimed) AND j.status = 'claimed')
FROM @queue_limits@ l
WHERE l.queue = $1
