// itertime_module.cpp: the native half of the Python package `itertime` (itertime._native; the package's
// python/itertime/__init__.py gives each function its signature and docstring from the tables here):
// predict, plan, validate, import_logs, score_published and read_calibration, each a query of the one
// query layer (query/) answered as plain Python values with the keys of the command's JSON.
// Invariants:
//  - This file only converts: keywords into the query's typed request (keywords.hpp: one table per
//    function, each row the command's option it stands for), the answer's JSON into Python values. Every
//    rule (defaults, --from, refusals, ranges, tie rule, routing) is the query layer's.
//  - A user error is a ValueError with the command's one line, its option names as the keywords; a bad
//    keyword or value a TypeError / ValueError naming it; an internal error a RuntimeError. Nothing is
//    printed. No state is kept between calls; the GIL is released while a query runs.
#include <climits>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <nlohmann/json.hpp>

#include "common/build_info.hpp"
#include "common/errors.hpp"
#include "python/calibration_view.hpp"
#include "python/keywords.hpp"
#include "query/import_query.hpp"
#include "query/plan_query.hpp"
#include "query/predict_query.hpp"
#include "query/published_query.hpp"
#include "query/validate_query.hpp"

namespace py = pybind11;
using itertime::python::Keyword;
using itertime::python::Kind;
using itertime::python::Value;

namespace {

// The calls whose request is a value or two, with the `given` set keywords.hpp fills.
struct PublishedCall {
  std::vector<std::string> files;
  std::set<std::string> given;
};
struct PathCall {
  std::string path;
  std::set<std::string> given;
};

constexpr int64_t kPositive = 1;
using PredictRequest = itertime::query::PredictRequest;
using PlanRequest = itertime::query::PlanRequest;
using ImportRequest = itertime::query::ImportRequest;
using ValidateRequest = itertime::query::ValidateRequest;

// The options predict and plan share, and import's run (model, layout, recipe), set by member.
#define ITERTIME_TEXT(Type, KEYWORD, FLAG, HELP, MEMBER)                                 \
  Keyword<Type> {                                                                        \
    KEYWORD, FLAG, Kind::kText, HELP, [](Type& r, const Value& v) { r.MEMBER = v.text; } \
  }
#define ITERTIME_INT(Type, KEYWORD, FLAG, HELP, MEMBER, LOW)                                                      \
  Keyword<Type> {                                                                                                 \
    KEYWORD, FLAG, Kind::kInt, HELP, [](Type& r, const Value& v) { r.MEMBER = static_cast<int>(v.integer); }, LOW \
  }
#define ITERTIME_FLAG(Type, KEYWORD, FLAG, HELP, MEMBER)                                 \
  Keyword<Type> {                                                                        \
    KEYWORD, FLAG, Kind::kFlag, HELP, [](Type& r, const Value& v) { r.MEMBER = v.flag; } \
  }

// The keywords predict and plan share (both requests have these fields): what is asked of which model,
// on which device.
template <class Request>
std::vector<Keyword<Request>> shared_keywords() {
  return {
      ITERTIME_TEXT(Request, "source", "", "a model from `itertime fit`, or a calibration .h5", source),
      ITERTIME_TEXT(Request, "model", "--model", "LLaMA config.json (unless from_ or megatron_args)", model_file),
      ITERTIME_TEXT(Request, "from_", "--from",
                    "your own configuration: Megatron-LM arguments, NeMo 2 / Bridge YAML, torchtitan TOML", from.file),
      ITERTIME_TEXT(Request, "from_format", "--from-format", "megatron-args, nemo or torchtitan (default: auto)", from.format),
      ITERTIME_TEXT(Request, "megatron_args", "--megatron-args", "a Megatron-LM command line, read as from_ reads a file",
                    from.megatron_args),
      ITERTIME_TEXT(Request, "hardware", "--hardware", "a data/hardware description", hardware),
      ITERTIME_TEXT(Request, "efficiency", "--efficiency", "operator efficiencies to carry to hardware", efficiency),
      ITERTIME_TEXT(Request, "framework", "--framework",
                    "itertime or megatron-te (default: megatron-te on a GPU description without a calibration)", framework),
      ITERTIME_TEXT(Request, "fitted", "--fitted", "megatron-te: terms fitted on logs (`itertime fit --framework megatron-te`)",
                    fitted),
  };
}

// `shared` then `own`.
template <class Request>
std::vector<Keyword<Request>> joined(std::vector<Keyword<Request>> shared, const std::vector<Keyword<Request>>& own) {
  shared.insert(shared.end(), own.begin(), own.end());
  return shared;
}

const std::vector<Keyword<PredictRequest>>& predict_keywords() {
  static const std::vector<Keyword<PredictRequest>> table = joined<PredictRequest>(
      shared_keywords<PredictRequest>(),
      {
          ITERTIME_INT(PredictRequest, "gpus", "--gpus", "GPUs: dp = gpus / (tp x pp x cp) when dp is not given", gpus,
                       kPositive),
          ITERTIME_INT(PredictRequest, "dp", "--dp", "data-parallel degree (default 1)", dp, kPositive),
          ITERTIME_INT(PredictRequest, "tp", "--tp", "tensor-parallel degree (default 1)", tp, kPositive),
          ITERTIME_INT(PredictRequest, "pp", "--pp", "pipeline-parallel degree (default 1)", pp, kPositive),
          ITERTIME_INT(PredictRequest, "cp", "--cp", "context-parallel degree (default 1)", cp, kPositive),
          ITERTIME_INT(PredictRequest, "vp", "--vp", "virtual pipeline stages per pipeline rank (default 1)", vp, kPositive),
          ITERTIME_INT(PredictRequest, "mbs", "--mbs", "micro-batch size (default 1)", micro_batch, kPositive),
          ITERTIME_INT(PredictRequest, "gbs", "--gbs", "global batch size (default: the smallest the layout allows)",
                       global_batch, kPositive),
          ITERTIME_INT(PredictRequest, "seq", "--seq", "sequence length (unless from_ or megatron_args)", seq_len, kPositive),
          ITERTIME_TEXT(PredictRequest, "precision", "--precision", "default: amp-bf16 on a GPU description, else fp32",
                        precision),
          ITERTIME_TEXT(PredictRequest, "recipe", "--recipe", "plain (default), or tokens joined by '+' (sp+vocab+dopt+ovl+opg)",
                        recipe),
          ITERTIME_FLAG(PredictRequest, "blind", "--blind", "precision-blind baseline", blind),
          ITERTIME_FLAG(PredictRequest, "raw", "--raw", "without the calibration factor fitted on ground truth", raw),
          ITERTIME_FLAG(PredictRequest, "allow_implausible", "--allow-implausible",
                        "return an answer the checks refuse, with its flags", allow_implausible),
          Keyword<PredictRequest>{"device_memory_gib", "--device-memory-gib", Kind::kFloat,
                                  "device memory (default: the GPU description's)",
                                  [](PredictRequest& r, const Value& v) { r.device_memory_gib = v.number; }, 0, INT_MAX},
          ITERTIME_INT(PredictRequest, "nodes", "--nodes", "with hardware: the nodes the layout fills", nodes, kPositive),
          Keyword<PredictRequest>{"ranks_per_node", "--ranks-per-node", Kind::kInt64,
                                  "on a calibration: world ranks per node (default: its own)",
                                  [](PredictRequest& r, const Value& v) { r.ranks_per_node = v.integer; }, kPositive, INT_MAX},
          ITERTIME_TEXT(PredictRequest, "fp8_recipe", "--fp8-recipe", "megatron-te, fp8: delayed (default) or current",
                        fp8_recipe),
          ITERTIME_FLAG(PredictRequest, "fp8_param_gather", "--fp8-param-gather", "megatron-te, fp8: parameters gathered in fp8",
                        fp8_param_gather),
          ITERTIME_FLAG(PredictRequest, "tp_comm_overlap", "--tp-comm-overlap", "megatron-te: TP collectives overlapped",
                        tp_comm_overlap),
      });
  return table;
}

#define ITERTIME_INTS(Type, KEYWORD, FLAG, HELP, MEMBER)                                                   \
  Keyword<Type> {                                                                                          \
    KEYWORD, FLAG, Kind::kIntList, HELP, [](Type& r, const Value& v) { r.MEMBER = v.integers; }, kPositive \
  }
#define ITERTIME_TEXTS(Type, KEYWORD, FLAG, HELP, MEMBER)                                     \
  Keyword<Type> {                                                                             \
    KEYWORD, FLAG, Kind::kTextList, HELP, [](Type& r, const Value& v) { r.MEMBER = v.texts; } \
  }

const std::vector<Keyword<PlanRequest>>& plan_keywords() {
  static const std::vector<Keyword<PlanRequest>> table = joined<PlanRequest>(
      shared_keywords<PlanRequest>(),
      {
          ITERTIME_TEXT(PlanRequest, "emit", "--emit", "megatron-args: each candidate's launch line (megatron-te)", emit),
          ITERTIME_INT(PlanRequest, "gpus", "--gpus", "number of GPUs", gpus, kPositive),
          Keyword<PlanRequest>{"ranks_per_node", "--ranks-per-node", Kind::kInt64, "on a calibration: world ranks per node",
                               [](PlanRequest& r, const Value& v) { r.ranks_per_node = v.integer; }, kPositive, INT_MAX},
          ITERTIME_INT(PlanRequest, "nodes", "--nodes", "nodes of the hardware description", nodes, kPositive),
          ITERTIME_INT(PlanRequest, "gbs", "--gbs", "global batch size", global_batch, kPositive),
          ITERTIME_INT(PlanRequest, "seq", "--seq", "sequence length", seq_len, kPositive),
          ITERTIME_INTS(PlanRequest, "mbs", "--mbs", "micro-batch sizes to consider (default [1, 2, 4, 8])", micro_batches),
          ITERTIME_INTS(PlanRequest, "cp", "--cp",
                        "context-parallel degrees to consider (default [1]; megatron-te: those leaving 4096 tokens a rank)",
                        context_parallel),
          ITERTIME_INTS(PlanRequest, "vp", "--vp", "virtual pipeline stages to consider (default [1]; megatron-te: 1 to 8)",
                        virtual_stages),
          ITERTIME_TEXTS(PlanRequest, "precisions", "--precisions", "precisions to consider (default ['amp-bf16'])", precisions),
          ITERTIME_TEXTS(PlanRequest, "recipes", "--recipes", "recipes to consider (default: plain; megatron-te: NeMo's)",
                         recipes),
          ITERTIME_FLAG(PlanRequest, "all_recipes", "--all-recipes", "every recipe the predictor models", all_recipes),
          Keyword<PlanRequest>{"device_memory_gib", "--device-memory-gib", Kind::kFloat, "device memory",
                               [](PlanRequest& r, const Value& v) { r.device_memory_gib = v.number; }, 0, INT_MAX},
          Keyword<PlanRequest>{"memory_margin_gib", "--memory-margin-gib", Kind::kFloat,
                               "megatron-te: headroom beside the peak and the runtime reserve (default 1)",
                               [](PlanRequest& r, const Value& v) { r.memory_margin_gib = v.number; }, 0, INT_MAX},
          ITERTIME_INT(PlanRequest, "top", "--top", "how many candidates to return (default 10)", top, 0),
          ITERTIME_TEXTS(PlanRequest, "fp8_recipes", "--fp8-recipes", "megatron-te: fp8 recipes (default ['delayed'])",
                         fp8_recipes),
          Keyword<PlanRequest>{"tie_pct", "--tie-pct", Kind::kFloat, "ties within this many percent (default: the model's)",
                               [](PlanRequest& r, const Value& v) { r.tie_pct = v.number; }, 0, 100},
      });
  return table;
}

const std::vector<Keyword<ValidateRequest>>& validate_keywords() {
  static const std::vector<Keyword<ValidateRequest>> table = {
      ITERTIME_TEXT(ValidateRequest, "calibration", "", "calibration HDF5 file with /comm, /ops and /groundtruth", calibration),
      ITERTIME_TEXT(ValidateRequest, "holdout", "--holdout", "tuple (default), precision or both", holdout),
      ITERTIME_TEXT(ValidateRequest, "model", "--model", "LLaMA config.json of the ground truth (default: /meta's)", model_file),
      ITERTIME_TEXT(ValidateRequest, "hardware", "--hardware", "score imported ground truth by this description", hardware),
      ITERTIME_TEXT(ValidateRequest, "framework", "--framework", "with hardware: megatron-te or itertime (default)", framework),
  };
  return table;
}

const std::vector<Keyword<ImportRequest>>& import_keywords() {
  static const std::vector<Keyword<ImportRequest>> table = {
      ITERTIME_TEXTS(ImportRequest, "logs", "", "training logs (each one run)", logs),
      ITERTIME_TEXT(ImportRequest, "output", "--output", "calibration HDF5 file: created, or added to", output),
      ITERTIME_TEXT(ImportRequest, "format", "--format", "auto (default), megatron, nemo or torchtitan", format),
      ITERTIME_TEXT(ImportRequest, "config", "--config", "NeMo / torchtitan logs: the run's configuration", config_file),
      ITERTIME_TEXT(ImportRequest, "model", "--model", "NeMo / torchtitan logs: the run's LLaMA config.json", model_file),
      ITERTIME_INT(ImportRequest, "dp", "--dp", "data-parallel degree", dp, kPositive),
      ITERTIME_INT(ImportRequest, "tp", "--tp", "tensor-parallel degree", tp, kPositive),
      ITERTIME_INT(ImportRequest, "pp", "--pp", "pipeline-parallel degree", pp, kPositive),
      ITERTIME_INT(ImportRequest, "cp", "--cp", "context-parallel degree", cp, kPositive),
      ITERTIME_INT(ImportRequest, "vp", "--vp", "virtual pipeline stages per pipeline rank", vp, kPositive),
      ITERTIME_INT(ImportRequest, "mbs", "--mbs", "micro-batch size", micro_batch, kPositive),
      ITERTIME_INT(ImportRequest, "gbs", "--gbs", "global batch size", global_batch, kPositive),
      ITERTIME_INT(ImportRequest, "seq", "--seq", "sequence length", seq_len, kPositive),
      ITERTIME_TEXT(ImportRequest, "precision", "--precision", "amp-bf16 (default), amp-fp16 or fp8", precision),
      ITERTIME_TEXT(ImportRequest, "recipe", "--recipe", "plain (default), or tokens joined by '+'", recipe),
      ITERTIME_TEXT(ImportRequest, "framework", "--framework", "the framework that trained: megatron-te (default)", framework),
      ITERTIME_TEXT(ImportRequest, "fp8_recipe", "--fp8-recipe", "delayed (default) or current", fp8_recipe),
      ITERTIME_FLAG(ImportRequest, "tp_comm_overlap", "--tp-comm-overlap", "the run overlapped TP communication",
                    tp_comm_overlap),
      ITERTIME_FLAG(ImportRequest, "fp8_param_gather", "--fp8-param-gather", "the run gathered fp8 parameters", fp8_param_gather),
  };
  return table;
}

const std::vector<Keyword<PublishedCall>>& published_keywords() {
  static const std::vector<Keyword<PublishedCall>> table = {
      ITERTIME_TEXTS(PublishedCall, "files", "", "files of published figures (default: every data/published/*.json)", files),
  };
  return table;
}

const std::vector<Keyword<PathCall>>& read_keywords() {
  static const std::vector<Keyword<PathCall>> table = {
      ITERTIME_TEXT(PathCall, "path", "", "a calibration HDF5 file", path),
  };
  return table;
}

// A JSON value as plain Python values, through the json module (NaN never occurs: the writers give null).
py::object to_python(const std::string& json_text) { return py::module_::import("json").attr("loads")(json_text); }

// `kwargs` into a request by `table`, `answer` run without the GIL, a UserError as a ValueError in keywords.
template <class Request, class Answer>
py::object call(const std::string& function, const std::vector<Keyword<Request>>& table, const py::dict& kwargs, Answer answer) {
  Request request;
  itertime::python::apply_keywords(function, table, kwargs, request);
  std::string text;
  try {
    py::gil_scoped_release unlocked;
    text = answer(request);
  } catch (const itertime::UserError& error) {
    throw py::value_error(itertime::python::in_keywords(error.what(), table));
  }
  return to_python(text);
}

std::string validate_answer(const ValidateRequest& call) {
  namespace q = itertime::query;
  const q::ValidationRoute route = q::route_validation(call);
  if (route.named_source) return q::imported_json(q::score_imports(call, route)).dump();
  nlohmann::json out = nlohmann::json::object();
  if (route.own) {
    const std::vector<nlohmann::json> reports = q::validation_json(route);
    if (reports.size() == 1) {
      out = reports.front();
    } else {
      for (const nlohmann::json& report : reports) out[report.at("holdout").get<std::string>()] = report;
    }
  }
  if (route.imports) out["imported"] = q::imported_json(q::score_imports(call, route));
  return out.dump();
}

std::string import_answer(const ImportRequest& call) {
  itertime::query::ImportRequest request = call;
  request.command_line = "python: itertime.import_logs";
  nlohmann::json out = nlohmann::json::array();
  for (const auto& im : itertime::query::import_logs(request)) out.push_back(itertime::query::import_json(im));
  return out.dump();
}

}  // namespace

PYBIND11_MODULE(_native, m) {
  m.doc() = "itertime's native half: the query layer's answers as JSON text (use the package `itertime`).";
  m.def("version", [] { return itertime::build_info().itertime_version; });
  m.def("predict", [](const py::dict& kwargs) {
    return call("predict", predict_keywords(), kwargs,
                [](const PredictRequest& r) { return itertime::query::predict_json(itertime::query::answer_predict(r)); });
  });
  m.def("plan", [](const py::dict& kwargs) {
    return call("plan", plan_keywords(), kwargs,
                [](const PlanRequest& r) { return itertime::query::plan_json(*itertime::query::answer_plan(r)); });
  });
  m.def("validate", [](const py::dict& kwargs) { return call("validate", validate_keywords(), kwargs, validate_answer); });
  m.def("import_logs", [](const py::dict& kwargs) { return call("import_logs", import_keywords(), kwargs, import_answer); });
  m.def("score_published", [](const py::dict& kwargs) {
    return call("score_published", published_keywords(), kwargs, [](const PublishedCall& c) {
      return itertime::query::published_json(*itertime::query::score_published(c.files)).dump();
    });
  });
  m.def("read_calibration", [](const py::dict& kwargs) {
    return call("read_calibration", read_keywords(), kwargs,
                [](const PathCall& c) { return itertime::python::read_calibration(c.path).dump(); });
  });
  m.def("keywords", [](const std::string& function) -> py::list {
    if (function == "predict") return itertime::python::describe(predict_keywords());
    if (function == "plan") return itertime::python::describe(plan_keywords());
    if (function == "validate") return itertime::python::describe(validate_keywords());
    if (function == "import_logs") return itertime::python::describe(import_keywords());
    if (function == "score_published") return itertime::python::describe(published_keywords());
    if (function == "read_calibration") return itertime::python::describe(read_keywords());
    throw py::value_error("no function " + function);
  });
}
