-- Test mode has a cap of running tasks of its own: the running tasks are counted per
-- account and mode. The per-account partial index gives way to one per account and
-- mode (as small: only running tasks are in it).
DROP INDEX IF EXISTS tasks_running_account;
CREATE INDEX tasks_running_lane ON tasks (account_id, mode) WHERE status = 'running';
-- Ended test tasks are deleted after test_task_retention_days: found by this index
-- without reading the live tasks kept meanwhile (only test tasks are in it).
CREATE INDEX tasks_test ON tasks (id) WHERE mode = 'test';
