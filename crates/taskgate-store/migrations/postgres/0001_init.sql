-- Times are Unix milliseconds; JSON documents are TEXT; money is integer micro-USD.
CREATE TABLE accounts (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    plan TEXT NOT NULL,
    status TEXT NOT NULL,
    monthly_spend_limit_micros BIGINT,
    created_at BIGINT NOT NULL
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
    created_at BIGINT NOT NULL,
    expires_at BIGINT,
    last_used_at BIGINT,
    revoked_at BIGINT
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
    units BIGINT NOT NULL DEFAULT 0,
    input_tokens BIGINT,
    output_tokens BIGINT,
    cost_micros BIGINT NOT NULL DEFAULT 0,
    metadata TEXT NOT NULL,
    key_id TEXT NOT NULL,
    idempotency_key TEXT,
    timeout_ms BIGINT NOT NULL,
    sandbox TEXT,
    events TEXT NOT NULL,
    attempts TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    started_at BIGINT,
    completed_at BIGINT,
    runner TEXT,
    lease_until BIGINT
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
    status_code BIGINT,
    response TEXT,
    created_at BIGINT NOT NULL,
    PRIMARY KEY (account_id, mode, idem_key)
);

CREATE TABLE account_spend (
    account_id TEXT NOT NULL,
    month TEXT NOT NULL,
    micros BIGINT NOT NULL,
    PRIMARY KEY (account_id, month)
);
