#!/usr/bin/env bash
# The sqsonce demo, run by `make demo` on the local stack (or on whatever the
# standard AWS SDK variables point at): a fresh ledger gets 10,000 credits
# with duplicates and malformed messages; two workers consume them, one is
# killed with SIGKILL mid-way and restarted; at the end every distinct credit
# must have been applied exactly once and the DLQ must hold exactly the
# malformed messages.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
bin=$root/bin
N=${DEMO_CREDITS:-10000}
name=${DEMO_LEDGER:-demo-$(date +%Y%m%d-%H%M%S)}
logs=$root/.stack/demo-$name
mkdir -p "$bin" "$logs"

step() { printf '\n== %s\n' "$*"; }
field() { sed -n "s/.*\"$1\":\([-0-9]*\).*/\1/p"; }

step "build"
(cd "$root" && go build -o "$bin/ledger" ./examples/ledger && go build -o "$bin/sqs-redrive" ./cmd/sqs-redrive)
ledger() { "$bin/ledger" -queue "$name" "$@"; }

step "ledger setup (queue $name)"
ledger setup

step "ledger send -n $N -accounts 50 -dup-rate 0.1 -bad-rate 0.01"
sent=$(ledger send -n "$N" -accounts 50 -dup-rate 0.1 -bad-rate 0.01 -json)
distinct=$(field distinct <<<"$sent")
expected=$(field total <<<"$sent")
malformed=$(field malformed <<<"$sent")
messages=$(field messages <<<"$sent")
echo "sent $messages messages: $distinct distinct credits totalling $expected, $(field duplicates <<<"$sent") duplicates (same id, separate message), $malformed malformed"

workers=()
start_worker() {
	"$bin/ledger" -queue "$name" work -concurrency 32 -visibility 10s -log-level info >>"$logs/worker-$1.log" 2>&1 &
	workers[$1]=$!
	echo "worker $1 started (pid ${workers[$1]}, log $logs/worker-$1.log)"
}
cleanup() {
	for pid in "${workers[@]}"; do kill "$pid" 2>/dev/null || true; done
}
trap cleanup EXIT

step "two workers side by side"
start_worker 1
start_worker 2
# Kill worker 1 once about a third of the messages are done.
until st=$(ledger status -json) && [ "$(field visible <<<"$st")" -lt $((messages * 2 / 3)) ]; do sleep 0.5; done
step "SIGKILL worker 1 mid-way, then start it again"
kill -9 "${workers[1]}"
wait "${workers[1]}" 2>/dev/null || true
echo "worker 1 killed; its in-flight messages reappear after their visibility timeout"
ledger status
start_worker 1

step "wait for the queue to drain"
deadline=$((SECONDS + 600))
while :; do
	st=$(ledger status -json)
	if grep -q '"queue_drained":true' <<<"$st"; then break; fi
	if [ $SECONDS -gt $deadline ]; then echo "the queue did not drain within 10 minutes: $st"; break; fi
	sleep 2
done
ledger status

step "SIGTERM both workers (graceful drain)"
for i in 1 2; do kill -TERM "${workers[$i]}" 2>/dev/null || true; done
for i in 1 2; do
	if wait "${workers[$i]}"; then echo "worker $i drained and exited 0"; else echo "worker $i exited with status $?"; fi
done
workers=()

step "results"
total=$(ledger balances -json | field total)
dlq=$(ledger status -json | field dlq_visible)
audit=$(ledger audit -json)
twice=$(field applied_twice <<<"$audit")
journal=$(field credits <<<"$audit")
printf 'credits sent (distinct):  %s\n' "$distinct"
printf 'total expected:           %s\n' "$expected"
printf 'total in DynamoDB:        %s\n' "$total"
printf 'credits in the journal:   %s (applied more than once: %s)\n' "$journal" "$twice"
printf 'malformed messages sent:  %s\n' "$malformed"
printf 'messages in the DLQ:      %s\n' "$dlq"

step "sqs-redrive peek $name-dlq -n 5"
"$bin/sqs-redrive" peek "$name-dlq" -n 5 || true

echo
if [ "$dlq" -gt "$malformed" ]; then
	echo "note: a worker killed between a DLQ send and its delete leaves a second copy in the DLQ ($dlq > $malformed); each copy carries the same sqsonce-id"
fi
if [ "$total" = "$expected" ] && [ "$journal" = "$distinct" ] && [ "$twice" = 0 ] && [ "$dlq" -ge "$malformed" ]; then
	echo "PASS: every distinct credit applied exactly once ($distinct credits, total $total; $dlq malformed in the DLQ)"
else
	echo "FAIL: every distinct credit applied exactly once: expected total $expected, got $total; journal $journal of $distinct, $twice applied twice; DLQ holds $dlq, expected at least $malformed"
	exit 1
fi
echo "The stack stays up: source .stack/env to explore (ledger: $bin/ledger -queue $name ...); make stack-down stops it."
