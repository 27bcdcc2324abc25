#!/usr/bin/env bash
# The sqsonce demo, run by `make demo` on the local stack (or on whatever the
# standard AWS SDK variables point at): a fresh ledger gets 10,000 credits
# with duplicates and malformed messages sent to its queue, and clients POST
# more credits through two API servers (`ledger serve`) with retries of the
# same Idempotency-Keys, which a relay publishes from the outbox; two workers
# consume everything, charging each credit at a toy bank (`ledger bank`)
# before applying it; the bank is down 10 s in every 30 (503 with
# Retry-After: the workers pause instead of burning receives) and drops 1%
# of its answers after charging. One worker, one server and the relay are
# killed with SIGKILL mid-way and restarted. At the end every distinct
# credit (message id or API key) must have been charged exactly once and
# applied exactly once, the credits sent due a minute later at or after
# their time, and the DLQ must hold exactly the malformed messages. It
# ends by starting the web console on the ledger's queues, outbox and
# Idempotency-Keys, left running with the stack (`make stack-down` stops
# both), and prints its URL last.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
bin=$root/bin
N=${DEMO_CREDITS:-10000}
API=${DEMO_API_CREDITS:-1000}
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

LARGE=${DEMO_LARGE_CREDITS:-20}
step "ledger send -n $LARGE -memo-bytes 2097152 (2 MiB credits, through S3) and -n $LARGE -memo-bytes 10240 -compress"
large=$(ledger send -n "$LARGE" -accounts 50 -memo-bytes 2097152 -json)
packed=$(ledger send -n "$LARGE" -accounts 50 -memo-bytes 10240 -compress -json)
distinct=$((distinct + $(field distinct <<<"$large") + $(field distinct <<<"$packed")))
expected=$((expected + $(field total <<<"$large") + $(field total <<<"$packed")))
echo "sent $(field distinct <<<"$large") credits of 2 MiB (bodies in S3, pointers in SQS) and $(field distinct <<<"$packed") compressed ones"

DELAYED=${DEMO_DELAYED_CREDITS:-20}
step "ledger send -n $DELAYED -not-before 1m -hop 20s (credits due in a minute: SQS delays them 20 s, the workers hold them the rest of the way)"
later=$(ledger send -n "$DELAYED" -accounts 50 -not-before 1m -hop 20s -json)
distinct=$((distinct + $(field distinct <<<"$later")))
expected=$((expected + $(field total <<<"$later")))
echo "sent $(field distinct <<<"$later") credits due at $(sed -n 's/.*"not_before":"\([^"]*\)".*/\1/p' <<<"$later")"

workers=()
servers=()
bank=
start_bank() {
	"$bin/ledger" bank -addr 127.0.0.1:0 -outage-every 30s -outage-for 10s -drop-rate 0.01 >"$logs/bank.out" 2>>"$logs/bank.log" &
	bank=$!
	until grep -q '^listening on ' "$logs/bank.out" 2>/dev/null; do
		kill -0 "$bank" 2>/dev/null || { echo "bank exited: $(tail -3 "$logs/bank.log")"; exit 1; }
		sleep 0.1
	done
	bank_url=$(sed -n 's/^listening on //p' "$logs/bank.out")
	echo "bank listening on $bank_url (pid $bank): down 10 s in every 30 s from now, 1% of its answers dropped after charging"
}
start_server() {
	"$bin/ledger" -queue "$name" serve -addr 127.0.0.1:0 -handler-delay 10ms >"$logs/serve-$1.out" 2>>"$logs/serve-$1.log" &
	servers[$1]=$!
	until grep -q '^listening on ' "$logs/serve-$1.out" 2>/dev/null; do
		kill -0 "${servers[$1]}" 2>/dev/null || { echo "serve $1 exited: $(tail -3 "$logs/serve-$1.log")"; exit 1; }
		sleep 0.1
	done
	urls[$1]=$(sed -n 's/^listening on //p' "$logs/serve-$1.out")
	echo "API server $1 listening on ${urls[$1]} (pid ${servers[$1]})"
}
start_relay() {
	"$bin/ledger" -queue "$name" relay >>"$logs/relay.log" 2>&1 &
	relay=$!
	echo "relay started (pid $relay)"
}
start_worker() {
	"$bin/ledger" -queue "$name" work -concurrency 32 -visibility 10s -log-level info -bank "$bank_url" >>"$logs/worker-$1.log" 2>&1 &
	workers[$1]=$!
	echo "worker $1 started (pid ${workers[$1]}, log $logs/worker-$1.log)"
}
relay=
poster=
cleanup() {
	for pid in "${workers[@]}" "${servers[@]}" $relay $poster $bank; do kill "$pid" 2>/dev/null || true; done
}
trap cleanup EXIT

step "two API servers and a relay; clients POST $API credits with retries of the same keys"
urls=()
start_server 1
start_server 2
start_relay
ledger post -servers "${urls[1]},${urls[2]}" -n "$API" -accounts 50 -concurrency 16 -json >"$logs/post.json" 2>"$logs/post.log" &
poster=$!

step "the bank, and two workers side by side charging each credit there"
start_bank
start_worker 1
start_worker 2
# Kill worker 1 once about a third of the messages are done.
until st=$(ledger status -json) && [ "$(field visible <<<"$st")" -lt $((messages * 2 / 3)) ]; do sleep 0.5; done
step "SIGKILL worker 1, API server 1 and the relay mid-way, then start them again"
kill -9 "${workers[1]}" "${servers[1]}" "$relay"
wait "${workers[1]}" "${servers[1]}" "$relay" 2>/dev/null || true
echo "killed; the worker's in-flight messages reappear after their visibility timeout, the clients retry their keys on the other server"
ledger status
start_worker 1
start_server 1
start_relay

step "wait for the clients"
if ! wait "$poster"; then echo "ledger post failed: $(cat "$logs/post.log")"; exit 1; fi
poster=
posted=$(cat "$logs/post.json")
echo "keys sent $(field keys <<<"$posted"), 201s (distinct credits) $(field created <<<"$posted"), replays $(field replays <<<"$posted"), 409s $(field conflict <<<"$posted"), 422s $(field reused <<<"$posted"), 400s $(field invalid <<<"$posted"), dropped connections $(field dropped <<<"$posted")"
distinct=$((distinct + $(field created <<<"$posted")))
expected=$((expected + $(field total <<<"$posted")))
until [ "$(ledger outbox -json | field pending)" = 0 ]; do sleep 0.5; done
echo "the outbox is empty: every accepted credit is on the queue"

step "wait for the queue to drain"
deadline=$((SECONDS + 600))
while :; do
	st=$(ledger status -json)
	if grep -q '"queue_drained":true' <<<"$st"; then break; fi
	if [ $SECONDS -gt $deadline ]; then echo "the queue did not drain within 10 minutes: $st"; break; fi
	sleep 2
done
ledger status

step "SIGTERM the workers, the servers and the relay (graceful drain)"
for pid in "${workers[@]}" "${servers[@]}" "$relay"; do kill -TERM "$pid" 2>/dev/null || true; done
for i in 1 2; do
	if wait "${workers[$i]}"; then echo "worker $i drained and exited 0"; else echo "worker $i exited with status $?"; fi
	if wait "${servers[$i]}"; then echo "API server $i exited 0"; else echo "API server $i exited with status $?"; fi
done
if wait "$relay"; then echo "relay exited 0"; else echo "relay exited with status $?"; fi
workers=()
servers=()
relay=

step "the bank"
stats=$(curl -fsS "$bank_url/stats")
charges=$(field charges <<<"$stats")
refs=$(field refs <<<"$stats")
dups=$(field duplicates <<<"$stats")
charged_total=$(curl -fsS "$bank_url/charges" | sed -n 's/.*"amount":\([-0-9]*\).*/\1/p' | awk '{s += $1} END {print s + 0}')
unavailable=$(sed -n 's/.*"POST 503":\([0-9]*\).*/\1/p' <<<"$stats")
dropped=$(sed -n 's/.*"POST dropped":\([0-9]*\).*/\1/p' <<<"$stats")
pauses=$(cat "$logs"/worker-*.log | grep -c '"msg":"consumer: paused' || true)
resumes=$(cat "$logs"/worker-*.log | grep -c '"msg":"consumer: resumed' || true)
echo "the bank answered ${unavailable:-0} charges 503 (its outages) and dropped ${dropped:-0} answers after charging;"
echo "the workers paused $pauses times and resumed $resumes times (one probe each pause);"
echo "each dropped answer left its charge's outcome unknown until a worker asked the bank (GET /charges/ID) instead of charging again"
kill -TERM "$bank" 2>/dev/null || true
wait "$bank" 2>/dev/null || true
bank=

step "results"
total=$(ledger balances -json | field total)
dlq=$(ledger status -json | field dlq_visible)
audit=$(ledger audit -json)
twice=$(field applied_twice <<<"$audit")
journal=$(field credits <<<"$audit")
delayed=$(field delayed <<<"$audit")
early=$(field early <<<"$audit")
printf 'API keys sent:            %s (201s: %s, replays: %s, 409s: %s, 422s: %s)\n' "$(field keys <<<"$posted")" "$(field created <<<"$posted")" "$(field replays <<<"$posted")" "$(field conflict <<<"$posted")" "$(field reused <<<"$posted")"
printf 'credits sent (distinct):  %s (queue and API)\n' "$distinct"
printf 'total expected:           %s\n' "$expected"
printf 'total in DynamoDB:        %s\n' "$total"
printf 'credits in the journal:   %s (applied more than once: %s)\n' "$journal" "$twice"
printf 'charges at the bank:      %s (distinct credits: %s, charged more than once: %s, total %s)\n' "$charges" "$refs" "$dups" "$charged_total"
printf 'delayed credits applied:  %s of %s (before their time: %s)\n' "$delayed" "$DELAYED" "$early"
printf 'malformed messages sent:  %s\n' "$malformed"
printf 'messages in the DLQ:      %s\n' "$dlq"

step "sqs-redrive peek $name-dlq -n 5"
"$bin/sqs-redrive" peek "$name-dlq" -n 5 || true

echo
if [ "$dlq" -gt "$malformed" ]; then
	echo "note: a worker killed between a DLQ send and its delete leaves a second copy in the DLQ ($dlq > $malformed); each copy carries the same sqsonce-id"
fi
if [ "$total" = "$expected" ] && [ "$journal" = "$distinct" ] && [ "$twice" = 0 ] && [ "$dlq" -ge "$malformed" ] &&
	[ "$charges" = "$distinct" ] && [ "$refs" = "$distinct" ] && [ "$dups" = 0 ] && [ "$charged_total" = "$expected" ] &&
	[ "$delayed" = "$DELAYED" ] && [ "$early" = 0 ]; then
	echo "PASS: every distinct credit charged exactly once and applied exactly once ($distinct credits, total $total; $dlq malformed in the DLQ; the $delayed delayed ones at or after their time)"
else
	echo "FAIL: every distinct credit charged exactly once and applied exactly once: expected total $expected, got $total; journal $journal of $distinct, $twice applied twice; bank: $charges charges of $refs credits ($dups twice), total $charged_total; DLQ holds $dlq, expected at least $malformed; delayed credits applied $delayed of $DELAYED, $early before their time"
	exit 1
fi
echo "The stack stays up: source .stack/env to explore (ledger: $bin/ledger -queue $name ...); make stack-down stops it."

step "the web console (runs with the stack; make stack-down stops it)"
url=$(bash "$root/localstack/stack.sh" console "$bin/sqs-redrive" ui -queue-prefix "$name" \
	-outbox-table "$name-outbox" -keys-table "$name-idempotency" -keys-namespace "$name")
echo "$url"
