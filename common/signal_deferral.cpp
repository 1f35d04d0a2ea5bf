// signal_deferral.cpp: see signal_deferral.hpp.
#include "common/signal_deferral.hpp"

#include <atomic>
#include <csignal>

namespace itertime {
namespace {

constexpr int kSignals[] = {SIGTERM, SIGINT, SIGHUP};
constexpr int kSignalCount = sizeof(kSignals) / sizeof(kSignals[0]);

// Signals are process-global; so is what remembers them (see the header).
std::atomic<int> g_depth{0};
std::atomic<int> g_held{0};
struct sigaction g_previous[kSignalCount];

extern "C" void hold_signal(int signal_number) {
  int expected = 0;
  g_held.compare_exchange_strong(expected, signal_number);
}

}  // namespace

SignalDeferral::SignalDeferral() {
  if (g_depth.fetch_add(1) != 0) return;
  struct sigaction action {};
  action.sa_handler = hold_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;  // interrupted system calls of the write resume
  for (int i = 0; i < kSignalCount; ++i) sigaction(kSignals[i], &action, &g_previous[i]);
}

SignalDeferral::~SignalDeferral() {
  if (g_depth.fetch_sub(1) != 1) return;
  for (int i = 0; i < kSignalCount; ++i) sigaction(kSignals[i], &g_previous[i], nullptr);
  const int held = g_held.exchange(0);
  if (held != 0) std::raise(held);
}

}  // namespace itertime
