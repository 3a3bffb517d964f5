#include "hoist/run/progress_reporter.hpp"

#include <spdlog/spdlog.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>

namespace hoist {

namespace {

// A terminal redraw ten times a second looks live and costs nothing.
constexpr auto k_bar_interval = std::chrono::milliseconds(100);

uint64_t files_done(const TransferStats& stats) {
  return stats.files_added + stats.files_changed + stats.files_unchanged + stats.files_removed;
}

std::string format_duration(double seconds) {
  const auto total = static_cast<long long>(seconds + 0.5);
  if (total < 60) {
    return fmt::format("{} s", total);
  }
  if (total < 3600) {
    return fmt::format("{}:{:02}", total / 60, total % 60);
  }
  return fmt::format("{}:{:02}:{:02}", total / 3600, (total / 60) % 60, total % 60);
}

int terminal_width(std::FILE* out) {
  winsize size{};
  if (::ioctl(::fileno(out), TIOCGWINSZ, &size) == 0 && size.ws_col > 20) {
    return size.ws_col;
  }
  return 80;
}

}  // namespace

std::string format_bytes(uint64_t bytes) {
  constexpr const char* k_units[] = {"KiB", "MiB", "GiB", "TiB"};
  if (bytes < 1024) {
    return fmt::format("{} B", bytes);
  }
  double value = static_cast<double>(bytes) / 1024.0;
  size_t unit = 0;
  while (value >= 1024.0 && unit + 1 < std::size(k_units)) {
    value /= 1024.0;
    ++unit;
  }
  return fmt::format("{:.1f} {}", value, k_units[unit]);
}

std::string format_progress(const TransferStats& stats, double elapsed_seconds) {
  std::string line = fmt::format("{} files, {}", files_done(stats), format_bytes(stats.bytes_done));
  if (stats.bytes_total > 0) {
    const double fraction =
        std::min(1.0, static_cast<double>(stats.bytes_done) / static_cast<double>(stats.bytes_total));
    line += fmt::format(" of {}{} ({:.0f}%)", stats.bytes_total_estimated ? "about " : "",
                        format_bytes(stats.bytes_total), fraction * 100.0);
  }
  if (elapsed_seconds > 0 && stats.bytes_done > 0) {
    const double rate = static_cast<double>(stats.bytes_done) / elapsed_seconds;
    line += fmt::format(", {}/s", format_bytes(static_cast<uint64_t>(rate)));
    if (stats.bytes_total > stats.bytes_done) {
      line +=
          fmt::format(", {} left", format_duration(static_cast<double>(stats.bytes_total - stats.bytes_done) / rate));
    }
  }
  return line;
}

std::string format_progress_bar(const TransferStats& stats, double elapsed_seconds, int width) {
  std::string tail;
  double fraction = 0;
  if (stats.bytes_total > 0) {
    fraction = std::min(1.0, static_cast<double>(stats.bytes_done) / static_cast<double>(stats.bytes_total));
    tail =
        fmt::format(" {:3.0f}% {} files {}/{}{}", fraction * 100.0, files_done(stats), format_bytes(stats.bytes_done),
                    stats.bytes_total_estimated ? "~" : "", format_bytes(stats.bytes_total));
  } else {
    tail = fmt::format(" {} files {}", files_done(stats), format_bytes(stats.bytes_done));
  }
  if (elapsed_seconds > 0 && stats.bytes_done > 0) {
    const double rate = static_cast<double>(stats.bytes_done) / elapsed_seconds;
    tail += fmt::format(" {}/s", format_bytes(static_cast<uint64_t>(rate)));
    if (stats.bytes_total > stats.bytes_done) {
      tail += " " + format_duration(static_cast<double>(stats.bytes_total - stats.bytes_done) / rate) + " left";
    }
  }
  const int cells = std::clamp(width - static_cast<int>(tail.size()) - 2, 0, 40);
  if (cells < 10) {
    return tail.substr(1, static_cast<size_t>(std::max(0, width)));
  }
  const int filled = static_cast<int>(fraction * cells);
  return "[" + std::string(static_cast<size_t>(filled), '#') + std::string(static_cast<size_t>(cells - filled), '.') +
         "]" + tail;
}

ProgressReporter::ProgressReporter(std::string label, ProgressStyle style, std::FILE* out,
                                   std::chrono::milliseconds log_interval)
    : m_label(std::move(label)),
      m_style(style),
      m_out(out),
      m_interval(log_interval),
      m_start(Clock::now()),
      m_last(m_start) {}

ProgressReporter::~ProgressReporter() {
  finish();
}

void ProgressReporter::update(const TransferStats& stats) {
  const auto now = Clock::now();
  const double elapsed = std::chrono::duration<double>(now - m_start).count();
  if (m_style == ProgressStyle::bar) {
    if (m_drawn && now - m_last < k_bar_interval) {
      return;
    }
    m_last = now;
    const std::string prefix = m_label + " ";
    const int width = terminal_width(m_out) - 1;
    const std::string bar = format_progress_bar(stats, elapsed, width - static_cast<int>(prefix.size()));
    std::fprintf(m_out, "\r%s%s\033[K", prefix.c_str(), bar.c_str());
    std::fflush(m_out);
    m_drawn = true;
  } else if (m_style == ProgressStyle::lines) {
    if (now - m_last < m_interval) {
      return;
    }
    m_last = now;
    spdlog::info("{}: {}", m_label, format_progress(stats, elapsed));
  }
}

void ProgressReporter::finish() {
  if (m_drawn) {
    std::fprintf(m_out, "\r\033[K");
    std::fflush(m_out);
    m_drawn = false;
  }
}

}  // namespace hoist
