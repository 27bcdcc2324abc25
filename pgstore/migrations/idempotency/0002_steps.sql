-- The handler's steps (package step): what each recorded, kept across a
-- takeover and a release; unknown_step names a step of unknown outcome,
-- for an operator's listing (Store.Unknown).
ALTER TABLE sqsonce_idempotency
    ADD COLUMN steps        jsonb,  -- step name -> {status, result, reason, at, resolved}; NULL: none
    ADD COLUMN unknown_step text;   -- a step whose outcome is unknown; NULL: none

CREATE INDEX sqsonce_idempotency_unknown_step ON sqsonce_idempotency (key) WHERE unknown_step IS NOT NULL;
