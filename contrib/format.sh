#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Format every tracked C and C++ source with the repository's .clang-format
# (what the test command checks).  contrib/format.sh [--check]
# --check also fails on a tracked source or script whose first lines lack
# the SPDX licence tag (LICENSE; documents and data files are exempt).
# The tree follows clang-format 14 (Debian 12's); other major versions
# format some constructs differently (Debian 13's 19: about 50 places), so
# with one of those, or outside a git work tree, it does nothing and exits
# 77 with one line saying why.
set -euo pipefail
cd "$(dirname "$0")/.."
CLANG_FORMAT_MAJOR=14
major=$(clang-format --version | sed -n 's/.*version \([0-9]*\)\..*/\1/p')
if [ "$major" != $CLANG_FORMAT_MAJOR ]; then
    echo "format.sh: skipped: clang-format ${major:-?} formats differently from $CLANG_FORMAT_MAJOR, which the tree follows (Debian 12's clang-format)"
    exit 77
fi
if ! git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    echo "format.sh: skipped: not a git work tree (git ls-files names the sources)"
    exit 77
fi
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
