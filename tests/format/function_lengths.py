#!/usr/bin/env python3
"""function_lengths.py: no function longer than the limit in launcher/, formats/ and predict/ without its
reason beside it (a comment line above it holding "Long because").

    function_lengths.py SOURCE_DIR [--limit 80] [--list] [--folders launcher formats predict]

Reads the code as clang-format (the repository's .clang-format) leaves it: a function defined at
namespace scope starts on a line at column 0 that ends with "{" (its signature may run over the lines
above, which are then counted too) and ends at the next line that is "}" at column 0. Its length is
those lines, signature to closing brace. Member functions defined inside a class body, and lambdas, are
counted as part of what holds them. Not a parser: it is exact for this tree's formatting, and a line it
misreads would show in --list.

Exit status: 0 when every long function has its reason, 1 otherwise (each named with file, line,
length); --list prints every function over the limit, with or without a reason, and exits 0.
"""
import argparse
import pathlib
import re
import sys

NOT_A_FUNCTION = re.compile(r"^(namespace|struct|class|enum|union|extern|template\s*<[^>]*>\s*(struct|class))\b")


def functions(lines):
    """(first line index, last line index, name) of each namespace-scope function definition."""
    i = 0
    while i < len(lines):
        line = lines[i]
        opens = (line and not line[0].isspace() and line.rstrip().endswith("{") and not NOT_A_FUNCTION.match(line)
                 and not line.startswith(("//", "#")) and "=" not in line.split("(")[0])
        if not opens:
            i += 1
            continue
        first = i
        while (first > 0 and lines[first - 1].strip() and not lines[first - 1][0].isspace()
               and not lines[first - 1].rstrip().endswith((";", "}", "{"))
               and not lines[first - 1].startswith(("//", "#", "template"))):
            first -= 1
        last = i + 1
        while last < len(lines) and not lines[last].startswith("}"):
            last += 1
        match = re.search(r"([A-Za-z_][A-Za-z_0-9:~]*)\s*\(", lines[first] if "(" in lines[first] else line)
        yield first, last, match.group(1) if match else line[:40]
        i = last + 1


def has_reason(lines, first):
    """Whether a comment line right above the function (or its template line) says why it is long."""
    k = first - 1
    while k >= 0 and lines[k].startswith(("//", "template")):
        if "Long because" in lines[k]:
            return True
        k -= 1
    return False


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("source_dir")
    parser.add_argument("--limit", type=int, default=80)
    parser.add_argument("--list", action="store_true")
    parser.add_argument("--folders", nargs="+", default=["launcher", "formats", "predict"])
    args = parser.parse_args()
    root = pathlib.Path(args.source_dir)
    long_ones = []
    for folder in args.folders:
        for path in sorted((root / folder).rglob("*")):
            if path.suffix not in (".cpp", ".hpp"):
                continue
            lines = path.read_text(errors="replace").split("\n")
            for first, last, name in functions(lines):
                length = last - first + 1
                if length > args.limit:
                    long_ones.append((length, str(path.relative_to(root)), first + 1, name, has_reason(lines, first)))
    long_ones.sort(key=lambda f: (-f[0], f[1]))
    if args.list:
        for length, file, line, name, reason in long_ones:
            print(f"{length:4d} lines  {file}:{line}  {name}{'  (its reason beside it)' if reason else ''}")
        return 0
    missing = [f for f in long_ones if not f[4]]
    for length, file, line, name, _ in missing:
        print(f"{file}:{line}: {name} is {length} lines (over {args.limit}): split it, or say why above it "
              f"in a comment starting 'Long because'")
    if not missing:
        print(f"function_lengths: {len(long_ones)} functions over {args.limit} lines in {', '.join(args.folders)}, "
              f"each with its reason")
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
