#!/bin/bash
# Format every tracked C and C++ source with the repository's .clang-format
# (what the test command checks).  contrib/format.sh [--check]
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = --check ]; then
    git ls-files '*.c' '*.h' '*.cc' | xargs clang-format --dry-run -Werror
else
    git ls-files '*.c' '*.h' '*.cc' | xargs clang-format -i
fi
