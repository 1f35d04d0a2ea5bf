// link_delay.cpp: the propagation delay of the emulated cluster's links (tests/cluster/emulated_cluster.sh).
// This kernel has no netem (CONFIG_NET_SCH_NETEM is off; HTB is on), so the links' bandwidth is shaped by
// HTB on each node's interface and their latency here: a TUN device in the cluster's switch namespace
// through which every node-to-node packet is routed; each packet read from it is written back after
// exactly --delay-us on a monotonic clock (a slow link is a node's lower HTB rate, not a longer delay).
//
//   itertime_link_delay --tun NAME --delay-us D [--ready FILE]
//   itertime_link_delay --pingpong-server PORT           (answers one client, 1-byte messages, then exits)
//   itertime_link_delay --pingpong-client ADDR PORT N    (prints the median one-way latency in us: RTT / 2;
//                                                         both ends spin on their receive, as MPI's TCP transport does)
// The script measures the path's own latency with a zero delay (the sockets, veths and this line's
// wake-ups) and delays by what is left of the latency asked for, so that --latency-us is what a socket
// ping-pong between two nodes sees, as on a real link.
//
// Invariants:
//  - Packets leave in the order they came (one FIFO, one constant delay).
//  - A packet is never released before its due time; it is released as soon after it as the scheduler
//    allows (timer slack 1 ns, SCHED_FIFO when permitted: the ranks of a loaded 2-core machine busy-poll).
//  - At most kMaxQueuedBytes wait; beyond that a packet is dropped, as a switch buffer would (TCP backs off).
//  - Ends on SIGTERM/SIGINT or when its parent (the script) dies; the device disappears with it.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <algorithm>
#include <string>
#include <vector>

namespace {

constexpr std::size_t kMaxPacketBytes = 65536;
constexpr std::size_t kMaxQueuedBytes = 64u << 20;
// A sleep overshoots by ~20 us here (a VM's timer and idle exit): sleep until this long before a due
// time, then spin to it.
constexpr int64_t kSpinNs = 60000;

volatile sig_atomic_t g_stop = 0;  // set by the signal handler only
void on_signal(int) { g_stop = 1; }

int64_t now_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000LL + ts.tv_nsec;
}

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "itertime_link_delay: %s: %s\n", what.c_str(), std::strerror(errno));
  std::exit(1);
}

[[noreturn]] void usage(const std::string& what) {
  std::fprintf(stderr,
               "itertime_link_delay: %s\nusage: itertime_link_delay --tun NAME --delay-us D "
               "[--ready FILE]\n",
               what.c_str());
  std::exit(2);
}

struct Packet {
  int64_t due_ns;
  std::vector<char> bytes;
};

int open_tun(const std::string& name) {
  const int fd = open("/dev/net/tun", O_RDWR | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) die("open /dev/net/tun");
  ifreq request{};
  request.ifr_flags = IFF_TUN | IFF_NO_PI;
  std::snprintf(request.ifr_name, IFNAMSIZ, "%s", name.c_str());
  if (ioctl(fd, TUNSETIFF, &request) < 0) die("TUNSETIFF " + name);
  return fd;
}

// One byte from `peer`, spinning on a non-blocking receive as MPI's TCP transport polls (a blocking read
// would add the scheduler's wake-up, 20-50 us here, which is no part of the link). 1, or 0 at the end.
int receive_spinning(int peer, char& byte) {
  for (;;) {
    const ssize_t got = recv(peer, &byte, 1, MSG_DONTWAIT);
    if (got == 1) return 1;
    if (got == 0 || (got < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) return 0;
  }
}

int pingpong_server(int port) {
  const int listener = socket(AF_INET, SOCK_STREAM, 0);
  const int on = 1;
  setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_ANY);
  if (bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof(address)) < 0) die("bind");
  if (listen(listener, 1) < 0) die("listen");
  const int peer = accept(listener, nullptr, nullptr);
  if (peer < 0) die("accept");
  setsockopt(peer, IPPROTO_TCP, TCP_NODELAY, &on, sizeof(on));
  char byte = 0;
  while (receive_spinning(peer, byte) == 1) {
    if (write(peer, &byte, 1) != 1) break;
  }
  close(peer);
  close(listener);
  return 0;
}

int pingpong_client(const std::string& host, int port, int count) {
  const int peer = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  if (inet_pton(AF_INET, host.c_str(), &address.sin_addr) != 1) usage("not an IPv4 address: " + host);
  int tries = 0;
  while (connect(peer, reinterpret_cast<sockaddr*>(&address), sizeof(address)) < 0) {
    if (++tries > 200) die("connect " + host);
    usleep(10000);
  }
  const int on = 1;
  setsockopt(peer, IPPROTO_TCP, TCP_NODELAY, &on, sizeof(on));
  std::vector<int64_t> rtt_ns;
  char byte = 'x';
  for (int i = 0; i < count + 10; ++i) {
    const int64_t start = now_ns();
    if (write(peer, &byte, 1) != 1 || receive_spinning(peer, byte) != 1) die("ping-pong");
    if (i >= 10) rtt_ns.push_back(now_ns() - start);  // the first ten warm the path
  }
  close(peer);
  std::sort(rtt_ns.begin(), rtt_ns.end());
  std::printf("%.1f\n", static_cast<double>(rtt_ns[rtt_ns.size() / 2]) / 2000.0);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 3 && std::string(argv[1]) == "--pingpong-server") return pingpong_server(std::atoi(argv[2]));
  if (argc == 5 && std::string(argv[1]) == "--pingpong-client")
    return pingpong_client(argv[2], std::atoi(argv[3]), std::atoi(argv[4]));
  std::string tun_name;
  std::string ready_path;
  double delay_us = -1.0;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (i + 1 >= argc) usage(arg + " needs a value");
    const std::string value = argv[++i];
    if (arg == "--tun") {
      tun_name = value;
    } else if (arg == "--delay-us") {
      char* end = nullptr;
      delay_us = std::strtod(value.c_str(), &end);
      if (*end != '\0' || !(delay_us >= 0.0) || delay_us > 1e6) usage("--delay-us " + value + ": not a delay in 0..1e6 us");
    } else if (arg == "--ready") {
      ready_path = value;
    } else {
      usage("unknown option " + arg);
    }
  }
  if (tun_name.empty() || delay_us < 0.0) usage("--tun and --delay-us are required");

  prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
  prctl(PR_SET_PDEATHSIG, SIGTERM, 0, 0, 0);
  sched_param priority{};
  priority.sched_priority = 50;
  const bool realtime = sched_setscheduler(0, SCHED_FIFO, &priority) == 0;
  signal(SIGTERM, on_signal);
  signal(SIGINT, on_signal);

  const int fd = open_tun(tun_name);
  if (!ready_path.empty()) {
    FILE* ready = std::fopen(ready_path.c_str(), "w");
    if (ready == nullptr) die("open " + ready_path);
    std::fprintf(ready, "tun %s delay_us %.1f realtime %d\n", tun_name.c_str(), delay_us, realtime ? 1 : 0);
    std::fclose(ready);
  }

  std::deque<Packet> queue;  // due times non-decreasing per source; released strictly in order of arrival
  std::size_t queued_bytes = 0;
  uint64_t dropped = 0;
  std::vector<char> buffer(kMaxPacketBytes);
  const int64_t delay_ns = static_cast<int64_t>(delay_us * 1000.0);
  while (g_stop == 0) {
    // Release what is due (in arrival order; a later packet with an earlier due time waits behind).
    const int64_t now = now_ns();
    while (!queue.empty() && queue.front().due_ns <= now) {
      const Packet& packet = queue.front();
      if (write(fd, packet.bytes.data(), packet.bytes.size()) < 0 && errno != EAGAIN && errno != EIO) die("write " + tun_name);
      queued_bytes -= packet.bytes.size();
      queue.pop_front();
    }
    // Wait for a packet or the next due time, whichever is first.
    pollfd readable{fd, POLLIN, 0};
    timespec timeout{};
    timespec* wait = nullptr;
    if (!queue.empty()) {
      const int64_t left_ns = std::max<int64_t>(0, queue.front().due_ns - now_ns() - kSpinNs);
      timeout.tv_sec = static_cast<time_t>(left_ns / 1000000000LL);
      timeout.tv_nsec = static_cast<long>(left_ns % 1000000000LL);
      wait = &timeout;
    }
    const int ready = ppoll(&readable, 1, wait, nullptr);
    if (ready < 0 && errno != EINTR) die("ppoll");
    if (ready <= 0) continue;
    for (;;) {
      const ssize_t got = read(fd, buffer.data(), buffer.size());
      if (got < 0) {
        if (errno == EAGAIN || errno == EINTR) break;
        die("read " + tun_name);
      }
      if (got == 0) break;
      const int64_t arrived = now_ns();
      if (queued_bytes + static_cast<std::size_t>(got) > kMaxQueuedBytes) {
        ++dropped;
        continue;
      }
      Packet packet{arrived + delay_ns, std::vector<char>(buffer.begin(), buffer.begin() + got)};
      queued_bytes += packet.bytes.size();
      queue.push_back(std::move(packet));
    }
  }
  if (dropped > 0)
    std::fprintf(stderr, "itertime_link_delay: %llu packets dropped (queue full)\n", static_cast<unsigned long long>(dropped));
  close(fd);
  return 0;
}
