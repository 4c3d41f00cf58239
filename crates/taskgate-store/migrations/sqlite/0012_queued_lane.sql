-- The dispatcher's poll (queued tasks by account and mode, taking turns) reads
-- this small index alone: without it SQLite took tasks_owner for the
-- partition's order and read every task's row to check its status, a scan
-- of the whole table each poll that also filled each read connection's page
-- cache (bench/RESULTS.md, issue 25's memory). Only queued tasks are in it;
-- status is in it so that SQLite reads the index alone (a covering index).
CREATE INDEX tasks_queued_lane ON tasks (account_id, mode, id, status) WHERE status = 'queued';
