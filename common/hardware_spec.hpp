// hardware_spec.hpp: what one kind of device and the node it sits in can do, as described by a
// file in data/hardware/<name>.json (format and sources: docs/hardware.md): dense peak FLOP/s per math
// type, memory capacity and bandwidth, L2, SMs, NVLink, GPUs and NICs per node.
// Invariants:
//  - Every figure of a HardwareSpec comes from its file, where it stands beside a non-empty public
//    source (or, for a measured node, the command that measured it); a figure without a source is
//    refused, as are unknown fields, units that do not fit the figure, values that are not positive
//    finite numbers, counts that are not integers, and a "name" that differs from the file's stem.
//  - A figure the device lacks (fp8 on an A100, NVLink on a CPU node) is null in the file with a
//    "reason", and absent here (std::nullopt, or no entry in the peak maps); the fp32 peak, memory
//    capacity and memory bandwidth are never absent.
//  - Values are in base units: FLOP/s, bytes, bytes/s. Bandwidths are per direction (NVLink: per GPU,
//    summed over its links; NICs: per NIC, line rate), the convention of NCCL's bus bandwidth.
//  - Torch-free and pure: loading reads one file, keeps no state; every mistake is one UserError naming
//    the file and the field.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace itertime {

// The math types a peak FLOP/s figure is given for. Not DType: tf32 is a Tensor Core mode of fp32
// tensors and fp8 is not (yet) a storage type of itertime.
enum class ComputeDType { kFp32, kTf32, kBf16, kFp16, kFp8 };

// "fp32", "tf32", "bf16", "fp16", "fp8": the keys of the file's peak sections.
std::string to_string(ComputeDType dtype);
// Accepts the names above (case-insensitive); throws UserError listing them otherwise.
ComputeDType parse_compute_dtype(std::string_view text);
const std::vector<ComputeDType>& all_compute_dtypes();

enum class DeviceKind { kGpu, kCpu };
std::string to_string(DeviceKind kind);

struct HardwareSpec {
  std::string name;              // file stem, e.g. "h100-sxm"
  std::string description;       // one line: device, form factor, memory
  std::string reference_system;  // the node the per-node figures describe, e.g. "NVIDIA DGX H100"
  DeviceKind kind = DeviceKind::kGpu;
  // The names the device reports, exactly (GPUs: the CUDA device name; CPU nodes: /proc/cpuinfo's
  // "model name"): what match_hardware_spec() recognizes it by. May be empty (never matched).
  std::vector<std::string> device_names;

  // Dense (no 2:4 sparsity) peak of one device; a dtype the device lacks has no entry.
  std::map<ComputeDType, double> peak_flops_per_s;
  // CPU nodes: the device is the whole node; this is the peak of one core (GPU files leave it empty).
  std::map<ComputeDType, double> peak_flops_per_s_per_core;

  int64_t memory_bytes = 0;
  double memory_bandwidth_bytes_per_s = 0;
  std::optional<int64_t> l2_bytes;
  std::optional<int> sm_count;
  std::optional<double> nvlink_bandwidth_bytes_per_s;  // per GPU, per direction, all links together
  std::optional<int> gpus_per_node;
  std::optional<int> cores_per_node;                // CPU nodes
  std::optional<int> nics_per_node;                 // NICs of the compute fabric (not storage)
  std::optional<double> nic_bandwidth_bytes_per_s;  // per NIC, per direction

  // Field path (e.g. "peak_flops_dense.bf16", "memory_capacity") -> its source text, for every figure
  // of the file, present or null; a null figure's reason is appended to its source.
  std::map<std::string, std::string> sources;

  std::optional<double> peak(ComputeDType dtype) const;
};

// Parses one description; `source` names it in errors (a path: its stem must equal "name").
HardwareSpec parse_hardware_spec(const std::string& json_text, const std::string& source);
// Reads and parses a file. Throws UserError for a missing or unreadable file and for every mistake.
HardwareSpec load_hardware_spec(const std::string& path);

// The folder of shipped descriptions: $ITERTIME_HARDWARE_DIR when set and non-empty, else
// <source dir>/data/hardware as configured at build time.
std::string hardware_dir();
// Names (file stems) of the *.json files in `dir`, sorted; empty when the folder does not exist.
std::vector<std::string> list_hardware_specs(const std::string& dir = hardware_dir());
// `name_or_path`: a name from list_hardware_specs(dir), or a path to a file (anything with a '/' or
// ending in ".json"). Throws UserError naming the known names when there is no such description.
HardwareSpec find_hardware_spec(const std::string& name_or_path, const std::string& dir = hardware_dir());

// Which description of `dir` the devices a calibration ran on match, for its /meta: with GPUs, the one
// whose device_names holds the name every GPU reports (none when they differ); without, the CPU node
// whose device_names holds `cpu_model` and whose cores_per_node equals `cores`. "" when none matches.
// A description that fails to load is skipped (find_hardware_spec reports it when it is asked for).
std::string match_hardware_spec(const std::vector<std::string>& gpu_names, const std::string& cpu_model, int cores,
                                const std::string& dir = hardware_dir());
// /proc/cpuinfo's first "model name" (Linux), or "" when there is none.
std::string cpu_model_name();

}  // namespace itertime
