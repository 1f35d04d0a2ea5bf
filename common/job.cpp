// job.cpp: job files (job.hpp, docs/jobs.md): parsed section by section, every mistake one UserError
// naming the file, the field and what to write. Techniques are parsed here, never judged: whether a
// configuration can train with them is the trainer's check_trainable, applied by ground truth.
#include "common/job.hpp"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "common/byte_size.hpp"
#include "common/errors.hpp"
#include "common/input_file.hpp"
#include "common/json_excerpt.hpp"
#include "common/json_fields.hpp"

namespace itertime {
namespace {

using nlohmann::json;

int get_int(const json& object, const char* key, int fallback, const std::string& where) {
  if (!object.contains(key)) return fallback;
  const json& value = object.at(key);
  if (!value.is_number_integer() || value.get<int64_t>() < 0 || value.get<int64_t>() > (1ll << 31)) {
    throw UserError(where + ": field '" + key + "' must be a non-negative integer, got " + json_excerpt(value));
  }
  return value.get<int>();
}

int get_required_int(const json& object, const char* key, const std::string& where) {
  if (!object.contains(key)) throw UserError(where + ": missing field '" + key + "'");
  return get_int(object, key, 0, where);
}

std::string get_string(const json& object, const char* key, const std::string& fallback, const std::string& where) {
  if (!object.contains(key)) return fallback;
  if (!object.at(key).is_string()) throw UserError(where + ": field '" + key + "' must be a string");
  return object.at(key).get<std::string>();
}

void reject_unknown(const json& object, const std::set<std::string>& known, const std::string& where) {
  for (const auto& item : object.items()) {
    if (!known.count(item.key())) {
      std::string list;
      for (const auto& k : known) list += (list.empty() ? "" : ", ") + k;
      throw UserError(where + ": unknown field '" + item.key() + "' (known: " + list + ")");
    }
  }
}

bool get_bool(const json& object, const char* key, bool fallback, const std::string& where) {
  if (!object.contains(key)) return fallback;
  const json& value = object.at(key);
  if (!value.is_boolean()) throw UserError(where + ": field '" + key + "' must be true or false, got " + json_excerpt(value));
  return value.get<bool>();
}

// A techniques object (docs/jobs.md): the fields it gives replace those of `base`, the others keep base's.
TrainingTechniques parse_techniques(const json& object, const TrainingTechniques& base, const std::string& where) {
  if (!object.is_object()) {
    throw UserError(where + ": a techniques object is a JSON object such as {\"sequence_parallel\": true}, got " +
                    json_excerpt(object));
  }
  reject_unknown(object,
                 {"sequence_parallel", "vocab_parallel", "distributed_optimizer", "recompute", "overlap_gradient_reduction",
                  "gradient_bucket_bytes", "overlap_parameter_gather"},
                 where);
  TrainingTechniques t = base;
  t.sequence_parallel = get_bool(object, "sequence_parallel", t.sequence_parallel, where);
  t.vocab_parallel = get_bool(object, "vocab_parallel", t.vocab_parallel, where);
  t.distributed_optimizer = get_bool(object, "distributed_optimizer", t.distributed_optimizer, where);
  t.overlap_gradient_reduction = get_bool(object, "overlap_gradient_reduction", t.overlap_gradient_reduction, where);
  t.overlap_parameter_gather = get_bool(object, "overlap_parameter_gather", t.overlap_parameter_gather, where);
  if (t.overlap_parameter_gather && !(t.distributed_optimizer && t.overlap_gradient_reduction)) {
    throw UserError(where +
                    ": field 'overlap_parameter_gather' overlaps the distributed optimizer's bucketed all-gathers: "
                    "set 'distributed_optimizer' and 'overlap_gradient_reduction' true too");
  }
  if (object.contains("recompute")) {
    const json& value = object.at("recompute");
    if (!value.is_string()) {
      throw UserError(where + ": field 'recompute' must be \"none\", \"selective\" or \"full\", got " + json_excerpt(value));
    }
    try {
      t.recompute = parse_recompute(value.get<std::string>());
    } catch (const UserError& error) {
      throw UserError(where + ": field 'recompute': " + error.what());
    }
  }
  if (object.contains("gradient_bucket_bytes")) {
    const json& value = object.at("gradient_bucket_bytes");
    int64_t bytes = -1;
    if (value.is_number_integer()) bytes = value.get<int64_t>();
    if (value.is_string()) bytes = parse_byte_size(value.get<std::string>()).value_or(-1);
    if (bytes < 1) {
      throw UserError(where +
                      ": field 'gradient_bucket_bytes' must be a positive integer or a size such as \"4M\" "
                      "(an integer with an optional K, M or G suffix), got " +
                      json_excerpt(value));
    }
    t.gradient_bucket_bytes = bytes;
  }
  return t;
}

}  // namespace

std::string JobConfig::key(const std::string& model_name) const {
  const std::string recipe = recipe_text(techniques);
  return model_name + "/" + parallel.layout_text() + "/mbs" + std::to_string(parallel.micro_batch) + "/gbs" +
         std::to_string(parallel.global_batch) + "/seq" + std::to_string(parallel.seq_len) + "/" + to_string(precision) +
         (recipe.empty() ? "" : "/" + recipe);
}

int Job::max_world_size() const {
  int largest = 1;
  for (const auto& c : configs) largest = std::max(largest, c.parallel.world_size());
  return largest;
}

std::vector<RankLayout> factorizations(int world_size) {
  std::vector<RankLayout> out;
  for (int pp = 1; pp <= world_size; ++pp) {
    if (world_size % pp) continue;
    for (int tp = 1; tp <= world_size / pp; ++tp) {
      if ((world_size / pp) % tp) continue;
      out.emplace_back(world_size / (pp * tp), tp, pp);
    }
  }
  return out;
}

std::vector<std::pair<int, RankLayout>> factorizations(int world_size, const std::vector<int>& cps) {
  std::vector<std::pair<int, RankLayout>> out;
  for (int cp : cps) {
    if (cp < 1 || world_size % cp != 0) continue;
    for (const RankLayout& layout : factorizations(world_size / cp)) out.emplace_back(cp, layout);
  }
  return out;
}

namespace {

double get_nonnegative_number(const json& section, const char* name, double fallback, const std::string& where,
                              const char* meaning) {
  if (!section.contains(name)) return fallback;
  const json& value = section.at(name);
  if (!value.is_number() || value.get<double>() < 0) {
    throw UserError(where + ": " + name + " must be a number >= 0 (" + meaning + ")");
  }
  return value.get<double>();
}

void parse_groundtruth_section(const json& gt, const std::string& where, Job& job) {
  reject_unknown(gt,
                 {"warmup_iters", "timed_iters", "min_timed_seconds", "rounds", "max_extra_rounds", "disagreement_pct",
                  "outside_load_cores", "drift_pct"},
                 where);
  job.warmup_iters = get_int(gt, "warmup_iters", job.warmup_iters, where);
  job.timed_iters = get_int(gt, "timed_iters", job.timed_iters, where);
  if (job.timed_iters < 1) throw UserError(where + ": timed_iters must be at least 1");
  if (job.timed_iters > kMaxTimedIters) {
    throw UserError(where + ": timed_iters must be at most " + std::to_string(kMaxTimedIters));
  }
  job.min_timed_seconds = get_nonnegative_number(gt, "min_timed_seconds", job.min_timed_seconds, where,
                                                 "seconds of timed steps per configuration and round");
  RoundPolicy& rounds = job.rounds;
  rounds.rounds = get_int(gt, "rounds", rounds.rounds, where);
  if (rounds.rounds < 1) throw UserError(where + ": rounds must be at least 1 (measurement rounds per configuration)");
  rounds.max_extra_rounds = get_int(gt, "max_extra_rounds", rounds.max_extra_rounds, where);
  if (rounds.max_extra_rounds < 0) throw UserError(where + ": max_extra_rounds must be >= 0");
  rounds.disagreement_pct = get_nonnegative_number(gt, "disagreement_pct", rounds.disagreement_pct, where,
                                                   "how far, in %, a round may lie from the others' median");
  rounds.outside_load_cores = get_nonnegative_number(gt, "outside_load_cores", rounds.outside_load_cores, where,
                                                     "outside CPU load, in cores, above which a round is disturbed");
  rounds.drift_pct = get_nonnegative_number(gt, "drift_pct", rounds.drift_pct, where,
                                            "how far, in %, the speed reference may move between the operator profiles "
                                            "and the ground truth before calibrate drift profiles an occupancy again");
}

void parse_comm_section(const json& comm, const std::string& where, Job& job) {
  reject_unknown(comm, {"min_bytes", "max_bytes", "step_factor", "warmup_iters", "iters"}, where);
  job.comm.min_bytes = get_string(comm, "min_bytes", job.comm.min_bytes, where);
  job.comm.max_bytes = get_string(comm, "max_bytes", job.comm.max_bytes, where);
  if (comm.contains("step_factor")) {
    if (!comm.at("step_factor").is_number()) throw UserError(where + ": step_factor must be a number");
    job.comm.step_factor = comm.at("step_factor").get<double>();
  }
  job.comm.warmup_iters = get_int(comm, "warmup_iters", job.comm.warmup_iters, where);
  job.comm.iters = get_int(comm, "iters", job.comm.iters, where);
}

// The job's configurations in order, each once (by key).
class ConfigList {
 public:
  explicit ConfigList(Job& job) : job_(job) {}
  void add(const JobConfig& config) {
    if (seen_.insert(config.key(job_.model.name)).second) job_.configs.push_back(config);
  }

 private:
  Job& job_;
  std::set<std::string> seen_;
};

void parse_configs(const json& configs, const std::string& path, const TrainingTechniques& defaults, ConfigList& list) {
  if (!configs.is_array()) throw UserError(path + ": 'configs' must be an array");
  int index = 0;
  for (const json& item : configs) {
    const std::string where = path + " configs[" + std::to_string(index++) + "]";
    if (!item.is_object()) throw UserError(where + ": each configuration is an object");
    reject_unknown(item, {"dp", "tp", "pp", "cp", "vp", "micro_batch", "global_batch", "seq_len", "precision", "techniques"},
                   where);
    JobConfig config;
    config.parallel.dp = get_required_int(item, "dp", where);
    config.parallel.tp = get_required_int(item, "tp", where);
    config.parallel.pp = get_required_int(item, "pp", where);
    config.parallel.micro_batch = get_required_int(item, "micro_batch", where);
    config.parallel.global_batch = get_required_int(item, "global_batch", where);
    config.parallel.seq_len = get_required_int(item, "seq_len", where);
    config.parallel.cp = get_int(item, "cp", 1, where);
    config.parallel.vp = get_int(item, "vp", 1, where);
    config.precision = parse_trainable_precision(get_string(item, "precision", "fp32", where)).name;
    config.techniques =
        item.contains("techniques") ? parse_techniques(item.at("techniques"), defaults, where + " techniques") : defaults;
    list.add(config);
  }
}

// The sweep's recipes: each a techniques object over the job's defaults; absent, the defaults alone.
std::vector<TrainingTechniques> parse_recipes(const json& sweep, const std::string& where, const TrainingTechniques& defaults) {
  if (!sweep.contains("recipes")) return {defaults};
  const json& recipes = sweep.at("recipes");
  if (!recipes.is_array() || recipes.empty()) {
    throw UserError(where + ": 'recipes' must be a non-empty array of techniques objects, e.g. [{}, {\"recompute\": \"full\"}]");
  }
  std::vector<TrainingTechniques> out;
  for (std::size_t i = 0; i < recipes.size(); ++i) {
    out.push_back(parse_techniques(recipes[i], defaults, where + " recipes[" + std::to_string(i) + "]"));
  }
  return out;
}

// The largest world size (and cp or vp) a sweep may ask for: beyond it the factorizations alone take
// minutes, and int would truncate larger numbers silently.
constexpr int64_t kMaxSweepRanks = int64_t{1} << 20;

// A sweep's optional list of positive degrees (absent: [1]).
std::vector<int> positive_list(const json& sweep, const char* name, const std::string& where, const char* meaning) {
  if (!sweep.contains(name)) return {1};
  const json& list = sweep.at(name);
  std::vector<int> out;
  if (list.is_array()) {
    for (const json& item : list) {
      if (!item.is_number_integer() || item.get<int64_t>() < 1 || item.get<int64_t>() > kMaxSweepRanks) {
        out.clear();
        break;
      }
      out.push_back(item.get<int>());
    }
  }
  if (out.empty()) {
    throw UserError(where + ": '" + name + "' must be a non-empty array of positive integers (" + meaning + "), e.g. [1, 2]");
  }
  return out;
}

void parse_sweep(const json& sweep, const std::string& where, const TrainingTechniques& defaults, ConfigList& list) {
  reject_unknown(sweep, {"world_sizes", "precisions", "micro_batch", "global_batch", "seq_len", "recipes", "cp", "vp"}, where);
  if (!sweep.contains("world_sizes") || !sweep.at("world_sizes").is_array()) {
    throw UserError(where + ": 'world_sizes' must be an array of rank counts, e.g. [1, 2, 4]");
  }
  if (!sweep.contains("precisions") || !sweep.at("precisions").is_array()) {
    throw UserError(where + ": 'precisions' must be an array, e.g. [\"fp32\", \"amp-bf16\"]");
  }
  const int micro_batch = get_required_int(sweep, "micro_batch", where);
  const int global_batch = get_required_int(sweep, "global_batch", where);
  const int seq_len = get_required_int(sweep, "seq_len", where);
  const std::vector<TrainingTechniques> recipes = parse_recipes(sweep, where, defaults);
  const std::vector<int> cps = positive_list(sweep, "cp", where, "context-parallel degrees");
  const std::vector<int> vps = positive_list(sweep, "vp", where, "virtual pipeline stages per pipeline rank");
  for (const json& world : sweep.at("world_sizes")) {
    if (!world.is_number_integer() || world.get<int64_t>() < 1 || world.get<int64_t>() > kMaxSweepRanks) {
      throw UserError(where + ": world sizes must be integers from 1 to " + std::to_string(kMaxSweepRanks));
    }
    for (const auto& [cp, layout] : factorizations(world.get<int>(), cps)) {
      for (int vp : vps) {
        if (vp > 1 && layout.pp() == 1) continue;  // interleaving needs a pipeline
        for (const json& precision : sweep.at("precisions")) {
          if (!precision.is_string()) throw UserError(where + ": precisions must be strings");
          JobConfig config;
          config.parallel = ParallelConfig{layout.dp(), layout.tp(), layout.pp(), micro_batch, global_batch, seq_len, cp, vp};
          config.precision = parse_trainable_precision(precision.get<std::string>()).name;
          for (const TrainingTechniques& recipe : recipes) {
            config.techniques = recipe;
            list.add(config);
          }
        }
      }
    }
  }
}

// The top-level scalar fields: name, model (loaded), backend, attention, seed, ranks, threads.
void parse_top_level(const json& root, const std::string& path, Job& job) {
  job.path = path;
  job.name = get_string(root, "name", std::filesystem::path(path).stem().string(), path);
  const std::string model = get_string(root, "model", "", path);
  if (model.empty()) throw UserError(path + ": missing field 'model' (a Hugging Face config.json, relative to the job file)");
  std::filesystem::path model_path(model);
  if (model_path.is_relative()) model_path = std::filesystem::path(path).parent_path() / model_path;
  job.model_path = model_path.lexically_normal().string();
  job.model = load_llama_config(job.model_path);
  job.backend = parse_backend(get_string(root, "backend", "cpu", path));
  try {
    job.attention = parse_attention(get_string(root, "attention", "auto", path));
  } catch (const UserError& error) {
    throw UserError(path + ": field 'attention': " + error.what());
  }
  job.seed = static_cast<uint64_t>(get_int(root, "seed", 1234, path));
  job.ranks = get_int(root, "ranks", 0, path);
  job.compute_threads = get_int(root, "compute_threads", 1, path);
  if (job.compute_threads < 1) throw UserError(path + ": compute_threads must be at least 1");
}

}  // namespace

Job parse_job(const std::string& json_text, const std::string& path) {
  const json root = parse_json_text(json_text, path, "; see docs/jobs.md for the job format");
  if (!root.is_object()) throw UserError(path + ": a job is a JSON object; see docs/jobs.md");
  reject_unknown(root,
                 {"name", "model", "backend", "seed", "groundtruth", "configs", "sweep", "comm", "ranks", "compute_threads",
                  "description", "attention", "techniques"},
                 path);

  Job job;
  parse_top_level(root, path, job);
  if (root.contains("groundtruth")) parse_groundtruth_section(root.at("groundtruth"), path + " groundtruth", job);
  if (root.contains("comm")) parse_comm_section(root.at("comm"), path + " comm", job);
  const TrainingTechniques defaults = root.contains("techniques")
                                          ? parse_techniques(root.at("techniques"), TrainingTechniques{}, path + " techniques")
                                          : TrainingTechniques{};
  ConfigList list(job);
  if (root.contains("configs")) parse_configs(root.at("configs"), path, defaults, list);
  if (root.contains("sweep")) parse_sweep(root.at("sweep"), path + " sweep", defaults, list);
  if (job.configs.empty()) throw UserError(path + ": the job lists no configuration (give 'configs' or 'sweep')");
  for (const auto& config : job.configs) {
    const auto& p = config.parallel;
    if (p.dp < 1 || p.tp < 1 || p.pp < 1 || p.cp < 1 || p.vp < 1 || p.micro_batch < 1 || p.global_batch < 1 || p.seq_len < 1) {
      throw UserError(path + ": configuration " + config.key(job.model.name) + " has a zero degree or size");
    }
  }
  return job;
}

Job load_job(const std::string& path) {
  const std::string text = read_input_file(
      path, {"no such job file; see jobs/ for examples", "is a directory; pass a job .json file", "cannot be read"});
  return parse_job(text, path);
}

}  // namespace itertime
