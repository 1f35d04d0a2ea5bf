"""itertime: the predicted iteration time of distributed LLaMA training, from Python (docs/python.md).

The same queries as the ``itertime`` command, computed by the same library (the query layer) in this
process: each function takes the command's options as keyword arguments (``--tp-comm-overlap`` is
``tp_comm_overlap``, ``--from`` is ``from_``), leaves out what the command leaves out with the command's
defaults (every keyword defaults to None: "not given"), and returns the dict the command's ``--json``
prints (keys with their units: ``iteration_us``, ``peak_memory_bytes``).

Functions: predict, plan, validate, import_logs (``itertime import``), score_published, read_calibration.
A user error raises ValueError with the command's one line; a wrong keyword or value type TypeError.
``python -m itertime ARGS`` runs the command itself.
"""
# Invariants: this file holds no rule of its own: every signature and docstring line comes from the native
# keyword tables (python/itertime_module.cpp), and every call goes to itertime._native unchanged.
import inspect as _inspect

from . import _native

__version__ = _native.version()
__all__ = ["predict", "plan", "validate", "import_logs", "score_published", "read_calibration", "__version__"]

_SUMMARIES = {
    "predict": ("One configuration's prediction: the dict `itertime predict --json` prints (iteration_us, breakdown_us, "
                "peak_memory_bytes, memory_split_bytes, rests_on, range_pct, flags, defaults, placement, input, ...)."),
    "plan": ("The fastest legal, memory-feasible configurations: the dict `itertime plan --json` prints (question, "
             "summary, candidates: the first `top`, guidance, input)."),
    "validate": ("A calibration's ground truth predicted: validation.json's dict of `itertime validate CAL` (holdout "
                 "'both': {'tuple': ..., 'precision': ...}; imported ground truth under 'imported'); with hardware, the "
                 "imported ground truth's scoring, as `itertime validate CAL --hardware NAME --json`. CAL is only read."),
    "import_logs": ("`itertime import LOG... -o CAL`: training logs into CAL's /groundtruth as imported ground truth "
                    "(CAL created or added to, all logs or none); returns one dict per log."),
    "score_published": "The framework model on published measurements: the dict `itertime score-published --json` prints.",
    "read_calibration": ("A calibration file's contents: file, meta (/meta as text), comm, operators (signatures, "
                         "timings, stages), groundtruth."),
}
# The positional arguments of the command, positional here too (the rest are keyword-only).
_POSITIONAL = {"validate": ("calibration",), "import_logs": ("logs",), "score_published": ("files",),
               "read_calibration": ("path",)}


def _make(name):
    table = _native.keywords(name)
    native = getattr(_native, name)
    positional = _POSITIONAL.get(name, ())
    parameters = [
        _inspect.Parameter(keyword,
                           _inspect.Parameter.POSITIONAL_OR_KEYWORD if keyword in positional
                           else _inspect.Parameter.KEYWORD_ONLY,
                           default=None)
        for keyword, _kind, _help in table]
    parameters.sort(key=lambda p: p.kind)
    signature = _inspect.Signature(parameters)

    def function(*args, **kwargs):
        try:
            bound = signature.bind(*args, **kwargs)
        except TypeError as error:
            raise TypeError(f"{name}(): {error}") from None
        return native(dict(bound.arguments))

    lines = [_SUMMARIES[name], "", "Arguments (None: not given, the command's default):"]
    lines += [f"    {keyword} ({kind}): {help_text}" for keyword, kind, help_text in table]
    function.__name__ = function.__qualname__ = name
    function.__signature__ = signature
    function.__doc__ = "\n".join(lines)
    function.__module__ = __name__
    return function


predict = _make("predict")
plan = _make("plan")
validate = _make("validate")
import_logs = _make("import_logs")
score_published = _make("score_published")
read_calibration = _make("read_calibration")
