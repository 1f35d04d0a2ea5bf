// hardware_spec.cpp: parsing and validation of data/hardware/<name>.json, lookup by name
// (hardware_spec.hpp; the format is in docs/hardware.md).
#include "common/hardware_spec.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "common/data_folder.hpp"
#include "common/errors.hpp"
#include "common/input_file.hpp"
#include "common/json_excerpt.hpp"
#include "common/json_fields.hpp"

#ifndef ITERTIME_DEFAULT_HARDWARE_DIR
#define ITERTIME_DEFAULT_HARDWARE_DIR "data/hardware"
#endif

namespace itertime {
namespace {

using nlohmann::json;

enum class Quantity { kFlops, kBytes, kBandwidth, kCount };

struct Unit {
  const char* name;
  Quantity quantity;
  double factor;  // to FLOP/s, bytes, bytes/s or 1
};

// The units a file may use; NVIDIA writes GB and TB/s in powers of ten, caches in MB meaning MiB
// (the file then says MiB), NICs in Gb/s (bits).
constexpr Unit kUnits[] = {
    {"FLOP/s", Quantity::kFlops, 1.0},
    {"GFLOP/s", Quantity::kFlops, 1e9},
    {"TFLOP/s", Quantity::kFlops, 1e12},
    {"PFLOP/s", Quantity::kFlops, 1e15},
    {"B", Quantity::kBytes, 1.0},
    {"KiB", Quantity::kBytes, 1024.0},
    {"MiB", Quantity::kBytes, 1048576.0},
    {"GiB", Quantity::kBytes, 1073741824.0},
    {"KB", Quantity::kBytes, 1e3},
    {"MB", Quantity::kBytes, 1e6},
    {"GB", Quantity::kBytes, 1e9},
    {"TB", Quantity::kBytes, 1e12},
    {"B/s", Quantity::kBandwidth, 1.0},
    {"MB/s", Quantity::kBandwidth, 1e6},
    {"GB/s", Quantity::kBandwidth, 1e9},
    {"TB/s", Quantity::kBandwidth, 1e12},
    {"GiB/s", Quantity::kBandwidth, 1073741824.0},
    {"Gb/s", Quantity::kBandwidth, 1e9 / 8.0},
    {"count", Quantity::kCount, 1.0},
};

std::string units_of(Quantity quantity) {
  std::string out;
  for (const Unit& unit : kUnits) {
    if (unit.quantity != quantity) continue;
    out += (out.empty() ? "" : ", ") + std::string(unit.name);
  }
  return out;
}

const char* quantity_name(Quantity quantity) {
  switch (quantity) {
    case Quantity::kFlops: return "a FLOP rate";
    case Quantity::kBytes: return "a size";
    case Quantity::kBandwidth: return "a bandwidth";
    case Quantity::kCount: return "a count";
  }
  return "?";
}

// Reads one file, remembers its name for errors and the sources of its figures.
class Reader : public JsonFieldReader {
 public:
  Reader(std::string source, HardwareSpec& spec) : JsonFieldReader(std::move(source)), spec_(spec) {}

  const json& member(const json& object, const std::string& key, const std::string& path) const {
    if (!object.contains(key)) fail(path, "missing (write null with a \"reason\" when the device lacks it)");
    return object.at(key);
  }

  std::string text(const json& object, const std::string& key) const {
    const json& value = member(object, key, key);
    if (!value.is_string() || value.get<std::string>().empty()) fail(key, "must be a non-empty string");
    return value.get<std::string>();
  }

  // A figure {"value": number|null, "unit": "...", "source": "...", "reason": "..."}, converted to base
  // units; nullopt when the value is null. `required` figures may not be null.
  static std::string unit_text_of(const json& item) {
    return item.contains("unit") && item.at("unit").is_string() ? item.at("unit").get<std::string>() : "its unit";
  }

  std::optional<double> figure(const json& object, const std::string& key, const std::string& path, Quantity quantity,
                               bool required) {
    const json& item = member(object, key, path);
    if (!item.is_object()) {
      fail(path, "must be an object {\"value\": ..., \"unit\": ..., \"source\": ...}, got " + json_excerpt(item));
    }
    only_known(item, path, {"value", "unit", "source", "reason"});
    for (const char* needed : {"value", "unit", "source"}) {
      if (!item.contains(needed)) fail(path + "." + needed, "missing (every figure names its value, unit and source)");
    }
    const json& source = item.at("source");
    if (!source.is_string() || source.get<std::string>().find_first_not_of(" \t\n") == std::string::npos) {
      fail(path + ".source", "must be a non-empty string naming where the figure comes from");
    }
    const json& unit_json = item.at("unit");
    if (!unit_json.is_string()) fail(path + ".unit", "must be a string, one of " + units_of(quantity));
    const std::string unit_name = unit_json.get<std::string>();
    const Unit* unit = nullptr;
    for (const Unit& candidate : kUnits) {
      if (candidate.quantity == quantity && unit_name == candidate.name) unit = &candidate;
    }
    if (unit == nullptr) {
      fail(path + ".unit",
           "'" + unit_name + "' is not a unit of " + quantity_name(quantity) + "; use one of " + units_of(quantity));
    }
    std::string recorded = source.get<std::string>();
    const json& value = item.at("value");
    if (value.is_null()) {
      if (required) fail(path + ".value", "must be a number: every device has this figure");
      if (!item.contains("reason") || !item.at("reason").is_string() || item.at("reason").get<std::string>().empty()) {
        fail(path + ".reason", "a null value needs a non-empty \"reason\" saying why the figure is absent");
      }
      spec_.sources[path] = recorded + " (absent: " + item.at("reason").get<std::string>() + ")";
      return std::nullopt;
    }
    if (item.contains("reason") && !item.at("reason").is_string()) fail(path + ".reason", "must be a string");
    if (!value.is_number()) fail(path + ".value", "must be a number or null, got " + json_excerpt(value));
    const double number = value.get<double>();
    if (!std::isfinite(number) || number <= 0) fail(path + ".value", "must be a positive number, got " + json_excerpt(value));
    if (quantity == Quantity::kCount && std::floor(number) != number) {
      fail(path + ".value", "must be a whole number, got " + json_excerpt(value));
    }
    const double base = number * unit->factor;
    if (!std::isfinite(base))
      fail(path + ".value", "is out of range once converted from " + unit_text_of(item) + " to base units");
    spec_.sources[path] = recorded;
    return base;
  }

  std::optional<int> count(const json& object, const std::string& key, bool required) {
    const auto value = figure(object, key, key, Quantity::kCount, required);
    if (!value) return std::nullopt;
    if (*value > 1e9) fail(key + ".value", "is implausibly large");
    return static_cast<int>(*value);
  }

  std::optional<int64_t> bytes(const json& object, const std::string& key, bool required) {
    const auto value = figure(object, key, key, Quantity::kBytes, required);
    if (!value) return std::nullopt;
    if (*value > 9.0e18) fail(key + ".value", "is implausibly large (more than 9 EB)");
    return static_cast<int64_t>(std::llround(*value));
  }

  // A section {"fp32": figure, ..., "fp8": figure} with all five keys.
  std::map<ComputeDType, double> peaks(const json& object, const std::string& key, bool fp32_required) {
    const json& section = member(object, key, key);
    if (!section.is_object()) fail(key, "must be an object with the keys fp32, tf32, bf16, fp16, fp8");
    std::set<std::string> names;
    for (ComputeDType dtype : all_compute_dtypes()) names.insert(to_string(dtype));
    only_known(section, key, names);
    std::map<ComputeDType, double> out;
    for (ComputeDType dtype : all_compute_dtypes()) {
      const std::string name = to_string(dtype);
      const auto value = figure(section, name, key + "." + name, Quantity::kFlops, fp32_required && dtype == ComputeDType::kFp32);
      if (value) out[dtype] = *value;
    }
    return out;
  }

 private:
  HardwareSpec& spec_;
};

std::string lower(std::string_view text) {
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

bool looks_like_path(const std::string& text) {
  return text.find('/') != std::string::npos || (text.size() > 5 && text.compare(text.size() - 5, 5, ".json") == 0);
}

}  // namespace

std::string to_string(ComputeDType dtype) {
  switch (dtype) {
    case ComputeDType::kFp32: return "fp32";
    case ComputeDType::kTf32: return "tf32";
    case ComputeDType::kBf16: return "bf16";
    case ComputeDType::kFp16: return "fp16";
    case ComputeDType::kFp8: return "fp8";
  }
  return "?";
}

ComputeDType parse_compute_dtype(std::string_view text) {
  const std::string wanted = lower(text);
  for (ComputeDType dtype : all_compute_dtypes()) {
    if (to_string(dtype) == wanted) return dtype;
  }
  throw UserError("unknown compute type '" + std::string(text) + "'; known: fp32, tf32, bf16, fp16, fp8");
}

const std::vector<ComputeDType>& all_compute_dtypes() {
  static const std::vector<ComputeDType> kAll = {ComputeDType::kFp32, ComputeDType::kTf32, ComputeDType::kBf16,
                                                 ComputeDType::kFp16, ComputeDType::kFp8};
  return kAll;
}

std::string to_string(DeviceKind kind) { return kind == DeviceKind::kGpu ? "gpu" : "cpu"; }

std::optional<double> HardwareSpec::peak(ComputeDType dtype) const {
  const auto it = peak_flops_per_s.find(dtype);
  if (it == peak_flops_per_s.end()) return std::nullopt;
  return it->second;
}

HardwareSpec parse_hardware_spec(const std::string& json_text, const std::string& source) {
  const json doc = parse_json_text(json_text, source);
  if (!doc.is_object()) throw UserError(source + ": must hold one JSON object, got " + std::string(doc.type_name()));

  HardwareSpec spec;
  Reader reader(source, spec);
  reader.only_known(
      doc, "",
      {"name", "description", "device_kind", "device_names", "reference_system", "notes", "peak_flops_dense",
       "peak_flops_dense_per_core", "memory_capacity", "memory_bandwidth", "l2_cache", "sm_count",
       "nvlink_bandwidth_per_direction", "gpus_per_node", "cores_per_node", "nics_per_node", "nic_bandwidth_per_direction"});

  spec.name = reader.text(doc, "name");
  const std::filesystem::path source_path(source);
  if (source_path.extension() == ".json" && source_path.stem().string() != spec.name) {
    reader.fail("name", "'" + spec.name + "' differs from the file name '" + source_path.stem().string() +
                            "'; find_hardware_spec looks descriptions up by file name");
  }
  spec.description = reader.text(doc, "description");
  spec.reference_system = reader.text(doc, "reference_system");
  const std::string kind = reader.text(doc, "device_kind");
  if (kind == "gpu") {
    spec.kind = DeviceKind::kGpu;
  } else if (kind == "cpu") {
    spec.kind = DeviceKind::kCpu;
  } else {
    reader.fail("device_kind", "must be \"gpu\" or \"cpu\", got \"" + kind + "\"");
  }
  if (doc.contains("notes") && !doc.at("notes").is_string()) reader.fail("notes", "must be a string");
  if (doc.contains("device_names")) {
    const json& names = doc.at("device_names");
    if (!names.is_array()) reader.fail("device_names", "must be an array of the names the device reports");
    for (const json& name : names) {
      if (!name.is_string() || name.get<std::string>().empty()) reader.fail("device_names", "must hold non-empty strings");
      spec.device_names.push_back(name.get<std::string>());
    }
  }

  spec.peak_flops_per_s = reader.peaks(doc, "peak_flops_dense", /*fp32_required=*/true);
  if (doc.contains("peak_flops_dense_per_core")) {
    spec.peak_flops_per_s_per_core = reader.peaks(doc, "peak_flops_dense_per_core", /*fp32_required=*/false);
  }
  spec.memory_bytes = *reader.bytes(doc, "memory_capacity", /*required=*/true);
  spec.memory_bandwidth_bytes_per_s =
      *reader.figure(doc, "memory_bandwidth", "memory_bandwidth", Quantity::kBandwidth, /*required=*/true);
  spec.l2_bytes = reader.bytes(doc, "l2_cache", false);
  spec.sm_count = reader.count(doc, "sm_count", false);
  spec.nvlink_bandwidth_bytes_per_s =
      reader.figure(doc, "nvlink_bandwidth_per_direction", "nvlink_bandwidth_per_direction", Quantity::kBandwidth, false);
  spec.gpus_per_node = reader.count(doc, "gpus_per_node", false);
  if (doc.contains("cores_per_node")) spec.cores_per_node = reader.count(doc, "cores_per_node", false);
  spec.nics_per_node = reader.count(doc, "nics_per_node", false);
  spec.nic_bandwidth_bytes_per_s =
      reader.figure(doc, "nic_bandwidth_per_direction", "nic_bandwidth_per_direction", Quantity::kBandwidth, false);

  if (spec.kind == DeviceKind::kGpu) {
    if (!spec.sm_count) reader.fail("sm_count.value", "a GPU description needs its SM count");
    if (!spec.gpus_per_node) reader.fail("gpus_per_node.value", "a GPU description needs its GPUs per node");
  } else if (!spec.cores_per_node) {
    reader.fail("cores_per_node", "a CPU node description needs its cores per node (a figure with a source)");
  }
  if (spec.nics_per_node.has_value() != spec.nic_bandwidth_bytes_per_s.has_value()) {
    reader.fail("nic_bandwidth_per_direction.value", "NICs per node and NIC bandwidth are both given or both null");
  }
  return spec;
}

HardwareSpec load_hardware_spec(const std::string& path) {
  const std::string text =
      read_input_file(path, {"no such file; pass a hardware description (see data/hardware/ and docs/hardware.md)",
                             "is a directory, not a hardware description", "cannot be read (permissions?)"});
  return parse_hardware_spec(text, path);
}

std::string hardware_dir() { return data_folder("ITERTIME_HARDWARE_DIR", ITERTIME_DEFAULT_HARDWARE_DIR); }

std::vector<std::string> list_hardware_specs(const std::string& dir) {
  std::vector<std::string> names;
  std::error_code error;
  if (!std::filesystem::is_directory(dir, error)) return names;
  for (const auto& entry : std::filesystem::directory_iterator(dir, error)) {
    if (entry.is_regular_file(error) && entry.path().extension() == ".json") {
      names.push_back(entry.path().stem().string());
    }
  }
  std::sort(names.begin(), names.end());
  return names;
}

HardwareSpec find_hardware_spec(const std::string& name_or_path, const std::string& dir) {
  if (looks_like_path(name_or_path)) return load_hardware_spec(name_or_path);
  const std::vector<std::string> known = list_hardware_specs(dir);
  if (std::find(known.begin(), known.end(), name_or_path) == known.end()) {
    std::string list;
    for (const auto& name : known) list += (list.empty() ? "" : ", ") + name;
    throw UserError("no hardware description '" + name_or_path + "' in " + dir + "; known: " +
                    (list.empty() ? "none (is ITERTIME_HARDWARE_DIR right?)" : list) + "; or pass the path of a .json file");
  }
  return load_hardware_spec(device_file(dir, name_or_path));
}

std::string match_hardware_spec(const std::vector<std::string>& gpu_names, const std::string& cpu_model, int cores,
                                const std::string& dir) {
  const bool gpus = !gpu_names.empty();
  if (gpus && std::any_of(gpu_names.begin(), gpu_names.end(), [&](const std::string& n) { return n != gpu_names.front(); })) {
    return "";  // a mixed node is no one description
  }
  const std::string& reported = gpus ? gpu_names.front() : cpu_model;
  if (reported.empty()) return "";
  for (const std::string& name : list_hardware_specs(dir)) {
    HardwareSpec spec;
    try {
      spec = load_hardware_spec(device_file(dir, name));
    } catch (const UserError&) {
      continue;
    }
    if ((spec.kind == DeviceKind::kGpu) != gpus) continue;
    if (std::find(spec.device_names.begin(), spec.device_names.end(), reported) == spec.device_names.end()) continue;
    if (!gpus && spec.cores_per_node != cores) continue;
    return spec.name;
  }
  return "";
}

std::string cpu_model_name() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) != 0) continue;
    const std::size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::size_t first = line.find_first_not_of(" \t", colon + 1);
    return first == std::string::npos ? "" : line.substr(first);
  }
  return "";
}

}  // namespace itertime
