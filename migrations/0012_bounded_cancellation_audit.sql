-- Issue #14: a clear or purge of a large queue records its exact count and at most the first
-- (smallest) 100 todo ids; `truncated` says the list is a sample.
ALTER TABLE queue_cancellations ADD COLUMN truncated boolean NOT NULL DEFAULT false;
