#!/bin/bash
# tap-exec.sh FILE — run one suite so that it prints TAP on stdout (prove's --exec).
#   *.bats     bats --tap
#   *.preload  a Criterion binary run under LD_PRELOAD=$LIBALLOC_SO
#   otherwise  a Criterion binary
set -uo pipefail
f="$1"
case "$f" in
*.bats) exec bats --tap "$f" ;;
*.preload) LD_PRELOAD="$LIBALLOC_SO" exec "$f" --tap=/dev/stdout --color=never 2>/dev/null ;;
*) exec "$f" --tap=/dev/stdout --color=never 2>/dev/null ;;
esac
