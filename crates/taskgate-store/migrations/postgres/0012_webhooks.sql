-- Webhooks (issue 28). Event sets are bits (task.running 1, task.succeeded 2,
-- task.failed 4, task.cancelled 8, webhook.test 16); secrets are stored as
-- their text (whsec_…), since they sign again.

-- Full-access keys hold every scope, the two new ones included.
UPDATE api_keys SET scopes = '["apis:read","tasks:read","tasks:write","webhooks:read","webhooks:write"]'
WHERE key_type IN ('live', 'test');

-- An account's endpoints of one mode. disabled: NULL while enabled, else why
-- ('owner', 'gone': the receiver answered 410, 'failing': every attempt
-- failed for webhooks.disable_after).
CREATE TABLE webhook_endpoints (
    id TEXT PRIMARY KEY,
    account_id TEXT NOT NULL,
    mode TEXT NOT NULL,
    url TEXT NOT NULL,
    events BIGINT NOT NULL,
    description TEXT,
    disabled TEXT,
    secret TEXT NOT NULL,
    previous_secret TEXT,
    previous_until BIGINT,
    failing_since BIGINT,
    created_at BIGINT NOT NULL
);
-- Pages of an account's endpoints, and the probe a task's end makes.
CREATE INDEX webhook_endpoints_owner ON webhook_endpoints (account_id, mode, id);

-- The secret that signs an account's per-call webhooks of one mode.
CREATE TABLE webhook_signing_secrets (
    account_id TEXT NOT NULL,
    mode TEXT NOT NULL,
    secret TEXT NOT NULL,
    previous_secret TEXT,
    previous_until BIGINT,
    created_at BIGINT NOT NULL,
    PRIMARY KEY (account_id, mode)
);

-- A call's own webhook (POST /call's "webhook"), written before its task.
CREATE TABLE task_webhooks (
    task_id TEXT PRIMARY KEY,
    account_id TEXT NOT NULL,
    mode TEXT NOT NULL,
    url TEXT NOT NULL,
    events BIGINT NOT NULL,
    created_at BIGINT NOT NULL
);

-- The outbox: one row per event and endpoint (or call's webhook), written in
-- the commit of the task's change. next_attempt_at is NULL once nothing more
-- is to be sent; a sender holds a row it sends until lease_until.
CREATE TABLE webhook_deliveries (
    seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    account_id TEXT NOT NULL,
    mode TEXT NOT NULL,
    event_type TEXT NOT NULL,
    task_id TEXT,
    endpoint_id TEXT,
    url TEXT,
    status TEXT NOT NULL,
    attempts TEXT NOT NULL,
    payload TEXT,
    next_attempt_at BIGINT,
    runner TEXT,
    lease_until BIGINT,
    created_at BIGINT NOT NULL
);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at)
    WHERE next_attempt_at IS NOT NULL;
CREATE INDEX webhook_deliveries_owner ON webhook_deliveries (account_id, mode, seq);
CREATE INDEX webhook_deliveries_endpoint ON webhook_deliveries (endpoint_id, seq);
CREATE INDEX webhook_deliveries_task ON webhook_deliveries (task_id);

-- The event types, for the statement that writes an event's deliveries.
CREATE TABLE webhook_event_types (
    bit BIGINT PRIMARY KEY,
    name TEXT NOT NULL
);
INSERT INTO webhook_event_types (bit, name) VALUES
    (1, 'task.running'), (2, 'task.succeeded'), (4, 'task.failed'), (8, 'task.cancelled'),
    (16, 'webhook.test');
