#!/usr/bin/env bash
# The local PostgreSQL server, without Docker.
#
#   postgres.sh up       install PostgreSQL 15 if needed (Debian's postgresql-15,
#                        as root), create the cluster once, start it on a free
#                        127.0.0.1 port and wait until it answers
#   postgres.sh down     stop the server started by `up` (pg_ctl, by the PID in
#                        the data directory)
#   postgres.sh status   exit 0 when the server runs and answers
#   postgres.sh env      print the line to source:
#                        export DATABASE_URL=postgres://...@127.0.0.1:PORT/...?sslmode=disable
#
# Data, log and the env file live in SQSONCE_POSTGRES_DIR (default
# .stack/postgres). Run as root, the server runs as the unprivileged
# `postgres` user (the Debian package's). SQSONCE_POSTGRES_PORT fixes the
# port; PG_BINDIR names the directory holding initdb, pg_ctl and postgres.
# SQSONCE_POSTGRES_OFFER_PORTS: ports to try first, in order, before free
# ones (a test hands out a port it holds).
#
# The cluster is for tests and local development: fsync is off and the only
# role (sqsonce, a superuser) has the password sqsonce.
set -euo pipefail

PG_MAJOR=15
PG_PACKAGE=postgresql-$PG_MAJOR

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
state=${SQSONCE_POSTGRES_DIR:-$root/.stack/postgres}
data=$state/data
logfile=$state/postgres.log
envfile=$state/env
db_user=sqsonce
db_password=sqsonce
db_name=sqsonce

say() { printf 'postgres: %s\n' "$*" >&2; }
die() { say "error: $*"; exit 1; }

is_root() { [ "$(id -u)" = 0 ]; }

# bindir prints the directory of the PostgreSQL server binaries, or nothing.
bindir() {
	local d
	for d in "${PG_BINDIR:-}" "/usr/lib/postgresql/$PG_MAJOR/bin"; do
		[ -n "$d" ] && [ -x "$d/initdb" ] && [ -x "$d/pg_ctl" ] && [ -x "$d/postgres" ] && { echo "$d"; return; }
	done
	if command -v pg_config >/dev/null; then
		d=$(pg_config --bindir 2>/dev/null || true)
		[ -n "$d" ] && [ -x "$d/initdb" ] && [ -x "$d/postgres" ] && { echo "$d"; return; }
	fi
	if command -v initdb >/dev/null && command -v pg_ctl >/dev/null; then
		d=$(dirname "$(readlink -f "$(command -v initdb)")")
		[ -x "$d/postgres" ] && echo "$d"
	fi
}

install() {
	bin=$(bindir)
	[ -n "$bin" ] && return 0
	if ! is_root || ! command -v apt-get >/dev/null; then
		die "PostgreSQL $PG_MAJOR is not installed: install the Debian package $PG_PACKAGE (apt-get install $PG_PACKAGE) or set PG_BINDIR to the directory holding initdb, pg_ctl and postgres"
	fi
	say "PostgreSQL is missing: installing $PG_PACKAGE with apt-get"
	apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$PG_PACKAGE" >/dev/null ||
		die "could not install $PG_PACKAGE: install it by hand (apt-get install $PG_PACKAGE)"
	bin=$(bindir)
	[ -n "$bin" ] || die "$PG_PACKAGE installed but initdb/pg_ctl/postgres not found in /usr/lib/postgresql/$PG_MAJOR/bin"
}

# as_owner CMD...: run CMD as the server's owner (postgres when we are root).
as_owner() {
	if is_root; then
		runuser -u postgres -- "$@"
	else
		"$@"
	fi
}

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# free_port: a port nothing answers on, below the kernel's ephemeral range
# where it can (a client socket's local port there makes the bind fail
# although nothing listens on it).
free_port() {
	local p i lo=32768 span=40000
	read -r lo _ </proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || true
	[ "$lo" -gt 21024 ] && span=$((lo - 20000))
	for i in $(seq 1 50); do
		p=$((20000 + RANDOM % span))
		port_open "$p" || { echo "$p"; return; }
	done
	die "no free port found on 127.0.0.1"
}

port() { sed -n 's/^port *= *\([0-9]*\).*/\1/p' "$data/postgresql.auto.conf" 2>/dev/null | tail -1; }

url() { echo "postgres://$db_user:$db_password@127.0.0.1:$1/$db_name?sslmode=disable"; }

running() { [ -n "${bin:-}" ] && [ -f "$data/PG_VERSION" ] && as_owner "$bin/pg_ctl" status -D "$data" >/dev/null 2>&1; }

answers() { [ -n "$(port)" ] && port_open "$(port)"; }

init() {
	[ -f "$data/PG_VERSION" ] && return 0
	mkdir -p "$state"
	rm -rf "$data"
	mkdir -p "$data"
	local pw=$state/.pwfile
	printf '%s\n' "$db_password" >"$pw"
	if is_root; then
		id postgres >/dev/null 2>&1 || die "run as root, the server needs the unprivileged user postgres (created by the $PG_PACKAGE package)"
		chown postgres: "$state" "$data" "$pw"
		runuser -u postgres -- test -x "$state" ||
			die "the postgres user cannot reach $state: make its parent directories traversable or set SQSONCE_POSTGRES_DIR"
	fi
	chmod 700 "$data"
	as_owner "$bin/initdb" -D "$data" --username="$db_user" --pwfile="$pw" --auth-local=scram-sha-256 \
		--auth-host=scram-sha-256 --encoding=UTF8 --locale=C.UTF-8 >"$state/initdb.log" 2>&1 ||
		{ rm -f "$pw"; tail -20 "$state/initdb.log" >&2; die "initdb failed (log: $state/initdb.log)"; }
	rm -f "$pw"
	cat >>"$data/postgresql.conf" <<CONF

# localstack/postgres.sh: a loopback-only server for tests.
listen_addresses = '127.0.0.1'
unix_socket_directories = ''
max_connections = 300
shared_buffers = 64MB
fsync = off
synchronous_commit = off
full_page_writes = off
log_min_messages = warning
log_min_error_statement = panic
CONF
}

start() {
	local p attempt offers
	read -ra offers <<<"${SQSONCE_POSTGRES_OFFER_PORTS:-}"
	for attempt in 1 2 3 4 5; do
		p=${SQSONCE_POSTGRES_PORT:-}
		if [ -z "$p" ] && [ ${#offers[@]} -gt 0 ]; then
			p=${offers[0]} offers=("${offers[@]:1}")
		fi
		[ -n "$p" ] || p=$(free_port)
		# ALTER SYSTEM's file: the port survives restarts and is read back by port().
		as_owner sh -c "printf 'port = %s\n' '$p' >'$data/postgresql.auto.conf'"
		if as_owner "$bin/pg_ctl" start -D "$data" -l "$logfile" -w -t 60 -o "-p $p" >/dev/null 2>&1; then
			return 0
		fi
		[ -n "${SQSONCE_POSTGRES_PORT:-}" ] && break
		# A clash: something answers there, or the bind failed.
		port_open "$p" || tail -5 "$logfile" 2>/dev/null | grep -q 'Address already in use' || break
		say "port $p was taken: trying another"
	done
	tail -20 "$logfile" >&2 || true
	die "the server did not start (log: $logfile)"
}

up() {
	install
	if is_root; then
		mkdir -p "$state"
		chown postgres: "$state"
		touch "$logfile" && chown postgres: "$logfile"
	else
		mkdir -p "$state"
	fi
	init
	if running && answers; then
		say "already running on 127.0.0.1:$(port)"
	else
		running && as_owner "$bin/pg_ctl" stop -D "$data" -m fast -w >/dev/null 2>&1 || true
		start
	fi
	# The database the URL names.
	PGPASSWORD=$db_password "$bin/psql" -h 127.0.0.1 -p "$(port)" -U "$db_user" -d postgres -qAtc \
		"SELECT 1 FROM pg_database WHERE datname = '$db_name'" | grep -q 1 ||
		PGPASSWORD=$db_password "$bin/createdb" -h 127.0.0.1 -p "$(port)" -U "$db_user" "$db_name" ||
		die "could not create the database $db_name"
	printf 'export DATABASE_URL=%s\n' "$(url "$(port)")" >"$envfile"
	say "up: 127.0.0.1:$(port), data in $data (env: $envfile)"
}

down() {
	bin=$(bindir)
	if running; then
		as_owner "$bin/pg_ctl" stop -D "$data" -m fast -w -t 60 >/dev/null || die "pg_ctl stop failed (log: $logfile)"
		say "down"
	elif [ "${1:-}" != quiet ]; then
		say "not running"
	fi
	rm -f "$envfile"
}

status() {
	bin=$(bindir)
	if running && answers; then
		say "running on 127.0.0.1:$(port) (data: $data)"
		return 0
	fi
	say "not running"
	return 1
}

env_line() {
	bin=$(bindir)
	running && answers || die "not running: start it with $0 up"
	printf 'export DATABASE_URL=%s\n' "$(url "$(port)")"
}

case "${1:-}" in
up) up ;;
down) down ;;
status) status ;;
env) env_line ;;
*) echo "usage: $0 up|down|status|env" >&2; exit 2 ;;
esac
