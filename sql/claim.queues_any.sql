-- The queues a claim on any queue looks at (the queues part of
-- sql/claim.priorities_several.sql): those with jobs in the ready index,
-- found by skipping along it from queue to queue, one probe per queue
-- (and a last one that finds none, the NULL the joins drop). There is no
-- index of every queue's ready jobs in claim order: every job would pay
-- for its entry at enqueue (an index entry, about 110 bytes of WAL and
-- 24,000 instructions, bench/costs and bench/instructions) for claims
-- that name no queue, which instead cost a probe per queue with jobs.
    (SELECT j.queue AS name FROM @jobs@ j
     WHERE j.status IN ('queued', 'failed') @ungrouped@
     ORDER BY j.queue
     LIMIT 1)
    UNION ALL
    SELECT (SELECT j.queue FROM @jobs@ j
            WHERE j.status IN ('queued', 'failed') @ungrouped@ AND j.queue > q.name
            ORDER BY j.queue
            LIMIT 1)
    FROM queues q
    WHERE q.name IS NOT NULL