-- A plan's max_running_tasks holds in the store, as on PostgreSQL: a task starts only
-- while its account has fewer running tasks than the cap, counted here.
CREATE INDEX tasks_running_account ON tasks (account_id) WHERE status = 'running';
