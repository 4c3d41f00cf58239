-- Requests per account, key and minute, as the dashboard's Usage shows them:
-- accepted requests and those refused by the rate limits (429). Counted in
-- memory and added here in batches, never written per request.
CREATE TABLE request_counts (
    account_id TEXT NOT NULL,
    key_id TEXT NOT NULL,
    mode TEXT NOT NULL,
    minute INTEGER NOT NULL,
    requests INTEGER NOT NULL DEFAULT 0,
    limited INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (account_id, minute, key_id)
);
