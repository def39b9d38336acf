#!/usr/bin/env bash
# Formats the C++ and CUDA sources with .clang-format (clang-format 14 from Debian):
#   scripts/format.sh          rewrite every file in place
#   scripts/format.sh --check  list the files that are not formatted, exit 1 if any
# Generated tables (unicode_data.cpp, jinja_unicode_tables.cpp) are left as their generators write them.
set -euo pipefail
cd "$(dirname "$0")/.."
mapfile -t files < <(git ls-files 'src/*.cpp' 'src/*.h' 'src/*.cu' 'src/*.cuh' 'tests/*.cpp' 'tests/*.h' 'bench/*.cpp' 'bench/*.h' \
  'fuzz/*.cpp' 'tools/*.cpp' 'tools/*.h' 'tools/*.cuh' | grep -v -e unicode_tables -e unicode_data.cpp)
if [ "${1:-}" = "--check" ]; then
  bad=0
  for f in "${files[@]}"; do
    if ! clang-format "$f" | cmp -s - "$f"; then echo "$f"; bad=1; fi
  done
  exit $bad
fi
clang-format -i "${files[@]}"
