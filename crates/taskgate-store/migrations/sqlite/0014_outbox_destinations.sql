-- The outbox's claim takes each destination's next due deliveries from the
-- first index, and counts each destination's deliveries being sent in the
-- second (only held ones are in it), so a claim's work follows the
-- destinations and what it takes, not the backlog (bench/RESULTS.md, issue
-- 30). A destination is an endpoint, or a call's own URL.
CREATE INDEX webhook_deliveries_destination
    ON webhook_deliveries (COALESCE(endpoint_id, url), next_attempt_at)
    WHERE next_attempt_at IS NOT NULL;
CREATE INDEX webhook_deliveries_held
    ON webhook_deliveries (COALESCE(endpoint_id, url), lease_until)
    WHERE lease_until IS NOT NULL;
-- What the claim read before: every due delivery, in time order.
DROP INDEX webhook_deliveries_due;
