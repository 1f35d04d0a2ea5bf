#!/usr/bin/env bash
# check_doc_examples.sh: the examples of the docs that say they are checked, run and compared with what
# they show (CTest `docs_examples`, labels cli and docs).
#
#   check_doc_examples.sh ITERTIME SOURCE_DIR [FILE.md...]
#
# Without FILE, README.md and docs/*.md of SOURCE_DIR. The marker, on its own line right before a
# ```console block:
#
#   <!-- example: checked -->
#   ```console
#   $ itertime --help
#   ...the output, exactly...
#   ```
#
# In such a block every line that starts with "$ itertime" is a command; the lines after it, up to the
# next command or the end of the block, are its output. Each command runs with bash in SOURCE_DIR (so
# paths are the repository's: data/models/..., tests/data/...), with `itertime` the ITERTIME given (a
# shell function: arguments, quotes and a pipe such as `| head -n 5` work as in a shell), stdout and
# stderr together, and its output must equal the block's lines exactly (trailing blank lines aside; the
# exit status is not compared: say it in the text). A marker not followed by a ```console block, or a
# marked block without a command, fails the test; a marker inside another fenced block (a page showing
# the marker, as docs/build.md does) is text.
# Only deterministic commands belong in a checked block: help texts, `model show`, `predict
# --hardware ...` (from published figures), `inspect` of a committed file (tests/data/), mistakes and
# their one line; not a calibration's timings, dates or absolute paths of this machine.
# The docs show the full build's output: the mark " [not in this prediction-only build]" that a
# prediction-only build adds to calibrate and run in `itertime --help` is dropped before comparing.
# CLI11 writes the defaults of a subcommand's options differently across versions (`--seq INT=4096` in
# 2.1, Debian 12; `--seq INT [4096]` in 2.4, Debian 13): leave a help text that shows defaults unchecked.
set -uo pipefail
if [[ $# -lt 2 ]]; then
  echo "usage: $0 ITERTIME SOURCE_DIR [FILE.md...]" >&2
  exit 64
fi
ITERTIME="$(realpath "$1")"
SOURCE_DIR="$(realpath "$2")"
shift 2
MARKER='<!-- example: checked -->'
cd "$SOURCE_DIR" || exit 1
files=("$@")
if [[ ${#files[@]} -eq 0 ]]; then files=(README.md docs/*.md); fi

failures=0
checked=0
fail() {
  echo "FAIL $*" >&2
  failures=$((failures + 1))
}

# run_example FILE LINE COMMAND EXPECTED: runs COMMAND ("$ itertime ..." without the "$ ") and compares.
run_example() {
  local file="$1" line="$2" command="$3" expected="$4" actual
  actual="$(ITERTIME_BINARY="$ITERTIME" bash -c 'itertime() { "$ITERTIME_BINARY" "$@"; }
'"$command" 2>&1)"
  # The docs show the full build: a prediction-only build's mark on calibrate and run is dropped.
  actual="${actual// \[not in this prediction-only build\]/}"
  expected="$(printf '%s' "$expected")"  # trailing blank lines aside, as $(...) drops the command's
  checked=$((checked + 1))
  if [[ "$actual" != "$expected" ]]; then
    fail "$file:$line: \$ $command"
    diff <(printf '%s\n' "$expected") <(printf '%s\n' "$actual") | sed 's/^/    /' >&2
    echo "    (< the doc, > the command)" >&2
  fi
}

for file in "${files[@]}"; do
  [[ -f "$file" ]] || { fail "$file: no such file"; continue; }
  state=text  # text | fenced | marked | block
  fence=""
  command="" command_line=0 expected="" number=0 marker_line=0
  while IFS= read -r line || [[ -n "$line" ]]; do
    number=$((number + 1))
    case "$state" in
      text)
        if [[ "$line" == "$MARKER" ]]; then
          state=marked
          marker_line=$number
        elif [[ "$line" =~ ^(\`\`\`+) ]]; then  # another fenced block: a marker shown in it is not one
          fence="${BASH_REMATCH[1]}"
          state=fenced
        fi
        ;;
      fenced)
        [[ "$line" == "$fence" ]] && state=text
        ;;
      marked)
        if [[ "$line" == '```console' ]]; then
          state=block
          command=""
        else
          fail "$file:$marker_line: the marker is not followed by a \`\`\`console block"
          state=text
          if [[ "$line" =~ ^(\`\`\`+) ]]; then
            fence="${BASH_REMATCH[1]}"
            state=fenced
          fi
        fi
        ;;
      block)
        if [[ "$line" == '```' ]]; then
          if [[ -n "$command" ]]; then
            run_example "$file" "$command_line" "$command" "$expected"
          else
            fail "$file:$marker_line: a checked block without a '\$ itertime' command"
          fi
          state=text
        elif [[ "$line" == '$ itertime'* ]]; then
          [[ -n "$command" ]] && run_example "$file" "$command_line" "$command" "$expected"
          command="${line#'$ '}"
          command_line=$number
          expected=""
        elif [[ -n "$command" ]]; then
          expected+="$line"$'\n'
        fi
        ;;
    esac
  done <"$file"
  [[ "$state" == text || "$state" == fenced ]] || fail "$file:$marker_line: a checked block that does not end"
done

if [[ $checked -eq 0 ]]; then fail "no checked example in ${files[*]}"; fi
if [[ $failures -gt 0 ]]; then
  echo "$failures of the checked examples (or markers) failed, $checked commands run" >&2
  exit 1
fi
echo "all $checked checked doc examples agree with the commands"
