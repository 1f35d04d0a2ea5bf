// fuzz_cli.cpp: mutated argument vectors given to the real `itertime` binary (ITERTIME_BINARY), in a
// TempDir holding a model config, a damaged one, a store, a job and a folder. The launcher builds its
// CLI11 app inside main.cpp (not exposed), so the binary itself is run: about 1.5 s of start-up each
// (its shared libraries), hence ITERTIME_FUZZ_CLI_INPUTS (default 40) inputs, two at a time.
// Invariants checked per input: exit status 0 or 2 within 30 s; status 2 prints exactly one line on
// stderr, starting "itertime: error: ", and nothing on stdout (also when an argument holds a line
// break: no input is excused); status 0 prints nothing on stderr; no file in the TempDir is created,
// removed or changed. Commands that start MPI or write files by design (calibrate, run, fit, validate,
// info, slurm submit without --dry-run) are never generated.
#include <gtest/gtest.h>

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "common/h5store.hpp"
#include "fuzz_common.hpp"
#include "tests/unit/temp_dir.hpp"

extern char** environ;

namespace itertime::fuzz {
namespace {

namespace fs = std::filesystem;
using Argv = std::vector<std::string>;

const std::vector<Argv>& cli_seeds() {
  static const std::vector<Argv> kSeeds = {
      {"--help"},
      {"--version"},
      {"model", "show", "tiny.json"},
      {"model", "show", "tiny.json", "--seq", "64"},
      {"inspect", "store.h5"},
      {"inspect", "store.h5", "--fields"},
      {"predict", "store.h5", "--model", "tiny.json", "--seq", "64", "--tp", "2", "--precision", "amp-bf16", "--recipe", "sp+vp"},
      {"predict", "store.h5", "--model", "tiny.json", "--seq", "64", "--dp", "2", "--pp", "2", "--vp", "2", "--json"},
      {"plan", "store.h5", "--model", "tiny.json", "--gpus", "4", "--gbs", "8", "--seq", "64", "--mbs", "1,2", "--recipes",
       "plain,sp+vp"},
      {"slurm", "submit", "job.json", "-o", "out.h5", "-N", "2", "--gpus-per-node", "4", "-t", "01:00:00", "--dry-run"},
      // Line breaks in arguments the messages quote (a file name, a precision, a recipe): one line still.
      {"model", "show", "no\nsuch.json"},
      {"predict", "store.h5", "--model", "tiny.json", "--seq", "64", "--precision", "fp\n32", "--recipe", "sp\nvp"},
  };
  return kSeeds;
}

const std::vector<std::string>& cli_tokens() {
  static const std::vector<std::string> kTokens = {"",
                                                   "-",
                                                   "--",
                                                   "-h",
                                                   "--help",
                                                   "--version",
                                                   "--json",
                                                   "--fields",
                                                   "--seq",
                                                   "--tp",
                                                   "--pp",
                                                   "--dp",
                                                   "--cp",
                                                   "--vp",
                                                   "--mbs",
                                                   "--gbs",
                                                   "--gpus",
                                                   "--model",
                                                   "--precision",
                                                   "--recipe",
                                                   "--recipes",
                                                   "--device-memory-gib",
                                                   "--top",
                                                   "-o",
                                                   "-N",
                                                   "--time",
                                                   "--stages",
                                                   "--launcher",
                                                   "0",
                                                   "-1",
                                                   "1",
                                                   "2",
                                                   "3",
                                                   "64",
                                                   "2147483647",
                                                   "2147483648",
                                                   "-2147483649",
                                                   "99999999999999999999",
                                                   "1e9",
                                                   "nan",
                                                   "inf",
                                                   "-inf",
                                                   "0x10",
                                                   "1.5",
                                                   "1,2,,3",
                                                   ",",
                                                   "fp8",
                                                   "amp-bf16",
                                                   "sp+vp+dopt+rc-full+ovl-64K",
                                                   "dopt+sp",
                                                   "plain",
                                                   "tiny.json",
                                                   "broken.json",
                                                   "store.h5",
                                                   "job.json",
                                                   "folder",
                                                   "folder/",
                                                   "missing.json",
                                                   "missing.h5",
                                                   ".",
                                                   "..",
                                                   "/",
                                                   "/dev/null",
                                                   "model",
                                                   "show",
                                                   "inspect",
                                                   "predict",
                                                   "plan",
                                                   "slurm",
                                                   "submit",
                                                   "--seq=64",
                                                   "--tp=0",
                                                   "--mbs=1,2",
                                                   "\xc3\xa9",
                                                   "\xff\xfe",
                                                   "a b",
                                                   "-t",
                                                   "99:99:99",
                                                   "1-00:00:00",
                                                   "--gpus-per-node",
                                                   "--mpi",
                                                   "pmix",
                                                   "--no-exclusive",
                                                   "--partition",
                                                   "--account=x"};
  return kTokens;
}

// Subcommands that start MPI, launch ranks or write files by design: never generated.
bool forbidden(const Argv& argv) {
  static const std::set<std::string> kForbidden = {"calibrate", "run", "fit", "validate", "info", "comm", "ops", "groundtruth"};
  bool slurm = false, dry_run = false;
  for (const auto& token : argv) {
    if (kForbidden.count(token)) return true;
    if (token.find("slurm") != std::string::npos) slurm = true;
    if (token == "--dry-run") dry_run = true;
  }
  return slurm && !dry_run;
}

Argv mutate_argv(Rng& rng) {
  for (;;) {
    Argv argv = rng.pick(cli_seeds());
    const std::size_t rounds = 1 + rng.below(3);
    for (std::size_t r = 0; r < rounds; ++r) {
      const std::size_t size = argv.size();
      switch (rng.below(6)) {
        case 0:
          if (size) argv[rng.below(size)] = rng.pick(cli_tokens());
          break;
        case 1: argv.insert(argv.begin() + static_cast<long>(rng.below(size + 1)), rng.pick(cli_tokens())); break;
        case 2:
          if (size) argv.erase(argv.begin() + static_cast<long>(rng.below(size)));
          break;
        case 3:
          if (size > 1) std::swap(argv[rng.below(size)], argv[rng.below(size)]);
          break;
        case 4:
          if (size) {  // bytes of one argument (no NUL: it would end the argument)
            std::string& token = argv[rng.below(size)];
            mutate_bytes(rng, token, rng.pick(cli_tokens()));
            for (auto& c : token)
              if (c == '\0') c = '0';
          }
          break;
        default:
          if (size) argv[rng.below(size)] = std::string(rng.chance(50) ? 100000 : 5000, '9');
          break;
      }
    }
    if (!forbidden(argv)) return argv;
  }
}

std::string joined(const Argv& argv) {
  std::string out;
  for (const auto& a : argv)
    out += (out.empty() ? "'" : " '") + (a.size() > 200 ? a.substr(0, 200) + "...(" + std::to_string(a.size()) + " bytes)" : a) +
           "'";
  return out;
}

// Every file under `dir` with its size, mtime and contents.
std::map<std::string, std::string> snapshot(const fs::path& dir) {
  std::map<std::string, std::string> out;
  for (const auto& entry : fs::recursive_directory_iterator(dir)) {
    const std::string name = fs::relative(entry.path(), dir).string();
    if (name.rfind(".cli", 0) == 0) continue;  // captured output
    std::string state = entry.is_directory() ? "dir" : read_file(entry.path());
    std::error_code error;
    state += "|" + std::to_string(fs::last_write_time(entry.path(), error).time_since_epoch().count());
    out[name] = state;
  }
  return out;
}

// The model the commands under test read, copied into the working folder as tiny.json.
void copy_tiny_model(const testing::TempDir& work) {
  fs::copy_file(fs::path(ITERTIME_SOURCE_DIR) / "data/models/tiny-llama-gqa.json", work.path() / "tiny.json");
}

struct Running {
  pid_t pid = -1;
  int64_t index = 0;
  Argv argv;
  std::chrono::steady_clock::time_point started;
};

TEST(Fuzz, Cli) {
  const std::string binary = ITERTIME_BINARY;
  ASSERT_TRUE(fs::exists(binary)) << binary;
  testing::TempDir work;
  copy_tiny_model(work);
  const fs::path source = ITERTIME_SOURCE_DIR;
  work.write("broken.json", read_file(source / "data/models/tiny-llama-gqa.json").substr(0, 40));
  work.write("job.json",
             "{\"model\": \"tiny.json\", \"sweep\": {\"world_sizes\": [1, 2], \"precisions\": [\"fp32\"], "
             "\"micro_batch\": 1, \"global_batch\": 4, \"seq_len\": 32}}");
  fs::create_directories(work.path() / "folder");
  { h5::Store::create(work.file("store.h5"), false, {{"argv", "fuzz"}}); }
  fs::create_directories(work.path() / ".cli");
  const auto before = snapshot(work.path());

  const uint64_t seed = fuzz_seed();
  auto input_of = [&](int64_t index) {
    Rng rng = input_rng(seed, "cli", static_cast<uint64_t>(index));
    return mutate_argv(rng);
  };
  const int64_t first = fuzz_first();
  const int64_t count = env_int("ITERTIME_FUZZ_CLI_INPUTS", 40);
  const int parallel = 2;
  Tally tally;
  tally.inputs = count;
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<Running> running;
  int64_t next = first;
  auto out_file = [&](int64_t index, const char* stream) {
    return (work.path() / ".cli" / (std::to_string(index) + "." + stream)).string();
  };
  auto fail = [&](int64_t index, const std::string& kind, const std::string& message) {
    if (kind == "hang")
      ++tally.hang;
    else if (kind == "crash")
      ++tally.crash;
    else
      ++tally.other;
    tally.failures.push_back({index, kind, message});
  };
  while (next < first + count || !running.empty()) {
    while (next < first + count && static_cast<int>(running.size()) < parallel) {
      Running r;
      r.index = next++;
      r.argv = input_of(r.index);
      std::vector<std::string> args = {binary};
      args.insert(args.end(), r.argv.begin(), r.argv.end());
      std::vector<char*> raw;
      for (auto& a : args) raw.push_back(a.data());
      raw.push_back(nullptr);
      posix_spawn_file_actions_t actions;
      posix_spawn_file_actions_init(&actions);
      posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
      posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, out_file(r.index, "out").c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                       0644);
      posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, out_file(r.index, "err").c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                       0644);
      posix_spawnattr_t attributes;
      posix_spawnattr_init(&attributes);
      posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETPGROUP);  // its own group: a timeout kills all of it
      posix_spawnattr_setpgroup(&attributes, 0);
      const fs::path old_dir = fs::current_path();
      fs::current_path(work.path());
      const int spawned = posix_spawn(&r.pid, binary.c_str(), &actions, &attributes, raw.data(), environ);
      fs::current_path(old_dir);
      posix_spawn_file_actions_destroy(&actions);
      posix_spawnattr_destroy(&attributes);
      ASSERT_EQ(spawned, 0) << "cannot run " << binary;
      r.started = std::chrono::steady_clock::now();
      running.push_back(r);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    for (auto it = running.begin(); it != running.end();) {
      int status = 0;
      const pid_t done = waitpid(it->pid, &status, WNOHANG);
      const double age_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - it->started).count();
      if (done == 0 && age_s < 30) {
        ++it;
        continue;
      }
      if (done == 0) {
        kill(-it->pid, SIGKILL);
        waitpid(it->pid, &status, 0);
        fail(it->index, "hang", "no exit after 30 s");
      } else if (WIFSIGNALED(status)) {
        fail(it->index, "crash", std::string("killed by signal ") + strsignal(WTERMSIG(status)));
      } else {
        const int code = WEXITSTATUS(status);
        const std::string out = read_file(out_file(it->index, "out"));
        const std::string err = read_file(out_file(it->index, "err"));
        if (code == 0) {
          if (err.empty())
            ++tally.accepted;
          else
            fail(it->index, "other", "status 0 with stderr: " + err);
        } else if (code == 2) {
          const bool one_line = !err.empty() && err.back() == '\n' && err.find('\n') == err.size() - 1;
          if (err.rfind("itertime: error: ", 0) != 0 || !out.empty()) {
            fail(it->index, "other",
                 "status 2 without the one error line (stdout " + std::to_string(out.size()) + " bytes): " + err);
          } else if (!one_line) {
            // An argument holding a line break, echoed in the message: main.cpp prints it escaped.
            fail(it->index, "other", "status 2 with an error of several lines: " + err);
          } else {
            ++tally.user_error;
          }
        } else {
          fail(it->index, "other", "exit status " + std::to_string(code) + ": " + err);
        }
      }
      fs::remove(out_file(it->index, "out"));
      fs::remove(out_file(it->index, "err"));
      const auto after = snapshot(work.path());
      if (after != before) {
        std::string changed;
        for (const auto& [name, state] : after)
          if (!before.count(name) || before.at(name) != state) changed += " " + name;
        for (const auto& [name, state] : before)
          if (!after.count(name)) changed += " -" + name;
        fail(it->index, "other", "the working folder changed:" + changed);
        // Restore nothing: the remaining inputs then see the change too, and each is reported.
      }
      it = running.erase(it);
    }
  }
  tally.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  report("cli", tally, [&](int64_t index) { return joined(input_of(index)); });
  EXPECT_EQ(tally.failed(), 0);
}

// The command's half of the one-line rule (fixed in commit 96fbbe4: main.cpp prints a UserError's line
// breaks escaped): arguments holding a line break that the error quotes (a config's and a store's file
// name, a number CLI11 cannot convert) each end in status 2 with one `itertime: error:` line that shows
// the break escaped, and nothing on stdout.
TEST(FixedBugs, CliErrorIsOneLine) {
  const std::string binary = ITERTIME_BINARY;
  ASSERT_TRUE(fs::exists(binary)) << binary;
  testing::TempDir work;
  copy_tiny_model(work);
  const std::vector<std::pair<Argv, std::string>> cases = {
      {{"model", "show", "no\nsuch.json"}, "no\\nsuch.json"},
      {{"inspect", "no\nsuch.h5"}, "no\\nsuch.h5"},
      {{"model", "show", "tiny.json", "--seq", "6\n4"}, "6\\n4"},
  };
  for (const auto& [argv, shown] : cases) {
    std::vector<std::string> args = {binary};
    args.insert(args.end(), argv.begin(), argv.end());
    std::vector<char*> raw;
    for (auto& a : args) raw.push_back(a.data());
    raw.push_back(nullptr);
    const std::string out_path = work.file("out.txt"), err_path = work.file("err.txt");
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const fs::path old_dir = fs::current_path();
    fs::current_path(work.path());
    pid_t pid = -1;
    const int spawned = posix_spawn(&pid, binary.c_str(), &actions, nullptr, raw.data(), environ);
    fs::current_path(old_dir);
    posix_spawn_file_actions_destroy(&actions);
    ASSERT_EQ(spawned, 0) << "cannot run " << binary;
    int status = 0;
    waitpid(pid, &status, 0);
    const std::string err = read_file(err_path), out = read_file(out_path);
    const std::string name = joined(argv);
    ASSERT_TRUE(WIFEXITED(status)) << name;
    EXPECT_EQ(WEXITSTATUS(status), 2) << name << ": " << err;
    EXPECT_EQ(err.rfind("itertime: error: ", 0), 0u) << name << ": " << err;
    EXPECT_EQ(err.find('\n'), err.size() - 1) << name << ": several lines: " << escaped(err);
    EXPECT_NE(err.find(shown), std::string::npos) << name << ": the line break is not shown escaped: " << escaped(err);
    EXPECT_TRUE(out.empty()) << name << ": " << out;
  }
}

}  // namespace
}  // namespace itertime::fuzz
