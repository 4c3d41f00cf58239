-- Spend reservations: a live call reserves its estimated cost when it is
-- accepted (account_spend.reserved, checked against the limit in the same
-- statement), and its task remembers how much (tasks.reserved_micros) so
-- that its end settles the reservation to the real cost.
ALTER TABLE account_spend ADD COLUMN reserved BIGINT NOT NULL DEFAULT 0;
ALTER TABLE tasks ADD COLUMN reserved_micros BIGINT NOT NULL DEFAULT 0;
