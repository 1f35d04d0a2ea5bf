#!/usr/bin/env bash
# The code follows .clang-format: every C++ source and header of the project (common, runtime, commbench,
# calibrate, predict, validate, query, launcher, python, tests) is what clang-format makes of it. Checked with clang-format
# 14 (Debian 12's, what formatted the tree): other majors format some constructs differently, so with
# none or another one this test is skipped (exit 77, the reason printed), never passed.
#   check_format.sh SOURCE_DIR
# Exit status: 0 every file follows, 1 some do not (each named, with the command that fixes it), 77 skipped.
set -uo pipefail
SRC="${1:?usage: check_format.sh SOURCE_DIR}"
tool=""
for candidate in clang-format-14 clang-format; do
  if command -v "$candidate" >/dev/null 2>&1 && "$candidate" --version | grep -qE 'version 14\.'; then
    tool="$candidate"
    break
  fi
done
if [[ -z "$tool" ]]; then
  echo "SKIP: no clang-format 14 here (apt-get install clang-format-14); other versions format differently"
  exit 77
fi
mapfile -t files < <(cd "$SRC" && find common runtime commbench calibrate predict validate query launcher python tests \
  -type f \( -name '*.cpp' -o -name '*.hpp' -o -name '*.cu' -o -name '*.c' -o -name '*.h' \) | sort)
# One clang-format for all files; each file that differs is named in its diagnostics ("FILE:LINE:COL: error:").
diagnostics="$(cd "$SRC" && "$tool" --dry-run --Werror "${files[@]}" 2>&1 >/dev/null)"
status=$?
mapfile -t bad < <(sed -n 's/^\([^: ]*\):[0-9]*:[0-9]*: error: .*/\1/p' <<<"$diagnostics" | sort -u)
if [[ $status -ne 0 && ${#bad[@]} -eq 0 ]]; then   # clang-format itself failed (e.g. a broken .clang-format)
  echo "format: $tool failed (status $status) naming no file: $(head -3 <<<"$diagnostics")"
  exit 1
fi
if [[ ${#bad[@]} -gt 0 ]]; then
  echo "format: ${#bad[@]} of ${#files[@]} files do not follow .clang-format:"
  printf '  %s\n' "${bad[@]}"
  echo "format: fix with: (cd $SRC && $tool -i ${bad[*]:0:3}${bad[3]:+ ...})"
  exit 1
fi
echo "format: ${#files[@]} files follow .clang-format ($("$tool" --version | head -1))"
