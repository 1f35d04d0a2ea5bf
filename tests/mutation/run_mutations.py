#!/usr/bin/env python3
"""run_mutations.py: itertime's mutation benchmark (issue 45). Run by hand, never by CI or ctest.

Each mutation of the catalogue (tests/mutation/catalogue.txt) is a plausible one-line bug written by
reading the code: a file, an exact pattern, its replacement, and the ctest regex of the tests that
should catch it. For each one alone this script:
  1. checks the pattern occurs exactly once in the file (else prints "PATTERN NOT FOUND" or
     "PATTERN NOT UNIQUE" and counts the mutation as broken, not as caught: the catalogue is stale);
  2. writes the mutant, rebuilds only the executables the named tests run (found with
     `ctest --show-only=json-v1`), and runs those tests (a mutant that does not compile is reported as
     "build failed" and left out of the score);
  3. restores the file, byte for byte, whatever happens (also on Ctrl-C or a crash: the original is
     kept in memory and in FILE.mutation-backup until restored).
A mutant is caught ("killed") when a named test fails. The score is printed per file and overall; with
--new-tests REGEX the same run also says which mutants the tests not matching REGEX (the tests that
existed before) catch alone: the "before" score, without a second build per mutant.

Usage (from the repository root, a configured build with tests):
  tests/mutation/run_mutations.py [--build build-po] [--only SUBSTRING] [--limit N] [--check]
                                  [--new-tests REGEX] [--jobs N] [--report FILE]
  --check      only verify that every pattern matches exactly once (no build; seconds)
  --only       run the mutations whose file contains SUBSTRING (e.g. framework_predictor)
  --new-tests  ctest names added since the "before" score (default: the suites of issue 45)
  --order      files in this order first (comma-separated substrings), the rest after
  --results F  append each mutant's outcome to F (JSON lines) as it goes: an interrupted run keeps them
  --summarize F  print the scores of a results file (no build)
Exit status: 0 when every mutation was applied (whatever the score), 1 when a pattern is stale, 2 on
a usage error.
"""
import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CATALOGUE = os.path.join(ROOT, "tests", "mutation", "catalogue.txt")
# The suites issue 45 added: what the "before" score leaves out.
NEW_TESTS = (r"^(FrameworkPins|FrameworkPinsProperty|FrameworkPinsStage|PublishedGolden|MemorySplitFields|"
             r"PredictionRangeText|AnswerCheckBoundary|PlanGuidanceBoundary|KernelRoofline|AttachDrift|"
             r"FitFirstProfiles|MegatronDefaults|NemoDefaults|TorchtitanDefaults|LogWarmup)\.")


class Mutation:
    def __init__(self, line_no, path, pattern, replacement, regex):
        self.line_no, self.path, self.pattern, self.replacement, self.regex = line_no, path, pattern, replacement, regex

    def describe(self):
        return "%s:%d  %r -> %r" % (self.path, self.line_no, self.pattern, self.replacement)


def unescape(text):
    return text.replace("\\t", "\t").replace("\\n", "\n")


def read_catalogue(path):
    """Lines: FILE<TAB>PATTERN<TAB>REPLACEMENT<TAB>REGEX; REGEX may be @NAME of a line '@NAME<TAB>REGEX'."""
    names, mutations = {}, []
    with open(path, encoding="utf-8") as f:
        for number, raw in enumerate(f, 1):
            line = raw.rstrip("\n")
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            fields = line.split("\t")
            if line.startswith("@"):
                if len(fields) != 2:
                    sys.exit("%s:%d: a regex name is '@NAME<TAB>REGEX'" % (path, number))
                names[fields[0]] = fields[1]
                continue
            if len(fields) != 4:
                sys.exit("%s:%d: expected 4 tab-separated fields, got %d" % (path, number, len(fields)))
            regex = fields[3]
            if regex.startswith("@"):
                if regex not in names:
                    sys.exit("%s:%d: unknown regex name %s" % (path, number, regex))
                regex = names[regex]
            mutations.append(Mutation(number, fields[0], unescape(fields[1]), unescape(fields[2]), regex))
    return mutations


class Restorer:
    """Restores the mutated file on exit, Ctrl-C or SIGTERM."""

    def __init__(self):
        self.path, self.original = None, None
        signal.signal(signal.SIGINT, self._signal)
        signal.signal(signal.SIGTERM, self._signal)

    def mutate(self, path, original, mutant):
        self.path, self.original = path, original
        with open(path + ".mutation-backup", "wb") as f:
            f.write(original)
        with open(path, "wb") as f:
            f.write(mutant)

    def restore(self):
        if self.path is None:
            return
        with open(self.path, "wb") as f:
            f.write(self.original)
        os.remove(self.path + ".mutation-backup")
        self.path, self.original = None, None

    def _signal(self, signum, _frame):
        self.restore()
        sys.stderr.write("\ninterrupted: the tree is restored\n")
        sys.exit(128 + signum)


def targets_of(build, regex, cache):
    """The build's executables the tests matching `regex` run (their CMake target names)."""
    if regex in cache:
        return cache[regex]
    out = subprocess.run(["ctest", "--test-dir", build, "-R", regex, "--show-only=json-v1"],
                         capture_output=True, text=True, check=True).stdout
    targets = set()
    build_abs = os.path.abspath(build)
    for test in json.loads(out).get("tests", []):
        for arg in test.get("command", []):
            if arg.startswith(build_abs) and os.path.isfile(arg) and os.access(arg, os.X_OK):
                targets.add(os.path.basename(arg))
    cache[regex] = sorted(targets)
    return cache[regex]


def run_tests(build, regex, jobs, timeout):
    """Names of the failed tests (ctest's JUnit), and how many ran."""
    with tempfile.TemporaryDirectory() as tmp:
        junit = os.path.join(tmp, "junit.xml")
        subprocess.run(["ctest", "--test-dir", build, "-R", regex, "-j", str(jobs), "--timeout", str(timeout),
                        "--output-junit", junit], capture_output=True, text=True)
        if not os.path.exists(junit):
            return ["(ctest wrote no results)"], 0
        failed, count = [], 0
        for case in ET.parse(junit).getroot().iter("testcase"):
            count += 1
            status = case.get("status", "")
            if status not in ("run", "notrun", "disabled") or case.find("failure") is not None:
                if status != "notrun" and status != "disabled":
                    failed.append(case.get("name"))
        return failed, count


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build", default=os.path.join(ROOT, "build-po"))
    parser.add_argument("--catalogue", default=CATALOGUE)
    parser.add_argument("--only", default="")
    parser.add_argument("--limit", type=int, default=0)
    parser.add_argument("--check", action="store_true")
    parser.add_argument("--new-tests", default=NEW_TESTS)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--timeout", type=int, default=300)
    parser.add_argument("--report", default="")
    parser.add_argument("--results", default="")
    parser.add_argument("--summarize", default="")
    parser.add_argument("--order", default="")
    args = parser.parse_args()

    if args.summarize:
        with open(args.summarize) as f:
            summarize([json.loads(line) for line in f if line.strip()])
        return 0
    mutations = [m for m in read_catalogue(args.catalogue) if args.only in m.path]
    if args.order:
        first = [s for s in args.order.split(",") if s]
        rank = lambda m: next((i for i, s in enumerate(first) if s in m.path), len(first))
        mutations.sort(key=rank)
    if args.limit:
        mutations = mutations[: args.limit]
    stale = 0
    for m in mutations:
        with open(os.path.join(ROOT, m.path), encoding="utf-8") as f:
            count = f.read().count(m.pattern)
        if count != 1:
            stale += 1
            print("PATTERN %s (%d matches): %s" % ("NOT FOUND" if count == 0 else "NOT UNIQUE", count, m.describe()),
                  flush=True)
    print("%d mutations, %d stale patterns" % (len(mutations), stale), flush=True)
    if args.check:
        return 1 if stale else 0

    new_tests = re.compile(args.new_tests)
    restorer = Restorer()
    cache, results = {}, []
    started = time.time()
    try:
        for index, m in enumerate(mutations, 1):
            path = os.path.join(ROOT, m.path)
            with open(path, "rb") as f:
                original = f.read()
            text = original.decode("utf-8")
            row = {"file": m.path, "line": m.line_no, "pattern": m.pattern, "replacement": m.replacement, "regex": m.regex}
            if text.count(m.pattern) != 1:
                row["outcome"] = "stale"
                results.append(row)
                continue
            targets = targets_of(args.build, m.regex, cache)
            restorer.mutate(path, original, text.replace(m.pattern, m.replacement).encode("utf-8"))
            try:
                build = subprocess.run(["nice", "cmake", "--build", args.build, "--target"] + (targets or ["all"]),
                                       capture_output=True, text=True)
                if build.returncode != 0:
                    row["outcome"] = "build failed"
                else:
                    failed, ran = run_tests(args.build, m.regex, args.jobs, args.timeout)
                    row["ran"] = ran
                    row["failed"] = failed
                    old = [t for t in failed if not new_tests.search(t or "")]
                    row["outcome"] = "killed" if failed else ("no tests" if ran == 0 else "survived")
                    row["killed_before"] = bool(old)
            finally:
                restorer.restore()
            results.append(row)
            if args.results:
                with open(args.results, "a") as f:
                    f.write(json.dumps(row) + "\n")
            print("[%d/%d %4.0fs] %-9s %s%s" % (index, len(mutations), time.time() - started, row["outcome"], m.describe(),
                                                "" if row["outcome"] != "killed" else "  by " + ", ".join(row["failed"][:3])),
                  flush=True)
    finally:
        restorer.restore()
        # Leave the executables the run rebuilt matching the restored tree.
        built = sorted({t for targets in cache.values() for t in targets})
        if built:
            subprocess.run(["nice", "cmake", "--build", args.build, "--target"] + built, capture_output=True)
    summarize(results)
    if args.report:
        with open(args.report, "w") as f:
            json.dump(results, f, indent=1)
    return 1 if any(r["outcome"] == "stale" for r in results) else 0


def summarize(results):
    """The score per file and overall: caught / scored, by the tests before issue 45 and by all."""
    by_file = {}
    for row in results:
        entry = by_file.setdefault(row["file"], {"scored": 0, "killed": 0, "before": 0, "other": 0})
        if row["outcome"] in ("killed", "survived", "no tests"):
            entry["scored"] += 1
            entry["killed"] += row["outcome"] == "killed"
            entry["before"] += bool(row.get("killed_before"))
        else:
            entry["other"] += 1
    print("\n%-48s %7s %7s %14s %14s" % ("file", "scored", "other", "before", "after"))
    totals = {"scored": 0, "killed": 0, "before": 0, "other": 0}
    for path in sorted(by_file):
        e = by_file[path]
        for k in totals:
            totals[k] += e[k]
        pct = lambda n: "%3d (%5.1f%%)" % (n, 100.0 * n / e["scored"]) if e["scored"] else "-"
        print("%-48s %7d %7d %14s %14s" % (path, e["scored"], e["other"], pct(e["before"]), pct(e["killed"])))
    n = totals["scored"] or 1
    print("%-48s %7d %7d %9d (%4.1f%%) %9d (%4.1f%%)" % ("overall", totals["scored"], totals["other"], totals["before"],
                                                        100.0 * totals["before"] / n, totals["killed"],
                                                        100.0 * totals["killed"] / n))
    for area in ("predict/", "formats/", "validate/", "common/"):
        rows = [r for r in results if r["file"].startswith(area) and r["outcome"] in ("killed", "survived", "no tests")]
        if rows:
            k = sum(r["outcome"] == "killed" for r in rows)
            b = sum(bool(r.get("killed_before")) for r in rows)
            print("%-48s %7d %7s %9d (%4.1f%%) %9d (%4.1f%%)" % (area, len(rows), "", b, 100.0 * b / len(rows), k,
                                                                100.0 * k / len(rows)))
    survivors = [r for r in results if r["outcome"] in ("survived", "no tests")]
    if survivors:
        print("\nsurvivors:")
        for r in survivors:
            print("  %s:%d  %r -> %r" % (r["file"], r["line"], r["pattern"], r["replacement"]))
    broken = [r for r in results if r["outcome"] not in ("killed", "survived", "no tests")]
    for r in broken:
        print("  %s: %s:%d  %r" % (r["outcome"], r["file"], r["line"], r["pattern"]))


if __name__ == "__main__":
    sys.exit(main())
