// Unit tests of common/job: sweeps expand to every (dp, tp, pp) factorization in order, explicit
// configurations come first and duplicates are dropped, relative model paths resolve against the
// job's folder, unknown fields and malformed JSON are refused naming the field or the file, training
// techniques come from the top level, a configuration's own object or the sweep's recipes (crossed with
// every layout and precision) and end the key in their recipe text, and the shipped jobs (jobs/*.json)
// load with the configurations counted by hand.
#include <gtest/gtest.h>

#include <filesystem>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "common/errors.hpp"
#include "common/job.hpp"
#include "temp_dir.hpp"
#include "user_error.hpp"

namespace itertime {
namespace {

using itertime::testing::contains;
using itertime::testing::user_error_of;
using Triple = std::tuple<int, int, int>;  // (dp, tp, pp)

const std::string kSource = ITERTIME_SOURCE_DIR;

std::vector<Triple> triples(const std::vector<RankLayout>& layouts) {
  std::vector<Triple> out;
  for (const auto& l : layouts) out.emplace_back(l.dp(), l.tp(), l.pp());
  return out;
}

std::vector<Triple> triples(const Job& job) {
  std::vector<Triple> out;
  for (const auto& c : job.configs) out.emplace_back(c.parallel.dp, c.parallel.tp, c.parallel.pp);
  return out;
}

// A job folder with the tiny model copied under models/.
struct JobFolder {
  testing::TempDir dir;
  JobFolder() {
    std::filesystem::create_directories(dir.path() / "models");
    std::filesystem::copy_file(kSource + "/data/models/tiny-llama-gqa.json", dir.path() / "models" / "tiny.json");
  }
  Job parse(const std::string& text, const std::string& name = "job.json") const { return parse_job(text, dir.file(name)); }
};

TEST(Job, Factorizations) {
  EXPECT_EQ(triples(factorizations(1)), (std::vector<Triple>{{1, 1, 1}}));
  EXPECT_EQ(triples(factorizations(2)), (std::vector<Triple>{{2, 1, 1}, {1, 2, 1}, {1, 1, 2}}));
  EXPECT_EQ(triples(factorizations(4)), (std::vector<Triple>{{4, 1, 1}, {2, 2, 1}, {1, 4, 1}, {2, 1, 2}, {1, 2, 2}, {1, 1, 4}}));
  // 8 = 2^3: the number of ordered triples is C(3+2, 2) = 10.
  EXPECT_EQ(triples(factorizations(8)),
            (std::vector<Triple>{
                {8, 1, 1}, {4, 2, 1}, {2, 4, 1}, {1, 8, 1}, {4, 1, 2}, {2, 2, 2}, {1, 4, 2}, {2, 1, 4}, {1, 2, 4}, {1, 1, 8}}));
  EXPECT_EQ(factorizations(6).size(), 9u);    // 2 * 3: 3 places for the 2, 3 for the 3
  EXPECT_EQ(factorizations(12).size(), 18u);  // 2^2 * 3: C(4,2) * 3
}

TEST(Job, SweepExpandsToEveryFactorizationInOrder) {
  JobFolder folder;
  const Job job = folder.parse(R"({
    "model": "models/tiny.json",
    "sweep": {"world_sizes": [1, 2, 4], "precisions": ["fp32"], "micro_batch": 1, "global_batch": 8, "seq_len": 64}
  })");
  EXPECT_EQ(triples(job),
            (std::vector<Triple>{
                {1, 1, 1}, {2, 1, 1}, {1, 2, 1}, {1, 1, 2}, {4, 1, 1}, {2, 2, 1}, {1, 4, 1}, {2, 1, 2}, {1, 2, 2}, {1, 1, 4}}));
  for (const auto& c : job.configs) {
    EXPECT_EQ(c.parallel.micro_batch, 1);
    EXPECT_EQ(c.parallel.global_batch, 8);
    EXPECT_EQ(c.parallel.seq_len, 64);
    EXPECT_EQ(c.precision, PrecisionName::kFp32);
  }
  EXPECT_EQ(job.max_world_size(), 4);
  EXPECT_EQ(job.configs[4].key(job.model.name), "tiny/dp4-tp1-pp1/mbs1/gbs8/seq64/fp32");
}

// Sweeps over cp and vp: cp divides the world and (dp,tp,pp) factorizes the rest; vp > 1 only with a
// pipeline; explicit configurations take cp and vp too; keys carry them only when they are not 1.
TEST(Job, SweepsAndConfigsWithContextAndVirtualStages) {
  JobFolder folder;
  const Job job = folder.parse(R"({
    "model": "models/tiny.json",
    "configs": [{"dp": 1, "tp": 1, "pp": 2, "vp": 2, "micro_batch": 1, "global_batch": 4, "seq_len": 64}],
    "sweep": {"world_sizes": [2], "precisions": ["fp32"], "micro_batch": 1, "global_batch": 8, "seq_len": 64,
              "cp": [1, 2], "vp": [1, 2]}
  })");
  std::vector<std::string> keys;
  for (const auto& c : job.configs) keys.push_back(c.key(job.model.name));
  EXPECT_EQ(keys, (std::vector<std::string>{
                      "tiny/dp1-tp1-pp2-cp1-vp2/mbs1/gbs4/seq64/fp32", "tiny/dp2-tp1-pp1/mbs1/gbs8/seq64/fp32",
                      "tiny/dp1-tp2-pp1/mbs1/gbs8/seq64/fp32", "tiny/dp1-tp1-pp2/mbs1/gbs8/seq64/fp32",
                      "tiny/dp1-tp1-pp2-cp1-vp2/mbs1/gbs8/seq64/fp32", "tiny/dp1-tp1-pp1-cp2-vp1/mbs1/gbs8/seq64/fp32"}));
  EXPECT_EQ(job.configs.back().parallel.world_size(), 2);
  for (const char* bad : {R"("vp": [])", R"("vp": [0])", R"("cp": 2)", R"("cp": ["2"])"}) {
    const std::string message = user_error_of([&] {
      folder.parse(std::string(R"({"model": "models/tiny.json", "sweep": {"world_sizes": [2], "precisions": ["fp32"], )"
                               R"("micro_batch": 1, "global_batch": 8, "seq_len": 64, )") +
                   bad + "}}");
    });
    EXPECT_TRUE(contains(message, "must be a non-empty array of positive integers")) << bad << ": " << message;
  }
}

TEST(Job, SweepLoopsPrecisionsInsideEachLayout) {
  JobFolder folder;
  const Job job = folder.parse(R"({
    "model": "models/tiny.json",
    "sweep": {"world_sizes": [2], "precisions": ["fp32", "amp-bf16"], "micro_batch": 2, "global_batch": 4, "seq_len": 16}
  })");
  ASSERT_EQ(job.configs.size(), 6u);
  std::vector<std::string> keys;
  for (const auto& c : job.configs) keys.push_back(c.key(job.model.name));
  EXPECT_EQ(keys,
            (std::vector<std::string>{"tiny/dp2-tp1-pp1/mbs2/gbs4/seq16/fp32", "tiny/dp2-tp1-pp1/mbs2/gbs4/seq16/amp-bf16",
                                      "tiny/dp1-tp2-pp1/mbs2/gbs4/seq16/fp32", "tiny/dp1-tp2-pp1/mbs2/gbs4/seq16/amp-bf16",
                                      "tiny/dp1-tp1-pp2/mbs2/gbs4/seq16/fp32", "tiny/dp1-tp1-pp2/mbs2/gbs4/seq16/amp-bf16"}));
}

TEST(Job, ExplicitConfigsComeFirstAndDuplicatesAreDropped) {
  JobFolder folder;
  const Job job = folder.parse(R"({
    "model": "models/tiny.json",
    "configs": [
      {"dp": 1, "tp": 1, "pp": 2, "micro_batch": 1, "global_batch": 8, "seq_len": 64, "precision": "fp32"},
      {"dp": 1, "tp": 3, "pp": 1, "micro_batch": 1, "global_batch": 8, "seq_len": 64},
      {"dp": 1, "tp": 1, "pp": 2, "micro_batch": 1, "global_batch": 8, "seq_len": 64, "precision": "fp32"}
    ],
    "sweep": {"world_sizes": [2], "precisions": ["fp32"], "micro_batch": 1, "global_batch": 8, "seq_len": 64}
  })");
  // (1,1,2) fp32 appears twice in configs and once in the sweep: kept once, in first place. The illegal
  // tp=3 (tiny has 8 heads) is kept: ground truth records it as skipped. Precision defaults to fp32.
  EXPECT_EQ(triples(job), (std::vector<Triple>{{1, 1, 2}, {1, 3, 1}, {2, 1, 1}, {1, 2, 1}}));
  EXPECT_EQ(job.configs[1].precision, PrecisionName::kFp32);
  EXPECT_EQ(job.max_world_size(), 3);
}

// How the job runs: its backend and ranks, the iterations it times, and the comm sweep's sizes.
void expect_run(const Job& job, Backend backend, int ranks, int warmup_iters, int timed_iters, const std::string& min_bytes,
                const std::string& max_bytes, double step_factor) {
  EXPECT_EQ(job.backend, backend);
  EXPECT_EQ(job.ranks, ranks);
  EXPECT_EQ(job.warmup_iters, warmup_iters);
  EXPECT_EQ(job.timed_iters, timed_iters);
  EXPECT_EQ(job.comm.min_bytes, min_bytes);
  EXPECT_EQ(job.comm.max_bytes, max_bytes);
  EXPECT_EQ(job.comm.step_factor, step_factor);
}

TEST(Job, Defaults) {
  JobFolder folder;
  const Job job = folder.parse(R"({"model": "models/tiny.json",
    "configs": [{"dp": 1, "tp": 1, "pp": 1, "micro_batch": 1, "global_batch": 1, "seq_len": 8}]})",
                               "my-cluster.json");
  EXPECT_EQ(job.name, "my-cluster");  // the file's stem
  EXPECT_EQ(job.path, folder.dir.file("my-cluster.json"));
  expect_run(job, Backend::kCpu, 0, 2, 5, "8", "16M", 4.0);
  EXPECT_EQ(job.seed, 1234u);
  EXPECT_EQ(job.compute_threads, 1);
  EXPECT_EQ(job.comm.warmup_iters, 5);
  EXPECT_EQ(job.comm.iters, 20);
}

TEST(Job, RelativeModelPathResolvesAgainstTheJobFolder) {
  JobFolder folder;
  std::filesystem::create_directories(folder.dir.path() / "jobs");
  const std::string text = R"({"model": "../models/tiny.json",
    "configs": [{"dp": 1, "tp": 1, "pp": 1, "micro_batch": 1, "global_batch": 1, "seq_len": 8}]})";
  const Job job = parse_job(text, folder.dir.file("jobs/job.json"));
  EXPECT_EQ(job.model_path, (folder.dir.path() / "models" / "tiny.json").lexically_normal().string());
  EXPECT_EQ(job.model.hidden_size, 128);
  EXPECT_EQ(job.model.num_kv_heads, 4);
  // The same text read as a job in the temp folder itself does not find the model: the path is
  // relative to the job, not to the working directory.
  const std::string message = user_error_of([&] { parse_job(text, folder.dir.file("job.json")); });
  EXPECT_TRUE(contains(message, "tiny.json")) << message;
  // An absolute path is taken as it is.
  const std::string absolute = kSource + "/data/models/tiny-llama.json";
  const Job abs_job = parse_job(R"({"model": ")" + absolute + R"(",
    "configs": [{"dp": 1, "tp": 1, "pp": 1, "micro_batch": 1, "global_batch": 1, "seq_len": 8}]})",
                                folder.dir.file("jobs/job.json"));
  EXPECT_EQ(abs_job.model_path, absolute);
}

TEST(Job, UnknownFieldsAreRefusedNamingTheField) {
  JobFolder folder;
  const std::string config = R"({"dp": 1, "tp": 1, "pp": 1, "micro_batch": 1, "global_batch": 1, "seq_len": 8})";
  struct Case {
    std::string text;
    std::string where;
    std::string field;
  };
  const std::vector<Case> cases = {
      {R"({"model": "models/tiny.json", "frobnicate": 1, "configs": [)" + config + "]}", "job.json", "'frobnicate'"},
      {R"({"model": "models/tiny.json", "configs": [{"dp": 1, "tp": 1, "pp": 1, "micro_batch": 1, "global_batch": 1, "seq_len": 8, "dpp": 2}]})",
       "configs[0]", "'dpp'"},
      {R"({"model": "models/tiny.json", "configs": [)" + config + R"(], "groundtruth": {"timed": 3}})", "groundtruth", "'timed'"},
      {R"({"model": "models/tiny.json", "configs": [)" + config + R"(], "comm": {"max_size": "1M"}})", "comm", "'max_size'"},
      {R"({"model": "models/tiny.json", "sweep": {"world_sizes": [1], "precisions": ["fp32"], "micro_batch": 1, "global_batch": 1, "seq_len": 8, "worlds": [2]}})",
       "sweep", "'worlds'"},
  };
  for (const auto& c : cases) {
    const std::string message = user_error_of([&] { folder.parse(c.text); });
    EXPECT_TRUE(contains(message, "unknown field " + c.field)) << message;
    EXPECT_TRUE(contains(message, c.where)) << message;
    EXPECT_TRUE(contains(message, folder.dir.file("job.json"))) << message;
  }
}

TEST(Job, MalformedJobsAreRefused) {
  JobFolder folder;
  const std::string path = folder.dir.file("job.json");
  std::string message = user_error_of([&] { folder.parse(R"({"model": "models/tiny.json", "configs": [)"); });
  EXPECT_TRUE(contains(message, path)) << message;
  EXPECT_TRUE(contains(message, "not valid JSON")) << message;
  // Each text refused with a message that names the fragment.
  const std::vector<std::pair<std::string, std::string>> refused = {
      {"model = tiny", "not valid JSON"},
      {"[1, 2]", "JSON object"},
      {R"({"configs": []})", "'model'"},
      {R"({"model": "models/tiny.json"})", "no configuration"},
      {R"({"model": "models/tiny.json", "configs": [{"dp": 1, "tp": 1, "micro_batch": 1, "global_batch": 1, "seq_len": 8}]})",
       "missing field 'pp'"},
      {R"({"model": "models/tiny.json", "configs": [{"dp": -1, "tp": 1, "pp": 1, "micro_batch": 1, "global_batch": 1, "seq_len": 8}]})",
       "'dp'"},
      {R"({"model": "models/tiny.json", "configs": [{"dp": 0, "tp": 1, "pp": 1, "micro_batch": 1, "global_batch": 1, "seq_len": 8}]})",
       "zero"},
      {R"({"model": "models/tiny.json", "configs": [{"dp": 1, "tp": 1, "pp": 1, "micro_batch": 1, "global_batch": 1, "seq_len": 8, "precision": "fp8"}]})",
       "fp8"},
      {R"({"model": "models/tiny.json", "sweep": {"precisions": ["fp32"], "micro_batch": 1, "global_batch": 1, "seq_len": 8}})",
       "world_sizes"},
      {R"({"model": "models/tiny.json", "backend": "tpu", "configs": [{"dp": 1, "tp": 1, "pp": 1, "micro_batch": 1, "global_batch": 1, "seq_len": 8}]})",
       "tpu"},
  };
  for (const auto& [text, fragment] : refused) {
    message = user_error_of([&] { folder.parse(text); });
    EXPECT_TRUE(contains(message, fragment)) << message;
  }
  message = user_error_of([&] { load_job(folder.dir.file("absent.json")); });
  EXPECT_TRUE(contains(message, "absent.json")) << message;
  message = user_error_of([&] { load_job(folder.dir.path().string()); });
  EXPECT_TRUE(contains(message, "directory")) << message;
}

TEST(Job, ShippedLocalCpuJob) {
  const Job job = load_job(kSource + "/jobs/local-cpu.json");
  EXPECT_EQ(job.name, "local-cpu");
  EXPECT_EQ(job.model_path, kSource + "/data/models/tiny-llama-gqa.json");
  EXPECT_EQ(job.model.name, "tiny-llama-gqa");
  EXPECT_EQ(job.backend, Backend::kCpu);
  EXPECT_EQ(job.ranks, 4);
  EXPECT_EQ(job.warmup_iters, 2);
  EXPECT_EQ(job.timed_iters, 3);
  EXPECT_EQ(job.comm.max_bytes, "8M");               // past the fp32 gradient buffer (3.5 MB), whose all-reduce jumps in cost
  EXPECT_EQ(job.attention, AttentionKernel::kAuto);  // sdpa where the LibTorch has it
  // 10 layouts of 1, 2 and 4 ranks x 5 precisions (the fp16 ones skipped where the LibTorch lacks them).
  ASSERT_EQ(job.configs.size(), 50u);
  EXPECT_EQ(job.max_world_size(), 4);
  EXPECT_EQ(job.configs.front().key(job.model.name), "tiny-llama-gqa/dp1-tp1-pp1/mbs1/gbs8/seq64/fp32");
  EXPECT_EQ(job.configs.back().key(job.model.name), "tiny-llama-gqa/dp1-tp1-pp4/mbs1/gbs8/seq64/amp-fp16");
}

// The layouts job: 9 (dp,tp,pp) layouts of 2 and 4 ranks and, with cp 2, the 4 of 1 and 2 ranks; those
// with a pipeline (4 + 1) also at vp 2 (pp 4 x vp 2 = 8 chunks of the 8-layer model); x 2 precisions;
// and first, explicitly, dp 2 x pp 2 x vp 2 fp32 with overlapped reduction per chunk (ovl-64K, and
// dopt+ovl-64K+opg).
TEST(Job, ShippedLocalCpuLayoutsJob) {
  const Job job = load_job(kSource + "/jobs/local-cpu-layouts.json");
  EXPECT_EQ(job.name, "local-cpu-layouts");
  EXPECT_EQ(job.model.name, "tiny-llama-gqa-8l");
  EXPECT_EQ(job.model.num_layers, 8);
  ASSERT_EQ(job.configs.size(), 38u);
  int interleaved = 0, context_parallel = 0;
  for (const auto& c : job.configs) {
    EXPECT_TRUE(c.parallel.violations(job.model, 0).empty()) << c.key(job.model.name);
    interleaved += c.parallel.vp == 2 ? 1 : 0;
    context_parallel += c.parallel.cp == 2 ? 1 : 0;
    EXPECT_LE(c.parallel.world_size(), 4);
  }
  EXPECT_EQ(interleaved, 12);
  EXPECT_EQ(context_parallel, 10);
  EXPECT_EQ(job.configs[0].key(job.model.name), "tiny-llama-gqa-8l/dp2-tp1-pp2-cp1-vp2/mbs1/gbs8/seq64/fp32/ovl-64K");
  EXPECT_EQ(job.configs[1].key(job.model.name), "tiny-llama-gqa-8l/dp2-tp1-pp2-cp1-vp2/mbs1/gbs8/seq64/fp32/dopt+ovl-64K+opg");
  EXPECT_EQ(job.configs.back().key(job.model.name), "tiny-llama-gqa-8l/dp1-tp1-pp2-cp2-vp2/mbs1/gbs8/seq64/amp-bf16");
}

TEST(Job, AttentionKernel) {
  JobFolder folder;
  const std::string configs = R"("configs": [{"dp": 1, "tp": 1, "pp": 1, "micro_batch": 1, "global_batch": 1, "seq_len": 8}])";
  EXPECT_EQ(folder.parse(R"({"model": "models/tiny.json", )" + configs + "}").attention, AttentionKernel::kAuto);
  EXPECT_EQ(folder.parse(R"({"model": "models/tiny.json", "attention": "eager", )" + configs + "}").attention,
            AttentionKernel::kEager);
  EXPECT_EQ(folder.parse(R"({"model": "models/tiny.json", "attention": "sdpa", )" + configs + "}").attention,
            AttentionKernel::kSdpa);
  const std::string message =
      user_error_of([&] { folder.parse(R"({"model": "models/tiny.json", "attention": "flash", )" + configs + "}"); });
  EXPECT_TRUE(contains(message, "'attention'")) << message;
  EXPECT_TRUE(contains(message, "'flash'")) << message;
  EXPECT_TRUE(contains(message, "use eager, sdpa or auto")) << message;
  EXPECT_TRUE(contains(message, folder.dir.file("job.json"))) << message;
}

TEST(Job, ShippedReducedCpuJob) {
  const Job job = load_job(kSource + "/jobs/reduced-cpu.json");
  EXPECT_EQ(job.name, "reduced-cpu");
  EXPECT_EQ(job.seed, 7u);
  EXPECT_EQ(job.ranks, 2);
  EXPECT_EQ(job.warmup_iters, 1);
  EXPECT_EQ(job.timed_iters, 3);
  EXPECT_EQ(job.comm.max_bytes, "256K");
  EXPECT_EQ(job.comm.step_factor, 8.0);
  EXPECT_EQ(job.comm.iters, 5);
  EXPECT_EQ(triples(job), (std::vector<Triple>{{1, 1, 1}, {2, 1, 1}, {1, 2, 1}, {1, 1, 2}, {1, 3, 1}, {1, 1, 1}}));
  EXPECT_EQ(job.configs[2].precision, PrecisionName::kAmpBf16);
  EXPECT_EQ(job.configs[5].precision, PrecisionName::kFp16);
  EXPECT_EQ(job.max_world_size(), 3);
}

TEST(Job, MinTimedSecondsIsReadAndChecked) {
  JobFolder folder;
  const std::string configs = R"("configs": [{"dp": 1, "tp": 1, "pp": 1, "micro_batch": 1, "global_batch": 1, "seq_len": 8}])";
  EXPECT_EQ(folder.parse(R"({"model": "models/tiny.json", )" + configs + "}", "a.json").min_timed_seconds, 0.0);
  const Job job = folder.parse(
      R"({"model": "models/tiny.json", "groundtruth": {"timed_iters": 3, "min_timed_seconds": 2.5}, )" + configs + "}", "b.json");
  EXPECT_EQ(job.timed_iters, 3);
  EXPECT_EQ(job.min_timed_seconds, 2.5);
  for (const std::string bad : {R"("min_timed_seconds": -1)", R"("min_timed_seconds": "2")", R"("timed_iters": 101)"}) {
    try {
      folder.parse(R"({"model": "models/tiny.json", "groundtruth": {)" + bad + "}, " + configs + "}", "c.json");
      ADD_FAILURE() << "accepted " << bad;
    } catch (const UserError& error) {
      EXPECT_NE(std::string(error.what()).find("c.json groundtruth"), std::string::npos) << error.what();
    }
  }
  // The shipped local job asks for 0.7 s per configuration and round, so fast fp32 steps get more samples.
  EXPECT_EQ(load_job(kSource + "/jobs/local-cpu.json").min_timed_seconds, 0.7);
}

TEST(Job, MeasurementRoundsAreReadAndChecked) {
  JobFolder folder;
  const std::string configs = R"("configs": [{"dp": 1, "tp": 1, "pp": 1, "micro_batch": 1, "global_batch": 1, "seq_len": 8}])";
  const Job defaults = folder.parse(R"({"model": "models/tiny.json", )" + configs + "}", "a.json");
  EXPECT_EQ(defaults.rounds.rounds, 3);
  EXPECT_EQ(defaults.rounds.max_extra_rounds, 3);
  EXPECT_EQ(defaults.rounds.disagreement_pct, 10.0);
  EXPECT_EQ(defaults.rounds.outside_load_cores, 0.3);
  EXPECT_EQ(defaults.rounds.drift_pct, 3.0);
  const Job job = folder.parse(R"({"model": "models/tiny.json", "groundtruth": {"rounds": 5, "max_extra_rounds": 0,
                                   "disagreement_pct": 4.5, "outside_load_cores": 0.5, "drift_pct": 7}, )" +
                                   configs + "}",
                               "b.json");
  EXPECT_EQ(job.rounds.rounds, 5);
  EXPECT_EQ(job.rounds.max_extra_rounds, 0);
  EXPECT_EQ(job.rounds.disagreement_pct, 4.5);
  EXPECT_EQ(job.rounds.outside_load_cores, 0.5);
  EXPECT_EQ(job.rounds.drift_pct, 7.0);
  for (const std::string bad : {R"("rounds": 0)", R"("max_extra_rounds": -1)", R"("disagreement_pct": -2)",
                                R"("outside_load_cores": "high")", R"("drift_pct": -1)", R"("round": 3)"}) {
    try {
      folder.parse(R"({"model": "models/tiny.json", "groundtruth": {)" + bad + "}, " + configs + "}", "c.json");
      ADD_FAILURE() << "accepted " << bad;
    } catch (const UserError& error) {
      EXPECT_NE(std::string(error.what()).find("c.json groundtruth"), std::string::npos) << error.what();
    }
  }
  EXPECT_EQ(load_job(kSource + "/jobs/local-cpu.json").rounds.rounds, 3);
}

TEST(Job, ShippedLlama8BJob) {
  const Job job = load_job(kSource + "/jobs/llama3.1-8b-8gpu.json");
  EXPECT_EQ(job.name, "llama3.1-8b-8gpu");
  EXPECT_EQ(job.model.num_layers, 32);
  EXPECT_EQ(job.model.hidden_size, 4096);
  expect_run(job, Backend::kCuda, 8, 3, 10, "1K", "1G", 2.0);
  // factorizations(8) has 10 layouts; x 5 precisions = 50 configurations, all of 8 ranks.
  ASSERT_EQ(job.configs.size(), 50u);
  for (const auto& c : job.configs) {
    EXPECT_EQ(c.parallel.world_size(), 8);
    EXPECT_EQ(c.parallel.global_batch, 32);
    EXPECT_EQ(c.parallel.seq_len, 4096);
  }
  std::vector<Triple> layouts;
  for (std::size_t i = 0; i < job.configs.size(); i += 5) layouts.push_back(triples(job)[i]);
  EXPECT_EQ(layouts, triples(factorizations(8)));
  const std::vector<PrecisionName> precisions = {PrecisionName::kAmpBf16, PrecisionName::kAmpFp16, PrecisionName::kFp16,
                                                 PrecisionName::kBf16, PrecisionName::kTf32};
  for (std::size_t i = 0; i < job.configs.size(); ++i) EXPECT_EQ(job.configs[i].precision, precisions[i % 5]) << i;
}

// gpu-run.sh's jobs (docs/gpu.md): the GPU one at LLaMA 3.1-8B's full width with 4 layers, one GPU, every
// policy; the CPU-mode one the same pipeline on a tiny model at 1 and 2 ranks, every policy a CPU runs.
TEST(Job, ShippedGpuRunJobs) {
  const Job gpu = load_job(kSource + "/jobs/gpu-h200.json");
  EXPECT_EQ(gpu.backend, Backend::kCuda);
  EXPECT_EQ(gpu.model.num_layers, 4);
  EXPECT_EQ(gpu.model.hidden_size, 4096);
  EXPECT_EQ(gpu.model.intermediate_size, 14336);
  EXPECT_EQ(gpu.model.vocab_size, 128256);
  ASSERT_EQ(gpu.configs.size(), 6u);
  std::set<PrecisionName> policies;
  for (const auto& c : gpu.configs) {
    EXPECT_EQ(c.parallel.world_size(), 1);
    EXPECT_EQ(c.parallel.seq_len, 4096);
    policies.insert(c.precision);
  }
  EXPECT_EQ(policies.size(), 6u);
  const Job cpu = load_job(kSource + "/jobs/gpu-cpu-mode.json");
  EXPECT_EQ(cpu.backend, Backend::kCpu);
  EXPECT_EQ(cpu.ranks, 2);
  EXPECT_EQ(cpu.configs.size(), 4u * 5u);  // (1,1,1), (2,1,1), (1,2,1), (1,1,2) x 5 policies
}

// ---- training techniques (issue 16) ----------------------------------------------------------------

std::vector<std::string> keys_of(const Job& job) {
  std::vector<std::string> keys;
  for (const auto& c : job.configs) keys.push_back(c.key(job.model.name));
  return keys;
}

TEST(JobTechniques, AbsentMeansPlainAndKeysStayAsBefore) {
  JobFolder folder;
  const Job job = folder.parse(R"({"model": "models/tiny.json",
    "configs": [{"dp": 1, "tp": 1, "pp": 2, "micro_batch": 1, "global_batch": 8, "seq_len": 64}],
    "sweep": {"world_sizes": [1], "precisions": ["bf16"], "micro_batch": 1, "global_batch": 8, "seq_len": 64}})");
  ASSERT_EQ(job.configs.size(), 2u);
  for (const auto& c : job.configs) EXPECT_FALSE(c.techniques.any());
  EXPECT_EQ(keys_of(job),
            (std::vector<std::string>{"tiny/dp1-tp1-pp2/mbs1/gbs8/seq64/fp32", "tiny/dp1-tp1-pp1/mbs1/gbs8/seq64/bf16"}));
}

TEST(JobTechniques, TopLevelDefaultsAndPerConfigurationOverrides) {
  JobFolder folder;
  const Job job = folder.parse(R"({"model": "models/tiny.json",
    "techniques": {"sequence_parallel": true, "recompute": "selective"},
    "configs": [
      {"dp": 1, "tp": 2, "pp": 1, "micro_batch": 1, "global_batch": 8, "seq_len": 64},
      {"dp": 2, "tp": 1, "pp": 1, "micro_batch": 1, "global_batch": 8, "seq_len": 64,
       "techniques": {"recompute": "full", "distributed_optimizer": true}},
      {"dp": 2, "tp": 1, "pp": 1, "micro_batch": 1, "global_batch": 8, "seq_len": 64,
       "techniques": {"sequence_parallel": false, "recompute": "none"}},
      {"dp": 2, "tp": 1, "pp": 1, "micro_batch": 1, "global_batch": 8, "seq_len": 64,
       "techniques": {"overlap_gradient_reduction": true, "gradient_bucket_bytes": "4M", "vocab_parallel": true}}
    ]})");
  ASSERT_EQ(job.configs.size(), 4u);
  // The top level is every configuration's default ...
  EXPECT_TRUE(job.configs[0].techniques.sequence_parallel);
  EXPECT_EQ(job.configs[0].techniques.recompute, Recompute::kSelective);
  // ... and a configuration's own object replaces the fields it gives, keeping the others.
  EXPECT_TRUE(job.configs[1].techniques.sequence_parallel);
  EXPECT_TRUE(job.configs[1].techniques.distributed_optimizer);
  EXPECT_EQ(job.configs[1].techniques.recompute, Recompute::kFull);
  EXPECT_FALSE(job.configs[2].techniques.any());
  EXPECT_TRUE(job.configs[3].techniques.overlap_gradient_reduction);
  EXPECT_EQ(job.configs[3].techniques.gradient_bucket_bytes, int64_t{4} << 20);
  EXPECT_EQ(keys_of(job),
            (std::vector<std::string>{"tiny/dp1-tp2-pp1/mbs1/gbs8/seq64/fp32/sp+rc-sel",
                                      "tiny/dp2-tp1-pp1/mbs1/gbs8/seq64/fp32/sp+dopt+rc-full",
                                      "tiny/dp2-tp1-pp1/mbs1/gbs8/seq64/fp32",  // turned back to plain: the plain key
                                      "tiny/dp2-tp1-pp1/mbs1/gbs8/seq64/fp32/sp+vp+rc-sel+ovl-4M"}));
  // The key's recipe is the canonical text: it parses back to the configuration's techniques.
  for (const auto& c : job.configs) {
    const std::string key = c.key(job.model.name);
    const std::string recipe = c.techniques.any() ? key.substr(key.rfind('/') + 1) : "";
    EXPECT_EQ(parse_recipe_text(recipe), c.techniques) << key;
  }
}

TEST(JobTechniques, SweepCrossesEveryLayoutAndPrecisionWithEveryRecipe) {
  JobFolder folder;
  const Job job = folder.parse(R"({"model": "models/tiny.json",
    "techniques": {"distributed_optimizer": true},
    "configs": [{"dp": 2, "tp": 1, "pp": 1, "micro_batch": 1, "global_batch": 8, "seq_len": 64,
                 "techniques": {"recompute": "full"}}],
    "sweep": {"world_sizes": [2], "precisions": ["fp32", "amp-bf16"], "micro_batch": 1, "global_batch": 8, "seq_len": 64,
              "recipes": [{}, {"distributed_optimizer": false}, {"recompute": "full"},
                          {"sequence_parallel": true, "vocab_parallel": true}, {}]}})");
  // 3 layouts x 2 precisions x 4 distinct recipes (the repeated {} is dropped by key), less the sweep's
  // (2,1,1) fp32 dopt+rc-full, which the explicit configuration already lists.
  ASSERT_EQ(job.configs.size(), 1u + 3u * 2u * 4u - 1u);
  const std::vector<std::string> keys = keys_of(job);
  EXPECT_EQ(std::vector<std::string>(keys.begin(), keys.begin() + 8),
            (std::vector<std::string>{
                "tiny/dp2-tp1-pp1/mbs1/gbs8/seq64/fp32/dopt+rc-full",
                // recipes vary fastest, inside each precision of each layout
                "tiny/dp2-tp1-pp1/mbs1/gbs8/seq64/fp32/dopt", "tiny/dp2-tp1-pp1/mbs1/gbs8/seq64/fp32",
                "tiny/dp2-tp1-pp1/mbs1/gbs8/seq64/fp32/sp+vp+dopt", "tiny/dp2-tp1-pp1/mbs1/gbs8/seq64/amp-bf16/dopt",
                "tiny/dp2-tp1-pp1/mbs1/gbs8/seq64/amp-bf16", "tiny/dp2-tp1-pp1/mbs1/gbs8/seq64/amp-bf16/dopt+rc-full",
                "tiny/dp2-tp1-pp1/mbs1/gbs8/seq64/amp-bf16/sp+vp+dopt"}));
  EXPECT_EQ(keys.back(), "tiny/dp1-tp1-pp2/mbs1/gbs8/seq64/amp-bf16/sp+vp+dopt");
  EXPECT_EQ(std::set<std::string>(keys.begin(), keys.end()).size(), keys.size()) << "duplicate keys";
}

TEST(JobTechniques, BucketSizesAndCombinationsTheTrainerRefusesAreKept) {
  JobFolder folder;
  const std::string layout = R"("dp": 2, "tp": 2, "pp": 1, "micro_batch": 1, "global_batch": 8, "seq_len": 63)";
  const Job job = folder.parse(R"({"model": "models/tiny.json", "configs": [
      {)" + layout + R"(, "techniques": {"overlap_gradient_reduction": true, "gradient_bucket_bytes": 4096}},
      {)" + layout + R"(, "techniques": {"overlap_gradient_reduction": true, "gradient_bucket_bytes": "64kb"}},
      {)" + layout + R"(, "techniques": {"overlap_gradient_reduction": true, "gradient_bucket_bytes": "25M"}},
      {)" + layout + R"(, "techniques": {"overlap_gradient_reduction": true, "gradient_bucket_bytes": 1000}},
      {)" + layout + R"(, "techniques": {"overlap_gradient_reduction": true, "distributed_optimizer": true}},
      {)" + layout + R"(, "techniques": {"overlap_gradient_reduction": true, "distributed_optimizer": true,
                                         "overlap_parameter_gather": true, "gradient_bucket_bytes": "64K"}},
      {)" + layout + R"(, "techniques": {"sequence_parallel": true}},
      {)" + layout + R"(, "techniques": {"gradient_bucket_bytes": "1M"}},
      {)" + layout + R"(}
    ]})");
  // Overlap with the distributed optimizer, and SP with seq 63 over tp 2, are the trainer's to refuse
  // (ground truth records them skipped); the bucket size without overlap changes nothing, so that
  // configuration is the plain one and the last entry is its duplicate.
  EXPECT_EQ(keys_of(job),
            (std::vector<std::string>{
                "tiny/dp2-tp2-pp1/mbs1/gbs8/seq63/fp32/ovl-4K", "tiny/dp2-tp2-pp1/mbs1/gbs8/seq63/fp32/ovl-64K",
                "tiny/dp2-tp2-pp1/mbs1/gbs8/seq63/fp32/ovl", "tiny/dp2-tp2-pp1/mbs1/gbs8/seq63/fp32/ovl-1000",
                "tiny/dp2-tp2-pp1/mbs1/gbs8/seq63/fp32/dopt+ovl", "tiny/dp2-tp2-pp1/mbs1/gbs8/seq63/fp32/dopt+ovl-64K+opg",
                "tiny/dp2-tp2-pp1/mbs1/gbs8/seq63/fp32/sp", "tiny/dp2-tp2-pp1/mbs1/gbs8/seq63/fp32"}));
  EXPECT_EQ(job.configs[0].techniques.gradient_bucket_bytes, 4096);
  EXPECT_EQ(job.configs[1].techniques.gradient_bucket_bytes, 65536);
  EXPECT_EQ(job.configs[2].techniques.gradient_bucket_bytes, kDefaultGradientBucketBytes);
}

TEST(JobTechniques, MistakesAreRefusedNamingTheFileAndTheFieldPath) {
  JobFolder folder;
  const std::string path = folder.dir.file("job.json");
  const std::string config = R"({"dp": 1, "tp": 1, "pp": 1, "micro_batch": 1, "global_batch": 1, "seq_len": 8)";
  const std::string sweep_head =
      R"("sweep": {"world_sizes": [1], "precisions": ["fp32"], "micro_batch": 1, "global_batch": 1, "seq_len": 8, "recipes": )";
  // In each place a techniques object can stand.
  auto top = [&](const std::string& body) {
    return R"({"model": "models/tiny.json", "techniques": )" + body + R"(, "configs": [)" + config + "}]}";
  };
  auto own = [&](const std::string& body) {
    return R"({"model": "models/tiny.json", "configs": [)" + config + R"(, "techniques": )" + body + "}]}";
  };
  auto recipe = [&](const std::string& body) {
    return R"({"model": "models/tiny.json", )" + sweep_head + "[{}, " + body + "]}}";
  };
  struct Case {
    std::string body;
    std::vector<std::string> parts;  // the message names them all
  };
  const std::vector<Case> cases = {
      {R"({"sp": true})", {"unknown field 'sp'", "sequence_parallel"}},
      {R"({"sequence_parallel": 1})", {"'sequence_parallel'", "true or false", "1"}},
      {R"({"vocab_parallel": "yes"})", {"'vocab_parallel'", "true or false", "\"yes\""}},
      {R"({"distributed_optimizer": null})", {"'distributed_optimizer'", "true or false"}},
      {R"({"overlap_gradient_reduction": 0})", {"'overlap_gradient_reduction'", "true or false"}},
      {R"({"overlap_parameter_gather": "on"})", {"'overlap_parameter_gather'", "true or false"}},
      {R"({"overlap_parameter_gather": true, "distributed_optimizer": true})",
       {"'overlap_parameter_gather'", "'distributed_optimizer' and 'overlap_gradient_reduction' true too"}},
      {R"({"recompute": true})", {"'recompute'", "\"selective\""}},
      {R"({"recompute": "partial"})", {"'recompute'", "'partial'", "none, selective or full"}},
      {R"({"gradient_bucket_bytes": 0})", {"'gradient_bucket_bytes'", "positive", "\"4M\""}},
      {R"({"gradient_bucket_bytes": -4096})", {"'gradient_bucket_bytes'", "-4096"}},
      {R"({"gradient_bucket_bytes": "4X"})", {"'gradient_bucket_bytes'", "\"4X\""}},
      {R"({"gradient_bucket_bytes": "0M"})", {"'gradient_bucket_bytes'", "\"0M\""}},
      {R"({"gradient_bucket_bytes": "99999999999G"})", {"'gradient_bucket_bytes'"}},
      {R"({"gradient_bucket_bytes": 1.5})", {"'gradient_bucket_bytes'", "1.5"}},
      {R"({"gradient_bucket_bytes": true})", {"'gradient_bucket_bytes'"}},
      {R"(["sequence_parallel"])", {"techniques object", "JSON object"}},
      {R"("sp+vp")", {"techniques object", "\"sp+vp\""}},
  };
  for (const auto& c : cases) {
    const std::vector<std::pair<std::string, std::string>> placed = {{top(c.body), path + " techniques"},
                                                                     {own(c.body), path + " configs[0] techniques"},
                                                                     {recipe(c.body), path + " sweep recipes[1]"}};
    for (const auto& [text, where] : placed) {
      const std::string message = user_error_of([&] { folder.parse(text); });
      EXPECT_TRUE(contains(message, where + ": ")) << where << " | " << message;
      for (const auto& part : c.parts) EXPECT_TRUE(contains(message, part)) << part << " | " << message;
    }
  }
  for (const std::string bad : {"[]", "{}", "\"plain\""}) {
    const std::string message =
        user_error_of([&] { folder.parse(R"({"model": "models/tiny.json", )" + sweep_head + bad + "}}"); });
    EXPECT_TRUE(contains(message, path + " sweep: 'recipes' must be a non-empty array")) << message;
  }
  // "techniques" belongs to the top level and to configurations, not to the sweep itself.
  const std::string message = user_error_of([&] {
    folder.parse(R"({"model": "models/tiny.json", "sweep": {"world_sizes": [1], "precisions": ["fp32"], "micro_batch": 1,
                     "global_batch": 1, "seq_len": 8, "techniques": {}}})");
  });
  EXPECT_TRUE(contains(message, path + " sweep: unknown field 'techniques'")) << message;
  EXPECT_TRUE(contains(message, "recipes")) << message;
}

TEST(JobTechniques, ShippedLocalCpuTechniquesJob) {
  const Job job = load_job(kSource + "/jobs/local-cpu-techniques.json");
  const Job local = load_job(kSource + "/jobs/local-cpu.json");
  EXPECT_EQ(job.name, "local-cpu-techniques");
  EXPECT_EQ(job.model.name, "tiny-llama-gqa");
  EXPECT_EQ(job.backend, Backend::kCpu);
  EXPECT_EQ(job.ranks, 4);
  // local-cpu's steps, fewer and shorter rounds (162 configurations).
  EXPECT_EQ(job.warmup_iters, local.warmup_iters);
  EXPECT_EQ(job.timed_iters, local.timed_iters);
  EXPECT_EQ(job.min_timed_seconds, 0.5);
  EXPECT_EQ(job.rounds.rounds, 2);
  EXPECT_EQ(job.rounds.max_extra_rounds, 2);
  // (3 + 6 layouts of 2 and 4 ranks) x (fp32, amp-bf16) x 9 recipes.
  ASSERT_EQ(job.configs.size(), 9u * 2u * 9u);
  std::vector<std::string> recipes;
  for (std::size_t i = 0; i < 9; ++i) recipes.push_back(recipe_text(job.configs[i].techniques));
  EXPECT_EQ(recipes, (std::vector<std::string>{"", "sp+vp", "dopt", "rc-sel", "rc-full", "ovl-64K", "dopt+ovl-64K",
                                               "dopt+ovl-64K+opg", "sp+vp+rc-full"}));
  EXPECT_EQ(job.configs.front().key(job.model.name), "tiny-llama-gqa/dp2-tp1-pp1/mbs1/gbs8/seq64/fp32");
  EXPECT_EQ(job.configs.back().key(job.model.name), "tiny-llama-gqa/dp1-tp1-pp4/mbs1/gbs8/seq64/amp-bf16/sp+vp+rc-full");
  for (const auto& c : job.configs) {
    EXPECT_EQ(c.parallel.micro_batch, 1);
    EXPECT_EQ(c.parallel.global_batch, 8);
    EXPECT_EQ(c.parallel.seq_len, 64);
    EXPECT_TRUE(c.precision == PrecisionName::kFp32 || c.precision == PrecisionName::kAmpBf16);
  }
}

}  // namespace
}  // namespace itertime
