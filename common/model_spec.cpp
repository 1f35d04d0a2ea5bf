// model_spec.cpp: LLaMA config.json: parsing, validation, parameter counts (model_spec.hpp).
#include "common/model_spec.hpp"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "common/errors.hpp"
#include "common/input_file.hpp"
#include "common/json_excerpt.hpp"
#include "common/json_fields.hpp"

namespace itertime {
namespace {

using nlohmann::json;

int64_t required_positive(const json& config, const char* key, const std::string& source) {
  if (!config.contains(key)) {
    throw UserError(source + ": missing field '" + key +
                    "' (a LLaMA config.json needs hidden_size, "
                    "intermediate_size, num_hidden_layers, num_attention_heads and vocab_size)");
  }
  const json& value = config.at(key);
  if (!value.is_number_integer() || value.get<int64_t>() <= 0) {
    throw UserError(source + ": field '" + key + "' must be a positive integer, got " + json_excerpt(value));
  }
  return value.get<int64_t>();
}

int64_t optional_positive(const json& config, const char* key, int64_t fallback, const std::string& source) {
  if (!config.contains(key) || config.at(key).is_null()) return fallback;
  return required_positive(config, key, source);
}

double optional_number(const json& config, const char* key, double fallback, const std::string& source) {
  if (!config.contains(key) || config.at(key).is_null()) return fallback;
  if (!config.at(key).is_number()) {
    throw UserError(source + ": field '" + key + "' must be a number, got " + json_excerpt(config.at(key)));
  }
  return config.at(key).get<double>();
}

}  // namespace

int64_t LlamaSpec::layer_params() const {
  const int64_t attention = hidden_size * (num_heads * head_dim)     // q
                            + 2 * hidden_size * kv_dim()             // k, v
                            + (num_heads * head_dim) * hidden_size;  // o
  const int64_t mlp = 3 * hidden_size * intermediate_size;           // gate, up, down
  const int64_t norms = 2 * hidden_size;
  return attention + mlp + norms;
}

int64_t LlamaSpec::total_params() const {
  return embedding_params() + num_layers * layer_params() + hidden_size /* final norm */ + lm_head_params();
}

int64_t LlamaSpec::matmul_params() const { return num_layers * (layer_params() - 2 * hidden_size) + vocab_size * hidden_size; }

double LlamaSpec::training_flops_per_token(int64_t seq_len) const {
  return 6.0 * static_cast<double>(matmul_params()) +
         12.0 * static_cast<double>(num_layers) * static_cast<double>(num_heads * head_dim) * static_cast<double>(seq_len);
}

std::vector<int> LlamaSpec::legal_tp_degrees() const {
  std::vector<int> degrees;
  for (int64_t tp = 1; tp <= num_heads; ++tp) {
    if (num_heads % tp == 0 && num_kv_heads % tp == 0 && intermediate_size % tp == 0) {
      degrees.push_back(static_cast<int>(tp));
    }
  }
  return degrees;
}

std::vector<int> LlamaSpec::legal_pp_degrees() const {
  std::vector<int> degrees;
  for (int64_t pp = 1; pp <= num_layers; ++pp) degrees.push_back(static_cast<int>(pp));
  return degrees;
}

LlamaSpec parse_llama_config(const std::string& json_text, const std::string& source) {
  const json config = parse_json_text(json_text, source, "; expected a Hugging Face config.json");
  if (!config.is_object()) throw UserError(source + ": expected a JSON object (a Hugging Face config.json)");
  if (config.contains("model_type") && config.at("model_type").is_string() &&
      config.at("model_type").get<std::string>() != "llama") {
    throw UserError(source + ": model_type is '" + config.at("model_type").get<std::string>() +
                    "', itertime models LLaMA (model_type \"llama\")");
  }

  LlamaSpec spec;
  spec.hidden_size = required_positive(config, "hidden_size", source);
  spec.intermediate_size = required_positive(config, "intermediate_size", source);
  spec.num_layers = required_positive(config, "num_hidden_layers", source);
  spec.num_heads = required_positive(config, "num_attention_heads", source);
  spec.vocab_size = required_positive(config, "vocab_size", source);
  spec.num_kv_heads = optional_positive(config, "num_key_value_heads", spec.num_heads, source);
  spec.head_dim = optional_positive(config, "head_dim", spec.hidden_size / spec.num_heads, source);
  spec.max_position_embeddings = optional_positive(config, "max_position_embeddings", 0, source);
  spec.rms_norm_eps = optional_number(config, "rms_norm_eps", 1e-6, source);
  spec.rope_theta = optional_number(config, "rope_theta", 10000.0, source);
  if (config.contains("tie_word_embeddings")) {
    if (!config.at("tie_word_embeddings").is_boolean()) {
      throw UserError(source + ": field 'tie_word_embeddings' must be true or false");
    }
    spec.tie_word_embeddings = config.at("tie_word_embeddings").get<bool>();
  }

  if (spec.hidden_size % spec.num_heads != 0 && !config.contains("head_dim")) {
    throw UserError(source + ": hidden_size " + std::to_string(spec.hidden_size) + " is not divisible by num_attention_heads " +
                    std::to_string(spec.num_heads));
  }
  if (spec.num_heads % spec.num_kv_heads != 0) {
    throw UserError(source + ": num_attention_heads " + std::to_string(spec.num_heads) +
                    " is not divisible by num_key_value_heads " + std::to_string(spec.num_kv_heads));
  }
  if (spec.rms_norm_eps <= 0 || spec.rope_theta <= 0) {
    throw UserError(source + ": rms_norm_eps and rope_theta must be positive");
  }

  std::string name = std::filesystem::path(source).stem().string();
  if (name == "config" && config.contains("_name_or_path") && config.at("_name_or_path").is_string()) {
    name = config.at("_name_or_path").get<std::string>();
  }
  spec.name = name;
  return spec;
}

LlamaSpec load_llama_config(const std::string& path) {
  const std::string text =
      read_input_file(path, {"no such file; pass a Hugging Face config.json (see data/models/)",
                             "is a directory; pass the config.json file inside it", "cannot be read (permissions?)"});
  return parse_llama_config(text, path);
}

}  // namespace itertime
