#!/usr/bin/env bash
# The no-Docker local AWS stack: fauxqs (SQS), DynamoDB Local (DynamoDB),
# local-aws-sqs (the SQS message-move-task API that fauxqs lacks) and
# PostgreSQL 15 (localstack/postgres.sh; Debian's postgresql-15).
#
#   stack.sh install   download the emulators into the cache (once); an
#                      interrupted download is redone on the next run
#   stack.sh up        install if needed, start all three on free ports, wait
#                      until each answers from the process this script
#                      started, write the env file; a port that another
#                      process takes first is replaced by another free port.
#                      Prints `started`, or `running` when it already was
#   stack.sh down      stop what `up` started: a process is stopped only while
#                      its PID and start time match the PID file
#   stack.sh status    exit 0 when every server we started is running, holds
#                      its port and answers an HTTP request
#   stack.sh env       print the path of the env file
#   stack.sh console CMD...
#                      start the web console (CMD: sqs-redrive ui [flags])
#                      with the env file's variables, detached as the servers
#                      are, so that `down` stops it; print its first line,
#                      `console on http://127.0.0.1:PORT/?token=…`, once it is up
#                      (its log, token included, is $SQSONCE_STACK_DIR/console.log,
#                      readable by its owner only)
#
# Network exposure: fauxqs and DynamoDB Local listen on every interface
# (neither can be told to bind loopback only), so other machines that can
# reach this one can reach them while the stack runs; local-aws-sqs listens
# on 127.0.0.1 only. The env file always points at 127.0.0.1. On a shared or
# exposed host, firewall the ports or use the LocalStack compose file, which
# publishes on 127.0.0.1 only.
#
# The env file (.stack/env, to be sourced) holds the standard SDK variables:
# AWS_ENDPOINT_URL_SQS, AWS_ENDPOINT_URL_SNS and AWS_ENDPOINT_URL_S3 (fauxqs
# serves all three on one port), AWS_ENDPOINT_URL_DYNAMODB, AWS_REGION and
# static test credentials, plus SQSONCE_MOVE_TASK_ENDPOINT for local-aws-sqs and
# DATABASE_URL for PostgreSQL.
#
# Environment:
#   SQSONCE_CACHE           the emulators' cache (default ~/.cache/sqsonce)
#   SQSONCE_STACK_DIR       state: PID files, logs, env (default .stack)
#   SQSONCE_SQS_PORT, SQSONCE_DYNAMODB_PORT, SQSONCE_MOVE_TASK_PORT
#                           fixed ports; `up` fails if another process holds one
#   SQSONCE_STACK_POSTGRES  0 leaves PostgreSQL out (default 1); its data
#                           lives in $SQSONCE_STACK_DIR/postgres
#   SQSONCE_STACK_BROWSER   0 leaves Chromium out (default 1): `install` and `up`
#                           install Debian's chromium package, which the
#                           console's browser tests drive, when it is missing
#                           and they run as root with apt-get
#   SQSONCE_STACK_OFFER_PORTS
#                           ports to try before asking the system for free ones,
#                           in order (tests use it to hand out a port they hold,
#                           as if another process took it after it was chosen)
#
# Needs Linux (it reads /proc), bash, setsid, Node.js 20+ with npm, Java 17+;
# the browser tests need Chromium (Debian's chromium package).
set -euo pipefail

FAUXQS_VERSION=1.9.2 # needs Node.js 20+
DDB_SIM_VERSION=2.9.30 # amplify-dynamodb-simulator: ships DynamoDB Local 1.25.1
LOCAL_AWS_SQS_VERSION=2.0.2
NODE_MIN=20
MARKER=.sqsonce-complete # written last into a cache folder whose install finished

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cache=${SQSONCE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/sqsonce}
state=${SQSONCE_STACK_DIR:-$root/.stack}
envfile=$state/env
read -r -a offers <<<"${SQSONCE_STACK_OFFER_PORTS:-}"
with_pg=${SQSONCE_STACK_POSTGRES:-1}
with_browser=${SQSONCE_STACK_BROWSER:-1}

# pg ARGS...: localstack/postgres.sh with its data under the stack's state.
pg() { SQSONCE_POSTGRES_DIR=$state/postgres bash "$root/localstack/postgres.sh" "$@"; }

# pg_up starts PostgreSQL (when wanted) and adds DATABASE_URL to the env file.
pg_up() {
	[ "$with_pg" = 1 ] || return 0
	pg up >&2
	grep -q '^export DATABASE_URL=' "$envfile" 2>/dev/null || pg env >>"$envfile"
}

say() { printf 'stack: %s\n' "$*" >&2; }
die() { say "error: $*"; exit 1; }

# usage: the comment at the top of this file.
usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "${BASH_SOURCE[0]}"; }

need_tools() {
	command -v node >/dev/null || die "node is missing: install Node.js $NODE_MIN or newer with npm"
	local v
	v=$(node --version 2>/dev/null) || die "node --version failed: install Node.js $NODE_MIN or newer"
	v=${v#v}
	[ "${v%%.*}" -ge "$NODE_MIN" ] 2>/dev/null ||
		die "node $v is too old: fauxqs $FAUXQS_VERSION needs Node.js $NODE_MIN or newer (Debian 12's nodejs package is 18); install Node.js $NODE_MIN+ (NodeSource packages, nvm or the official binaries) and put it first in PATH"
	command -v npm >/dev/null || die "npm is missing: install the npm that comes with Node.js $NODE_MIN+"
	command -v setsid >/dev/null || die "setsid is missing: install util-linux"
	if ! command -v java >/dev/null; then
		if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
			say "java is missing: installing openjdk-17-jre-headless"
			# shellcheck disable=SC2015 # either step failing is fatal
			apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openjdk-17-jre-headless >/dev/null ||
				die "could not install java: install openjdk-17-jre-headless (Java 17+) by hand"
		else
			die "java is missing: install Java 17+ (Debian: apt-get install openjdk-17-jre-headless)"
		fi
	fi
}

# browser: the console's browser tests (console/browser_test.go) drive
# Debian's chromium package, headless. As root with apt-get it is installed
# when missing, as PostgreSQL is (localstack/postgres.sh); anyone else is
# told how, and the browser tests fail until it is there. No browser is
# downloaded any other way.
browser() {
	[ "$with_browser" = 1 ] || return 0
	command -v chromium >/dev/null && return 0
	if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
		say "chromium is missing: installing Debian's chromium package with apt-get (the console's browser tests drive it)"
		# shellcheck disable=SC2015 # either step failing is fatal
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null ||
			die "could not install chromium: install it by hand (apt-get install chromium)"
		return 0
	fi
	say "chromium is missing: the console's browser tests need it (Debian: apt-get install chromium)"
}

# npm_failed WHAT LOG: show npm's own words, then stop.
npm_failed() {
	say "$1 failed; npm said:"
	tail -n 40 "$2" >&2
	die "$1 failed (full output: $2)"
}

# fresh_tmp DIR: an empty work folder next to DIR, in the same file system so
# the final rename is atomic; work folders left by dead runs are removed.
fresh_tmp() {
	local d p
	for d in "$1".tmp.*; do
		[ -e "$d" ] || continue
		p=${d##*.}
		kill -0 "$p" 2>/dev/null || rm -rf "$d"
	done
	tmp=$1.tmp.$$
	rm -rf "$tmp" && mkdir -p "$tmp"
}

# commit TMP DIR: TMP becomes DIR, then the marker is written, last: a folder
# without it is a half-done install and is installed again.
commit() {
	rm -rf "$2"
	mv "$1" "$2"
	: >"$2/$MARKER"
}

# npm_install PACKAGE VERSION
npm_install() {
	local dir=$cache/$1-$2 log=$cache/$1-$2.npm.log tmp
	[ -f "$dir/$MARKER" ] && return 0
	# An older stack.sh, like this one, moved an npm install into place only
	# after npm succeeded: its folder (with npm's hidden lockfile) is complete.
	if [ -f "$dir/node_modules/.package-lock.json" ] && [ -f "$dir/node_modules/$1/package.json" ]; then
		: >"$dir/$MARKER"
		return 0
	fi
	say "installing $1@$2"
	fresh_tmp "$dir"
	npm install --no-audit --no-fund --no-save --no-progress --prefix "$tmp" "$1@$2" >"$log" 2>&1 ||
		{ rm -rf "$tmp"; npm_failed "npm install $1@$2" "$log"; }
	commit "$tmp" "$dir"
}

install() {
	need_tools
	browser
	mkdir -p "$cache"
	npm_install fauxqs "$FAUXQS_VERSION"
	npm_install local-aws-sqs "$LOCAL_AWS_SQS_VERSION"
	local dir=$cache/dynamodb-local-$DDB_SIM_VERSION log=$cache/dynamodb-local-$DDB_SIM_VERSION.npm.log tmp
	[ -f "$dir/$MARKER" ] && return 0
	say "installing DynamoDB Local (from amplify-dynamodb-simulator@$DDB_SIM_VERSION)"
	fresh_tmp "$dir"
	(cd "$tmp" && npm pack --no-progress "amplify-dynamodb-simulator@$DDB_SIM_VERSION") >"$log" 2>&1 ||
		{ rm -rf "$tmp"; npm_failed "npm pack amplify-dynamodb-simulator@$DDB_SIM_VERSION" "$log"; }
	tar -xzf "$tmp"/amplify-dynamodb-simulator-*.tgz -C "$tmp" package/emulator ||
		{ rm -rf "$tmp"; die "could not unpack amplify-dynamodb-simulator@$DDB_SIM_VERSION"; }
	[ -f "$tmp/package/emulator/DynamoDBLocal.jar" ] ||
		{ rm -rf "$tmp"; die "amplify-dynamodb-simulator@$DDB_SIM_VERSION holds no emulator/DynamoDBLocal.jar"; }
	commit "$tmp/package/emulator" "$dir"
	rm -rf "$tmp"
}

# next_port: sets port to the next offered port, else to one the system says
# is free now (another process may still take it before our server binds it).
next_port() {
	if [ ${#offers[@]} -gt 0 ]; then
		port=${offers[0]}
		offers=("${offers[@]:1}")
		return 0
	fi
	port=$(node -e 'const s=require("net").createServer();s.listen(0,()=>{console.log(s.address().port);s.close()})')
}

# proc_start PID: sets start to the process's start time (clock ticks since
# boot); fails when there is no such process or it has exited (a zombie).
# Builtins only: the wait loops call it often.
proc_start() {
	local stat
	start=
	{ IFS= read -r stat <"/proc/$1/stat"; } 2>/dev/null || return 1
	stat=${stat##*) }
	# shellcheck disable=SC2086 # split the fields after the command name
	set -- $stat
	case $1 in Z | X | x) return 1 ;; esac
	start=${20}
}

# ours NAME: the process named by $state/NAME.pid is still the one we started:
# same PID and same start time. Sets pid.
ours() {
	local f=$state/$1.pid want="" start
	pid=
	[ -f "$f" ] || return 1
	read -r pid want <"$f" || true
	[ -n "$pid" ] || return 1
	[ -n "$want" ] || { legacy "$1"; return; }
	proc_start "$pid" && [ "$start" = "$want" ]
}

# legacy NAME: an older stack.sh wrote $pid without a start time. The
# process is ours only if it has the exact command line that script used and
# holds the port of NAME in the env file.
legacy() {
	local i want port
	case $1 in
	fauxqs) i=0 want="node $cache/fauxqs-$FAUXQS_VERSION/node_modules/fauxqs/dist/cli.js" ;;
	dynamodb) i=1 want="java -Xmx1g -Djava.library.path=DynamoDBLocal_lib -jar DynamoDBLocal.jar -inMemory -port" ;;
	movetask) i=2 want="node $root/localstack/local-aws-sqs.cjs" ;;
	esac
	port=$(env_port "$i")
	[ "$i" = 0 ] || want="$want $port"
	[ -n "$port" ] && [ "$({ tr '\0' ' ' <"/proc/$pid/cmdline"; } 2>/dev/null)" = "$want " ] && listens "$pid" "$port"
}

# env_port I: the port of server I (0 fauxqs, 1 DynamoDB Local,
# 2 local-aws-sqs) in the env file.
env_port() {
	[ -f "$envfile" ] || return 0
	sed -n "s|^export ${vars[$1]}=http://127.0.0.1:\([0-9]*\)$|\1|p" "$envfile"
}

# listens PID PORT: PID holds a listening TCP socket on PORT, and no other
# process does.
listens() {
	local hex inode found=
	hex=$(printf ':%04X' "$2")
	# shellcheck disable=SC2013 # one inode per line, no spaces
	for inode in $(awk -v p="$hex" 'FNR > 1 && $4 == "0A" && substr($2, length($2) - 4) == p { print $10 }' /proc/net/tcp /proc/net/tcp6 2>/dev/null); do
		[ -n "$(find "/proc/$1/fd" -maxdepth 1 -lname "socket:\[$inode\]" 2>/dev/null | head -n 1)" ] || return 1
		found=1
	done
	[ -n "$found" ]
}

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# answers PORT: an HTTP request to 127.0.0.1:PORT gets an HTTP response.
answers() (
	exec 3<>"/dev/tcp/127.0.0.1/$1" || exit 1
	printf 'GET / HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n' >&3
	line=
	IFS= read -r -t 5 line <&3 || true
	[[ $line == HTTP/* ]]
) 2>/dev/null

# bind_failed NAME: the server's log says its port was taken (DynamoDB Local
# says so and keeps running; the Node servers exit).
bind_failed() { grep -qE 'EADDRINUSE|Address already in use|Failed to bind' "$state/$1.log" 2>/dev/null; }

# wait_ours NAME PORT: wait until the server we started answers on PORT
# itself. Returns 1 when another process holds PORT; dies on other failures.
wait_ours() {
	local name=$1 port=$2 end=$((SECONDS + 60))
	while [ "$SECONDS" -lt "$end" ]; do
		if ! ours "$name"; then
			port_open "$port" && return 1
			bind_failed "$name" && return 1
			tail -n 20 "$state/$name.log" >&2
			die "$name exited during start-up (log: $state/$name.log)"
		fi
		if port_open "$port"; then
			listens "$pid" "$port" && return 0
			bind_failed "$name" && return 1
		fi
		sleep 0.1
	done
	port_open "$port" && die "127.0.0.1:$port answers, but not from the $name we started (PID $pid): another process holds the port"
	die "$name did not answer on 127.0.0.1:$port within 60s (log: $state/$name.log)"
}

# spawn NAME DIR CMD...: start CMD in its own session, detached from the
# caller, and record its PID and start time (which exec does not change).
spawn() {
	local name=$1 dir=$2 p
	shift 2
	: >"$state/$name.log"
	(cd "$dir" && exec setsid "$@" >"$state/$name.log" 2>&1 </dev/null) &
	p=$!
	local start=gone
	proc_start "$p" || true
	echo "$p $start" >"$state/$name.pid"
}

start_fauxqs() {
	FAUXQS_PORT=$1 FAUXQS_DEFAULT_REGION=us-east-1 FAUXQS_MAIN=$cache/fauxqs-$FAUXQS_VERSION/node_modules/fauxqs/dist/app.js \
		spawn fauxqs "$state" node "$root/localstack/fauxqs.mjs"
}

start_dynamodb() {
	spawn dynamodb "$cache/dynamodb-local-$DDB_SIM_VERSION" java -Xmx1g \
		-Djava.library.path=DynamoDBLocal_lib -jar DynamoDBLocal.jar -inMemory -port "$1"
}

start_movetask() {
	LOCAL_AWS_SQS_MAIN=$cache/local-aws-sqs-$LOCAL_AWS_SQS_VERSION/node_modules/local-aws-sqs/dist/index.js \
		spawn movetask "$state" node "$root/localstack/local-aws-sqs.cjs" "$1"
}

names=(fauxqs dynamodb movetask)
vars=(AWS_ENDPOINT_URL_SQS AWS_ENDPOINT_URL_DYNAMODB SQSONCE_MOVE_TASK_ENDPOINT)
portvars=(SQSONCE_SQS_PORT SQSONCE_DYNAMODB_PORT SQSONCE_MOVE_TASK_PORT)

up() {
	mkdir -p "$state"
	browser
	if running quiet emulators; then
		pg_up
		say "already running ($envfile)"
		echo running
		return 0
	fi
	down quiet
	install
	# A start that fails stops what it started.
	trap 'down quiet' EXIT
	local ports=() fixed=() i tries port
	for i in 0 1 2; do
		fixed[i]=${!portvars[i]:-}
		port=${fixed[i]}
		[ -n "$port" ] || next_port
		ports[i]=$port
		"start_${names[i]}" "$port"
	done
	for i in 0 1 2; do
		tries=1
		until wait_ours "${names[i]}" "${ports[i]}"; do
			stop "${names[i]}"
			[ -z "${fixed[i]}" ] || die "${names[i]}: port ${ports[i]} (${portvars[i]}) is held by another process"
			[ "$tries" -lt 5 ] || die "${names[i]}: 5 free ports in a row were taken by other processes before it could bind one"
			say "${names[i]}: port ${ports[i]} was taken by another process before it could bind it; trying another"
			next_port
			ports[i]=$port
			"start_${names[i]}" "$port"
			tries=$((tries + 1))
		done
	done

	cat >"$envfile" <<ENV
# Written by localstack/stack.sh up; source it. Static test credentials only.
export AWS_ENDPOINT_URL_SQS=http://127.0.0.1:${ports[0]}
export AWS_ENDPOINT_URL_SNS=http://127.0.0.1:${ports[0]}
export AWS_ENDPOINT_URL_S3=http://127.0.0.1:${ports[0]}
export AWS_ENDPOINT_URL_DYNAMODB=http://127.0.0.1:${ports[1]}
export AWS_REGION=us-east-1
export AWS_ACCESS_KEY_ID=test
export AWS_SECRET_ACCESS_KEY=test
unset AWS_SESSION_TOKEN AWS_PROFILE
export SQSONCE_MOVE_TASK_ENDPOINT=http://127.0.0.1:${ports[2]}
ENV
	pg_up
	trap - EXIT
	say "up: SQS 127.0.0.1:${ports[0]}, DynamoDB 127.0.0.1:${ports[1]}, move tasks 127.0.0.1:${ports[2]}"
	say "fauxqs and DynamoDB Local listen on every interface, not only 127.0.0.1"
	say "env file: $envfile"
	echo started
}

# stop NAME...: SIGTERM each process we started, wait up to 5 s for them to
# exit, and SIGKILL only those that are still ours (same PID and start time).
# A PID file naming any other process is dropped and that process left alone.
stop() {
	local name pid cmd end=$((SECONDS + 5)) left=() still
	for name in "$@"; do
		[ -f "$state/$name.pid" ] || continue
		if ours "$name"; then
			kill "$pid" 2>/dev/null || true
			left+=("$name")
		elif [ -n "$pid" ] && cmd=$({ tr '\0' ' ' <"/proc/$pid/cmdline"; } 2>/dev/null); then
			# The PID may exit between the check and the read (a server of
			# ours that lost its port race): then there is nothing to leave.
			say "$name: $state/$name.pid names PID $pid ($cmd), not a process this script can prove it started: left alone"
		fi
	done
	while [ ${#left[@]} -gt 0 ] && [ "$SECONDS" -le "$end" ]; do
		still=()
		for name in "${left[@]}"; do
			ours "$name" && still+=("$name")
		done
		left=("${still[@]}")
		[ ${#left[@]} -eq 0 ] || sleep 0.1
	done
	for name in "${left[@]}"; do
		if ours "$name"; then
			say "$name (PID $pid) ignored SIGTERM for 5s: sending SIGKILL"
			kill -KILL "$pid" 2>/dev/null || true
		fi
	done
	for name in "$@"; do rm -f "$state/$name.pid"; done
}

# console CMD...: see the top of this file. A console this script started
# before is stopped first.
console() {
	[ $# -gt 0 ] || die "console needs a command: stack.sh console sqs-redrive ui [flags]"
	[ -f "$envfile" ] || die "the stack is not running ($envfile is missing): run stack.sh up first"
	stop console
	# The console reaches the stack through the env file's variables; its log
	# holds its URL, token included: its owner's only.
	set -a
	# shellcheck disable=SC1090
	. "$envfile"
	set +a
	: >"$state/console.log"
	chmod 600 "$state/console.log"
	spawn console "$root" "$@"
	local end=$((SECONDS + 60)) line
	while [ "$SECONDS" -lt "$end" ]; do
		line=$(grep -m 1 '^console on http' "$state/console.log" 2>/dev/null || true)
		if [ -n "$line" ]; then
			echo "$line"
			return 0
		fi
		if ! ours console; then
			tail -n 20 "$state/console.log" >&2
			die "the console exited during start-up (log: $state/console.log)"
		fi
		sleep 0.1
	done
	stop console
	die "the console did not print its URL within 60s (log: $state/console.log)"
}

down() {
	stop console "${names[@]}"
	if [ "$with_pg" = 1 ] && [ -d "$state/postgres" ]; then pg down >&2 || true; fi
	rm -f "$envfile"
	[ "${1:-}" = quiet ] || say "down"
}

# running [quiet [emulators]]: every server we started is alive, holds the
# port written in the env file and answers an HTTP request on it (with
# "emulators": PostgreSQL is not checked).
running() {
	local quiet=${1:-} ok=0 i port
	note() { [ -n "$quiet" ] || say "$@"; }
	[ -f "$envfile" ] || { note "not running (no $envfile)"; return 1; }
	for i in 0 1 2; do
		port=$(env_port "$i")
		if [ -z "$port" ]; then
			note "${names[i]}: no ${vars[i]} in $envfile"
			ok=1
		elif ! ours "${names[i]}"; then
			note "${names[i]} is not running"
			ok=1
		elif ! listens "$pid" "$port"; then
			note "${names[i]} (PID $pid) does not hold 127.0.0.1:$port"
			ok=1
		elif ! answers "$port"; then
			note "${names[i]} on 127.0.0.1:$port does not answer"
			ok=1
		fi
	done
	if [ "$with_pg" = 1 ] && [ "${2:-}" != emulators ] && ! pg status >/dev/null 2>&1; then
		note "postgres is not running"
		ok=1
	fi
	[ $ok = 0 ] && note "running ($envfile)"
	return $ok
}

case "${1:-}" in
install) install ;;
up) up ;;
down) down ;;
status) running ;;
env) echo "$envfile" ;;
console) shift; console "$@" ;;
help | -h | --help) usage ;;
*) usage >&2; exit 2 ;;
esac
