-- The operator's ceiling on an account's monthly spend limit (micro-USD; NULL:
-- none). The owner's own limit may be set at most this high; the limit that
-- holds is the lower of the two, or the ceiling alone when the owner set none.
ALTER TABLE accounts ADD COLUMN max_monthly_spend_limit_micros BIGINT;
