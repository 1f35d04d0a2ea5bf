// Unit tests of common/model_spec: every shipped config loads, parameter counts equal the published
// ones (hand-computed below), FLOPs per token follow the documented formula, and every kind of bad
// config.json is refused with a UserError naming the problem.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "common/errors.hpp"
#include "common/model_spec.hpp"
#include "temp_dir.hpp"

namespace itertime {
namespace {

std::string model_path(const std::string& file) { return std::string(ITERTIME_SOURCE_DIR) + "/data/models/" + file; }

// A valid LLaMA config.json with one field replaced or removed (value "" removes it).
std::string config_json(const std::string& field = "", const std::string& value = "") {
  struct Field {
    std::string key, value;
  };
  std::vector<Field> fields = {{"model_type", "\"llama\""},    {"hidden_size", "4096"},
                               {"intermediate_size", "14336"}, {"num_hidden_layers", "32"},
                               {"num_attention_heads", "32"},  {"num_key_value_heads", "8"},
                               {"vocab_size", "128256"},       {"max_position_embeddings", "131072"}};
  bool found = false;
  for (auto& f : fields) {
    if (f.key == field) {
      f.value = value;
      found = true;
    }
  }
  if (!field.empty() && !found) fields.push_back({field, value});
  std::string out = "{";
  bool first = true;
  for (const auto& f : fields) {
    if (f.value.empty()) continue;
    out += (first ? "" : ", ") + ("\"" + f.key + "\": " + f.value);
    first = false;
  }
  return out + "}";
}

std::string user_error_message(const std::string& json_text, const std::string& source = "test.json") {
  try {
    parse_llama_config(json_text, source);
  } catch (const UserError& error) {
    return error.what();
  }
  ADD_FAILURE() << "no UserError for: " << json_text;
  return "";
}

// ---- the shipped configs -----------------------------------------------------------------------

TEST(ModelSpec, EveryShippedConfigLoads) {
  int count = 0;
  for (const auto& entry : std::filesystem::directory_iterator(std::string(ITERTIME_SOURCE_DIR) + "/data/models")) {
    if (entry.path().extension() != ".json") continue;
    SCOPED_TRACE(entry.path().string());
    LlamaSpec spec;
    ASSERT_NO_THROW(spec = load_llama_config(entry.path().string()));
    ++count;
    EXPECT_EQ(spec.name, entry.path().stem().string());
    EXPECT_GT(spec.total_params(), 0);
    EXPECT_EQ(spec.num_heads * spec.head_dim, spec.hidden_size);
    EXPECT_EQ(spec.num_heads % spec.num_kv_heads, 0);
    ASSERT_FALSE(spec.legal_tp_degrees().empty());
    EXPECT_EQ(spec.legal_tp_degrees().front(), 1);
    EXPECT_EQ(static_cast<int64_t>(spec.legal_pp_degrees().size()), spec.num_layers);
    EXPECT_FALSE(spec.tie_word_embeddings);
    EXPECT_EQ(spec.total_params(),
              spec.embedding_params() + spec.num_layers * spec.layer_params() + spec.hidden_size + spec.lm_head_params());
  }
  EXPECT_GE(count, 9) << "data/models/ should hold the six LLaMA models and three small test models";
}

TEST(ModelSpec, Llama31_8B) {
  const LlamaSpec spec = load_llama_config(model_path("llama3.1-8b.json"));
  EXPECT_EQ(spec.name, "llama3.1-8b");
  EXPECT_EQ(spec.num_layers, 32);
  EXPECT_EQ(spec.hidden_size, 4096);
  EXPECT_EQ(spec.intermediate_size, 14336);
  EXPECT_EQ(spec.num_heads, 32);
  EXPECT_EQ(spec.num_kv_heads, 8);
  EXPECT_EQ(spec.head_dim, 128);
  EXPECT_EQ(spec.kv_dim(), 1024);
  EXPECT_EQ(spec.vocab_size, 128256);
  EXPECT_EQ(spec.max_position_embeddings, 131072);
  EXPECT_DOUBLE_EQ(spec.rms_norm_eps, 1e-5);
  EXPECT_DOUBLE_EQ(spec.rope_theta, 500000.0);
  EXPECT_FALSE(spec.tie_word_embeddings);
  // q 4096*4096 + k,v 2*4096*1024 + o 4096*4096 + gate/up/down 3*4096*14336 + 2 norms * 4096
  EXPECT_EQ(spec.layer_params(), 16777216 + 8388608 + 16777216 + 176160768 + 8192);
  EXPECT_EQ(spec.layer_params(), 218112000);
  EXPECT_EQ(spec.embedding_params(), 525336576);
  EXPECT_EQ(spec.lm_head_params(), 525336576);
  EXPECT_EQ(spec.total_params(), 8030261248LL);  // the published count of Llama-3.1-8B
  EXPECT_EQ(spec.legal_tp_degrees(), (std::vector<int>{1, 2, 4, 8}));
  std::vector<int> pp;
  for (int i = 1; i <= 32; ++i) pp.push_back(i);
  EXPECT_EQ(spec.legal_pp_degrees(), pp);
}

TEST(ModelSpec, Llama2_7B_HandChecked) {
  const LlamaSpec spec = load_llama_config(model_path("llama2-7b.json"));
  EXPECT_EQ(spec.num_kv_heads, 32) << "num_key_value_heads defaults to the heads (MHA)";
  EXPECT_EQ(spec.head_dim, 128);
  const int64_t h = 4096, f = 11008, v = 32000, layers = 32;
  const int64_t layer = 4 * h * h + 3 * h * f + 2 * h;
  EXPECT_EQ(spec.layer_params(), layer);
  EXPECT_EQ(spec.total_params(), 2 * v * h + layers * layer + h);
  EXPECT_EQ(spec.total_params(), 6738415616LL);
  // 11008 = 2^8 * 43: every power of two up to the 32 heads divides it.
  EXPECT_EQ(spec.legal_tp_degrees(), (std::vector<int>{1, 2, 4, 8, 16, 32}));
}

// The models checked by their published parameter count and their legal TP degrees alone.
TEST(ModelSpec, PublishedCountAndTpDegrees) {
  struct Case {
    const char* file;
    int64_t total_params;
    std::vector<int> tp_degrees;
  };
  const Case cases[] = {
      // 40 heads: 5, 10, 20, 40 divide the heads but not the FFN size 13824 = 2^9 * 27.
      {"llama2-13b.json", 13015864320LL, {1, 2, 4, 8}},
      {"llama3.1-405b.json", 405853388800LL, {1, 2, 4, 8}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.file);
    const LlamaSpec spec = load_llama_config(model_path(c.file));
    EXPECT_EQ(spec.total_params(), c.total_params);
    EXPECT_EQ(spec.legal_tp_degrees(), c.tp_degrees);
  }
}

TEST(ModelSpec, Llama70BModels) {
  const LlamaSpec l31 = load_llama_config(model_path("llama3.1-70b.json"));
  const LlamaSpec l2 = load_llama_config(model_path("llama2-70b.json"));
  for (const LlamaSpec* spec : {&l31, &l2}) {
    EXPECT_EQ(spec->num_layers, 80);
    EXPECT_EQ(spec->hidden_size, 8192);
    EXPECT_EQ(spec->num_heads, 64);
    EXPECT_EQ(spec->num_kv_heads, 8);
    EXPECT_EQ(spec->head_dim, 128);
    // q, o 8192^2 each; k, v 8192*1024 each; MLP 3*8192*28672; norms 2*8192.
    EXPECT_EQ(spec->layer_params(), 2 * 67108864LL + 2 * 8388608LL + 704643072LL + 16384);
    EXPECT_EQ(spec->layer_params(), 855654400LL);
    EXPECT_EQ(spec->legal_tp_degrees(), (std::vector<int>{1, 2, 4, 8}));
  }
  EXPECT_EQ(l31.total_params(), 70553706496LL);  // Llama-3.1-70B
  EXPECT_EQ(l2.total_params(), 68976648192LL);   // Llama-2-70b
}

TEST(ModelSpec, TinyModels) {
  const LlamaSpec tiny = load_llama_config(model_path("tiny-llama.json"));
  // 4 * 128^2 + 3 * 128 * 352 + 2 * 128 per layer, 4 layers, 512 * 128 embedding and head, final norm.
  EXPECT_EQ(tiny.total_params(), 4 * 200960 + 2 * 65536 + 128);
  EXPECT_EQ(tiny.legal_tp_degrees(), (std::vector<int>{1, 2, 4}));
  const LlamaSpec gqa = load_llama_config(model_path("tiny-llama-gqa.json"));
  EXPECT_EQ(gqa.num_heads, 8);
  EXPECT_EQ(gqa.num_kv_heads, 4);
  EXPECT_EQ(gqa.head_dim, 16);
  // q, o 128*128; k, v 128*64; MLP 3*128*352; norms 256.
  EXPECT_EQ(gqa.layer_params(), 2 * 16384 + 2 * 8192 + 135168 + 256);
  EXPECT_EQ(gqa.legal_tp_degrees(), (std::vector<int>{1, 2, 4})) << "tp=8 divides the heads, not the 4 KV heads";
}

// ---- FLOPs ------------------------------------------------------------------------------------

TEST(ModelSpec, TrainingFlopsPerTokenByHand) {
  const LlamaSpec spec = load_llama_config(model_path("llama3.1-8b.json"));
  // Matmul parameters: 32 layers without their norm weights, plus the LM head.
  const int64_t matmul = 32 * (218112000LL - 2 * 4096) + 128256LL * 4096;
  EXPECT_EQ(spec.matmul_params(), matmul);
  EXPECT_EQ(spec.matmul_params(), 7504658432LL);
  // 6 * matmul + 12 * layers * hidden * seq
  EXPECT_DOUBLE_EQ(spec.training_flops_per_token(4096), 6.0 * 7504658432.0 + 12.0 * 32 * 4096 * 4096);
  EXPECT_DOUBLE_EQ(spec.training_flops_per_token(4096), 51470401536.0);
  EXPECT_DOUBLE_EQ(spec.training_flops_per_token(2048), 45027950592.0 + 3221225472.0);
  // The attention term grows linearly with the sequence length.
  EXPECT_DOUBLE_EQ(spec.training_flops_per_token(8192) - spec.training_flops_per_token(4096), 12.0 * 32 * 4096 * 4096);
}

TEST(ModelSpec, TiedEmbeddingsDropTheHeadButKeepItsFlops) {
  const LlamaSpec untied = parse_llama_config(config_json(), "untied.json");
  const LlamaSpec tied = parse_llama_config(config_json("tie_word_embeddings", "true"), "tied.json");
  EXPECT_FALSE(untied.tie_word_embeddings);
  EXPECT_TRUE(tied.tie_word_embeddings);
  EXPECT_EQ(tied.lm_head_params(), 0);
  EXPECT_EQ(untied.total_params() - tied.total_params(), 128256LL * 4096);
  EXPECT_EQ(tied.matmul_params(), untied.matmul_params());
  EXPECT_DOUBLE_EQ(tied.training_flops_per_token(1024), untied.training_flops_per_token(1024));
}

TEST(ModelSpec, ExplicitHeadDim) {
  // 4 heads of 64 on a hidden size of 128: q projects 128 -> 256, o 256 -> 128.
  const std::string text =
      R"({"model_type": "llama", "hidden_size": 128, "intermediate_size": 256, "num_hidden_layers": 2,
          "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 64, "vocab_size": 100})";
  const LlamaSpec spec = parse_llama_config(text, "hd.json");
  EXPECT_EQ(spec.head_dim, 64);
  EXPECT_EQ(spec.kv_dim(), 128);
  EXPECT_EQ(spec.layer_params(), 128 * 256 + 2 * 128 * 128 + 256 * 128 + 3 * 128 * 256 + 2 * 128);
}

TEST(ModelSpec, DefaultsForOptionalFields) {
  const std::string text =
      R"({"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
          "vocab_size": 100})";
  const LlamaSpec spec = parse_llama_config(text, "minimal.json");
  EXPECT_EQ(spec.num_kv_heads, 4);
  EXPECT_EQ(spec.head_dim, 16);
  EXPECT_EQ(spec.max_position_embeddings, 0);
  EXPECT_DOUBLE_EQ(spec.rms_norm_eps, 1e-6);
  EXPECT_DOUBLE_EQ(spec.rope_theta, 10000.0);
  EXPECT_EQ(spec.name, "minimal");
}

TEST(ModelSpec, NameFromNameOrPathWhenFileIsConfigJson) {
  itertime::testing::TempDir dir;
  const std::string path =
      dir.write("config.json", R"({"_name_or_path": "org/some-llama", "hidden_size": 64, "intermediate_size": 128,
                        "num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 100})");
  EXPECT_EQ(load_llama_config(path).name, "org/some-llama");
  const std::string other = dir.write("mine.json", itertime::testing::read_bytes(path));
  EXPECT_EQ(load_llama_config(other).name, "mine");
}

// ---- errors -----------------------------------------------------------------------------------

TEST(ModelSpecErrors, MissingRequiredFieldNamesIt) {
  for (const char* field : {"hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads", "vocab_size"}) {
    SCOPED_TRACE(field);
    const std::string message = user_error_message(config_json(field, ""), "my-config.json");
    EXPECT_NE(message.find("'" + std::string(field) + "'"), std::string::npos) << message;
    EXPECT_NE(message.find("missing"), std::string::npos) << message;
    EXPECT_NE(message.find("my-config.json"), std::string::npos) << "should name the file: " << message;
  }
}

TEST(ModelSpecErrors, NotJson) {
  for (const char* text : {"", "not json at all", "{\"hidden_size\": 4096,", "hidden_size = 4096"}) {
    const std::string message = user_error_message(text, "broken.json");
    EXPECT_NE(message.find("not valid JSON"), std::string::npos) << message;
    EXPECT_NE(message.find("broken.json"), std::string::npos) << message;
  }
}

TEST(ModelSpecErrors, JsonThatIsNotAnObject) {
  for (const char* text : {"[1, 2, 3]", "42", "\"llama\"", "null"}) {
    EXPECT_NE(user_error_message(text).find("JSON object"), std::string::npos) << text;
  }
}

TEST(ModelSpecErrors, NonPositiveOrNonIntegerValues) {
  struct Case {
    const char* field;
    const char* value;
  };
  for (const Case& c :
       {Case{"hidden_size", "0"}, Case{"hidden_size", "-4096"}, Case{"num_hidden_layers", "0"}, Case{"vocab_size", "-1"},
        Case{"intermediate_size", "1.5"}, Case{"hidden_size", "\"4096\""}, Case{"num_key_value_heads", "0"},
        Case{"num_attention_heads", "true"}, Case{"max_position_embeddings", "-5"}, Case{"head_dim", "0"}}) {
    SCOPED_TRACE(std::string(c.field) + "=" + c.value);
    const std::string message = user_error_message(config_json(c.field, c.value));
    EXPECT_NE(message.find("'" + std::string(c.field) + "'"), std::string::npos) << message;
    EXPECT_NE(message.find("positive integer"), std::string::npos) << message;
  }
}

TEST(ModelSpecErrors, OtherInvalidFields) {
  EXPECT_NE(user_error_message(config_json("tie_word_embeddings", "\"yes\"")).find("tie_word_embeddings"), std::string::npos);
  EXPECT_NE(user_error_message(config_json("rms_norm_eps", "-1e-5")).find("rms_norm_eps"), std::string::npos);
  EXPECT_NE(user_error_message(config_json("rope_theta", "0")).find("rope_theta"), std::string::npos);
  EXPECT_NE(user_error_message(config_json("rope_theta", "\"big\"")).find("rope_theta"), std::string::npos);
}

TEST(ModelSpecErrors, HeadsNotDivisibleByKvHeads) {
  const std::string message = user_error_message(config_json("num_key_value_heads", "6"));
  EXPECT_NE(message.find("num_attention_heads 32"), std::string::npos) << message;
  EXPECT_NE(message.find("num_key_value_heads 6"), std::string::npos) << message;
}

TEST(ModelSpecErrors, HiddenNotDivisibleByHeads) {
  const std::string message = user_error_message(config_json("num_attention_heads", "30"));
  EXPECT_NE(message.find("hidden_size 4096"), std::string::npos) << message;
  EXPECT_NE(message.find("30"), std::string::npos) << message;
}

TEST(ModelSpecErrors, ModelTypeNotLlama) {
  const std::string message = user_error_message(config_json("model_type", "\"mistral\""));
  EXPECT_NE(message.find("mistral"), std::string::npos) << message;
  EXPECT_NE(message.find("llama"), std::string::npos) << message;
  EXPECT_NO_THROW(parse_llama_config(config_json("model_type", "\"llama\""), "ok.json"));
}

TEST(ModelSpecErrors, MissingFileAndDirectory) {
  itertime::testing::TempDir dir;
  const std::string missing = dir.file("does-not-exist.json");
  try {
    load_llama_config(missing);
    ADD_FAILURE() << "missing file accepted";
  } catch (const UserError& error) {
    EXPECT_NE(std::string(error.what()).find(missing), std::string::npos) << error.what();
    EXPECT_NE(std::string(error.what()).find("no such file"), std::string::npos) << error.what();
  }
  EXPECT_THROW(load_llama_config(dir.path().string()), UserError);
  EXPECT_FALSE(std::filesystem::exists(missing)) << "loading must not create the file";
}

TEST(ModelSpecErrors, BadFileOnDiskNamesThePath) {
  itertime::testing::TempDir dir;
  const std::string path = dir.write("garbage.json", "this is not json\n");
  try {
    load_llama_config(path);
    ADD_FAILURE() << "garbage accepted";
  } catch (const UserError& error) {
    EXPECT_NE(std::string(error.what()).find(path), std::string::npos) << error.what();
  }
}

}  // namespace
}  // namespace itertime
