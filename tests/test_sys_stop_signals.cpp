#include <signal.h>

#include <catch2/catch.hpp>

#include "hoist/host/interrupted.hpp"
#include "hoist/sys/stop_signals.hpp"

namespace stop_signals = hoist::stop_signals;

TEST_CASE("SIGTERM raises the interrupt and makes the next safe point throw, saying where", "[stop_signals]") {
  stop_signals::install();
  stop_signals::install();  // idempotent
  REQUIRE(stop_signals::installed());
  stop_signals::reset_for_test();
  CHECK(stop_signals::received() == 0);
  CHECK_FALSE(stop_signals::wake_flag()->raised());
  CHECK_NOTHROW(hoist::throw_if_interrupted("staging k3s"));

  REQUIRE(::raise(SIGTERM) == 0);  // handled: the test binary lives on
  CHECK(stop_signals::received() == SIGTERM);
  CHECK(stop_signals::received_name() == "SIGTERM");
  CHECK(stop_signals::wake_flag()->raised());
  try {
    hoist::throw_if_interrupted("switching k3s");
    FAIL("no throw");
  } catch (const hoist::Interrupted& e) {
    CHECK(std::string(e.what()) == "stopped by SIGTERM before switching k3s");
    CHECK(e.code() == hoist::ExitCode::failed);
  }
  stop_signals::reset_for_test();
  CHECK(stop_signals::received() == 0);
  CHECK_FALSE(stop_signals::wake_flag()->raised());

  REQUIRE(::raise(SIGINT) == 0);
  CHECK(stop_signals::received_name() == "SIGINT");
  CHECK_THROWS_WITH(hoist::throw_if_interrupted("restarting k3s.service"),
                    "stopped by SIGINT before restarting k3s.service");
  stop_signals::reset_for_test();
}
