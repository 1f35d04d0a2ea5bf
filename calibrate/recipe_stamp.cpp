// recipe_stamp.cpp: see recipe_stamp.hpp.
#include "calibrate/recipe_stamp.hpp"

#include "calibrate/torch_compat.hpp"
#include "common/errors.hpp"

namespace itertime::calibrate {
namespace {

// "2.6.0+cpu" -> "2.6": the part that decides the dispatcher's behaviour.
std::string major_minor(const std::string& version) {
  const auto first = version.find('.');
  if (first == std::string::npos) return version;
  const auto second = version.find_first_of(".+", first + 1);
  return version.substr(0, second);
}

}  // namespace

std::string torch_version() { return TORCH_VERSION; }

AttentionKernel resolve_attention_kernel(AttentionKernel requested) { return resolve_attention(requested); }

void stamp_recipe(h5::Store& store, AttentionKernel resolved_attention) {
  ITERTIME_CHECK(resolved_attention != AttentionKernel::kAuto, "stamp_recipe needs a resolved attention kernel");
  const auto meta = store.meta();
  const std::string attention = to_string(resolved_attention);
  const std::string version = torch_version();
  const auto recorded_attention = meta.find(kAttentionAttribute);
  if (recorded_attention != meta.end() && recorded_attention->second != attention) {
    throw UserError(store.path() + " was calibrated with attention '" + recorded_attention->second + "', this job runs '" +
                    attention + "': set \"attention\" in the job to match, or write a new file");
  }
  const auto recorded_version = meta.find(kTorchVersionAttribute);
  if (recorded_version != meta.end() && major_minor(recorded_version->second) != major_minor(version)) {
    throw UserError(store.path() + " was calibrated with LibTorch " + recorded_version->second + ", this build has " + version +
                    ": its operator sequences differ; write a new file");
  }
  store.set_meta(kAttentionAttribute, attention);
  store.set_meta(kTorchVersionAttribute, version);
}

}  // namespace itertime::calibrate
