#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Format every tracked C and C++ source with the repository's .clang-format
# (what the test command checks).  contrib/format.sh [--check]
# --check also fails on a tracked source or script whose first lines lack
# the SPDX licence tag (LICENSE; documents and data files are exempt).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = --check ]; then
    git ls-files '*.c' '*.h' '*.cc' | xargs clang-format --dry-run -Werror
    missing=0
    while IFS= read -r f; do
        case $f in
        *.md | LICENSE | .gitignore | .git-blame-ignore-revs | .clang-format | *.txt) continue ;;
        esac
        [ -f "$f" ] || continue
        if ! head -n 3 "$f" | grep -q 'SPDX-License-Identifier: BSD-3-Clause'; then
            echo "format.sh: $f: no SPDX-License-Identifier line in its first 3 lines" >&2
            missing=1
        fi
    done < <(git ls-files)
    exit $missing
else
    git ls-files '*.c' '*.h' '*.cc' | xargs clang-format -i
fi
