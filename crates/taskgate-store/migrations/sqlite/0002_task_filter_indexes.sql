-- GET /tasks filtered by api or by status stays an index range scan, however
-- rare the matching tasks are among the account's history.
CREATE INDEX tasks_owner_api ON tasks (account_id, mode, api, id);
CREATE INDEX tasks_owner_status ON tasks (account_id, mode, status, id);
