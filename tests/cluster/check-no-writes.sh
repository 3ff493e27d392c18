#!/usr/bin/env bash
# Lists every file and folder under /etc, /usr, /var, /opt and /run changed
# after MARKER (a file touched before tests/cluster/up.sh): the proof that a
# cluster wrote nothing outside its folder. Prints nothing when nothing changed.
#   marker=$(mktemp); tests/cluster/up.sh DIR; ...; tests/cluster/down.sh DIR
#   tests/cluster/check-no-writes.sh "$marker"
set -euo pipefail
[ $# -ge 1 ] && [ -e "$1" ] || { echo "usage: tests/cluster/check-no-writes.sh MARKER" >&2; exit 2; }
find /etc /usr /var /opt /run -xdev -newer "$1" 2>/dev/null | sort || true
