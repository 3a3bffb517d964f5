#include <signal.h>

#include <catch2/catch.hpp>

#include "hoist/host/interruption.hpp"
#include "hoist/sys/termination.hpp"

namespace termination = hoist::termination;

TEST_CASE("SIGTERM raises the interrupt and makes the next safe point throw, saying where", "[termination]") {
  termination::install();
  termination::install();  // idempotent
  REQUIRE(termination::installed());
  termination::reset_for_test();
  CHECK(termination::received() == 0);
  CHECK_FALSE(termination::interrupt()->raised());
  CHECK_NOTHROW(hoist::throw_if_interrupted("staging k3s"));

  REQUIRE(::raise(SIGTERM) == 0);  // handled: the test binary lives on
  CHECK(termination::received() == SIGTERM);
  CHECK(termination::received_name() == "SIGTERM");
  CHECK(termination::interrupt()->raised());
  try {
    hoist::throw_if_interrupted("switching k3s");
    FAIL("no throw");
  } catch (const hoist::Interrupted& e) {
    CHECK(std::string(e.what()) == "stopped by SIGTERM before switching k3s");
    CHECK(e.code() == hoist::ExitCode::failed);
  }
  termination::reset_for_test();
  CHECK(termination::received() == 0);
  CHECK_FALSE(termination::interrupt()->raised());

  REQUIRE(::raise(SIGINT) == 0);
  CHECK(termination::received_name() == "SIGINT");
  CHECK_THROWS_WITH(hoist::throw_if_interrupted("restarting k3s.service"),
                    "stopped by SIGINT before restarting k3s.service");
  termination::reset_for_test();
}
