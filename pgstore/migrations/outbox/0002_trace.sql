-- The writer's W3C trace context (traceparent, tracestate) as a JSON
-- object, sent with the message; NULL when the event was written outside a
-- trace.
ALTER TABLE sqsonce_outbox ADD COLUMN trace jsonb;
