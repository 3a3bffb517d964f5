#include "hoist/sys/system_bus.hpp"
#include "hoist/util/text.hpp"

#include <fcntl.h>
#include <poll.h>
#include <systemd/sd-bus.h>

#include <sdbus-c++/Error.h>
#include <sdbus-c++/IConnection.h>
#include <algorithm>
#include <array>
#include <cerrno>

namespace hoist {

namespace {

constexpr const char* k_socket = "/run/dbus/system_bus_socket";

// sd_bus_unref on every early return of connect().
struct BusRef {
  sd_bus* bus = nullptr;
  ~BusRef() {
    if (bus != nullptr) {
      sd_bus_flush_close_unref(bus);
    }
  }
};

}  // namespace

Expected<BusAddress> system_bus_address(const HostRoot& root, const std::string& override_address) {
  if (!override_address.empty()) {
    return BusAddress{override_address, override_address, Fd()};
  }
  const std::string display = "unix:path=" + root.display(k_socket);
  auto socket = root.open(k_socket, O_PATH);
  if (!socket) {
    return SysError{"failed to find the system bus socket " + in_quotes(root.display(k_socket)) + ": " +
                        errno_text(socket.error().errnum),
                    socket.error().errnum};
  }
  std::string address = "unix:path=/proc/self/fd/" + std::to_string(socket->get());
  return BusAddress{std::move(address), display, std::move(*socket)};
}

SystemBus::SystemBus(std::unique_ptr<sdbus::IConnection> connection, std::string display)
    : m_connection(std::move(connection)), m_display(std::move(display)) {}
SystemBus::SystemBus(SystemBus&&) noexcept = default;
SystemBus& SystemBus::operator=(SystemBus&&) noexcept = default;
SystemBus::~SystemBus() = default;

Expected<SystemBus> SystemBus::connect(BusAddress address, std::chrono::milliseconds call_timeout) {
  const std::string what = "connect to the system bus at " + in_quotes(address.display);
  BusRef ref;
  int r = sd_bus_new(&ref.bus);
  if (r >= 0) {
    r = sd_bus_set_address(ref.bus, address.address.c_str());
  }
  if (r >= 0) {
    // A bus client says Hello and gets a unique name: needed for the daemon to
    // route the signals we subscribe to.
    r = sd_bus_set_bus_client(ref.bus, 1);
  }
  if (r >= 0) {
    r = sd_bus_set_description(ref.bus, "hoist");
  }
  if (r >= 0) {
    r = sd_bus_start(ref.bus);
  }
  if (r < 0) {
    return sys_error(what, -r);
  }
  try {
    // sdbus-c++ takes the started bus over.
    auto connection = sdbus::createBusConnection(ref.bus);
    ref.bus = nullptr;
    connection->setMethodCallTimeout(call_timeout);
    return SystemBus(std::move(connection), address.display);
  } catch (const sdbus::Error& e) {
    return SysError{"failed to " + what + ": " + e.getMessage(), EIO};
  }
}

Expected<BusWait> SystemBus::wait_until(const std::function<bool()>& done,
                                        std::chrono::steady_clock::time_point deadline, const WakeFlag* interrupt) {
  try {
    for (;;) {
      // Dispatch everything queued (a signal may have arrived with a method
      // reply), then sleep in poll until something more comes.
      while (m_connection->processPendingEvent()) {
        if (done()) {
          return BusWait::done;
        }
      }
      if (done()) {
        return BusWait::done;
      }
      if (interrupt != nullptr && interrupt->raised()) {
        return BusWait::interrupted;
      }
      const auto now = std::chrono::steady_clock::now();
      if (now >= deadline) {
        return BusWait::timed_out;
      }
      const auto poll_data = m_connection->getEventLoopPollData();
      std::array<pollfd, 3> fds{{{poll_data.fd, poll_data.events, 0},
                                 {poll_data.eventFd, POLLIN, 0},
                                 {interrupt != nullptr ? interrupt->fd() : -1, POLLIN, 0}}};
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now).count() + 1;
      const int bus_timeout = poll_data.getPollTimeout();
      const int timeout = bus_timeout < 0 ? static_cast<int>(left) : std::min(bus_timeout, static_cast<int>(left));
      if (::poll(fds.data(), fds.size(), timeout) < 0 && errno != EINTR) {
        return sys_error("wait on the system bus at " + in_quotes(m_display));
      }
    }
  } catch (const sdbus::Error& e) {
    return SysError{"failed to read from the system bus at " + in_quotes(m_display) + ": " + e.getMessage(), EIO};
  }
}

}  // namespace hoist
