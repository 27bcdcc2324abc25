-- The time before which the event must not be handled (outbox.Event's
-- NotBefore), sent with the message for the consumer to hold it; NULL
-- when the event may be handled at once.
ALTER TABLE sqsonce_outbox ADD COLUMN not_before timestamptz;
