-- Every instance learns at once when a task ends, wherever it ran and
-- whoever ended it: a cancel reaches the instance running the task, and the
-- end reaches instances with a sync call or a stream waiting for it.
-- Delivered when the ending transaction commits. Payload:
-- "<id> <status> <account>" (the account: its cap of running tasks may have
-- room again).
CREATE FUNCTION taskgate_task_ended() RETURNS trigger AS $$
BEGIN
    PERFORM pg_notify('taskgate_task_ended', NEW.id || ' ' || NEW.status || ' ' || NEW.account_id);
    RETURN NULL;
END;
$$ LANGUAGE plpgsql;

CREATE TRIGGER tasks_ended AFTER INSERT OR UPDATE OF status ON tasks
    FOR EACH ROW
    WHEN (NEW.status IN ('succeeded', 'failed', 'cancelled'))
    EXECUTE FUNCTION taskgate_task_ended();
