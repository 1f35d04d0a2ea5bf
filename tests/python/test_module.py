"""tests/python/test_module.py: the Python module `itertime` against the `itertime` command (CTest
python_module, label python).

Each function gives what the command's JSON gives, for the same options: predict (megatron-te on a
description, and itertime's own trainer on the checked-in calibration), plan, validate (validation.json);
read_calibration reads the ground truth the command validates; a user error is a ValueError with the
command's one line; the calibration file is never written. Run with the interpreter the module was built
for (Debian's /usr/bin/python3):

    python3 test_module.py ITERTIME MODULE_DIR SOURCE_DIR
"""
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import unittest

ITERTIME, MODULE_DIR, SOURCE_DIR = sys.argv[1:4]
sys.path.insert(0, MODULE_DIR)
import itertime  # noqa: E402  (the built module, found through MODULE_DIR)

CAL = "tests/data/accuracy-cpu.h5"
MODEL_8B = "data/models/llama3.1-8b.json"
FRAMEWORK_8B = dict(model=MODEL_8B, hardware="h100-sxm", framework="megatron-te", dp=4, tp=1, pp=1, cp=2, vp=1, mbs=1,
                    gbs=128, seq=8192, precision="amp-bf16", recipe="sp+dopt+ovl+opg")
FRAMEWORK_8B_FLAGS = ["--model", MODEL_8B, "--hardware", "h100-sxm", "--framework", "megatron-te", "--dp", "4", "--tp", "1",
                      "--pp", "1", "--cp", "2", "--vp", "1", "--mbs", "1", "--gbs", "128", "--seq", "8192",
                      "--precision", "amp-bf16", "--recipe", "sp+dopt+ovl+opg"]


def command_json(*args):
    out = subprocess.run([ITERTIME, *args], cwd=SOURCE_DIR, check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def digest(path):
    with open(os.path.join(SOURCE_DIR, path), "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


class ModuleAgainstCommand(unittest.TestCase):
    def test_predict_framework_is_the_commands_json(self):
        got = itertime.predict(**FRAMEWORK_8B)
        self.assertEqual(got, command_json("predict", *FRAMEWORK_8B_FLAGS, "--json"))
        self.assertGreater(got["iteration_us"], 0)
        self.assertEqual(got["memory_split_bytes"]["weights"] + got["memory_split_bytes"]["gradients"] +
                         got["memory_split_bytes"]["optimizer"] + got["memory_split_bytes"]["activations"] +
                         got["memory_split_bytes"]["other"], got["peak_memory_bytes"])

    def test_predict_calibrated_is_the_commands_json(self):
        model = "data/models/tiny-llama-gqa.json"
        got = itertime.predict(model=model, source=CAL, dp=2, gbs=8, seq=32, precision="fp32")
        want = command_json("predict", CAL, "--model", model, "--dp", "2", "--gbs", "8", "--seq", "32", "--precision", "fp32",
                            "--json")
        self.assertEqual(got, want)

    def test_plan_is_the_commands_json(self):
        got = itertime.plan(model=MODEL_8B, hardware="h100-sxm", framework="megatron-te", nodes=1, gbs=128, seq=8192, top=3)
        want = command_json("plan", "--model", MODEL_8B, "--hardware", "h100-sxm", "--framework", "megatron-te", "--nodes",
                            "1", "--gbs", "128", "--seq", "8192", "--top", "3", "--json")
        self.assertEqual(got, want)
        self.assertEqual(len(got["candidates"]), 3)

    def test_validate_is_validation_json_and_writes_nothing(self):
        before = digest(CAL)
        got = itertime.validate(CAL)
        self.assertEqual(digest(CAL), before)
        with tempfile.TemporaryDirectory() as out_dir:
            subprocess.run([ITERTIME, "validate", CAL, "--out-dir", out_dir], cwd=SOURCE_DIR, check=True, capture_output=True)
            with open(os.path.join(out_dir, "validation.json")) as f:
                want = json.load(f)
        self.assertEqual(got, want)
        self.assertEqual(got["mape_overall"]["count"], 8)
        precision = itertime.validate(CAL, holdout="precision")
        self.assertEqual(precision["holdout"], "precision")

    def test_read_calibration(self):
        cal = itertime.read_calibration(CAL)
        self.assertEqual(set(cal), {"file", "meta", "comm", "operators", "groundtruth"})
        self.assertEqual(len(cal["groundtruth"]), 8)
        self.assertEqual({row["precision"] for row in cal["groundtruth"]}, {"fp32"})
        self.assertIn("schema_version", cal["meta"])
        self.assertIsInstance(cal["meta"]["schema_version"], str)  # /meta's attributes, rendered as text
        validated = {row["key"]: row["measured_us"] for row in itertime.validate(CAL)["configurations"]}
        self.assertEqual(validated, {row["key"]: row["time_us_median"] for row in cal["groundtruth"]})
        self.assertTrue(cal["comm"] and cal["operators"]["signatures"] and cal["operators"]["stages"])
        self.assertIsInstance(cal["comm"][0]["time_us_median"], float)


class UserErrors(unittest.TestCase):
    def one_line(self, call, *needles):
        with self.assertRaises(ValueError) as raised:
            call()
        text = str(raised.exception)
        self.assertNotIn("\n", text)
        for needle in needles:
            self.assertIn(needle, text)

    def test_errors_are_value_errors_with_one_line(self):
        self.one_line(lambda: itertime.predict(model="no/such.json", gbs=8, seq=32), "no/such.json")
        self.one_line(lambda: itertime.predict(**{**FRAMEWORK_8B, "hardware": "no-such-gpu"}), "no-such-gpu")
        self.one_line(lambda: itertime.predict(**{**FRAMEWORK_8B, "recipe": "sp+bogus"}), "bogus")
        self.one_line(lambda: itertime.predict(**{**FRAMEWORK_8B, "dp": 3}), "128")
        self.one_line(lambda: itertime.validate("no/such.h5"), "no/such.h5")
        self.one_line(lambda: itertime.validate(CAL, holdout="rows"), "holdout")
        self.one_line(lambda: itertime.read_calibration("no/such.h5"), "no/such.h5")

    def test_keywords_only(self):
        with self.assertRaises(TypeError):
            itertime.predict(MODEL_8B, 128, 8192)  # positional: refused by the binding


if __name__ == "__main__":
    os.chdir(SOURCE_DIR)
    unittest.main(argv=[sys.argv[0], "-v"])
