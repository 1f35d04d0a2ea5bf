"""tests/python/test_module.py: the Python package `itertime` against the `itertime` command (CTest
python_module, label python).

A table of cases, each one query asked twice, of the module with keywords and of the command with its
options and --json, the answers compared field by field: predict (a description with megatron-te, a
calibration, the command's defaults left out, --from, --megatron-args, a what-if override beside --from),
plan (megatron-te, --from, a calibration), validate (both holdouts, a described device and a framework on
imported logs), import (the same logs imported by both into two files, their rows compared) and
score-published. Also: the calibration file is never written; a user error is a ValueError of one line with
the keywords' names; a mistyped keyword or a wrong type a TypeError of one line; __version__ is the
command's; docstrings list every keyword. Run with the interpreter the module was built for:

    python3 test_module.py ITERTIME PACKAGE_PARENT_DIR SOURCE_DIR
"""
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import unittest

ITERTIME, MODULE_DIR, SOURCE_DIR = (os.path.abspath(arg) for arg in sys.argv[1:4])
sys.path.insert(0, MODULE_DIR)
import itertime  # noqa: E402  (the built package, found through MODULE_DIR)

CAL = "tests/data/accuracy-cpu.h5"
LOGS = "tests/data/logs"
MODEL_8B = "data/models/llama3.1-8b.json"
TINY = "data/models/tiny-llama-gqa.json"
MEGATRON_FILE = "tests/formats/fixtures/llama3_8b_megatron.sh"
NEMO_FILE = "tests/formats/fixtures/llama3_8b_bridge.yaml"
MEGATRON_LINE = ("--num-layers 32 --hidden-size 4096 --ffn-hidden-size 14336 --num-attention-heads 32 "
                 "--group-query-attention --num-query-groups 8 --seq-length 4096 --max-position-embeddings 8192 "
                 "--swiglu --normalization RMSNorm --untie-embeddings-and-output-weights --disable-bias-linear "
                 "--position-embedding-type rope --vocab-size 128256 --tensor-model-parallel-size 2 "
                 "--micro-batch-size 1 --global-batch-size 64 --bf16")


def flags(**keywords):
    """The command's options for the module's keywords (from_ is --from; a list is comma-separated)."""
    out = []
    for keyword, value in keywords.items():
        if keyword in ("source", "files"):  # the command's positional arguments
            out[0:0] = value if isinstance(value, list) else [value]
            continue
        flag = "--" + keyword.rstrip("_").replace("_", "-")
        if value is True:
            out.append(flag)
        elif isinstance(value, list):
            out += [flag, ",".join(str(v) for v in value)]
        else:
            out += [flag, str(value)]
    return out


def command(*args, cwd=SOURCE_DIR):
    return subprocess.run([ITERTIME, *args], cwd=cwd, check=True, capture_output=True, text=True).stdout


def command_json(*args, cwd=SOURCE_DIR):
    return json.loads(command(*args, cwd=cwd))


def digest(path):
    with open(os.path.join(SOURCE_DIR, path), "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


# (name, function, keywords): the command is `itertime <verb> flags(keywords) --json`.
CASES = [
    ("predict megatron-te on a description", "predict",
     dict(model=MODEL_8B, hardware="h100-sxm", framework="megatron-te", dp=4, cp=2, mbs=1, gbs=128, seq=8192,
          precision="amp-bf16", recipe="sp+dopt+ovl+opg", allow_implausible=True)),  # over the memory: flagged
    ("predict on a calibration", "predict", dict(source=CAL, model=TINY, dp=2, gbs=8, seq=32, precision="fp32")),
    ("predict, the command's defaults (gbs, precision)", "predict", dict(source=CAL, model=TINY, dp=2, seq=32)),
    ("predict a described device from a calibration", "predict",
     dict(source=CAL, model=TINY, hardware="h100-sxm", dp=2, gbs=8, seq=32, precision="fp32", allow_implausible=True)),
    ("predict --from a Megatron-LM script", "predict", dict(from_=MEGATRON_FILE, hardware="h100-sxm")),
    ("predict --from with an override", "predict", dict(from_=MEGATRON_FILE, hardware="h100-sxm", tp=4, gbs=256)),
    ("predict --from a NeMo YAML", "predict", dict(from_=NEMO_FILE, hardware="h100-sxm", gpus=8)),
    ("predict --megatron-args", "predict", dict(megatron_args=MEGATRON_LINE, hardware="h100-sxm", framework="megatron-te",
                                               gpus=8, allow_implausible=True)),
    ("plan megatron-te on one node", "plan",
     dict(model=MODEL_8B, hardware="h100-sxm", framework="megatron-te", nodes=1, gbs=128, seq=8192, top=3)),
    ("plan --from", "plan", dict(from_=MEGATRON_FILE, hardware="h100-sxm", top=4)),
    ("plan on a calibration, the default tie", "plan",
     dict(source=CAL, model=TINY, gpus=2, gbs=8, seq=32, precisions=["fp32"], mbs=[1, 2])),
    # Two of the shipped files: narayanan2021-table1.json's leave-one-model-out fit alone takes 20 s.
    ("score-published", "score_published",
     dict(files=["data/published/bigscience-bloom176b.json", "data/published/nemotron4-dgxc-h100.json"])),
]


class ModuleAgainstCommand(unittest.TestCase):
    def test_the_table(self):
        for name, function, keywords in CASES:
            with self.subTest(name):
                got = getattr(itertime, function)(**keywords)
                verb = function.replace("_", "-")
                want = command_json(verb, *flags(**keywords), "--json")
                self.assertEqual(sorted(got), sorted(want), name)
                for key in want:
                    self.assertEqual(got[key], want[key], f"{name}: {key}")

    def test_fitted_terms_are_the_commands(self):
        # itertime fit --framework megatron-te's terms, used by predict and plan alike (issue 46).
        with tempfile.TemporaryDirectory() as work:
            terms = os.path.join(work, "terms.json")
            command("fit", "--framework", "megatron-te", "data/published/nemotron4-dgxc-h100.json", "-o", terms)
            for function, keywords in (
                    ("predict", dict(model=MODEL_8B, hardware="h100-sxm", dp=4, cp=2, gbs=128, seq=8192,
                                     recipe="sp+dopt+ovl+opg", fitted=terms)),
                    ("plan", dict(model=MODEL_8B, hardware="h100-sxm", framework="megatron-te", nodes=1, gbs=128,
                                  seq=8192, top=3, fitted=terms))):
                got = getattr(itertime, function)(**keywords)
                want = command_json(function, *flags(**keywords), "--json")
                self.assertEqual(got, want, function)
            described = itertime.predict(model=MODEL_8B, hardware="h100-sxm", dp=4, cp=2, gbs=128, seq=8192,
                                         recipe="sp+dopt+ovl+opg")
            fitted = itertime.predict(model=MODEL_8B, hardware="h100-sxm", dp=4, cp=2, gbs=128, seq=8192,
                                      recipe="sp+dopt+ovl+opg", fitted=terms)
            self.assertGreater(fitted["iteration_us"], described["iteration_us"])  # GEMMs at 0.88 of the figures

    def test_defaults_are_the_commands(self):
        got = itertime.predict(source=CAL, model=TINY, dp=2, seq=32)
        self.assertEqual(got["global_batch"] if "global_batch" in got else got["config"]["global_batch"], 2)
        self.assertTrue(any(line.startswith("--gbs 2") for line in got["defaults"]), got["defaults"])
        self.assertTrue(any(line.startswith("--precision fp32") for line in got["defaults"]), got["defaults"])

    def test_validate_both_holdouts_is_the_commands_reports_and_writes_nothing(self):
        before = digest(CAL)
        both = itertime.validate(CAL, holdout="both")
        tuple_only = itertime.validate(CAL)
        self.assertEqual(digest(CAL), before)
        with tempfile.TemporaryDirectory() as out_dir:
            command("validate", CAL, "--out-dir", out_dir, "--holdout", "both")
            with open(os.path.join(out_dir, "validation.json")) as f:
                want_tuple = json.load(f)
            with open(os.path.join(out_dir, "validation-precision.json")) as f:
                want_precision = json.load(f)
        self.assertEqual(sorted(both), ["precision", "tuple"])
        self.assertEqual(both["tuple"], want_tuple)
        self.assertEqual(both["precision"], want_precision)
        self.assertEqual(tuple_only, want_tuple)
        self.assertEqual(tuple_only["mape_overall"]["count"], 8)

    def test_imports_and_their_scoring(self):
        logs_dir = os.path.join(SOURCE_DIR, LOGS)
        with tempfile.TemporaryDirectory() as work:
            by_module, by_command = os.path.join(work, "module.h5"), os.path.join(work, "command.h5")
            nemo = dict(model=os.path.join(SOURCE_DIR, MODEL_8B), dp=8, tp=2, pp=4, gbs=512, seq=8192)
            for target in (by_module, by_command):
                if target == by_module:  # from the logs' folder, as the command: the logs' names are stored
                    os.chdir(logs_dir)
                    try:
                        imported = itertime.import_logs(["megatron_llama8b_tp2.log"], output=target)
                        itertime.import_logs("nemo_llama8b.log", output=target, **nemo)
                    finally:
                        os.chdir(SOURCE_DIR)
                    self.assertEqual(imported[0]["run"]["layout"], "dp4-tp2-pp1 mbs1 gbs128 seq8192")
                else:
                    command("import", "megatron_llama8b_tp2.log", "-o", target, cwd=logs_dir)
                    command("import", "nemo_llama8b.log", "-o", target, *flags(**nemo), cwd=logs_dir)
            rows = [{k: v for k, v in row.items() if k not in ("created_utc",)}
                    for row in itertime.read_calibration(by_module)["groundtruth"]]
            want_rows = [{k: v for k, v in row.items() if k not in ("created_utc",)}
                         for row in itertime.read_calibration(by_command)["groundtruth"]]
            self.assertEqual(rows, want_rows)
            for source in (dict(hardware="h100-sxm"), dict(hardware="h100-sxm", framework="megatron-te")):
                with self.subTest(**source):
                    got = itertime.validate(by_module, **source)
                    want = command_json("validate", by_command, *flags(**source), "--json")
                    got["calibration_file"] = want["calibration_file"]
                    self.assertEqual(got, want)
                    self.assertEqual(len(got["configurations"]), 2)
            with self.assertRaises(ValueError) as raised:
                itertime.validate(by_module)
            self.assertIn("hardware NAME", str(raised.exception))


class UserErrors(unittest.TestCase):
    def one_line(self, error, call, *needles):
        with self.assertRaises(error) as raised:
            call()
        text = str(raised.exception)
        self.assertNotIn("\n", text)
        for needle in needles:
            self.assertIn(needle, text)
        return text

    def test_errors_are_value_errors_with_one_line(self):
        framework = dict(CASES[0][2])
        self.one_line(ValueError, lambda: itertime.predict(model="no/such.json", gbs=8, seq=32), "no/such.json")
        self.one_line(ValueError, lambda: itertime.predict(**{**framework, "hardware": "no-such-gpu"}), "no-such-gpu")
        self.one_line(ValueError, lambda: itertime.predict(**{**framework, "recipe": "sp+bogus"}), "bogus")
        self.one_line(ValueError, lambda: itertime.predict(**{**framework, "dp": 3}), "128")
        self.one_line(ValueError, lambda: itertime.validate("no/such.h5"), "no/such.h5")
        self.one_line(ValueError, lambda: itertime.validate(CAL, holdout="rows"), "holdout rows")
        self.one_line(ValueError, lambda: itertime.read_calibration("no/such.h5"), "no/such.h5")
        # The command's option names in a message are the keywords here.
        text = self.one_line(ValueError, lambda: itertime.predict(**{**framework, "fp8_param_gather": True}),
                             "fp8_param_gather needs precision fp8")
        self.assertNotIn("--", text)

    def test_bad_keywords_and_values_are_one_line(self):
        self.one_line(TypeError, lambda: itertime.predict(model=TINY, gbz=8, seq=32), "gbz")
        self.one_line(TypeError, lambda: itertime.predict(MODEL_8B, 128, 8192), "predict")
        self.one_line(ValueError, lambda: itertime.predict(model=TINY, gbs=2**40, seq=32), "gbs", "out of range")
        self.one_line(TypeError, lambda: itertime.predict(model=TINY, gbs="8", seq=32), "gbs", "int")
        self.one_line(ValueError, lambda: itertime.plan(model=TINY, gbs=8, seq=32, gpus=2, tie_pct=140), "tie_pct")
        self.one_line(TypeError, lambda: itertime.plan(model=TINY, gbs=8, seq=32, gpus=2, mbs=["1"]), "mbs")


class Package(unittest.TestCase):
    def test_version_is_the_commands(self):
        self.assertIn(itertime.__version__, command("--version"))

    def test_docstrings_name_every_keyword(self):
        import inspect
        for name in ("predict", "plan", "validate", "import_logs", "score_published", "read_calibration"):
            function = getattr(itertime, name)
            for keyword in inspect.signature(function).parameters:
                self.assertIn(f"    {keyword} (", function.__doc__, f"{name}: {keyword}")
        self.assertIn("from_", inspect.signature(itertime.predict).parameters)

    def test_python_m_itertime_runs_the_command(self):
        out = subprocess.run([sys.executable, "-m", "itertime", "--version"], cwd=SOURCE_DIR, check=True,
                             capture_output=True, text=True, env={**os.environ, "PYTHONPATH": MODULE_DIR}).stdout
        self.assertEqual(out, command("--version"))

    def test_read_calibration(self):
        cal = itertime.read_calibration(CAL)
        self.assertEqual(set(cal), {"file", "meta", "comm", "operators", "groundtruth"})
        self.assertEqual(len(cal["groundtruth"]), 8)
        self.assertIsInstance(cal["meta"]["schema_version"], str)  # /meta's attributes, rendered as text
        validated = {row["key"]: row["measured_us"] for row in itertime.validate(CAL)["configurations"]}
        self.assertEqual(validated, {row["key"]: row["time_us_median"] for row in cal["groundtruth"]})


if __name__ == "__main__":
    os.chdir(SOURCE_DIR)
    unittest.main(argv=[sys.argv[0], "-v"])
