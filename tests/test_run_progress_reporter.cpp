#include <algorithm>
#include <catch2/catch.hpp>

#include "hoist/run/progress_reporter.hpp"

using hoist::format_bytes;
using hoist::format_progress;
using hoist::format_progress_bar;
using hoist::TransferStats;

TEST_CASE("bytes are shown in binary units with one decimal", "[progress]") {
  CHECK(format_bytes(0) == "0 B");
  CHECK(format_bytes(1023) == "1023 B");
  CHECK(format_bytes(1536) == "1.5 KiB");
  CHECK(format_bytes(300ULL << 20U) == "300.0 MiB");
  CHECK(format_bytes(3ULL << 40U) == "3.0 TiB");
}

TEST_CASE("a progress line has files, bytes of the total, rate and time left", "[progress]") {
  TransferStats stats;
  stats.files_added = 1000;
  stats.files_unchanged = 200;
  stats.bytes_done = 120ULL << 20U;
  stats.bytes_total = 300ULL << 20U;
  CHECK(format_progress(stats, 2.0) == "1200 files, 120.0 MiB of 300.0 MiB (40%), 60.0 MiB/s, 3 s left");
  // The installed version's size standing for the payload's (its content index's).
  stats.bytes_total_estimated = true;
  CHECK(format_progress(stats, 2.0) == "1200 files, 120.0 MiB of about 300.0 MiB (40%), 60.0 MiB/s, 3 s left");
  stats.bytes_total = 0;
  CHECK(format_progress(stats, 2.0) == "1200 files, 120.0 MiB, 60.0 MiB/s");
  CHECK(format_progress(TransferStats{}, 0) == "0 files, 0 B");
}

TEST_CASE("the bar fills with the fraction done and fits the width", "[progress]") {
  TransferStats stats;
  stats.files_added = 10;
  stats.bytes_done = 50;
  stats.bytes_total = 100;
  const std::string bar = format_progress_bar(stats, 1.0, 80);
  REQUIRE(bar.starts_with("["));
  const auto close = bar.find(']');
  CHECK(bar.substr(close) == "]  50% 10 files 50 B/100 B 50 B/s 1 s left");
  const std::string cells = bar.substr(1, close - 1);
  CHECK(std::count(cells.begin(), cells.end(), '#') == static_cast<long>(cells.size() / 2));
  CHECK(bar.size() <= 80);
  CHECK(format_progress_bar(stats, 1.0, 30).size() <= 30);
  stats.bytes_total_estimated = true;
  const std::string estimated = format_progress_bar(stats, 1.0, 80);
  CHECK(estimated.substr(estimated.find(']')) == "]  50% 10 files 50 B/~100 B 50 B/s 1 s left");
}
