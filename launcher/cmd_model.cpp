// cmd_model.cpp: `itertime model show FILE`: the parsed model, its size and its legal layouts.
#include <cstdio>
#include <iostream>
#include <string>

#include "common/errors.hpp"
#include "common/model_spec.hpp"
#include "launcher/commands.hpp"

namespace itertime::launcher {
namespace {

std::string join_degrees(const std::vector<int>& degrees) {
  // Print contiguous runs compactly: 1, 2, 4, 8 or 1..32.
  std::string out;
  std::size_t i = 0;
  while (i < degrees.size()) {
    std::size_t j = i;
    while (j + 1 < degrees.size() && degrees[j + 1] == degrees[j] + 1) ++j;
    if (!out.empty()) out += ", ";
    if (j >= i + 2) {
      out += std::to_string(degrees[i]) + ".." + std::to_string(degrees[j]);
      i = j + 1;
    } else {
      out += std::to_string(degrees[i]);
      ++i;
    }
  }
  return out;
}

std::string human_count(double count) {
  char text[32];
  if (count >= 1e9)
    std::snprintf(text, sizeof(text), "%.2f billion", count / 1e9);
  else if (count >= 1e6)
    std::snprintf(text, sizeof(text), "%.2f million", count / 1e6);
  else
    std::snprintf(text, sizeof(text), "%.1f thousand", count / 1e3);
  return text;
}

}  // namespace

void register_model(CLI::App& app, std::vector<std::pair<CLI::App*, Action>>& actions) {
  CLI::App* model = app.add_subcommand("model", "Inspect LLaMA model configurations (Hugging Face config.json)");
  model->require_subcommand(1);
  CLI::App* show = model->add_subcommand("show", "Print a model's parsed configuration, size and legal TP/PP degrees");
  auto file = std::make_shared<std::string>();
  auto seq_len = std::make_shared<int64_t>(0);
  show->add_option("FILE", *file, "Hugging Face config.json of a LLaMA model (see data/models/)")->required();
  show->add_option("--seq", *seq_len,
                   "Sequence length for FLOPs per token (default: 4096, or max_position_embeddings when smaller)");

  actions.emplace_back(show, [file, seq_len, show](Context&) {
    const LlamaSpec spec = load_llama_config(*file);
    if (show->count("--seq") > 0 && *seq_len <= 0) {
      throw UserError("--seq " + std::to_string(*seq_len) + " must be a positive sequence length");
    }
    const int64_t seq = *seq_len > 0
                            ? *seq_len
                            : (spec.max_position_embeddings > 0 ? std::min<int64_t>(spec.max_position_embeddings, 4096) : 4096);
    std::printf("model              %s (%s)\n", spec.name.c_str(), file->c_str());
    std::printf("layers             %lld\n", static_cast<long long>(spec.num_layers));
    std::printf("hidden_size        %lld\n", static_cast<long long>(spec.hidden_size));
    std::printf("intermediate_size  %lld\n", static_cast<long long>(spec.intermediate_size));
    std::printf("attention heads    %lld (KV heads %lld, head dim %lld)\n", static_cast<long long>(spec.num_heads),
                static_cast<long long>(spec.num_kv_heads), static_cast<long long>(spec.head_dim));
    std::printf("vocab_size         %lld\n", static_cast<long long>(spec.vocab_size));
    std::printf("rms_norm_eps       %g\n", spec.rms_norm_eps);
    std::printf("rope_theta         %g\n", spec.rope_theta);
    std::printf("tied embeddings    %s\n", spec.tie_word_embeddings ? "yes" : "no");
    std::printf("parameters         %lld (%s; %s per layer x %lld, embedding %s, LM head %s)\n",
                static_cast<long long>(spec.total_params()), human_count(spec.total_params()).c_str(),
                human_count(spec.layer_params()).c_str(), static_cast<long long>(spec.num_layers),
                human_count(spec.embedding_params()).c_str(),
                spec.tie_word_embeddings ? "tied to the embedding" : human_count(spec.lm_head_params()).c_str());
    std::printf("training FLOPs     %.4g per token at seq %lld (6 x %.3g matmul params + attention)\n",
                spec.training_flops_per_token(seq), static_cast<long long>(seq), static_cast<double>(spec.matmul_params()));
    std::printf("legal TP degrees   %s (divide %lld heads, %lld KV heads, FFN %lld)\n",
                join_degrees(spec.legal_tp_degrees()).c_str(), static_cast<long long>(spec.num_heads),
                static_cast<long long>(spec.num_kv_heads), static_cast<long long>(spec.intermediate_size));
    std::printf("legal PP degrees   %s (at most one stage per layer)\n", join_degrees(spec.legal_pp_degrees()).c_str());
    return 0;
  });
}

}  // namespace itertime::launcher
