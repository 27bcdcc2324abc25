#!/usr/bin/env bash
# with-stack.sh CMD...: run CMD with the local stack's variables set.
# Starts the stack when it is not running and stops it afterwards; a stack
# that was already running is used and left running. Sets
# SQSONCE_INTEGRATION=1, so integration tests fail (never skip) when a
# server is unreachable.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# up says whether it started the stack, so a stack that only looked down for
# a moment is never stopped here.
started=$(bash "$here/stack.sh" up)
cleanup() { [ "$started" != started ] || bash "$here/stack.sh" down; }
trap cleanup EXIT
# shellcheck disable=SC1090
envfile=$(bash "$here/stack.sh" env)
. "$envfile"
export SQSONCE_INTEGRATION=1
# Where the stack's PID files are: the bench gives DynamoDB Local a CPU of
# its own while its DynamoDB rows run (bench/isolate_linux.go).
SQSONCE_STACK_DIR=$(cd "$(dirname "$envfile")" && pwd)
export SQSONCE_STACK_DIR
"$@"
