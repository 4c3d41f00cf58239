-- Times are Unix milliseconds; JSON documents are TEXT; money is integer micro-USD.
CREATE TABLE accounts (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    plan TEXT NOT NULL,
    status TEXT NOT NULL,
    monthly_spend_limit_micros INTEGER,
    created_at INTEGER NOT NULL
);

CREATE TABLE api_keys (
    id TEXT PRIMARY KEY,
    account_id TEXT NOT NULL REFERENCES accounts(id),
    name TEXT NOT NULL,
    key_type TEXT NOT NULL,
    mode TEXT NOT NULL,
    scopes TEXT NOT NULL,
    allowed_apis TEXT,
    key_hash TEXT NOT NULL UNIQUE,
    hint TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    expires_at INTEGER,
    last_used_at INTEGER,
    revoked_at INTEGER
);
CREATE INDEX api_keys_account ON api_keys (account_id, id);

CREATE TABLE tasks (
    id TEXT PRIMARY KEY,
    account_id TEXT NOT NULL,
    mode TEXT NOT NULL,
    api TEXT NOT NULL,
    status TEXT NOT NULL,
    input TEXT NOT NULL,
    output TEXT,
    error TEXT,
    units INTEGER NOT NULL DEFAULT 0,
    input_tokens INTEGER,
    output_tokens INTEGER,
    cost_micros INTEGER NOT NULL DEFAULT 0,
    metadata TEXT NOT NULL,
    key_id TEXT NOT NULL,
    idempotency_key TEXT,
    timeout_ms INTEGER NOT NULL,
    sandbox TEXT,
    events TEXT NOT NULL,
    attempts TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    started_at INTEGER,
    completed_at INTEGER,
    runner TEXT,
    lease_until INTEGER
);
-- Keyset pagination: ids are time-sortable, so (account, mode, id) serves every page.
CREATE INDEX tasks_owner ON tasks (account_id, mode, id);
-- The dispatcher and the lease sweeper only look at unfinished tasks.
CREATE INDEX tasks_unfinished ON tasks (status, id) WHERE status IN ('queued', 'running');

CREATE TABLE idempotency_keys (
    account_id TEXT NOT NULL,
    mode TEXT NOT NULL,
    idem_key TEXT NOT NULL,
    request_hash TEXT NOT NULL,
    status_code INTEGER,
    response TEXT,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (account_id, mode, idem_key)
);

CREATE TABLE account_spend (
    account_id TEXT NOT NULL,
    month TEXT NOT NULL,
    micros INTEGER NOT NULL,
    PRIMARY KEY (account_id, month)
);
