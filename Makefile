# sqsonce — `make help` lists the targets.
SHELL := /bin/bash
.SHELLFLAGS := -eo pipefail -c
GO ?= go
STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2
STACK := localstack/stack.sh
WITH_STACK := bash localstack/with-stack.sh
TEST_TIMEOUT ?= 15m

# An execution count, not a duration: a duration's deadline can race the fuzz
# workers' shutdown in go1.26 and fail a target with a bare "context deadline
# exceeded" and no input (golang/go#75804).
FUZZTIME ?= 100000x

.PHONY: help build test test-unit test-reliability fuzz lint tidy-check bench-once stack-up stack-down demo bench

help: ## list the targets
	@grep -E '^[a-zA-Z_-]+:.*?## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*?## "}; {printf "  %-18s %s\n", $$1, $$2}'

build: ## build every package, command and example
	$(GO) build ./...

test: ## unit + integration tests against the local stack (starts it if needed, stops what it started)
	$(WITH_STACK) $(GO) test -race -count=1 -timeout $(TEST_TIMEOUT) ./...

test-unit: ## unit tests only, no stack (integration tests skip)
	env -u AWS_ENDPOINT_URL_SQS -u AWS_ENDPOINT_URL_DYNAMODB -u SQSONCE_INTEGRATION $(GO) test -race -count=1 ./...

test-reliability: ## the full reliability suite (ten scenarios at full size, the crash, fault, relay, external-effects and outage ones on DynamoDB and on PostgreSQL) with a summary per scenario
	mkdir -p .stack
	$(WITH_STACK) env SQSONCE_RELIABILITY=full $(GO) test -count=1 -timeout 60m -v -run . ./reliability/ 2>&1 | tee .stack/reliability.log | grep -E '^(RELIABILITY|--- |PASS|FAIL|ok)'

fuzz: ## run every fuzz target for FUZZTIME (100000x: executions) each, with go test's output; a failing input is printed
	@set -e; stamp=$$(mktemp); trap 'rm -f "$$stamp"' EXIT; failed=; \
	for dir in $$($(GO) list -f '{{.Dir}}' ./...); do pkg=.$${dir#$$PWD}; \
		for f in $$(cat "$$dir"/*_test.go 2>/dev/null | sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*/\1/p'); do \
			echo "== fuzz $$f in $$pkg"; touch "$$stamp"; \
			if ! $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) "$$pkg"; then \
				failed="$$failed $$f"; \
				for c in $$(find "$$dir/testdata/fuzz/$$f" -type f -newer "$$stamp" 2>/dev/null); do \
					echo "== failing input of $$f ($$c):"; cat "$$c"; echo; \
				done; \
			fi; \
		done; \
	done; \
	if [ -n "$$failed" ]; then echo "fuzz: failed:$$failed"; exit 1; fi

lint: ## go vet for Linux, macOS and Windows, staticcheck, the import boundaries (scripts/deps-check.sh), and the API compared with the last release tag
	GOOS=linux $(GO) vet ./...
	GOOS=darwin $(GO) vet ./...
	GOOS=windows $(GO) vet ./...
	$(GO) run $(STATICCHECK) ./...
	GO=$(GO) bash scripts/deps-check.sh
	GO=$(GO) bash scripts/api-check.sh

tidy-check: ## fail when `go mod tidy` would change go.mod or go.sum (prints the diff)
	$(GO) mod tidy -diff

bench-once: ## run every testing.B benchmark once (-benchtime=1x) so none rots (starts the stack if needed)
	$(WITH_STACK) $(GO) test -count=1 -run '^$$' -bench . -benchtime=1x ./...

stack-up: ## install (once) and start the no-Docker local stack; writes .stack/env
	bash $(STACK) up

stack-down: ## stop the local stack
	bash $(STACK) down

demo: ## the exactly-once ledger demo on the local stack, ending with the web console's URL (the stack and the console stay up; `make stack-down` stops them)
	bash $(STACK) up
	. "$$(bash $(STACK) env)" && $(GO) run ./localstack/setup && bash examples/ledger/demo.sh

bench: ## the benchmark table: sqsonce next to the plain SDK loops on the same servers; writes docs/bench.md and docs/bench.svg (starts the stack if needed)
	$(WITH_STACK) $(GO) run ./bench -md docs/bench.md -svg docs/bench.svg
	$(WITH_STACK) $(GO) test -run '^$$' -bench . -benchmem ./consumer/ ./dedupe/
