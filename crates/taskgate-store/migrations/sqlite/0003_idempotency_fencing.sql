-- Idempotency records are fenced: `owner` is the request that holds the key
-- now (a request that took over a stale key replaces it, and the one it
-- replaced can no longer complete or free the record); `task_id` is the task
-- the request created, stored as soon as it exists, so a retry after a lost
-- answer returns that task instead of making a second one.
ALTER TABLE idempotency_keys ADD COLUMN owner TEXT;
ALTER TABLE idempotency_keys ADD COLUMN task_id TEXT;
