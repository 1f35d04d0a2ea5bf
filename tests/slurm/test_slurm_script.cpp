// Unit tests of launcher/slurm_script.{hpp,cpp}: shell and #SBATCH quoting (with adversarial values run
// through a real /bin/sh and bash), time limits, job ids, option validation, and the rendered batch
// script, which is executed with fake srun / mpirun / itertime that record their arguments.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <cctype>
#include <cstdlib>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "common/errors.hpp"
#include "launcher/slurm_script.hpp"
#include "tests/unit/temp_dir.hpp"

namespace itertime::launcher::slurm {
namespace {

using itertime::testing::TempDir;
namespace fs = std::filesystem;

// Values that break or inject into naive scripts.
const std::vector<std::string>& adversarial_values() {
  static const std::vector<std::string> values = {
      "plain",
      "with space",
      "two  spaces and\ttab",
      "it's",
      "'",
      "''",
      "\"double\"",
      "$(touch INJECTED)",
      "`touch INJECTED`",
      "; touch INJECTED",
      "&& touch INJECTED",
      "| touch INJECTED",
      "> INJECTED",
      "$HOME ${IFS} $$ $0 $1",
      "* ? [a-z]",
      "~root",
      "!! !$",
      "back\\slash \\n \\",
      "line\nbreak",
      "-n",
      "--help",
      "#not a comment",
      "%j %% %x",
      "unicode \xc3\xa9\xe2\x82\xac",
      "a'b\"c$(d)`e`;f|g&h<i>j\\k",
      "",
  };
  return values;
}

std::string run_capture(const std::string& command) {
  std::string out;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (!pipe) return "<popen failed>";
  char buffer[4096];
  std::size_t n = 0;
  while ((n = std::fread(buffer, 1, sizeof(buffer), pipe)) > 0) out.append(buffer, n);
  ::pclose(pipe);
  return out;
}

int run_status(const std::string& command) {
  const int status = std::system(command.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

bool injected_anywhere(const fs::path& root) {
  for (const auto& entry : fs::recursive_directory_iterator(root)) {
    const std::string name = entry.path().filename().string();
    if (name == "INJECTED" || name == "INJECTED2") return true;
  }
  return false;
}

TEST(ShellQuote, PlainWordsStayAsTheyAre) {
  EXPECT_EQ(shell_quote("abc"), "abc");
  EXPECT_EQ(shell_quote("/a/b-c_d.e/f=1,2:3@4%5+6"), "/a/b-c_d.e/f=1,2:3@4%5+6");
  EXPECT_EQ(shell_quote(""), "''");
  EXPECT_EQ(shell_quote("a b"), "'a b'");
  EXPECT_EQ(shell_quote("it's"), "'it'\\''s'");
  EXPECT_EQ(shell_quote("~root"), "'~root'");
  EXPECT_EQ(shell_quote("*"), "'*'");
}

TEST(ShellQuote, RoundTripsThroughShAndBashWithoutInjection) {
  TempDir dir;
  for (const std::string shell : {"sh", "bash"}) {
    for (const auto& value : adversarial_values()) {
      const std::string command =
          "cd " + shell_quote(dir.path().string()) + " && " + shell + " -c " + shell_quote("printf '%s' " + shell_quote(value));
      EXPECT_EQ(run_capture(command), value) << shell << " quoting of [" << value << "]: " << shell_quote(value);
    }
  }
  EXPECT_FALSE(injected_anywhere(dir.path()));
}

// A model of sbatch's #SBATCH argument parser (src/sbatch/opt.c, Slurm 22.05), as observed: the value
// ends at unquoted whitespace or '#'; '"' and '\'' quote; a backslash escapes the next character.
std::string sbatch_parse_argument(const std::string& text) {
  std::string out;
  bool quoted = false;
  bool escape = false;
  char quote = 0;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (!quoted && std::isspace(static_cast<unsigned char>(c))) break;
    if (escape) {
      escape = false;
    } else if (c == '\\') {
      escape = true;
      continue;
    } else if (quoted) {
      if (c == quote) {
        quoted = false;
        continue;
      }
    } else if (c == '"' || c == '\'') {
      quoted = true;
      quote = c;
      continue;
    } else if (c == '#') {
      break;
    }
    out += c;
  }
  return out;
}

TEST(SbatchQuote, RoundTripsThroughSbatchsDirectiveParser) {
  for (const auto& value : adversarial_values()) {
    if (value.find_first_of("\n\t") != std::string::npos) continue;
    const std::string quoted = sbatch_quote("--x", value);
    EXPECT_EQ(sbatch_parse_argument(quoted + " trailing"), value) << quoted;
  }
  EXPECT_EQ(sbatch_quote("--x", "a b"), "\"a b\"");
  EXPECT_EQ(sbatch_quote("--x", "say \"hi\" \\o/"), "\"say \\\"hi\\\" \\\\o/\"");
}

TEST(SbatchQuote, RefusesControlCharacters) {
  EXPECT_THROW(sbatch_quote("--partition", "gpu\n#SBATCH --account=evil"), UserError);
  EXPECT_THROW(sbatch_quote("--partition", std::string("a\rb")), UserError);
  EXPECT_THROW(sbatch_quote("--partition", std::string("a\tb")), UserError);
}

TEST(FilenamePattern, PercentSignsAreDoubled) {
  EXPECT_EQ(escape_filename_pattern("/a/100%/b%j"), "/a/100%%/b%%j");
  EXPECT_EQ(escape_filename_pattern("/plain"), "/plain");
}

TEST(TimeLimit, AcceptsSlurmFormats) {
  for (const std::string ok : {"30", "0", "90:00", "1:30:00", "12:00:00", "100:00:00", "1-0", "2-12", "1-12:30", "7-00:00:00",
                               "UNLIMITED", "INFINITE"}) {
    EXPECT_TRUE(is_valid_time_limit(ok)) << ok;
  }
  for (const std::string bad : {"", "abc", "1h", "-5", "1:60", "1:00:60", "1:60:00", "1-24", "1-1:60", "1:2:3:4", "1-", ":30",
                                "12:00:00; rm -rf /", "10 ", " 10", "1e3", "1-2-3"}) {
    EXPECT_FALSE(is_valid_time_limit(bad)) << bad;
  }
}

TEST(SbatchOutput, JobIdFromParsableOutput) {
  EXPECT_EQ(parse_sbatch_job_id("42\n"), 42);
  EXPECT_EQ(parse_sbatch_job_id("1234;cluster\n"), 1234);
  EXPECT_EQ(parse_sbatch_job_id("  77  \n\n"), 77);
  EXPECT_EQ(parse_sbatch_job_id(""), -1);
  EXPECT_EQ(parse_sbatch_job_id("Submitted batch job 5\n"), -1);
  EXPECT_EQ(parse_sbatch_job_id("12abc\n"), -1);
}

TEST(Names, SanitizedForSlurmAndComments) {
  EXPECT_EQ(sanitize_name("llama3.1-8b_8gpu"), "llama3.1-8b_8gpu");
  EXPECT_EQ(sanitize_name("a b\n#SBATCH $(x)"), "a_b__SBATCH___x_");
  EXPECT_EQ(sanitize_name(""), "job");
  EXPECT_EQ(sanitize_name(std::string(100, 'x')).size(), 64u);
}

TEST(Stages, ParsedInPipelineOrder) {
  EXPECT_EQ(parse_stages({"groundtruth", "comm"}), (std::vector<Stage>{Stage::kComm, Stage::kGroundTruth}));
  EXPECT_EQ(parse_stages({"drift", "ops"}), (std::vector<Stage>{Stage::kOps, Stage::kDrift}));
  EXPECT_EQ(parse_stages({"ops", "ops"}), (std::vector<Stage>{Stage::kOps}));
  EXPECT_THROW(parse_stages({"fit"}), UserError);
  EXPECT_THROW(parse_launcher("ssh"), UserError);
}

// A job file in `dir`, pointing at the tiny model of data/models by absolute path.
std::string write_job(const TempDir& dir, const std::string& name, const std::string& backend = "cpu",
                      const std::string& folder = "") {
  const fs::path where = folder.empty() ? dir.path() : dir.path() / folder;
  fs::create_directories(where);
  const std::string model = std::string(ITERTIME_SOURCE_DIR) + "/data/models/tiny-llama-gqa.json";
  std::ofstream out(where / name);
  out << R"({"name": "t $(x) 'y'", "model": ")" << model << R"(", "backend": ")" << backend
      << R"(", "ranks": 2, "comm": {"min_bytes": "8", "max_bytes": "64K", "step_factor": 8, "warmup_iters": 1, "iters": 3},
         "configs": [{"dp": 2, "tp": 1, "pp": 1, "micro_batch": 1, "global_batch": 4, "seq_len": 32, "precision": "fp32"}]})";
  return (where / name).string();
}

SubmitRequest request_for(const std::string& job, const std::string& output) {
  SubmitRequest request;
  request.job_file = job;
  request.output = output;
  return request;
}

void expect_user_error(const SubmitRequest& request, const std::string& fragment) {
  try {
    resolve(request, "/usr/bin/itertime", "0.1.0");
    ADD_FAILURE() << "no UserError; expected one mentioning '" << fragment << "'";
  } catch (const UserError& error) {
    const std::string message = error.what();
    EXPECT_NE(message.find(fragment), std::string::npos) << message;
    EXPECT_EQ(message.find('\n'), std::string::npos) << "more than one line: " << message;
  }
}

TEST(Resolve, UserMistakesAreUserErrors) {
  TempDir dir;
  const std::string job = write_job(dir, "job.json");
  const std::string gpu_job = write_job(dir, "gpu.json", "cuda");
  const std::string out = dir.file("r.h5");

  expect_user_error(request_for(dir.file("missing.json"), out), "no such job file");
  // One field of the valid request for `job` made wrong at a time.
  const std::vector<std::pair<std::function<void(SubmitRequest&)>, std::string>> one_field_wrong = {
      {[](SubmitRequest& r) { r.nodes = 0; }, "--nodes must be at least 1"},
      {[](SubmitRequest& r) { r.time_limit = "2h"; }, "--time '2h' is not a Slurm time limit"},
      {[](SubmitRequest& r) { r.time_limit = "1:00\n#SBATCH --x"; }, "control character"},
      {[](SubmitRequest& r) { r.gpus_per_node = -1; }, "--gpus-per-node"},
      {[](SubmitRequest& r) { r.cpus_per_task = 0; }, "--cpus-per-task"},
      {[](SubmitRequest& r) { r.ntasks_per_node = 1; }, "comm stage needs at least 2 ranks"},
      {[](SubmitRequest& r) { r.partition = "gpu\n#SBATCH --account=evil"; }, "control character"},
      {[](SubmitRequest& r) { r.launcher = "ssh"; }, "--launcher"},
      {[](SubmitRequest& r) { r.srun_mpi = "pmix; rm -rf ~"; }, "--mpi"},
      {[](SubmitRequest& r) {
         r.stages = {"comm", "fit"};
       },
       "unknown stage 'fit'"},
  };
  for (const auto& [make_wrong, fragment] : one_field_wrong) {
    SubmitRequest r = request_for(job, out);
    make_wrong(r);
    expect_user_error(r, fragment);
  }
  expect_user_error(request_for(gpu_job, out), "give --gpus-per-node");
  SubmitRequest r = request_for(gpu_job, out);
  r.gpus_per_node = 4;
  r.ntasks_per_node = 8;
  expect_user_error(r, "one rank per GPU");
  expect_user_error(request_for(job, dir.file("a\nb.h5")), "control character");
  expect_user_error(request_for(job, dir.file("a\\b.h5")), "backslash");
  expect_user_error(request_for(job, dir.path().string()), "is a directory");
  expect_user_error(request_for(job, ""), "--output");
}

TEST(Resolve, DefaultsFollowTheJobAndTheGpus) {
  TempDir dir;
  const std::string job = write_job(dir, "job.json");
  ScriptSpec spec = resolve(request_for(job, "rel/out.h5"), "/opt/itertime", "0.1.0");
  EXPECT_EQ(spec.ntasks_per_node, 2);  // the job's ranks
  EXPECT_EQ(spec.ranks(), 2);
  EXPECT_EQ(spec.backend, "cpu");
  EXPECT_EQ(spec.job_name, "itertime-t___x___y_");
  EXPECT_TRUE(fs::path(spec.output).is_absolute());
  EXPECT_EQ(spec.log_pattern, spec.output + ".slurm-%j.log");
  EXPECT_EQ(spec.itertime, "/opt/itertime");
  EXPECT_EQ(spec.job_file, fs::canonical(job).string());
  EXPECT_TRUE(spec.exclusive);

  const std::string gpu_job = write_job(dir, "gpu.json", "cuda");
  auto r = request_for(gpu_job, dir.file("100%.h5"));
  r.nodes = 2;
  r.gpus_per_node = 8;
  spec = resolve(r, "/opt/itertime", "0.1.0");
  EXPECT_EQ(spec.ntasks_per_node, 8);
  EXPECT_EQ(spec.ranks(), 16);
  EXPECT_EQ(spec.backend, "cuda");
  EXPECT_EQ(spec.log_pattern, dir.file("100%%.h5") + ".slurm-%j.log");

  // The repository's example jobs resolve.
  const std::string source = ITERTIME_SOURCE_DIR;
  r = request_for(source + "/jobs/llama3.1-8b-8gpu.json", dir.file("c.h5"));
  r.nodes = 2;
  r.gpus_per_node = 8;
  EXPECT_EQ(resolve(r, "/x", "0.1.0").ranks(), 16);
  EXPECT_EQ(resolve(request_for(source + "/jobs/reduced-cpu.json", dir.file("c.h5")), "/x", "0.1.0").ranks(), 2);
  EXPECT_EQ(resolve(request_for(source + "/jobs/local-cpu.json", dir.file("c.h5")), "/x", "0.1.0").ranks(), 4);
}

// Issue 33: an allocation of fewer ranks than the job asks for is refused before anything is rendered
// (its larger configurations would be skipped only after the job queued and ran), unless
// --allow-fewer-ranks, which leaves one warning; configurations above the job's own "ranks" are its design.
TEST(Resolve, AllocationSmallerThanTheJobIsRefused) {
  TempDir dir;
  const std::string source = ITERTIME_SOURCE_DIR;
  SubmitRequest r = request_for(source + "/jobs/slurm/llama3.1-8b-2x8gpu.json", dir.file("c.h5"));
  r.nodes = 2;
  r.gpus_per_node = 4;
  expect_user_error(r, "the allocation holds 8 ranks (2 node(s) x 4), the job");
  expect_user_error(r, "asks for 16 (its \"ranks\")");
  expect_user_error(r, "raise --nodes or --gpus-per-node, or pass --allow-fewer-ranks");
  r.allow_fewer_ranks = true;
  const ScriptSpec spec = resolve(r, "/x", "0.1.0");
  EXPECT_EQ(spec.ranks(), 8);
  ASSERT_EQ(spec.warnings.size(), 1u);
  EXPECT_NE(spec.warnings.front().find("would be recorded as skipped"), std::string::npos) << spec.warnings.front();
  r.allow_fewer_ranks = false;
  r.gpus_per_node = 8;
  EXPECT_TRUE(resolve(r, "/x", "0.1.0").warnings.empty());
  // A CPU job with fewer tasks than its ranks names --ntasks-per-node.
  SubmitRequest cpu = request_for(source + "/jobs/local-cpu.json", dir.file("c.h5"));
  cpu.ntasks_per_node = 2;
  expect_user_error(cpu, "raise --nodes or --ntasks-per-node");
  // reduced-cpu's 3-rank configuration is above its own "ranks": 2, skipped by design, not refused.
  EXPECT_TRUE(resolve(request_for(source + "/jobs/reduced-cpu.json", dir.file("c.h5")), "/x", "0.1.0").warnings.empty());
}

TEST(Render, DirectivesAndStages) {
  TempDir dir;
  auto r = request_for(write_job(dir, "job.json", "cuda"), dir.file("c.h5"));
  r.nodes = 2;
  r.gpus_per_node = 8;
  r.partition = "gpu";
  r.account = "proj-1";
  r.time_limit = "1-00:00:00";
  const std::string script = render_script(resolve(r, "/opt/itertime", "0.1.0"));
  for (const std::string line :
       {"#!/bin/bash\n", "#SBATCH --nodes=2\n", "#SBATCH --ntasks-per-node=8\n", "#SBATCH --gpus-per-node=8\n",
        "#SBATCH --exclusive\n", "#SBATCH --partition=\"gpu\"\n", "#SBATCH --account=\"proj-1\"\n",
        "#SBATCH --time=\"1-00:00:00\"\n", "#SBATCH --open-mode=append\n", "#SBATCH --requeue\n",
        "srun --mpi=pmix --nodes=2 --ntasks=16 --ntasks-per-node=8 --kill-on-bad-exit=1 \"$@\"",
        "launch \"$ITERTIME\" calibrate comm -o \"$OUTPUT\" --resume --backend cuda --min-bytes 8 --max-bytes 64K "
        "--step-factor 8 --warmup 1 --iters 3 --outside-load-cores 0.3 --max-extra-tries 3\n",
        "launch \"$ITERTIME\" calibrate ops --job \"$JOB\" -o \"$OUTPUT\" --resume\n",
        "launch \"$ITERTIME\" calibrate groundtruth --job \"$JOB\" -o \"$OUTPUT\" --resume\n",
        "launch \"$ITERTIME\" calibrate drift --job \"$JOB\" -o \"$OUTPUT\" --resume\n"}) {
    EXPECT_NE(script.find(line), std::string::npos) << "missing: " << line << "\n" << script;
  }
  // The stages run in pipeline order, and nothing runs without --resume.
  EXPECT_LT(script.find("calibrate comm"), script.find("calibrate ops"));
  EXPECT_LT(script.find("calibrate ops"), script.find("calibrate groundtruth"));
  EXPECT_LT(script.find("calibrate groundtruth"), script.find("calibrate drift"));
  std::istringstream lines(script);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.find("calibrate ") != std::string::npos && line.rfind("launch", 0) == 0) {
      EXPECT_NE(line.find("--resume"), std::string::npos) << line;
      EXPECT_EQ(line.find("--force"), std::string::npos) << line;
    }
  }
  // #SBATCH directives must come before the first command (sbatch stops reading them there).
  const auto first_command = script.find("\nset -euo");
  EXPECT_LT(script.rfind("#SBATCH"), first_command);

  r.no_exclusive = true;
  r.launcher = "mpirun";
  r.cpus_per_task = 4;
  r.stages = {"comm"};
  const std::string mpirun_script = render_script(resolve(r, "/opt/itertime", "0.1.0"));
  EXPECT_EQ(mpirun_script.find("#SBATCH --exclusive"), std::string::npos);
  EXPECT_NE(mpirun_script.find("#SBATCH --cpus-per-task=4\n"), std::string::npos);
  EXPECT_NE(mpirun_script.find("mpirun -np 16 --map-by ppr:8:node:PE=4 \"$@\""), std::string::npos) << mpirun_script;
  EXPECT_EQ(mpirun_script.find("calibrate ops"), std::string::npos);
}

// The comm stage applies the job's outside-load policy (groundtruth.outside_load_cores, max_extra_rounds),
// as `itertime run` passes it; the script once rendered the defaults (0.3, 3) whatever the job said, which
// on 2 emulated nodes (the delay line and the forwarding are outside load) measured every stretch again.
TEST(Render, CommStageCarriesTheJobsOutsideLoadPolicy) {
  TempDir dir;
  const std::string model = std::string(ITERTIME_SOURCE_DIR) + "/data/models/tiny-llama-gqa.json";
  const std::string job = dir.file("nodes.json");
  std::ofstream(job) << R"({"name": "nodes", "model": ")" << model << R"(", "backend": "cpu", "ranks": 4,
      "groundtruth": {"outside_load_cores": 2.5, "max_extra_rounds": 1},
      "comm": {"min_bytes": "8", "max_bytes": "1K", "step_factor": 4, "warmup_iters": 1, "iters": 3},
      "configs": [{"dp": 2, "tp": 2, "pp": 1, "micro_batch": 1, "global_batch": 4, "seq_len": 16, "precision": "fp32"}]})";
  SubmitRequest r = request_for(job, dir.file("c.h5"));
  r.nodes = 2;
  r.ntasks_per_node = 2;
  const ScriptSpec spec = resolve(r, "/opt/itertime", "0.1.0");
  EXPECT_EQ(spec.rounds.outside_load_cores, 2.5);
  EXPECT_EQ(spec.rounds.max_extra_rounds, 1);
  const std::string script = render_script(spec);
  EXPECT_NE(script.find("srun --mpi=pmix --nodes=2 --ntasks=4 --ntasks-per-node=2 --kill-on-bad-exit=1 \"$@\""),
            std::string::npos)
      << script;
  EXPECT_NE(script.find(" --outside-load-cores 2.5 --max-extra-tries 1\n"), std::string::npos) << script;
  r.launcher = "mpirun";
  const std::string mpirun_script = render_script(resolve(r, "/opt/itertime", "0.1.0"));
  EXPECT_NE(mpirun_script.find("mpirun -np 4 --map-by ppr:2:node \"$@\""), std::string::npos) << mpirun_script;
  EXPECT_NE(mpirun_script.find(" --outside-load-cores 2.5 --max-extra-tries 1\n"), std::string::npos) << mpirun_script;
}

// Runs a rendered script with fake srun, mpirun and itertime that record their argv (one argument per
// line, NUL-free), in a folder whose name is built to break and inject; returns the record.
std::string run_rendered(const TempDir& dir, const std::string& launcher, std::string* script_out = nullptr,
                         ScriptSpec* spec_out = nullptr) {
  const std::string hostile = "out dir 'q' \"d\" $(touch INJECTED) ; `touch INJECTED2` %j & x #y";
  const fs::path root = dir.path() / hostile;
  fs::create_directories(root);
  const fs::path bin = dir.path() / "bin";
  fs::create_directories(bin);
  const std::string recorder =
      "#!/bin/bash\n{ printf '%s\\n' \"$(basename \"$0\")\"; for a in \"$@\"; do printf '[%s]\\n' \"$a\"; done; "
      "echo ---; } >> \"$RECORD\"\n";
  for (const fs::path& tool : {bin / "srun", bin / "mpirun", root / "it ertime's $(x)"}) {
    std::ofstream(tool) << recorder;
    fs::permissions(tool, fs::perms::owner_all);
  }
  const std::string job = write_job(dir, "job $(touch INJECTED) 'a'.json", "cpu", hostile);
  auto r = request_for(job, (root / "cluster; $(touch INJECTED).h5").string());
  r.launcher = launcher;
  r.itertime = (root / "it ertime's $(x)").string();
  r.partition = "p \"x\" $(touch INJECTED)";
  r.account = "acct' ; touch INJECTED";
  const ScriptSpec spec = resolve(r, "/unused", "0.1.0");
  const std::string script = render_script(spec);
  const std::string script_path = (root / "job.sbatch").string();
  std::ofstream(script_path) << script;
  if (script_out) *script_out = script;
  if (spec_out) *spec_out = spec;

  EXPECT_EQ(run_status("bash -n " + shell_quote(script_path)), 0) << script;
  const std::string record = dir.file("record");
  const std::string command = "cd " + shell_quote(dir.path().string()) +
                              " && env PATH=" + shell_quote(bin.string() + ":/usr/bin:/bin") + " RECORD=" + shell_quote(record) +
                              " SLURM_JOB_ID=7 bash " + shell_quote(script_path) + " > /dev/null";
  EXPECT_EQ(run_status(command), 0) << script;
  EXPECT_FALSE(injected_anywhere(dir.path())) << script;
  std::ifstream in(record);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST(Render, HostilePathsArriveIntactUnderSrun) {
  TempDir dir;
  ScriptSpec spec;
  const std::string record = run_rendered(dir, "srun", nullptr, &spec);
  const std::string launch = "srun\n[--mpi=pmix]\n[--nodes=1]\n[--ntasks=2]\n[--ntasks-per-node=2]\n[--kill-on-bad-exit=1]\n";
  const std::string it = "[" + spec.itertime + "]\n";
  const std::string expected = launch + it + "[info]\n---\n" + launch + it + "[calibrate]\n[comm]\n[-o]\n[" + spec.output +
                               "]\n[--resume]\n[--backend]\n[cpu]\n[--min-bytes]\n[8]\n"
                               "[--max-bytes]\n[64K]\n[--step-factor]\n[8]\n[--warmup]\n[1]\n[--iters]\n[3]\n"
                               "[--outside-load-cores]\n[0.3]\n[--max-extra-tries]\n[3]\n---\n" +
                               launch + it + "[calibrate]\n[ops]\n[--job]\n[" + spec.job_file + "]\n[-o]\n[" + spec.output +
                               "]\n[--resume]\n---\n" + launch + it + "[calibrate]\n[groundtruth]\n[--job]\n[" + spec.job_file +
                               "]\n[-o]\n[" + spec.output + "]\n[--resume]\n---\n" + launch + it +
                               "[calibrate]\n[drift]\n[--job]\n[" + spec.job_file + "]\n[-o]\n[" + spec.output +
                               "]\n[--resume]\n---\n" + "it ertime's $(x)\n[inspect]\n[" + spec.output + "]\n---\n";
  EXPECT_EQ(record, expected);
  EXPECT_NE(spec.output.find("$(touch INJECTED)"), std::string::npos);
}

TEST(Render, HostilePathsArriveIntactUnderMpirun) {
  TempDir dir;
  ScriptSpec spec;
  std::string script;
  const std::string record = run_rendered(dir, "mpirun", &script, &spec);
  EXPECT_NE(record.find("mpirun\n[-np]\n[2]\n[--map-by]\n[ppr:2:node]\n[" + spec.itertime + "]\n[info]\n"), std::string::npos)
      << record;
  EXPECT_NE(record.find("[--job]\n[" + spec.job_file + "]\n[-o]\n[" + spec.output + "]\n"), std::string::npos) << record;
  // The directives carry the hostile values as sbatch reads them back.
  std::istringstream lines(script);
  std::string line;
  int checked = 0;
  while (std::getline(lines, line)) {
    for (const auto& [option, value] :
         std::vector<std::pair<std::string, std::string>>{{"#SBATCH --partition=", spec.partition},
                                                          {"#SBATCH --account=", spec.account},
                                                          {"#SBATCH --output=", spec.log_pattern}}) {
      if (line.rfind(option, 0) == 0) {
        EXPECT_EQ(sbatch_parse_argument(line.substr(option.size())), value) << line;
        ++checked;
      }
    }
  }
  EXPECT_EQ(checked, 3) << script;
}

TEST(Render, OutsideSlurmTheScriptRefusesToRun) {
  TempDir dir;
  const auto spec = resolve(request_for(write_job(dir, "job.json"), dir.file("c.h5")), "/bin/true", "0.1.0");
  const std::string path = dir.write("s.sbatch", render_script(spec));
  EXPECT_EQ(run_status("env -u SLURM_JOB_ID bash " + shell_quote(path) + " 2>/dev/null"), 2);
}

TEST(JobScripts, StaticBatchScriptsParse) {
  const fs::path folder = fs::path(ITERTIME_SOURCE_DIR) / "jobs" / "slurm";
  int count = 0;
  for (const auto& entry : fs::directory_iterator(folder)) {
    if (entry.path().extension() != ".sbatch") continue;
    ++count;
    EXPECT_EQ(run_status("bash -n " + shell_quote(entry.path().string())), 0) << entry.path();
    std::ifstream in(entry.path());
    std::stringstream text;
    text << in.rdbuf();
    for (const std::string needed : {"#SBATCH --requeue", "#SBATCH --open-mode=append", "--resume"}) {
      EXPECT_NE(text.str().find(needed), std::string::npos) << entry.path() << " lacks " << needed;
    }
    EXPECT_EQ(text.str().find("--force"), std::string::npos) << entry.path();
  }
  EXPECT_GE(count, 2);
}

}  // namespace
}  // namespace itertime::launcher::slurm
