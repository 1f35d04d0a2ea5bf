#!/usr/bin/env python3
"""update_doc_examples.py: rewrites the output of the docs' checked examples (the blocks
check_doc_examples.sh compares; same marker, same rules) from what ITERTIME prints now. For a maintainer
after a deliberate change of output: review the diff before committing it.

    tests/docs/update_doc_examples.py ITERTIME SOURCE_DIR [FILE.md...]
"""
import os
import pathlib
import subprocess
import sys

MARKER = "<!-- example: checked -->"
TAG = " [not in this prediction-only build]"


def run(itertime, source_dir, command):
    script = 'itertime() { "%s" "$@"; }\n%s' % (itertime, command)
    done = subprocess.run(["bash", "-c", script], cwd=source_dir, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines = done.stdout.replace(TAG, "").split("\n")
    while lines and lines[-1] == "":
        lines.pop()
    return lines


def update(itertime, source_dir, path):
    lines = path.read_text().split("\n")
    out, i, changed = [], 0, False
    fence = False
    while i < len(lines):
        line = lines[i]
        if not fence and line == MARKER and i + 1 < len(lines) and lines[i + 1] == "```console":
            out += [line, lines[i + 1]]
            i += 2
            block = []
            while i < len(lines) and lines[i] != "```":
                block.append(lines[i])
                i += 1
            new = []
            commands = [k for k, entry in enumerate(block) if entry.startswith("$ itertime")]
            for n, k in enumerate(commands):
                new.append(block[k])
                new += run(itertime, source_dir, block[k][2:])
                end = commands[n + 1] if n + 1 < len(commands) else len(block)
                if end > k + 1 and block[end - 1] == "":  # a blank line the page kept after the output
                    new.append("")
            changed |= new != block
            out += new
            if i < len(lines):
                out.append(lines[i])  # the block's closing fence
                i += 1
            continue
        if line.startswith("```"):
            fence = not fence
        out.append(line)
        i += 1
    if changed:
        path.write_text("\n".join(out))
        print("updated", path)


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    itertime, source_dir = os.path.realpath(sys.argv[1]), pathlib.Path(sys.argv[2]).resolve()
    files = [pathlib.Path(f) for f in sys.argv[3:]] or [source_dir / "README.md"] + sorted((source_dir / "docs").glob("*.md"))
    for f in files:
        update(itertime, source_dir, f if f.is_absolute() else source_dir / f)


if __name__ == "__main__":
    main()
