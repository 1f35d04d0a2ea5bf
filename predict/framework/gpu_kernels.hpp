// gpu_kernels.hpp: how long one GPU kernel takes, from published kernel-level measurements of that GPU
// (issue 32), never from a CPU calibration: GEMM throughput by dtype and shape, fused attention forward
// and backward by head dim, sequence length, causal mask and dtype, the achieved bandwidth of
// memory-bound kernels, and the launch overhead. The figures live in data/kernels/<gpu>.json, each with
// its source beside it (format, figures and rules: docs/kernels.md).
// Invariants:
//  - Every time is > 0 for a kernel with work and includes the launch overhead once; a kernel without
//    work (a zero dimension) takes 0.
//  - gemm_time_us is monotone non-decreasing in each of m, n, k: the measured shapes form a lattice in
//    (log m, log n, log k), extended by one node per axis at 4x its largest value (where products at
//    least the largest measured one in every dimension reach the file's measured maximum achievable,
//    MAMF), whose log-times are made monotone (the mean of their majorant and minorant), interpolated
//    multilinearly, held below the lattice and grown in proportion to a dimension above it. Its achieved
//    throughput never exceeds the description's dense peak for the dtype, nor the file's MAMF where it
//    gives one. A dtype with no measured figure is derived by the file's stated rule ("same_as", e.g.
//    fp16 = bf16 on the same tensor cores), never silently; a dtype with neither is a UserError.
//  - attention_time_us counts FLOPs as the FlashAttention papers do (forward 4 * b * heads * s_q * s_kv *
//    head_dim, halved for a causal mask; backward 2.5x the forward) at the measured throughput for the
//    nearest measured head dim (log distance, the smaller on a tie), interpolated in log(sequence
//    length) with the sequence length sqrt(s_q * s_kv), clamped to the measured range.
//  - memory_bound_time_us = bytes / achieved bandwidth + launch overhead.
//  - Plain data after loading; load_gpu_kernel_figures throws UserError naming the file and the field
//    for a missing file, a malformed one, a figure without a source, a derived figure without its rule,
//    or an achieved figure above the description's peak.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "common/hardware_spec.hpp"

namespace itertime::predict::framework {

struct GemmShape {
  int64_t m = 0;  // rows of the output (tokens)
  int64_t n = 0;  // columns of the output
  int64_t k = 0;  // the reduced dimension
  double flops() const { return 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k); }
};

struct AttentionShape {
  int64_t batch = 1;
  int64_t heads = 1;     // query heads on this GPU
  int64_t kv_heads = 1;  // key/value heads on this GPU (GQA)
  int64_t seq_q = 1;     // query tokens on this GPU (s / cp with context parallelism)
  int64_t seq_kv = 1;    // key/value tokens it attends to
  int64_t head_dim = 128;
  bool causal = true;
  double forward_flops() const;  // as the FlashAttention papers count them (see above)
};

struct GpuKernelFigures {
  std::string gpu;   // the hardware description's name, e.g. "h100-sxm"
  std::string path;  // the file read
  // How reports name it: the shipped figures as data/kernels/NAME.json (the same text on every checkout), another
  // folder's (ITERTIME_KERNELS_DIR) by its path.
  std::string shown_path() const;
  double launch_overhead_us = 0;
  double memory_bandwidth_bytes_per_s = 0;  // achieved by large memory-bound kernels
  // The measured tables as the file gives them (a "same_as" dtype holds its source dtype's copy).
  struct GemmPoint {
    GemmShape shape;
    double achieved_flops_per_s = 0;
  };
  std::map<ComputeDType, std::vector<GemmPoint>> gemm;
  struct AttentionPoint {
    int64_t head_dim = 0;
    int64_t seq = 0;
    bool causal = true;
    bool backward = false;
    double achieved_flops_per_s = 0;
  };
  std::map<ComputeDType, std::vector<AttentionPoint>> attention;
  std::map<std::string, std::string> sources;  // figure path (e.g. "gemm.bf16") -> its source text (+ rule)
  std::string summary_text;                    // the file's one-line "summary"

  // What gemm_time_us interpolates, built once at loading (private to gpu_kernels.cpp; plain data).
  struct GemmLattice {
    std::vector<double> log_m, log_n, log_k;  // the lattice axes: ln of the measured dimensions, ascending
    std::vector<double> log_time_s;           // ln(seconds), made monotone, index (i * n + j) * k + l
    double ceiling_flops_per_s = 0;           // min(dense peak, measured maximum achievable)
  };
  std::map<ComputeDType, GemmLattice> gemm_lattice;
  std::map<ComputeDType, double> attention_peak_flops_per_s;  // the dense peak that bounds attention
  struct AttentionCurve {  // one table: a head dim, mask and pass, its points by ascending ln(seq)
    int64_t head_dim = 0;
    bool causal = true;
    bool backward = false;
    std::vector<double> log_seq, achieved_flops_per_s;
  };
  std::map<ComputeDType, std::vector<AttentionCurve>> attention_curves;

  double gemm_time_us(ComputeDType dtype, const GemmShape& shape) const;
  double attention_time_us(ComputeDType dtype, const AttentionShape& shape, bool backward) const;
  double memory_bound_time_us(double bytes) const;
  // One line naming the file and the sources of the figures used, for a prediction's notes.
  std::string summary() const;
};

// <source dir>/data/kernels, or $ITERTIME_KERNELS_DIR when set and non-empty.
std::string kernel_figures_dir();
// Reads <dir>/<hardware.name>.json, checked against `hardware` (its peaks bound the achieved figures).
// UserError when there is none for that GPU, naming the GPUs that have figures.
GpuKernelFigures load_gpu_kernel_figures(const HardwareSpec& hardware, const std::string& dir = kernel_figures_dir());

}  // namespace itertime::predict::framework
