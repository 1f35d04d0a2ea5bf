// cmd_info.cpp: `itertime info`: build configuration, library versions, devices and the MPI world.
// Collective when run under mpirun (every rank takes part in node detection; rank 0 prints).
#include <sys/utsname.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "calibrate/torch_info.hpp"
#include "common/build_info.hpp"
#include "runtime/cuda_info.hpp"
#include "runtime/mpi_session.hpp"
#include "launcher/commands.hpp"

namespace itertime::launcher {
namespace {

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      const auto colon = line.find(':');
      if (colon != std::string::npos) return line.substr(colon + 2);
    }
  }
  return "unknown";
}

std::string joined(const std::vector<std::string>& items) {
  std::string out;
  for (std::size_t i = 0; i < items.size(); ++i) out += (i ? ", " : "") + items[i];
  return out;
}

}  // namespace

void register_info(CLI::App& app, std::vector<std::pair<CLI::App*, Action>>& actions) {
  CLI::App* info = app.add_subcommand("info", kInfoSummary);
  actions.emplace_back(info, [](Context& context) {
    MpiSession mpi(&context.argc, &context.argv);
    const NodeInfo nodes = detect_nodes();
    if (mpi.world_rank() != 0) return 0;

    const BuildInfo build = build_info();
    const CudaInfo cuda = query_cuda();
    const calibrate::TorchInfo torch = calibrate::query_torch();
    std::printf("itertime %s (git %s, %s, %s)\n", build.itertime_version.c_str(), build.git_revision.c_str(),
                build.build_type.c_str(), build.compiler.c_str());
    std::printf("\nbuild\n");
    std::printf("  CUDA               %s\n", build.with_cuda ? ("yes, runtime " + cuda.runtime_version).c_str() : "no");
    std::printf("  NCCL               %s\n", build.with_nccl ? cuda.nccl_version.c_str() : "no");
    std::printf("  LibTorch           %s\n", torch.compiled ? torch.version.c_str() : "no");
    if (torch.compiled) {
      std::printf("  LibTorch CUDA      %s\n",
                  torch.cuda_version == "none" ? "none (CPU-only LibTorch)" : torch.cuda_version.c_str());
    }
    std::printf("  HDF5               %s\n", build.hdf5_version.c_str());
    std::printf("  MPI                %s\n", MpiSession::library_version().c_str());
    std::printf("\ndevices\n");
    std::printf("  CPU                %s, %ld cores online\n", cpu_model().c_str(), sysconf(_SC_NPROCESSORS_ONLN));
    if (torch.compiled) {
      std::printf("  LibTorch threads   %d per rank\n", torch.intra_op_threads);
      std::printf("  CPU fp16 matmul    %s\n",
                  torch.cpu_fp16_matmul ? "yes" : "no (torch::mm of two kFloat16 CPU tensors throws)");
      std::printf("  attention          %s\n", joined(torch.attention_backends).c_str());
      if (torch.blas_threads > 0) {
        std::printf("  OpenBLAS threads   %d per rank at start; calibrations set it to the job's compute_threads\n",
                    torch.blas_threads);
      }
    }
    if (cuda.device_names.empty()) {
      std::printf("  CUDA devices       none (%s)\n", cuda.status.c_str());
    } else {
      for (std::size_t i = 0; i < cuda.device_names.size(); ++i) {
        std::printf("  CUDA device %zu      %s, %.1f GiB\n", i, cuda.device_names[i].c_str(), cuda.device_memory_gib[i]);
      }
      if (!cuda.driver_version.empty()) std::printf("  CUDA driver        %s\n", cuda.driver_version.c_str());
    }
    std::printf("\nMPI world\n");
    std::printf("  ranks              %d\n", mpi.world_size());
    std::printf("  nodes              %d\n", nodes.num_nodes);
    for (int n = 0; n < nodes.num_nodes; ++n) {
      int ranks_on_node = 0;
      for (int node : nodes.node_of_rank) ranks_on_node += (node == n) ? 1 : 0;
      std::printf("  node %-3d           %s, %d rank(s)\n", n, nodes.hostnames[static_cast<std::size_t>(n)].c_str(),
                  ranks_on_node);
    }
    return 0;
  });
}

}  // namespace itertime::launcher
