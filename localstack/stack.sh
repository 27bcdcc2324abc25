#!/usr/bin/env bash
# The no-Docker local AWS stack: fauxqs (SQS), DynamoDB Local (DynamoDB) and
# local-aws-sqs (the SQS message-move-task API that fauxqs lacks).
#
#   stack.sh install   download the emulators into the cache (once)
#   stack.sh up        install if needed, start all three on free loopback
#                      ports, wait until each answers, write the env file
#   stack.sh down      stop what `up` started, by PID
#   stack.sh status    exit 0 when every server answers
#   stack.sh env       print the path of the env file
#
# The env file (.stack/env, to be sourced) holds the standard SDK variables:
# AWS_ENDPOINT_URL_SQS, AWS_ENDPOINT_URL_DYNAMODB, AWS_REGION and static test
# credentials, plus SQSONCE_MOVE_TASK_ENDPOINT for local-aws-sqs.
set -euo pipefail

FAUXQS_VERSION=1.9.2
DDB_SIM_VERSION=2.9.30 # amplify-dynamodb-simulator: ships DynamoDB Local 1.25.1
LOCAL_AWS_SQS_VERSION=2.0.2

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cache=${SQSONCE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/sqsonce}
state=${SQSONCE_STACK_DIR:-$root/.stack}
envfile=$state/env

say() { printf 'stack: %s\n' "$*" >&2; }
die() { say "error: $*"; exit 1; }

need_tools() {
	command -v node >/dev/null || die "node is missing: install Node.js 20+ (Debian: apt-get install nodejs)"
	command -v npm >/dev/null || die "npm is missing: install npm (Debian: apt-get install npm)"
	if ! command -v java >/dev/null; then
		if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
			say "java is missing: installing openjdk-17-jre-headless"
			apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openjdk-17-jre-headless >/dev/null ||
				die "could not install java: install openjdk-17-jre-headless (Java 17+) by hand"
		else
			die "java is missing: install Java 17+ (Debian: apt-get install openjdk-17-jre-headless)"
		fi
	fi
}

install() {
	need_tools
	mkdir -p "$cache"
	if [ ! -f "$cache/fauxqs-$FAUXQS_VERSION/node_modules/fauxqs/dist/cli.js" ]; then
		say "installing fauxqs@$FAUXQS_VERSION"
		rm -rf "$cache/fauxqs-$FAUXQS_VERSION.tmp"
		npm install --silent --no-audit --no-fund --no-save --prefix "$cache/fauxqs-$FAUXQS_VERSION.tmp" \
			"fauxqs@$FAUXQS_VERSION" >/dev/null 2>&1 || die "npm install fauxqs@$FAUXQS_VERSION failed"
		rm -rf "$cache/fauxqs-$FAUXQS_VERSION" && mv "$cache/fauxqs-$FAUXQS_VERSION.tmp" "$cache/fauxqs-$FAUXQS_VERSION"
	fi
	if [ ! -f "$cache/local-aws-sqs-$LOCAL_AWS_SQS_VERSION/node_modules/local-aws-sqs/dist/index.js" ]; then
		say "installing local-aws-sqs@$LOCAL_AWS_SQS_VERSION"
		rm -rf "$cache/local-aws-sqs-$LOCAL_AWS_SQS_VERSION.tmp"
		npm install --silent --no-audit --no-fund --no-save --prefix "$cache/local-aws-sqs-$LOCAL_AWS_SQS_VERSION.tmp" \
			"local-aws-sqs@$LOCAL_AWS_SQS_VERSION" >/dev/null 2>&1 || die "npm install local-aws-sqs@$LOCAL_AWS_SQS_VERSION failed"
		rm -rf "$cache/local-aws-sqs-$LOCAL_AWS_SQS_VERSION" && mv "$cache/local-aws-sqs-$LOCAL_AWS_SQS_VERSION.tmp" "$cache/local-aws-sqs-$LOCAL_AWS_SQS_VERSION"
	fi
	local ddb=$cache/dynamodb-local-$DDB_SIM_VERSION
	if [ ! -f "$ddb/DynamoDBLocal.jar" ]; then
		say "installing DynamoDB Local (from amplify-dynamodb-simulator@$DDB_SIM_VERSION)"
		local tmp
		tmp=$(mktemp -d)
		(cd "$tmp" && npm pack --silent "amplify-dynamodb-simulator@$DDB_SIM_VERSION" >/dev/null 2>&1) ||
			{ rm -rf "$tmp"; die "npm pack amplify-dynamodb-simulator@$DDB_SIM_VERSION failed"; }
		tar -xzf "$tmp"/amplify-dynamodb-simulator-*.tgz -C "$tmp" package/emulator
		rm -rf "$ddb" && mv "$tmp/package/emulator" "$ddb"
		rm -rf "$tmp"
	fi
}

free_port() {
	node -e 'const s=require("net").createServer();s.listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})'
}

# alive NAME: the PID in $state/NAME.pid runs and is the server we started.
alive() {
	local f=$state/$1.pid pid
	[ -f "$f" ] || return 1
	pid=$(cat "$f")
	[ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || return 1
	grep -qa "$2" "/proc/$pid/cmdline" 2>/dev/null
}

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

wait_port() {
	local name=$1 port=$2 pid=$3 i
	for i in $(seq 1 300); do
		port_open "$port" && return 0
		kill -0 "$pid" 2>/dev/null || { tail -20 "$state/$name.log" >&2; die "$name exited during start-up (log: $state/$name.log)"; }
		sleep 0.1
	done
	die "$name did not answer on 127.0.0.1:$port within 30s (log: $state/$name.log)"
}

# spawn NAME DIR CMD...: start CMD in its own session, detached from the caller.
spawn() {
	local name=$1 dir=$2
	shift 2
	(cd "$dir" && exec setsid "$@" >"$state/$name.log" 2>&1 </dev/null) &
	echo $! >"$state/$name.pid"
}

up() {
	mkdir -p "$state"
	if alive fauxqs fauxqs && alive dynamodb DynamoDBLocal && alive movetask local-aws-sqs && [ -f "$envfile" ]; then
		say "already running ($envfile)"
		return 0
	fi
	down quiet
	install
	local sqs_port ddb_port mt_port
	sqs_port=${SQSONCE_SQS_PORT:-$(free_port)}
	ddb_port=${SQSONCE_DYNAMODB_PORT:-$(free_port)}
	mt_port=${SQSONCE_MOVE_TASK_PORT:-$(free_port)}

	FAUXQS_PORT=$sqs_port FAUXQS_LOGGER=false FAUXQS_DEFAULT_REGION=us-east-1 \
		spawn fauxqs "$state" node "$cache/fauxqs-$FAUXQS_VERSION/node_modules/fauxqs/dist/cli.js"
	spawn dynamodb "$cache/dynamodb-local-$DDB_SIM_VERSION" java -Xmx1g \
		-Djava.library.path=DynamoDBLocal_lib -jar DynamoDBLocal.jar -inMemory -port "$ddb_port"
	LOCAL_AWS_SQS_MAIN=$cache/local-aws-sqs-$LOCAL_AWS_SQS_VERSION/node_modules/local-aws-sqs/dist/index.js \
		spawn movetask "$state" node "$root/localstack/local-aws-sqs.cjs" "$mt_port"

	wait_port fauxqs "$sqs_port" "$(cat "$state/fauxqs.pid")"
	wait_port dynamodb "$ddb_port" "$(cat "$state/dynamodb.pid")"
	wait_port movetask "$mt_port" "$(cat "$state/movetask.pid")"

	cat >"$envfile" <<ENV
# Written by localstack/stack.sh up; source it. Static test credentials only.
export AWS_ENDPOINT_URL_SQS=http://127.0.0.1:$sqs_port
export AWS_ENDPOINT_URL_DYNAMODB=http://127.0.0.1:$ddb_port
export AWS_REGION=us-east-1
export AWS_ACCESS_KEY_ID=test
export AWS_SECRET_ACCESS_KEY=test
unset AWS_SESSION_TOKEN AWS_PROFILE
export SQSONCE_MOVE_TASK_ENDPOINT=http://127.0.0.1:$mt_port
ENV
	say "up: SQS 127.0.0.1:$sqs_port, DynamoDB 127.0.0.1:$ddb_port, move tasks 127.0.0.1:$mt_port"
	say "env file: $envfile"
}

stop_one() {
	local name=$1 f=$state/$1.pid pid i
	[ -f "$f" ] || return 0
	pid=$(cat "$f")
	if [ -n "$pid" ] && alive "$name" "$2"; then
		kill "$pid" 2>/dev/null || true
		for i in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
		kill -9 "$pid" 2>/dev/null || true
	fi
	rm -f "$f"
}

down() {
	stop_one fauxqs fauxqs
	stop_one dynamodb DynamoDBLocal
	stop_one movetask local-aws-sqs
	rm -f "$envfile"
	[ "${1:-}" = quiet ] || say "down"
}

status() {
	[ -f "$envfile" ] || { say "not running"; return 1; }
	local ok=0
	alive fauxqs fauxqs || { say "fauxqs is not running"; ok=1; }
	alive dynamodb DynamoDBLocal || { say "DynamoDB Local is not running"; ok=1; }
	alive movetask local-aws-sqs || { say "local-aws-sqs is not running"; ok=1; }
	[ $ok = 0 ] && say "running ($envfile)"
	return $ok
}

case "${1:-}" in
install) install ;;
up) up ;;
down) down ;;
status) status ;;
env) echo "$envfile" ;;
*) echo "usage: $0 install|up|down|status|env" >&2; exit 2 ;;
esac
