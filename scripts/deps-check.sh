#!/usr/bin/env bash
# deps-check.sh: fail when a package links code it must not.
#
#   1. The HTTP and outbox side (idempotency and its stores, the outbox and
#      its stores, the producer) must not link the SQS consumer engine: the
#      consumer, heartbeat, sqslambda, redrive, and the internal packages
#      only they import (internal/heartbeat, internal/pipeline,
#      internal/settle, ...). An HTTP API server has no use for it.
#   2. A PostgreSQL-only application (the consumer, the neutral packages
#      and the PostgreSQL stores) must not link the DynamoDB SDK, and a
#      DynamoDB-only one must not link pgx.
#   3. What builds on the message model (package sqsmsg: the dedupe and
#      envelope middleware and the dedupe stores, redrive and its command
#      and console, the Lambda adapter) must not link package consumer.
#
# Each failure names the import chain that brings the package in, first
# importer first. Run by `make lint`.
#
# Environment: GO (default go).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
GO=${GO:-go}
module=$($GO list -m)

# The packages that must stay free of the engine.
no_engine=(./idempotency ./idempotency/idemdynamo ./idempotency/idempg ./outbox/... ./producer)
# The engine, by name; the internal packages that only these import are
# the engine too (found below).
engine_named=(consumer heartbeat sqslambda redrive internal/heartbeat internal/pipeline internal/settle)
# What a PostgreSQL-only application imports, and what it must not link.
pg_only=(./awsconfig ./consumer ./dedupe ./dedupe/dedupepg ./idempotency ./idempotency/idempg ./outbox ./outbox/outboxpg ./producer ./pgstore)
pg_forbidden='github.com/aws/aws-sdk-go-v2/service/dynamodb'
# What a DynamoDB-only application imports, and what it must not link.
ddb_only=(./consumer ./dedupe ./dedupe/dedupedynamo ./idempotency ./idempotency/idemdynamo ./outbox ./outbox/outboxdynamo ./producer)
ddb_forbidden='github.com/jackc/pgx'

failed=0

# graph prints "package imports..." for pkgs and everything they link.
graph() { $GO list -deps -f '{{.ImportPath}} {{join .Imports " "}}' "$@"; }

# chain prints the shortest import chain from the packages named by
# pattern to target, reading graph lines on stdin.
chain() {
	local roots=$1 target=$2
	awk -v roots="$roots" -v target="$target" '
		{ edges[$1] = $0 }
		END {
			n = split(roots, r, " ")
			head = 0; tail = 0
			for (i = 1; i <= n; i++) { q[tail++] = r[i]; seen[r[i]] = 1 }
			while (head < tail) {
				p = q[head++]
				if (p == target) break
				m = split(edges[p], e, " ")
				for (j = 2; j <= m; j++) if (!(e[j] in seen)) { seen[e[j]] = 1; from[e[j]] = p; q[tail++] = e[j] }
			}
			if (!(target in seen)) { print target; exit }
			path = target
			for (p = target; p in from; p = from[p]) path = from[p] " -> " path
			print path
		}'
}

# roots prints the import paths a pattern list names.
roots() { $GO list "$@" | tr '\n' ' '; }

# --- 1. no engine on the HTTP and outbox side.
all=$($GO list -f '{{.ImportPath}} {{join .Imports " "}}' ./...)
declare -A engine=()
for p in "${engine_named[@]}"; do engine["$module/$p"]=1; done
for p in $(printf '%s\n' "$all" | awk -v m="$module/consumer/" 'index($1, m) == 1 { print $1 }'); do engine["$p"]=1; done
# An internal package imported by the engine alone is the engine's.
while :; do
	grew=0
	for p in $(printf '%s\n' "$all" | awk -v m="$module/internal/" 'index($1, m) == 1 { print $1 }'); do
		[ -n "${engine[$p]:-}" ] && continue
		importers=$(printf '%s\n' "$all" | awk -v p="$p" '{ for (i = 2; i <= NF; i++) if ($i == p) { print $1; break } }')
		[ -z "$importers" ] && continue
		only=1
		for i in $importers; do [ -z "${engine[$i]:-}" ] && only=0 && break; done
		if [ $only = 1 ]; then engine["$p"]=1; grew=1; fi
	done
	[ $grew = 0 ] && break
done

g=$(graph "${no_engine[@]}")
bad=$(printf '%s\n' "$g" | awk '{ print $1 }' | while read -r p; do [ -n "${engine[$p]:-}" ] && echo "$p"; done || true)
if [ -n "$bad" ]; then
	failed=1
	echo "deps-check: the HTTP and outbox side links the SQS consumer engine:"
	r=$(roots "${no_engine[@]}")
	# Shortest chain first: the import to cut is on it.
	for p in $bad; do
		c=$(printf '%s\n' "$g" | chain "$r" "$p" | sed "s|$module/||g")
		echo "$(printf '%s' "$c" | grep -o -- '->' | wc -l) ${p#"$module"/}: $c"
	done | sort -n -k1,1 | sed 's/^[0-9]* /  /'
	echo "  (${no_engine[*]} must not import the consumer or its internals: move what they share to a leaf or internal package)"
fi

# --- 2. one backend's application does not link the other's driver.
forbid() {
	local what=$1 forbidden=$2; shift 2
	local g bad r
	g=$(graph "$@")
	bad=$(printf '%s\n' "$g" | awk -v f="$forbidden" 'index($1, f) == 1 { print $1 }')
	[ -z "$bad" ] && return 0
	failed=1
	echo "deps-check: a $what application links $forbidden:"
	r=$(roots "$@")
	# The first package of the driver each chain reaches is enough.
	# The driver's root package when linked, else its shortest name: one
	# chain is enough to show the import to cut.
	p=$(printf '%s\n' "$bad" | awk '{ print length($0), $0 }' | sort -n | head -1 | cut -d' ' -f2)
	echo "  $(printf '%s\n' "$g" | chain "$r" "$p" | sed "s|$module/||g")"
	echo "  ($* must not import it)"
}
forbid PostgreSQL-only "$pg_forbidden" "${pg_only[@]}"
forbid DynamoDB-only "$ddb_forbidden" "${ddb_only[@]}"

# --- 3. no long-poll consumer under what builds on the message model.
model_users=(./sqsmsg ./envelope ./dedupe/... ./redrive ./cmd/sqs-redrive ./console ./sqslambda)
forbid "middleware, redrive or Lambda" "$module/consumer" "${model_users[@]}"

if [ $failed = 0 ]; then
	echo "deps-check: ok (no consumer engine on the HTTP and outbox side; PostgreSQL-only links no DynamoDB SDK, DynamoDB-only no pgx; no consumer under the middleware, redrive and Lambda)"
fi
exit $failed
