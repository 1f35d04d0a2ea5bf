// build_info.cpp: how this binary was built: version, revision, build type, CUDA/NCCL/LibTorch (build_info.hpp).
#include "common/build_info.hpp"

#include <H5public.h>

#include <ctime>

namespace itertime {

BuildInfo build_info() {
  BuildInfo info;
  info.itertime_version = ITERTIME_VERSION_STRING;
  info.git_revision = ITERTIME_GIT_REVISION_STRING;
  info.build_type = ITERTIME_BUILD_TYPE_STRING;
#if defined(__clang__)
  info.compiler = "clang " __clang_version__;
#elif defined(__GNUC__)
  info.compiler = "gcc " __VERSION__;
#else
  info.compiler = "unknown";
#endif
#ifdef ITERTIME_HAVE_CUDA
  info.with_cuda = true;
#endif
#ifdef ITERTIME_HAVE_NCCL
  info.with_nccl = true;
#endif
#ifdef ITERTIME_HAVE_TORCH
  info.with_torch = true;
#endif
  unsigned major = 0, minor = 0, release = 0;
  H5get_libversion(&major, &minor, &release);
  info.hdf5_version = std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(release);
  return info;
}

std::string utc_timestamp() {
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  char text[32];
  std::strftime(text, sizeof(text), "%Y-%m-%dT%H:%M:%SZ", &utc);
  return text;
}

}  // namespace itertime
