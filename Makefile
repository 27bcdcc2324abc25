# sqsonce — `make help` lists the targets.
SHELL := /bin/bash
GO ?= go
STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2
TAGS := integration
STACK := localstack/stack.sh
WITH_STACK := bash localstack/with-stack.sh
TEST_TIMEOUT ?= 15m

.PHONY: help build test test-unit lint stack-up stack-down demo bench

help: ## list the targets
	@grep -E '^[a-zA-Z_-]+:.*?## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*?## "}; {printf "  %-18s %s\n", $$1, $$2}'

build: ## build every package, command and example
	$(GO) build ./...

test: ## unit + integration tests against the local stack (starts it if needed, stops what it started)
	$(WITH_STACK) $(GO) test -race -count=1 -timeout $(TEST_TIMEOUT) ./...

test-unit: ## unit tests only, no stack (integration tests skip)
	env -u AWS_ENDPOINT_URL_SQS -u AWS_ENDPOINT_URL_DYNAMODB -u SQSONCE_INTEGRATION $(GO) test -race -count=1 ./...

lint: ## go vet (every build tag) and staticcheck
	$(GO) vet ./...
	$(GO) vet -tags '$(TAGS)' ./...
	$(GO) run $(STATICCHECK) ./...

stack-up: ## install (once) and start the no-Docker local stack; writes .stack/env
	bash $(STACK) up

stack-down: ## stop the local stack
	bash $(STACK) down

demo: ## the exactly-once ledger demo on the local stack (the stack stays up; `make stack-down` stops it)
	bash $(STACK) up
	. "$$(bash $(STACK) env)" && $(GO) run ./localstack/setup && bash examples/ledger/demo.sh

bench: ## print the benchmark table (placeholder until the benchmark suite lands)
	@echo "bench: no benchmarks yet"
