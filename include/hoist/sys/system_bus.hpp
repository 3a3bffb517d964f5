#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "hoist/sys/host_root.hpp"
#include "hoist/sys/wake_flag.hpp"
#include "hoist/util/expected.hpp"

namespace sdbus {
class IConnection;
}

namespace hoist {

/// Where the host's system bus is.
struct BusAddress {
  /// The address sd-bus connects to (a `/proc/self/fd/N` path when the socket
  /// was resolved inside the host root).
  std::string address;
  /// The address as people read it (`unix:path=/host/run/dbus/system_bus_socket`).
  std::string display;
  /// Holds the socket resolved inside the root (O_PATH) until the connection is made.
  Fd socket;
};

/// The host's system bus address: `override_address` (DBUS_SYSTEM_BUS_ADDRESS)
/// when it is not empty, used as it is; else the socket `/run/dbus/system_bus_socket`
/// resolved inside `root` (never `/var/run`, a symlink that the container would
/// resolve to its own `/run`). The socket is opened O_PATH inside the root and
/// connected to through `/proc/self/fd/N`, so that no path outside the root is
/// ever followed and the 108-byte limit of socket paths does not apply.
Expected<BusAddress> system_bus_address(const HostRoot& root, const std::string& override_address);

/// How a wait on the bus ended.
enum class BusWait {
  done,         ///< the condition became true
  timed_out,    ///< the deadline passed first
  interrupted,  ///< the WakeFlag was raised first (SIGTERM, SIGINT)
};

/// A client connection to the host's system bus: sd-bus (through sdbus-c++)
/// without an event-loop thread, so the process stays single-threaded;
/// incoming messages (signals) are dispatched only inside wait_until(). Method
/// calls go through sdbus-c++ proxies made on connection(); they throw
/// sdbus::Error, which the core turns into messages.
class SystemBus {
 public:
  /// Connects and says Hello. A method call times out after `call_timeout`.
  static Expected<SystemBus> connect(BusAddress address, std::chrono::milliseconds call_timeout);

  SystemBus(SystemBus&&) noexcept;
  SystemBus& operator=(SystemBus&&) noexcept;
  ~SystemBus();

  [[nodiscard]] sdbus::IConnection& connection() const { return *m_connection; }
  /// The address as people read it, for messages.
  [[nodiscard]] const std::string& display() const noexcept { return m_display; }

  /// Dispatches incoming messages (running the signal handlers registered on
  /// proxies of this connection) until `done()` returns true, `deadline`
  /// passes, or `interrupt` (optional) is raised. A lost connection is
  /// returned as an error ("failed to read from the system bus …").
  Expected<BusWait> wait_until(const std::function<bool()>& done, std::chrono::steady_clock::time_point deadline,
                               const WakeFlag* interrupt);

 private:
  SystemBus(std::unique_ptr<sdbus::IConnection> connection, std::string display);
  std::unique_ptr<sdbus::IConnection> m_connection;
  std::string m_display;
};

}  // namespace hoist
