#!/usr/bin/env bash
# Lints every shell script of the repository (the tracked *.sh files and
# .ci/run) with ShellCheck, following the files they source. ShellCheck comes
# from Debian's package, unpacked into ${GPUREADY_CACHE:-~/.cache/gpuready}/tools/
# (tests/lib/build-lib.sh: nothing installed); a no-op fetch once cached.
# Settings: .shellcheckrc.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=tests/lib/build-lib.sh
. tests/lib/build-lib.sh
shellcheck=$(debian_file shellcheck usr/bin/shellcheck shellcheck)
mapfile -t scripts < <(git ls-files '*.sh' .ci/run)
"$shellcheck" -x "${scripts[@]}"
echo "shellcheck $("$shellcheck" --version | awk '/^version:/ {print $2}'): ${#scripts[@]} scripts clean" >&2
