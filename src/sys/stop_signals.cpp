#include "hoist/sys/stop_signals.hpp"

#include <signal.h>

#include <atomic>
#include <cerrno>
#include <optional>

#include "hoist/util/error.hpp"

namespace hoist::stop_signals {

namespace {

// Written by the handler, read by the main thread: sig_atomic_t-sized and
// lock-free, as a handler may only touch such objects.
std::atomic<int> g_received{0};
static_assert(std::atomic<int>::is_always_lock_free);

// The WakeFlag the handler raises. A plain pointer to storage that lives to
// the end of the process: the handler must not depend on any destructor order.
std::optional<WakeFlag> g_storage;
std::atomic<const WakeFlag*> g_interrupt{nullptr};

extern "C" void on_signal(int signo) {
  const int saved_errno = errno;
  g_received.store(signo);
  if (const WakeFlag* interrupt = g_interrupt.load(); interrupt != nullptr) {
    interrupt->raise();
  }
  errno = saved_errno;
}

void arm() {
  struct sigaction action {};
  action.sa_handler = on_signal;
  action.sa_flags = SA_RESTART | SA_RESETHAND;
  sigemptyset(&action.sa_mask);
  for (const int signo : {SIGTERM, SIGINT}) {
    ::sigaction(signo, &action, nullptr);
  }
}

}  // namespace

void install() {
  if (g_interrupt.load() != nullptr) {
    return;
  }
  g_storage.emplace(WakeFlag::create().value());
  g_interrupt.store(&*g_storage);
  arm();
}

bool installed() noexcept {
  return g_interrupt.load() != nullptr;
}

const WakeFlag* wake_flag() noexcept {
  return g_interrupt.load();
}

int received() noexcept {
  return g_received.load();
}

std::string_view received_name() noexcept {
  switch (g_received.load()) {
    case SIGTERM: return "SIGTERM";
    case SIGINT: return "SIGINT";
    default: return "";
  }
}

void reset_for_test() {
  g_received.store(0);
  if (const WakeFlag* interrupt = g_interrupt.load(); interrupt != nullptr) {
    interrupt->clear();
    arm();
  }
}

}  // namespace hoist::stop_signals
