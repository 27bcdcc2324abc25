#!/usr/bin/env bash
# with-stack.sh CMD...: run CMD with the local stack's variables set.
# Starts the stack when it is not running and stops it afterwards; a stack
# that was already running is used and left running. Sets
# SQSONCE_INTEGRATION=1, so integration tests fail (never skip) when a
# server is unreachable.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
started=
if ! bash "$here/stack.sh" status >/dev/null 2>&1; then
	bash "$here/stack.sh" up
	started=1
fi
cleanup() { [ -z "$started" ] || bash "$here/stack.sh" down; }
trap cleanup EXIT
# shellcheck disable=SC1090
. "$(bash "$here/stack.sh" env)"
export SQSONCE_INTEGRATION=1
"$@"
