#include <catch2/catch.hpp>

#include <thread>

#include "hoist/util/log_fields.hpp"

using hoist::LogField;
using hoist::LogFields;

TEST_CASE("log fields nest and are gone with their scope") {
  REQUIRE(LogFields::current().empty());
  {
    const LogFields outer{{"component", "app"}, {"phase", "stage"}};
    {
      const LogFields inner{{"files_added", std::uint64_t{3}}};
      CHECK(LogFields::current() ==
            std::vector<LogField>{{"component", "app"}, {"phase", "stage"}, {"files_added", std::uint64_t{3}}});
    }
    CHECK(LogFields::current() == std::vector<LogField>{{"component", "app"}, {"phase", "stage"}});
  }
  CHECK(LogFields::current().empty());
}

TEST_CASE("log fields belong to the thread that set them") {
  const LogFields fields{{"component", "app"}};
  std::size_t seen = 99;
  std::thread([&seen] { seen = LogFields::current().size(); }).join();
  CHECK(seen == 0);
  CHECK(LogFields::current().size() == 1);
}
