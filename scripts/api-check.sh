#!/usr/bin/env bash
# api-check.sh: compare the module's exported API with the last release tag
# (the newest tag v*.*.* reachable from HEAD) and print what changed.
#
# Incompatible changes fail the check unless CHANGELOG.md's [Unreleased]
# section has a "### Breaking" heading that lists them: a release must say
# what it breaks. With no release tag yet there is nothing to compare, and
# the check passes saying so.
#
# Environment: GO (default go), APIDIFF (the `go run` argument for apidiff).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
GO=${GO:-go}
APIDIFF=${APIDIFF:-golang.org/x/exp/cmd/apidiff@v0.0.0-20261120182113-8801fbdfac81}
module=$($GO list -m)

base=$(git describe --tags --abbrev=0 --match 'v[0-9]*.[0-9]*.[0-9]*' HEAD 2>/dev/null || true)
if [ -z "$base" ]; then
	echo "api-check: no release tag (v*.*.*) reachable from HEAD; nothing to compare"
	exit 0
fi

tmp=$(mktemp -d)
cleanup() { git worktree remove --force "$tmp/base" >/dev/null 2>&1 || true; rm -rf "$tmp"; }
trap cleanup EXIT
git worktree add --quiet --detach "$tmp/base" "$base"

# apidiff reads the export data of the module in the current directory.
# apidiff names each internal package it skips on stderr: only errors are kept.
apidiff() { $GO run "$APIDIFF" "$@" 2> >(grep -v '^Ignoring internal package' >&2); }
(cd "$tmp/base" && apidiff -m -w "$tmp/base.export" "$module")
report=$(apidiff -m "$tmp/base.export" "$module")
incompatible=$(apidiff -m -incompatible "$tmp/base.export" "$module")

if [ -z "$report" ]; then
	echo "api-check: the API is unchanged since $base"
	exit 0
fi
echo "api-check: changes since $base:"
printf '%s\n' "$report" | sed 's/^/  /'
if [ -n "$incompatible" ]; then
	unreleased=$(awk '/^## \[Unreleased\]/ { on = 1; next } /^## / { on = 0 } on' CHANGELOG.md)
	if ! printf '%s\n' "$unreleased" | grep -q '^### Breaking'; then
		echo "api-check: incompatible changes since $base, and CHANGELOG.md's [Unreleased] has no \"### Breaking\" section: list them there"
		exit 1
	fi
fi
