// calibration_verbs.cpp: the calibration verbs in the light front (calibration_verbs.hpp).
#include "launcher/calibration_verbs.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>

#include "common/build_info.hpp"
#include "common/errors.hpp"
#include "common/hardware_spec.hpp"

namespace itertime::launcher {
namespace {

constexpr const char* kCalibrationBinary = "itertime-calibrate";

#ifdef ITERTIME_HAVE_CALIBRATION
// The verb's name and summary only; everything after it is left to itertime-calibrate (no --help here:
// `itertime calibrate --help` is its help).
void register_forwarding(CLI::App& app, std::vector<std::pair<CLI::App*, Action>>& actions, const char* name,
                         const char* summary) {
  CLI::App* verb = app.add_subcommand(name, summary);
  verb->set_help_flag();
  verb->allow_extras();
  verb->prefix_command();
  actions.emplace_back(verb, [](Context& context) -> int { exec_calibration_binary(context.argv); });
}

void forward_info(CLI::App& app, std::vector<std::pair<CLI::App*, Action>>& actions) {
  register_forwarding(app, actions, "info", kInfoSummary);
}
void forward_calibrate(CLI::App& app, std::vector<std::pair<CLI::App*, Action>>& actions) {
  register_forwarding(app, actions, "calibrate", kCalibrateSummary);
}
void forward_run(CLI::App& app, std::vector<std::pair<CLI::App*, Action>>& actions) {
  register_forwarding(app, actions, "run", kRunSummary);
}
#else
constexpr const char* kNoCalibration =
    "this itertime is a prediction-only build (built without MPI): it cannot calibrate; calibrate with a build "
    "that has MPI and LibTorch (cmake -DITERTIME_WITH_MPI=ON, docs/build.md) and predict from its file here";

void register_refusing(CLI::App& app, std::vector<std::pair<CLI::App*, Action>>& actions, const char* name, const char* summary) {
  CLI::App* verb = app.add_subcommand(name, std::string(summary) + " [not in this prediction-only build]");
  verb->allow_extras();
  verb->prefix_command();
  actions.emplace_back(verb, [name](Context&) -> int { throw UserError(std::string(name) + ": " + kNoCalibration); });
}

void refuse_calibrate(CLI::App& app, std::vector<std::pair<CLI::App*, Action>>& actions) {
  register_refusing(app, actions, "calibrate", kCalibrateSummary);
}
void refuse_run(CLI::App& app, std::vector<std::pair<CLI::App*, Action>>& actions) {
  register_refusing(app, actions, "run", kRunSummary);
}

// `itertime info` of a prediction-only build: the build and the CPU; no MPI world, LibTorch or devices.
void prediction_only_info(CLI::App& app, std::vector<std::pair<CLI::App*, Action>>& actions) {
  CLI::App* info = app.add_subcommand("info", kInfoSummary);
  actions.emplace_back(info, [](Context&) {
    const BuildInfo build = build_info();
    std::printf("itertime %s (git %s, %s, %s)\n", build.itertime_version.c_str(), build.git_revision.c_str(),
                build.build_type.c_str(), build.compiler.c_str());
    std::printf("\nbuild\n");
    std::printf("  calibration        no (prediction-only build: predict, plan, fit, validate, inspect, model, slurm)\n");
    std::printf("  CUDA               no\n");
    std::printf("  NCCL               no\n");
    std::printf("  LibTorch           no\n");
    std::printf("  HDF5               %s\n", build.hdf5_version.c_str());
    std::printf("  MPI                no\n");
    std::printf("\ndevices\n");
    std::printf("  CPU                %s, %ld cores online\n", cpu_model_name().c_str(), sysconf(_SC_NPROCESSORS_ONLN));
    return 0;
  });
}
#endif

}  // namespace

bool is_calibration_verb(const char* word) {
  const std::string verb = word == nullptr ? "" : word;
  return verb == "info" || verb == "calibrate" || verb == "run";
}

void exec_calibration_binary(char** argv) {
  std::error_code error;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", error);
  if (error) throw UserError(std::string("cannot find this program's folder (/proc/self/exe: ") + error.message() + ")");
  const std::string binary = (self.parent_path() / kCalibrationBinary).string();
  execv(binary.c_str(), argv);
  const int code = errno;
  throw UserError("cannot run " + binary + " (" + std::strerror(code) + "): the calibration verbs (info, calibrate, run) " +
                  "live in " + kCalibrationBinary + ", built and installed beside itertime; rebuild it or copy it there");
}

CalibrationVerbs front_calibration_verbs() {
#ifdef ITERTIME_HAVE_CALIBRATION
  return CalibrationVerbs{forward_info, forward_calibrate, forward_run};
#else
  return CalibrationVerbs{prediction_only_info, refuse_calibrate, refuse_run};
#endif
}

}  // namespace itertime::launcher
