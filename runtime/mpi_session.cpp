// mpi_session.cpp: the MPI session: process groups, node detection, abort_all (mpi_session.hpp).
#include "runtime/mpi_session.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <thread>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <initializer_list>

#include "common/errors.hpp"
#include "runtime/mpi_check.hpp"
#include "runtime/watchdog.hpp"

namespace itertime {

namespace {

// This process's world rank or size as its launcher exported it (Open MPI, PMIx, PMI, Slurm); -1 if none.
int launcher_number(std::initializer_list<const char*> names) {
  for (const char* name : names) {
    const char* text = std::getenv(name);
    if (text != nullptr && *text != '\0') return std::atoi(text);
  }
  return -1;
}

// The watchdog's limit for MPI_Init, before the command line is read: ITERTIME_WATCHDOG_S or the default
// (a malformed value is reported by the command later).
double init_watchdog_seconds() {
  try {
    return watchdog_seconds();
  } catch (const UserError&) {
    return kDefaultWatchdogSeconds;
  }
}

}  // namespace

MpiSession::MpiSession(int* argc, char*** argv) {
  if (!initialized()) {
    int provided = 0;
    // MPI_Init waits for every rank of the job too: a rank stopped before it would hold the others there.
    Watchdog init_watchdog(init_watchdog_seconds(),
                           launcher_number({"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID"}),
                           launcher_number({"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS"}), {},
                           Watchdog::kAsyncErrorGrace_s, launcher_to_watch());
    WatchedOperation watched("MPI_Init_thread", -1, 0);
    ITERTIME_MPI_CHECK(MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided));
    owns_ = true;
    // Errors come back as codes, checked by ITERTIME_MPI_CHECK, instead of killing the job silently.
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  }
}

void MpiSession::start_watchdog(double timeout_s) {
  if (watchdog_ != nullptr) return;
  watchdog_ = std::make_unique<Watchdog>(timeout_s, world_rank(), world_size(), Watchdog::Handler{}, Watchdog::kAsyncErrorGrace_s,
                                         launcher_to_watch());
}

MpiSession::~MpiSession() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  // While an exception unwinds, MPI stays up so that main() can abort every rank (MPI_Abort) instead of
  // finalizing one rank while the others wait for it.
  if (owns_ && !finalized && std::uncaught_exceptions() == 0) MPI_Finalize();
}

void MpiSession::finalize_if_initialized() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (initialized() && !finalized) MPI_Finalize();
}

bool MpiSession::initialized() {
  int flag = 0;
  MPI_Initialized(&flag);
  int finalized = 0;
  MPI_Finalized(&finalized);
  return flag != 0 && finalized == 0;
}

int MpiSession::world_rank() const {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}

int MpiSession::world_size() const {
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  return size;
}

std::string MpiSession::library_version() {
  char version[MPI_MAX_LIBRARY_VERSION_STRING];
  int length = 0;
  MPI_Get_library_version(version, &length);
  std::string text(version, static_cast<std::size_t>(length));
  const auto newline = text.find_first_of("\n,");
  return newline == std::string::npos ? text : text.substr(0, newline);
}

void MpiSession::abort_all(int exit_code) {
  std::fflush(stdout);
  std::fflush(stderr);
  if (initialized()) MPI_Abort(MPI_COMM_WORLD, exit_code);
  std::_Exit(exit_code);
}

MpiComm::~MpiComm() { release(); }

MpiComm::MpiComm(MpiComm&& other) noexcept : comm_(other.comm_), owned_(other.owned_) {
  other.comm_ = MPI_COMM_NULL;
  other.owned_ = false;
}

MpiComm& MpiComm::operator=(MpiComm&& other) noexcept {
  if (this != &other) {
    release();
    comm_ = other.comm_;
    owned_ = other.owned_;
    other.comm_ = MPI_COMM_NULL;
    other.owned_ = false;
  }
  return *this;
}

void MpiComm::release() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (owned_ && comm_ != MPI_COMM_NULL && !finalized) MPI_Comm_free(&comm_);
  comm_ = MPI_COMM_NULL;
  owned_ = false;
}

MpiComm MpiComm::split(MPI_Comm parent, int color, int key) {
  MPI_Comm out = MPI_COMM_NULL;
  ITERTIME_MPI_CHECK(MPI_Comm_split(parent, color, key, &out));
  if (out != MPI_COMM_NULL) MPI_Comm_set_errhandler(out, MPI_ERRORS_RETURN);
  return MpiComm(out, true);
}

int MpiComm::rank() const {
  int rank = 0;
  ITERTIME_MPI_CHECK(MPI_Comm_rank(comm_, &rank));
  return rank;
}

int MpiComm::size() const {
  int size = 0;
  ITERTIME_MPI_CHECK(MPI_Comm_size(comm_, &size));
  return size;
}

ProcessGroups::ProcessGroups(const RankLayout& layout, MPI_Comm parent) : layout_(layout) {
  int world_size = 0;
  int world_rank = 0;
  MPI_Comm_size(parent, &world_size);
  MPI_Comm_rank(parent, &world_rank);
  if (world_size != layout.world_size()) {
    throw UserError("layout dp=" + std::to_string(layout.dp()) + " tp=" + std::to_string(layout.tp()) +
                    " pp=" + std::to_string(layout.pp()) + (layout.cp() > 1 ? " cp=" + std::to_string(layout.cp()) : "") +
                    " needs " + std::to_string(layout.world_size()) + " ranks but the job has " + std::to_string(world_size) +
                    "; change -np or the layout");
  }
  coords_ = layout.coords(world_rank);
  const RankCoords& c = coords_;
  // Color: the coordinates that stay fixed within the group; key: the index that varies.
  const int dp = layout.dp(), tp = layout.tp(), cp = layout.cp();
  tp_ = MpiComm::split(parent, (c.pp_idx * dp + c.dp_idx) * cp + c.cp_idx, c.tp_idx);
  dp_ = MpiComm::split(parent, (c.pp_idx * cp + c.cp_idx) * tp + c.tp_idx, c.dp_idx);
  pp_ = MpiComm::split(parent, (c.dp_idx * cp + c.cp_idx) * tp + c.tp_idx, c.pp_idx);
  cp_ = MpiComm::split(parent, (c.pp_idx * dp + c.dp_idx) * tp + c.tp_idx, c.cp_idx);
  dp_cp_ = MpiComm::split(parent, c.pp_idx * tp + c.tp_idx, c.dp_idx * cp + c.cp_idx);
}

NodeInfo detect_nodes() {
  NodeInfo info;
  int world_rank = 0;
  int world_size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world_size);

  MPI_Comm node_comm = MPI_COMM_NULL;
  ITERTIME_MPI_CHECK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, world_rank, MPI_INFO_NULL, &node_comm));
  MpiComm node(node_comm, true);
  info.local_rank = node.rank();
  info.local_size = node.size();

  // The node's leader is its lowest world rank; nodes are numbered in the order of their leaders.
  int leader = world_rank;
  ITERTIME_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &leader, 1, MPI_INT, MPI_MIN, node.get()));
  std::vector<int> leader_of_rank(static_cast<std::size_t>(world_size));
  ITERTIME_MPI_CHECK(MPI_Allgather(&leader, 1, MPI_INT, leader_of_rank.data(), 1, MPI_INT, MPI_COMM_WORLD));
  std::vector<int> leaders(leader_of_rank);
  std::sort(leaders.begin(), leaders.end());
  leaders.erase(std::unique(leaders.begin(), leaders.end()), leaders.end());
  info.num_nodes = static_cast<int>(leaders.size());
  info.node_of_rank.resize(static_cast<std::size_t>(world_size));
  for (int r = 0; r < world_size; ++r) {
    const auto it = std::lower_bound(leaders.begin(), leaders.end(), leader_of_rank[static_cast<std::size_t>(r)]);
    info.node_of_rank[static_cast<std::size_t>(r)] = static_cast<int>(it - leaders.begin());
  }
  info.node_index = info.node_of_rank[static_cast<std::size_t>(world_rank)];

  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  info.hostname = host;
  constexpr int kHostLen = 256;
  std::vector<char> all_hosts(static_cast<std::size_t>(world_size) * kHostLen);
  ITERTIME_MPI_CHECK(MPI_Allgather(host, kHostLen, MPI_CHAR, all_hosts.data(), kHostLen, MPI_CHAR, MPI_COMM_WORLD));
  for (int leader_rank : leaders) {
    info.hostnames.emplace_back(&all_hosts[static_cast<std::size_t>(leader_rank) * kHostLen]);
  }
  return info;
}

int node_local_rank(MPI_Comm comm) {
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm node_comm = MPI_COMM_NULL;
  ITERTIME_MPI_CHECK(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node_comm));
  MpiComm node(node_comm, true);
  return node.rank();
}

std::string broadcast_string(const std::string& text, MPI_Comm comm) {
  std::string out = text;
  int length = static_cast<int>(out.size());
  ITERTIME_MPI_CHECK(MPI_Bcast(&length, 1, MPI_INT, 0, comm));
  out.resize(static_cast<std::size_t>(length));
  ITERTIME_MPI_CHECK(MPI_Bcast(out.data(), length, MPI_CHAR, 0, comm));
  return out;
}

void quiet_barrier(MPI_Comm comm) {
  WatchedOperation watched("quiet barrier", -1, MPI_DATATYPE_NULL, comm);
  MPI_Request request;
  ITERTIME_MPI_CHECK(MPI_Ibarrier(comm, &request));
  int done = 0;
  while (true) {
    ITERTIME_MPI_CHECK(MPI_Test(&request, &done, MPI_STATUS_IGNORE));
    if (done) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

}  // namespace itertime
