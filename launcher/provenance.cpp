// provenance.cpp: /meta provenance of a calibration file (provenance.hpp).
#include "launcher/provenance.hpp"

#include <unistd.h>

#include "calibrate/torch_info.hpp"
#include "common/build_info.hpp"
#include "common/hardware_spec.hpp"
#include "runtime/cuda_info.hpp"
#include "runtime/mpi_session.hpp"

namespace itertime::launcher {
namespace {
std::string hardware_or_none(const std::string& name) { return name.empty() ? "none" : name; }
}  // namespace

std::map<std::string, std::string> collect_provenance(const std::string& command_line, const std::string& backend) {
  const NodeInfo nodes = detect_nodes();
  const BuildInfo build = build_info();
  const CudaInfo cuda = query_cuda();
  const calibrate::TorchInfo torch = calibrate::query_torch();
  int world_size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &world_size);

  std::string hostnames;
  for (std::size_t i = 0; i < nodes.hostnames.size(); ++i) hostnames += (i ? "," : "") + nodes.hostnames[i];
  std::string devices;
  for (std::size_t i = 0; i < cuda.device_names.size(); ++i) devices += (i ? "," : "") + cuda.device_names[i];

  return {
      {"itertime_version", build.itertime_version},
      {"git_revision", build.git_revision},
      {"created_utc", utc_timestamp()},
      {"argv", command_line},
      {"hostnames", hostnames},
      {"world_size", std::to_string(world_size)},
      {"num_nodes", std::to_string(nodes.num_nodes)},
      {"cpu_cores_per_node", std::to_string(sysconf(_SC_NPROCESSORS_ONLN))},  // rank 0's node: cores online
      {"backend", backend},
      {"device_names", devices.empty() ? "cpu" : devices},
      // The data/hardware description these devices match ("none" when no description names them).
      {"hardware", hardware_or_none(match_hardware_spec(cuda.device_names, cpu_model_name(), static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN))))},
      {"mpi_version", MpiSession::library_version()},
      {"hdf5_version", build.hdf5_version},
      {"cuda_version", cuda.runtime_version.empty() ? "none" : cuda.runtime_version},
      {"nccl_version", cuda.nccl_version.empty() ? "none" : cuda.nccl_version},
      {"torch_version", torch.compiled ? torch.version : "none"},
  };
}

}  // namespace itertime::launcher
