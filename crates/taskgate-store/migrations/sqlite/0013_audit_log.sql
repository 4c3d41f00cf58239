-- The audit log (issue 29): every change to accounts, keys, users, sign-ins
-- and webhooks, one row each, appended in the transaction of the change.
-- seq is the chain's order; hash seals each event to the one before it (see
-- taskgate-core's audit.rs for the canonical JSON the hash covers).
CREATE TABLE audit_events (
    seq INTEGER PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    at INTEGER NOT NULL,
    account_id TEXT,
    actor_type TEXT NOT NULL,
    actor_id TEXT NOT NULL,
    actor_email TEXT,
    action TEXT NOT NULL,
    target_type TEXT NOT NULL,
    target_id TEXT NOT NULL,
    changes TEXT NOT NULL,
    ip TEXT,
    user_agent TEXT,
    hash TEXT NOT NULL
);
-- An account's events, newest first (the dashboard's Audit log of an owner).
CREATE INDEX audit_events_account ON audit_events (account_id, seq);

-- The chain's head, one row: the last sequence number given and the last
-- event's hash. Every append updates it first in its transaction, which
-- serialises appends (PostgreSQL's row lock; SQLite has one writer), so the
-- chain is linear. The checkpoint is what retention deleted last: the
-- sequence number and hash of the newest event deleted, where verification
-- starts from (64 zeros and 0 while nothing was deleted).
CREATE TABLE audit_head (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    seq INTEGER NOT NULL,
    hash TEXT NOT NULL,
    checkpoint_seq INTEGER NOT NULL,
    checkpoint_hash TEXT NOT NULL,
    checkpoint_at INTEGER
);
INSERT INTO audit_head (id, seq, hash, checkpoint_seq, checkpoint_hash) VALUES
    (1, 0, '0000000000000000000000000000000000000000000000000000000000000000', 0,
     '0000000000000000000000000000000000000000000000000000000000000000');
