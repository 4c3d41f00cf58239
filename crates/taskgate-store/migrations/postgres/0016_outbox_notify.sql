-- Every instance's webhook sender learns at once that deliveries were
-- written, by any instance, instead of at its next poll (up to 2 s when
-- idle; issue 30). Delivered when the writing transaction commits; one
-- notification a transaction, however many deliveries it wrote (PostgreSQL
-- folds identical ones). A row trigger: a statement that writes no delivery
-- (a task's end with no webhook wanting it) costs nothing more.
CREATE FUNCTION taskgate_deliveries_written() RETURNS trigger AS $$
BEGIN
    PERFORM pg_notify('taskgate_deliveries_written', '');
    RETURN NULL;
END;
$$ LANGUAGE plpgsql;

CREATE TRIGGER webhook_deliveries_written AFTER INSERT ON webhook_deliveries
    FOR EACH ROW EXECUTE FUNCTION taskgate_deliveries_written();
