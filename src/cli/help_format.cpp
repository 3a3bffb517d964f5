#include "help_format.hpp"

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

namespace hoist::cli {

namespace {

// The first column: the option's names and what it takes.
constexpr std::size_t k_first_column = 30;

std::size_t clamp_width(long columns) {
  return static_cast<std::size_t>(std::clamp(columns, 40L, 200L));
}

// What an option's value is called, from what CLI11 knows of it: a set of words as they are (`never|if-needed`),
// a number as N (with its range), anything else by the option's own name (`--source SOURCE`).
std::string value_name(const CLI::Option* option) {
  std::string type = option->get_type_name();
  const std::size_t set = type.find('{');
  if (set != std::string::npos && type.find('}', set) != std::string::npos) {
    std::string words = type.substr(set + 1, type.find('}', set) - set - 1);
    std::replace(words.begin(), words.end(), ',', '|');
    return words;
  }
  const std::string base = type.substr(0, type.find(':'));
  if (base == "UINT" || base == "INT" || base == "FLOAT" || base == "NUMBER") {
    const std::size_t range = type.find(" in [");
    if (range != std::string::npos) {
      std::string bounds = type.substr(range + 5, type.find(']', range) - range - 5);
      bounds.erase(std::remove(bounds.begin(), bounds.end(), ' '), bounds.end());
      return "N (" + bounds + ")";
    }
    return "N";
  }
  std::string name = option->get_lnames().empty() ? option->get_name() : option->get_lnames().front();
  std::transform(name.begin(), name.end(), name.begin(),
                 [](unsigned char c) { return c == '-' ? '_' : static_cast<char>(std::toupper(c)); });
  return name;
}

// Edits (insert, delete, replace, swap of neighbours) between two short words.
std::size_t distance(std::string_view a, std::string_view b) {
  std::vector<std::vector<std::size_t>> d(a.size() + 1, std::vector<std::size_t>(b.size() + 1));
  for (std::size_t i = 0; i <= a.size(); ++i) {
    d[i][0] = i;
  }
  for (std::size_t j = 0; j <= b.size(); ++j) {
    d[0][j] = j;
  }
  for (std::size_t i = 1; i <= a.size(); ++i) {
    for (std::size_t j = 1; j <= b.size(); ++j) {
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[a.size()][b.size()];
}

// Every name of every option `app` takes: its own, then its parents' (global options come through).
std::vector<std::string> option_names(const CLI::App& app) {
  std::vector<std::string> names;
  for (const CLI::App* level = &app; level != nullptr; level = level->get_parent()) {
    for (const CLI::Option* option : level->get_options({})) {
      for (const auto& name : option->get_lnames()) {
        names.push_back("--" + name);
      }
      for (const auto& name : option->get_snames()) {
        names.push_back("-" + name);
      }
    }
  }
  return names;
}

}  // namespace

std::size_t help_width() {
  struct winsize size {};
  if (::isatty(STDOUT_FILENO) != 0 && ::ioctl(STDOUT_FILENO, TIOCGWINSZ, &size) == 0 && size.ws_col > 0) {
    return clamp_width(size.ws_col);
  }
  if (const char* columns = std::getenv("COLUMNS"); columns != nullptr && *columns != '\0') {
    char* end = nullptr;
    const long value = std::strtol(columns, &end, 10);
    if (end != nullptr && *end == '\0' && value > 0) {
      return clamp_width(value);
    }
  }
  return 80;
}

std::string wrap_text(std::string_view text, std::size_t width, std::size_t indent) {
  std::string out;
  std::size_t column = 0;
  const std::string pad(indent, ' ');
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t end = std::min(text.find('\n', start), text.size());
    std::istringstream words{std::string(text.substr(start, end - start))};
    std::string word;
    bool first = true;
    while (words >> word) {
      if (!first && column + 1 + word.size() > width) {
        out += "\n" + pad;
        column = indent;
      } else if (!first) {
        out += ' ';
        ++column;
      }
      out += word;
      column += word.size();
      first = false;
    }
    if (end >= text.size()) {
      break;
    }
    out += "\n" + pad;
    column = indent;
    start = end + 1;
  }
  return out;
}

HelpFormatter::HelpFormatter() : m_width(help_width()) {
  column_width(k_first_column);
}

std::string HelpFormatter::make_option_opts(const CLI::Option* option) const {
  if (option->get_items_expected_max() == 0) {
    return {};  // a flag
  }
  if (!option->get_option_text().empty()) {
    return " " + option->get_option_text();
  }
  std::string text = " " + value_name(option);
  if (!option->get_default_str().empty()) {
    text += " (default: " + option->get_default_str() + ")";
  }
  if (option->get_required()) {
    text += " (required)";
  }
  return text;
}

namespace {

// `first`, then `text` wrapped in the column from `column` to `width` (on the next line when `first` reaches it).
std::string two_columns(const std::string& first, const std::string& text, std::size_t width,
                        std::size_t column = k_first_column) {
  const std::string description = wrap_text(text, width > column + 20 ? width - column : 20, 0);
  std::string out;
  if (first.size() + 2 > column) {
    out = first + "\n" + std::string(column, ' ');
  } else {
    out = first + std::string(column - first.size(), ' ');
  }
  // Each line of the wrapped description after the first is indented to the column.
  for (char c : description) {
    out += c;
    if (c == '\n') {
      out += std::string(column, ' ');
    }
  }
  return out + "\n";
}

}  // namespace

std::string HelpFormatter::make_option(const CLI::Option* option, bool is_positional) const {
  return two_columns(
      "  " + make_option_name(option, is_positional) + (is_positional ? std::string() : make_option_opts(option)),
      make_option_desc(option), m_width);
}

std::string HelpFormatter::make_subcommand(const CLI::App* sub) const {
  return two_columns("  " + sub->get_display_name(), sub->get_description(), m_width);
}

std::string HelpFormatter::make_description(const CLI::App* app) const {
  const std::string& description = app->get_description();
  return description.empty() ? std::string() : wrap_text(description, m_width, 0) + "\n";
}

std::string HelpFormatter::make_footer(const CLI::App* app) const {
  // Headings ("Exit status:") as written, and the lines under "Examples:" (commands, which a shell reads as
  // written). Under the others, an entry "  KEY  TEXT" (with the deeper-indented lines after it, which continue
  // TEXT) has TEXT wrapped in its own column; every other line is a paragraph, wrapped.
  const std::string& footer = app->get_footer();
  if (footer.empty()) {
    return {};
  }
  std::vector<std::string> lines;
  std::istringstream in(footer);
  for (std::string line; std::getline(in, line);) {
    lines.push_back(line);
  }
  const auto continues = [](const std::string& line) { return line.starts_with("   "); };
  std::string out = "\n";
  bool examples = false;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    const std::string& line = lines[i];
    if (line.empty() || line.front() != ' ') {
      examples = line.empty() ? examples : line == "Examples:";
      out += (line.empty() || line.back() == ':' ? line : wrap_text(line, m_width, 0)) + "\n";
      continue;
    }
    const std::size_t gap = line.find("  ", 2);
    const std::size_t column = gap == std::string::npos ? std::string::npos : line.find_first_not_of(' ', gap);
    if (examples || continues(line) || column == std::string::npos) {
      out += line + "\n";
      continue;
    }
    std::string text = line.substr(column);
    while (i + 1 < lines.size() && continues(lines[i + 1])) {
      ++i;
      text += " " + lines[i].substr(lines[i].find_first_not_of(' '));
    }
    out += two_columns(line.substr(0, gap), text, m_width, column);
  }
  return out;
}

std::string closest_option(const CLI::App& app, std::string_view word) {
  return closest_word(word, option_names(app));
}

std::string closest_word(std::string_view word, const std::vector<std::string>& names) {
  std::string best;
  std::size_t best_distance = 3;
  for (const std::string& name : names) {
    if (name.size() > 2 && name.starts_with(word) && word.size() > 3) {
      return name;  // an abbreviation
    }
    if (const std::size_t d = distance(word, name); d < best_distance) {
      best = name;
      best_distance = d;
    }
  }
  return best;
}

const CLI::Option* find_option(const CLI::App& app, const std::string& name) {
  for (const CLI::App* level = &app; level != nullptr; level = level->get_parent()) {
    if (const CLI::Option* option = level->get_option_no_throw(name); option != nullptr) {
      return option;
    }
  }
  return nullptr;
}

CLI::Validator whole_number_in(std::uint64_t min, std::uint64_t max, RangeInHelp shown) {
  const std::string bounded = "from " + std::to_string(min) + " to " + std::to_string(max);
  const std::string open = "of " + std::to_string(min) + " or more";
  auto check = [min, max, shown, bounded, open](const std::string& value) -> std::string {
    std::uint64_t number = 0;
    const char* end = value.data() + value.size();
    const auto [at, error] = std::from_chars(value.data(), end, number);
    const bool digits =
        !value.empty() && std::all_of(value.begin(), value.end(), [](unsigned char c) { return std::isdigit(c) != 0; });
    if (!digits || at != end || error != std::errc() || number < min || number > max) {
      // Past the type's bound, that bound is what the value missed.
      const bool too_big = digits && (error == std::errc::result_out_of_range || number > max);
      return "expects a whole number " + (shown == RangeInHelp::yes || too_big ? bounded : open) + ", not '" + value +
             "'";
    }
    return {};
  };
  // The description CLI11 gives its own Range: what the help reads the bounds from (value_name()).
  return {check, shown == RangeInHelp::yes ? "UINT in [" + std::to_string(min) + " - " + std::to_string(max) + "]" : "",
          "whole number"};
}

CLI::Validator one_of(const std::vector<std::string>& words) {
  std::string listed;
  std::string set;
  for (std::size_t i = 0; i < words.size(); ++i) {
    listed += (i == 0 ? "" : i + 1 == words.size() ? " or " : ", ") + words[i];
    set += (i == 0 ? "" : ",") + words[i];
  }
  auto check = [words, listed](const std::string& value) -> std::string {
    if (std::find(words.begin(), words.end(), value) != words.end()) {
      return {};
    }
    const std::string close = closest_word(value, words);
    return "expects " + listed + ", not '" + value + "'" + (close.empty() ? "" : " (did you mean '" + close + "'?)");
  };
  // The description IsMember gives: what the help reads the words from (value_name()).
  return {check, "{" + set + "}", "one of"};
}

CLI::Validator number_of_seconds(Zero zero) {
  auto check = [zero](const std::string& value) -> std::string {
    char* end = nullptr;
    const double number = value.empty() ? NAN : std::strtod(value.c_str(), &end);
    const bool whole =
        end != nullptr && *end == '\0' && std::isfinite(number) &&
        std::all_of(value.begin(), value.end(), [](unsigned char c) { return std::isdigit(c) != 0 || c == '.'; });
    if (!whole || number < 0 || (zero == Zero::refused && number == 0)) {
      return std::string("expects a number of seconds ") + (zero == Zero::refused ? "above 0" : "of 0 or more") +
             ", not '" + value + "'";
    }
    return {};
  };
  return {check, "", "seconds"};
}

}  // namespace hoist::cli
