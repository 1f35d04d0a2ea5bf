"""tests/python/check_doc_example.py: the checked example of docs/python.md (CTest python_doc_example,
label python).

The marker `<!-- python example: checked -->`, on its own line right before a ```python block: that
block is run with this interpreter, the module's folder on PYTHONPATH, in SOURCE_DIR, and what it prints
(stdout and stderr) must equal the first ```text block after it exactly (trailing blank lines aside).
A marker without both blocks fails.

    python3 check_doc_example.py DOC.md MODULE_DIR SOURCE_DIR
"""
import os
import re
import subprocess
import sys

MARKER = "<!-- python example: checked -->"


def main():
    doc, module_dir, source_dir = sys.argv[1:4]
    with open(doc) as f:
        text = f.read()
    checked = 0
    failures = 0
    for at in [m.start() for m in re.finditer(re.escape(MARKER), text)]:
        rest = text[at + len(MARKER):]
        found = re.match(r"\s*```python\n(.*?)\n```\n(.*?)```text\n(.*?)```", rest, re.S)
        if found is None:
            print(f"FAIL {doc}: a marker without a ```python block and a ```text block after it")
            failures += 1
            continue
        script, expected = found.group(1), found.group(3)
        env = dict(os.environ, PYTHONPATH=module_dir + os.pathsep + os.environ.get("PYTHONPATH", ""))
        run = subprocess.run([sys.executable, "-c", script], cwd=source_dir, env=env, capture_output=True, text=True)
        got = run.stdout + run.stderr
        checked += 1
        if got.rstrip("\n") != expected.rstrip("\n") or run.returncode != 0:
            print(f"FAIL {doc}: the example's output (exit {run.returncode}) differs from the doc's:")
            print("--- doc\n" + expected.rstrip("\n") + "\n--- got\n" + got.rstrip("\n"))
            failures += 1
    if checked == 0 and failures == 0:
        print(f"FAIL {doc}: no checked example (the marker {MARKER})")
        return 1
    print(f"{checked} example(s) checked, {failures} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
