// Unit tests of common/hardware_spec: every shipped description in data/hardware loads; hand-checked
// figures of the H100 SXM, H200 SXM, A100 and the CPU node convert to base units as documented;
// absent figures come back as nullopt; each kind of malformed file is refused with one UserError that
// names the file and the field; lookup by name lists the known names when it fails.
// Invariants: reads data/hardware under ITERTIME_SOURCE_DIR; writes only into a TempDir.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "common/errors.hpp"
#include "common/hardware_spec.hpp"
#include "temp_dir.hpp"
#include "user_error.hpp"

namespace itertime {
namespace {

using itertime::testing::user_error_of;

const std::string kHardwareDir = std::string(ITERTIME_SOURCE_DIR) + "/data/hardware";

HardwareSpec shipped(const std::string& name) { return find_hardware_spec(name, kHardwareDir); }

// A minimal valid GPU description; `replace` swaps one top-level member's JSON text ("" removes it).
std::string gpu_json(const std::string& member = "", const std::string& json_text = "") {
  const std::string figure_count = R"({"value": 4, "unit": "count", "source": "test"})";
  std::vector<std::pair<std::string, std::string>> members = {
      {"name", R"("x")"},
      {"description", R"("test device")"},
      {"device_kind", R"("gpu")"},
      {"reference_system", R"("test node")"},
      {"peak_flops_dense", R"({"fp32": {"value": 10, "unit": "TFLOP/s", "source": "test"},
                               "tf32": {"value": 20, "unit": "TFLOP/s", "source": "test"},
                               "bf16": {"value": 40, "unit": "TFLOP/s", "source": "test"},
                               "fp16": {"value": 40, "unit": "TFLOP/s", "source": "test"},
                               "fp8": {"value": null, "unit": "TFLOP/s", "source": "test", "reason": "none"}})"},
      {"memory_capacity", R"({"value": 16, "unit": "GB", "source": "test"})"},
      {"memory_bandwidth", R"({"value": 1, "unit": "TB/s", "source": "test"})"},
      {"l2_cache", R"({"value": 6, "unit": "MiB", "source": "test"})"},
      {"sm_count", figure_count},
      {"nvlink_bandwidth_per_direction", R"({"value": null, "unit": "GB/s", "source": "test", "reason": "PCIe card"})"},
      {"gpus_per_node", figure_count},
      {"nics_per_node", R"({"value": 1, "unit": "count", "source": "test"})"},
      {"nic_bandwidth_per_direction", R"({"value": 100, "unit": "Gb/s", "source": "test"})"},
  };
  bool found = member.empty();
  std::string out = "{";
  for (auto& [key, value] : members) {
    if (key == member) {
      found = true;
      if (json_text.empty()) continue;
      value = json_text;
    }
    out += (out.size() > 1 ? ",\n" : "\n") + ("\"" + key + "\": " + value);
  }
  if (!found) out += ",\n\"" + member + "\": " + json_text;
  return out + "\n}";
}

TEST(HardwareSpec, EveryShippedDescriptionLoads) {
  const std::vector<std::string> names = list_hardware_specs(kHardwareDir);
  for (const char* expected : {"a100-sxm-80gb", "b200", "cpu-node-local", "gb200-nvl72", "h100-sxm", "h200-sxm"}) {
    EXPECT_NE(std::find(names.begin(), names.end(), expected), names.end()) << expected;
  }
  for (const auto& name : names) {
    SCOPED_TRACE(name);
    const HardwareSpec spec = shipped(name);
    EXPECT_EQ(spec.name, name);
    EXPECT_GT(spec.memory_bytes, 0);
    EXPECT_GT(spec.memory_bandwidth_bytes_per_s, 0);
    ASSERT_TRUE(spec.peak(ComputeDType::kFp32).has_value());
    // Every figure of the file carries its source, the absent ones included.
    EXPECT_GE(spec.sources.size(), 13u);
    for (const auto& [field, source] : spec.sources) EXPECT_FALSE(source.empty()) << field;
    // Dense tensor peaks exceed the fp32 peak wherever a device has them (GPUs).
    if (spec.kind == DeviceKind::kGpu) {
      EXPECT_GT(*spec.peak(ComputeDType::kBf16), *spec.peak(ComputeDType::kFp32));
      // A node is an NVLink domain: an 8-GPU baseboard, or the GB200 NVL72's 72 GPUs.
      EXPECT_EQ(spec.gpus_per_node, name == "gb200-nvl72" ? 72 : 8);
    }
  }
}

TEST(HardwareSpec, H100FiguresAreTheWhitepapersDenseOnes) {
  const HardwareSpec h100 = shipped("h100-sxm");
  EXPECT_EQ(h100.kind, DeviceKind::kGpu);
  EXPECT_DOUBLE_EQ(*h100.peak(ComputeDType::kBf16), 989.4e12);  // 1978.9 sparse, halved
  EXPECT_DOUBLE_EQ(*h100.peak(ComputeDType::kFp8), 1978.9e12);
  EXPECT_DOUBLE_EQ(*h100.peak(ComputeDType::kTf32), 494.7e12);
  EXPECT_DOUBLE_EQ(h100.memory_bandwidth_bytes_per_s, 3.35e12);
  EXPECT_EQ(h100.memory_bytes, int64_t{81559} * 1048576);  // the driver's total, not the datasheet's 80 GB
  EXPECT_EQ(h100.l2_bytes, 50 * 1024 * 1024);
  EXPECT_EQ(h100.sm_count, 132);
  EXPECT_DOUBLE_EQ(*h100.nvlink_bandwidth_bytes_per_s, 450e9);  // 900 GB/s bidirectional
  EXPECT_EQ(h100.nics_per_node, 8);
  EXPECT_DOUBLE_EQ(*h100.nic_bandwidth_bytes_per_s, 50e9);  // 400 Gb/s
  EXPECT_TRUE(h100.peak_flops_per_s_per_core.empty());
  EXPECT_NE(h100.sources.at("peak_flops_dense.bf16").find("989.4"), std::string::npos);
}

TEST(HardwareSpec, H200DiffersFromH100InMemoryOnly) {
  const HardwareSpec h200 = shipped("h200-sxm");
  const HardwareSpec h100 = shipped("h100-sxm");
  EXPECT_EQ(h200.memory_bytes, int64_t{143771} << 20);  // the driver's total, 143771 MiB (docs/hardware.md)
  EXPECT_DOUBLE_EQ(h200.memory_bandwidth_bytes_per_s, 4.8e12);
  EXPECT_EQ(h200.sm_count, h100.sm_count);
  EXPECT_EQ(h200.nvlink_bandwidth_bytes_per_s, h100.nvlink_bandwidth_bytes_per_s);
  for (ComputeDType dtype : all_compute_dtypes()) {
    EXPECT_NEAR(*h200.peak(dtype) / *h100.peak(dtype), 1.0, 0.01) << to_string(dtype);
  }
}

TEST(HardwareSpec, AbsentFiguresAreNullopt) {
  const HardwareSpec a100 = shipped("a100-sxm-80gb");
  EXPECT_FALSE(a100.peak(ComputeDType::kFp8).has_value());
  EXPECT_EQ(a100.peak_flops_per_s.count(ComputeDType::kFp8), 0u);
  EXPECT_DOUBLE_EQ(*a100.peak(ComputeDType::kBf16), 312e12);
  EXPECT_NE(a100.sources.at("peak_flops_dense.fp8").find("absent"), std::string::npos);

  const HardwareSpec cpu = shipped("cpu-node-local");
  EXPECT_EQ(cpu.kind, DeviceKind::kCpu);
  EXPECT_FALSE(cpu.sm_count.has_value());
  EXPECT_FALSE(cpu.nvlink_bandwidth_bytes_per_s.has_value());
  EXPECT_FALSE(cpu.gpus_per_node.has_value());
  EXPECT_FALSE(cpu.nics_per_node.has_value());
  EXPECT_FALSE(cpu.peak(ComputeDType::kTf32).has_value());
  EXPECT_FALSE(cpu.peak(ComputeDType::kFp8).has_value());
  EXPECT_EQ(cpu.cores_per_node, 2);
  ASSERT_TRUE(cpu.peak(ComputeDType::kBf16).has_value());
  // Measured per core as well as for the node, in GFLOP/s converted to FLOP/s.
  EXPECT_EQ(cpu.peak_flops_per_s_per_core.size(), 2u);  // fp32 and bf16
  EXPECT_GT(cpu.peak_flops_per_s_per_core.at(ComputeDType::kBf16), 1e9);
  EXPECT_GT(*cpu.peak(ComputeDType::kFp32), 1e9);
  EXPECT_EQ(cpu.memory_bytes, int64_t{24683548} * 1024);  // MemTotal, kB = KiB
}

TEST(HardwareSpec, ComputeDTypeNamesRoundTrip) {
  for (ComputeDType dtype : all_compute_dtypes()) EXPECT_EQ(parse_compute_dtype(to_string(dtype)), dtype);
  EXPECT_EQ(parse_compute_dtype("BF16"), ComputeDType::kBf16);
  EXPECT_NE(user_error_of([] { parse_compute_dtype("fp4"); }).find("fp8"), std::string::npos);
}

TEST(HardwareSpec, TheMinimalFileLoadsAndConvertsUnits) {
  testing::TempDir dir;
  const HardwareSpec spec = load_hardware_spec(dir.write("x.json", gpu_json()));
  EXPECT_EQ(spec.memory_bytes, 16'000'000'000);
  EXPECT_EQ(spec.l2_bytes, 6 * 1024 * 1024);
  EXPECT_DOUBLE_EQ(*spec.nic_bandwidth_bytes_per_s, 12.5e9);
  EXPECT_FALSE(spec.nvlink_bandwidth_bytes_per_s.has_value());
  EXPECT_EQ(spec.sm_count, 4);
}

// Each malformed file gives one UserError naming the file and the field.
TEST(HardwareSpec, MalformedFilesNameFileAndField) {
  struct Case {
    const char* what;
    std::string text;
    std::string field;  // expected in the message after "field '"
  };
  const std::vector<Case> cases = {
      {"missing source", gpu_json("memory_capacity", R"({"value": 16, "unit": "GB"})"), "memory_capacity.source"},
      {"empty source", gpu_json("memory_capacity", R"({"value": 16, "unit": "GB", "source": " "})"), "memory_capacity.source"},
      {"negative value", gpu_json("memory_bandwidth", R"({"value": -1, "unit": "TB/s", "source": "t"})"),
       "memory_bandwidth.value"},
      {"zero value", gpu_json("sm_count", R"({"value": 0, "unit": "count", "source": "t"})"), "sm_count.value"},
      {"fractional count", gpu_json("sm_count", R"({"value": 1.5, "unit": "count", "source": "t"})"), "sm_count.value"},
      {"unknown top-level field", gpu_json("tdp", R"({"value": 700, "unit": "W", "source": "t"})"), "tdp"},
      {"unknown field in a figure", gpu_json("memory_capacity", R"({"value": 16, "unit": "GB", "source": "t", "note": "x"})"),
       "memory_capacity.note"},
      {"unknown dtype", gpu_json("peak_flops_dense", R"({"fp32": {"value": 1, "unit": "TFLOP/s", "source": "t"},
                                                        "fp4": {"value": 1, "unit": "TFLOP/s", "source": "t"}})"),
       "peak_flops_dense.fp4"},
      {"wrong type of value", gpu_json("memory_capacity", R"({"value": "16", "unit": "GB", "source": "t"})"),
       "memory_capacity.value"},
      {"figure not an object", gpu_json("memory_capacity", "16"), "memory_capacity"},
      {"wrong unit for the figure", gpu_json("memory_capacity", R"({"value": 16, "unit": "GB/s", "source": "t"})"),
       "memory_capacity.unit"},
      {"null without reason", gpu_json("l2_cache", R"({"value": null, "unit": "MiB", "source": "t"})"), "l2_cache.reason"},
      {"null where required", gpu_json("memory_capacity", R"({"value": null, "unit": "GB", "source": "t",
                                                              "reason": "r"})"),
       "memory_capacity.value"},
      {"missing figure", gpu_json("l2_cache", ""), "l2_cache"},
      {"missing fp32 peak", gpu_json("peak_flops_dense", R"({"tf32": {"value": 1, "unit": "TFLOP/s", "source": "t"}})"),
       "peak_flops_dense.fp32"},
      {"name not the file's", gpu_json("name", R"("y")"), "name"},
      {"bad device kind", gpu_json("device_kind", R"("tpu")"), "device_kind"},
      {"name of wrong type", gpu_json("description", "3"), "description"},
  };
  testing::TempDir dir;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    const std::string path = dir.write("x.json", c.text);
    const std::string message = user_error_of([&] { load_hardware_spec(path); });
    ASSERT_FALSE(message.empty()) << "no UserError";
    EXPECT_EQ(message.rfind(path + ": ", 0), 0u) << message;
    EXPECT_NE(message.find("field '" + c.field + "'"), std::string::npos) << message;
  }
  // Not JSON, not an object, no file: the file is named (there is no field).
  const std::string not_json = dir.write("x.json", "{\"name\": ");
  EXPECT_EQ(user_error_of([&] { load_hardware_spec(not_json); }).rfind(not_json + ": not valid JSON", 0), 0u);
  const std::string array = dir.write("x.json", "[1, 2]");
  EXPECT_EQ(user_error_of([&] { load_hardware_spec(array); }).rfind(array + ": must hold one JSON object", 0), 0u);
  EXPECT_NE(user_error_of([&] { load_hardware_spec(dir.file("none.json")); }).find("no such file"), std::string::npos);
}

TEST(HardwareSpec, FindByNameListsTheKnownNames) {
  const std::string message = user_error_of([] { find_hardware_spec("nope", kHardwareDir); });
  EXPECT_NE(message.find("'nope'"), std::string::npos) << message;
  for (const char* name : {"a100-sxm-80gb", "b200", "cpu-node-local", "h100-sxm", "h200-sxm"}) {
    EXPECT_NE(message.find(name), std::string::npos) << message;
  }
  // A path is read as a file; a name is looked up in the folder given.
  EXPECT_EQ(find_hardware_spec(kHardwareDir + "/b200.json").name, "b200");
  testing::TempDir dir;
  dir.write("x.json", gpu_json());
  EXPECT_EQ(list_hardware_specs(dir.path().string()), std::vector<std::string>{"x"});
  EXPECT_EQ(find_hardware_spec("x", dir.path().string()).sm_count, 4);
  EXPECT_NE(user_error_of([&] { find_hardware_spec("h100-sxm", dir.path().string()); }).find("known: x"), std::string::npos);
  EXPECT_TRUE(list_hardware_specs(dir.file("missing")).empty());
}

// What a calibration's /meta "hardware" says: the shipped description whose device_names holds what the
// devices report (GPUs all alike; a CPU node also by its core count), "" when none does.
TEST(HardwareSpec, MatchesTheDevicesACalibrationRanOn) {
  const std::string shipped = std::string(ITERTIME_SOURCE_DIR) + "/data/hardware";
  EXPECT_EQ(match_hardware_spec({"NVIDIA H100 80GB HBM3", "NVIDIA H100 80GB HBM3"}, "", 16, shipped), "h100-sxm");
  EXPECT_EQ(match_hardware_spec({"NVIDIA H200"}, "", 16, shipped), "h200-sxm");
  EXPECT_EQ(match_hardware_spec({"NVIDIA A100-SXM4-80GB"}, "", 16, shipped), "a100-sxm-80gb");
  EXPECT_EQ(match_hardware_spec({"NVIDIA H100 80GB HBM3", "NVIDIA H200"}, "", 16, shipped), "");  // mixed
  EXPECT_EQ(match_hardware_spec({"NVIDIA H100 PCIe"}, "", 16, shipped), "");                      // not described
  EXPECT_EQ(match_hardware_spec({}, "AMD EPYC", 2, shipped), "cpu-node-local");
  EXPECT_EQ(match_hardware_spec({}, "AMD EPYC", 64, shipped), "");  // another node of that CPU
  EXPECT_EQ(match_hardware_spec({}, "", 2, shipped), "");
  for (const std::string& name : list_hardware_specs(shipped)) {
    EXPECT_FALSE(find_hardware_spec(name, shipped).device_names.empty()) << name << " names no device";
  }
}

TEST(HardwareSpec, DefaultFolderIsTheSourceTreesOrTheEnvironments) {
  // Without ITERTIME_HARDWARE_DIR the build-time default is data/hardware of this source tree.
  const char* saved = std::getenv("ITERTIME_HARDWARE_DIR");
  if (saved == nullptr) {
    EXPECT_EQ(std::filesystem::weakly_canonical(hardware_dir()), std::filesystem::weakly_canonical(kHardwareDir));
    EXPECT_EQ(find_hardware_spec("h100-sxm").sm_count, 132);
  }
}

}  // namespace
}  // namespace itertime
