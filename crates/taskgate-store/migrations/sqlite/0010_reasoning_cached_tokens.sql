-- Two more counts of a task's usage, NULL where the provider does not report
-- them: the part of output_tokens spent reasoning, and the part of
-- input_tokens read from the provider's prompt cache (billed at the API's
-- cached input price). input_tokens stays the whole input.
ALTER TABLE tasks ADD COLUMN reasoning_tokens INTEGER;
ALTER TABLE tasks ADD COLUMN cached_input_tokens INTEGER;
