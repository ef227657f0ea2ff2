-- Purging a queue identity (deleting it with all its todos) is recorded beside remove and clear.
ALTER TABLE queue_cancellations DROP CONSTRAINT queue_cancellations_action_check;
ALTER TABLE queue_cancellations ADD CONSTRAINT queue_cancellations_action_check
    CHECK (action IN ('remove', 'clear', 'purge'));
