// provenance.cpp: /meta provenance of a calibration file (provenance.hpp).
#include "launcher/provenance.hpp"

#include <unistd.h>

#include "calibrate/torch_info.hpp"
#include "common/build_info.hpp"
#include "common/hardware_spec.hpp"
#include "common/store_meta.hpp"
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
      {store::meta_key::kItertimeVersion, build.itertime_version},
      {store::meta_key::kGitRevision, build.git_revision},
      {store::meta_key::kCreatedUtc, utc_timestamp()},
      {store::meta_key::kArgv, command_line},
      {store::meta_key::kHostnames, hostnames},
      {store::meta_key::kWorldSize, std::to_string(world_size)},
      {store::meta_key::kNumNodes, std::to_string(nodes.num_nodes)},
      {store::meta_key::kCpuCoresPerNode, std::to_string(sysconf(_SC_NPROCESSORS_ONLN))},  // rank 0's node: cores online
      {store::meta_key::kBackend, backend},
      {store::meta_key::kDeviceNames, devices.empty() ? "cpu" : devices},
      // The data/hardware description these devices match ("none" when no description names them).
      {store::meta_key::kHardware, hardware_or_none(match_hardware_spec(cuda.device_names, cpu_model_name(),
                                                                        static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN))))},
      {store::meta_key::kMpiVersion, MpiSession::library_version()},
      {store::meta_key::kHdf5Version, build.hdf5_version},
      {store::meta_key::kCudaVersion, cuda.runtime_version.empty() ? "none" : cuda.runtime_version},
      {store::meta_key::kNcclVersion, cuda.nccl_version.empty() ? "none" : cuda.nccl_version},
      {store::meta_key::kTorchVersion, torch.compiled ? torch.version : "none"},
  };
}

}  // namespace itertime::launcher
