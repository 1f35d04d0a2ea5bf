// itertime_module.cpp: the Python module `itertime` (docs/python.md): predict, plan, validate and
// read_calibration, each returning plain Python values (dicts, lists, str, int, float, bool, None) with
// the keys of the command's JSON (units in the names: iteration_us, peak_memory_bytes).
// Invariants:
//  - Every function takes keyword arguments named as the command's options (dp, tp, pp, cp, vp, mbs, gbs,
//    seq, precision, recipe, ...) and calls the libraries the command calls (prediction_query.hpp,
//    calibration_view.hpp); no state is kept between calls.
//  - A user error is a ValueError carrying the command's one line; an internal error a RuntimeError.
//  - Nothing is printed.
#include <optional>
#include <string>
#include <vector>

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "common/errors.hpp"
#include "python/calibration_view.hpp"
#include "python/prediction_query.hpp"

namespace py = pybind11;

namespace {

// A JSON value as plain Python values, through the json module (NaN never occurs: the writers give null).
py::object to_python(const nlohmann::json& value) { return py::module_::import("json").attr("loads")(value.dump()); }

py::object predict(const std::string& model, int gbs, int seq, const std::optional<std::string>& source,
                   const std::optional<std::string>& hardware, const std::string& framework, int dp, int tp, int pp, int cp,
                   int vp, int mbs, const std::string& precision, const std::string& recipe, bool blind, bool raw,
                   bool allow_implausible, double device_memory_gib, const std::optional<std::string>& efficiency,
                   const std::string& fp8_recipe, bool tp_comm_overlap, bool fp8_param_gather,
                   const std::optional<int64_t>& ranks_per_node) {
  itertime::python::PredictQuery q;
  q.model_file = model;
  q.source = source.value_or("");
  q.hardware = hardware.value_or("");
  q.efficiency = efficiency.value_or("");
  q.framework = framework;
  q.dp = dp, q.tp = tp, q.pp = pp, q.cp = cp, q.vp = vp, q.micro_batch = mbs, q.global_batch = gbs, q.seq_len = seq;
  q.precision = precision;
  q.recipe = recipe;
  q.blind = blind, q.raw = raw, q.allow_implausible = allow_implausible;
  q.device_memory_gib = device_memory_gib;
  q.fp8_recipe = fp8_recipe;
  q.tp_comm_overlap = tp_comm_overlap, q.fp8_param_gather = fp8_param_gather;
  q.ranks_per_node = ranks_per_node.value_or(-1);
  nlohmann::json out;
  {
    py::gil_scoped_release unlocked;
    out = itertime::python::predict_json(q);
  }
  return to_python(out);
}

py::object plan(const std::string& model, int gbs, int seq, const std::optional<std::string>& source,
                const std::optional<std::string>& hardware, const std::string& framework, int gpus, int nodes,
                const std::vector<int>& mbs, const std::vector<int>& vp, const std::vector<int>& cp,
                const std::vector<std::string>& precisions, const std::optional<std::vector<std::string>>& recipes,
                bool all_recipes, double device_memory_gib, const std::optional<std::string>& efficiency,
                const std::vector<std::string>& fp8_recipes, const std::optional<double>& tie_pct, int top) {
  itertime::python::PlanQuery q;
  q.model_file = model;
  q.global_batch = gbs, q.seq_len = seq;
  q.source = source.value_or("");
  q.hardware = hardware.value_or("");
  q.efficiency = efficiency.value_or("");
  q.framework = framework;
  q.gpus = gpus, q.nodes = nodes, q.top = top;
  q.micro_batches = mbs, q.virtual_stages = vp, q.context_parallel = cp;
  q.precisions = precisions;
  q.recipes = recipes;
  q.all_recipes = all_recipes;
  q.device_memory_gib = device_memory_gib;
  q.fp8_recipes = fp8_recipes;
  q.tie_pct = tie_pct;
  nlohmann::json out;
  {
    py::gil_scoped_release unlocked;
    out = itertime::python::plan_json(q);
  }
  return to_python(out);
}

}  // namespace

PYBIND11_MODULE(itertime, m) {
  m.doc() =
      "itertime: predicted iteration time of distributed LLaMA training (docs/python.md). Results are plain dicts "
      "with the keys of the command's --json output.";
  py::register_exception_translator([](std::exception_ptr error) {
    try {
      if (error) std::rethrow_exception(error);
    } catch (const itertime::UserError& e) {
      PyErr_SetString(PyExc_ValueError, e.what());
    }
  });
  using namespace pybind11::literals;
  m.def("predict", &predict, py::kw_only(), "model"_a, "gbs"_a, "seq"_a, "source"_a = py::none(), "hardware"_a = py::none(),
        "framework"_a = "itertime", "dp"_a = 1, "tp"_a = 1, "pp"_a = 1, "cp"_a = 1, "vp"_a = 1, "mbs"_a = 1,
        "precision"_a = "amp-bf16", "recipe"_a = "plain", "blind"_a = false, "raw"_a = false, "allow_implausible"_a = false,
        "device_memory_gib"_a = 0.0, "efficiency"_a = py::none(), "fp8_recipe"_a = "delayed", "tp_comm_overlap"_a = false,
        "fp8_param_gather"_a = false, "ranks_per_node"_a = py::none(),
        "One configuration's prediction: the dict `itertime predict --json` prints (iteration_us, breakdown_us, "
        "peak_memory_bytes, memory_split_bytes, rests_on, range_pct, flags, placement, ...). model: a LLaMA config.json; "
        "source: a calibration .h5 or fitted model (framework itertime); hardware: a data/hardware name; framework: itertime "
        "or megatron-te; ranks_per_node: on a calibration, the job's ranks per node (--ranks-per-node; default its own). Raises "
        "ValueError with the command's one-line message on a user error.");
  m.def("plan", &plan, py::kw_only(), "model"_a, "gbs"_a, "seq"_a, "source"_a = py::none(), "hardware"_a = py::none(),
        "framework"_a = "itertime", "gpus"_a = 0, "nodes"_a = 0, "mbs"_a = std::vector<int>{1, 2, 4, 8},
        "vp"_a = std::vector<int>{1}, "cp"_a = std::vector<int>{1}, "precisions"_a = std::vector<std::string>{"amp-bf16"},
        "recipes"_a = py::none(), "all_recipes"_a = false, "device_memory_gib"_a = 0.0, "efficiency"_a = py::none(),
        "fp8_recipes"_a = std::vector<std::string>{"delayed"}, "tie_pct"_a = py::none(), "top"_a = 10,
        "The fastest legal, memory-feasible configurations: the dict `itertime plan --json` prints (question, summary, "
        "candidates: the first `top`). recipes None: plain (megatron-te: NeMo's recipes); tie_pct None: megatron-te's "
        "published MAPE, else the calibration's stored validation MAPE.");
  m.def(
      "validate",
      [](const std::string& calibration, const std::string& holdout, const std::optional<std::string>& model) {
        nlohmann::json out;
        {
          py::gil_scoped_release unlocked;
          out = itertime::python::validate_calibration(calibration, holdout, model.value_or(""));
        }
        return to_python(out);
      },
      "calibration"_a, py::kw_only(), "holdout"_a = "tuple", "model"_a = py::none(),
      "Predict every ground-truth configuration of a calibration file: validation.json's dict (configurations, "
      "mape_per_tuple, mape_per_precision, mape_per_tuple_precision, mape_per_recipe, mape_overall). The file is only read.");
  m.def(
      "read_calibration",
      [](const std::string& path) {
        nlohmann::json out;
        {
          py::gil_scoped_release unlocked;
          out = itertime::python::read_calibration(path);
        }
        return to_python(out);
      },
      "path"_a,
      "A calibration file's contents: {'file', 'meta' (/meta's attributes as text), 'comm' (rows), 'operators' "
      "({'signatures', 'timings', 'stages'}), 'groundtruth' (rows)}.");
}
