-- The queues a claim on any queue looks at (the queues part of
-- sql/claim.priorities_several.sql) when the jobs table lacks the index of
-- every queue's ready jobs, jobs_ready_idx (a table declared by 0.5.0 whose
-- update has not run; src/claim.rs QueueFilter::AnyQueueByQueue): those
-- with jobs in the ready index, found by skipping along it from queue to
-- queue, one probe per queue (and a last one that finds none, the NULL the
-- joins drop). A probe for every queue with jobs, ready or not: 0.6.0's
-- index makes the claim cost what the ready jobs cost.
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