#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include <CLI/CLI.hpp>

namespace hoist::cli {

/// The "Exit status:" section of the help of a command that changes the host (DESIGN's exit codes).
inline constexpr const char* k_exit_status_help =
    "Exit status:\n"
    "  0  done, or already at the target\n"
    "  1  failed: the host is on the old version (docs/how-it-works.md says where it cannot be)\n"
    "  2  bad usage or bad input (the message names the option or file)\n"
    "  3  refused by the version gate: a downgrade, a skipped minor, a quarantined version\n"
    "  4  the lock was not taken within --lock-timeout\n"
    "  5  the payload did not verify: checksum, signature, extension-release\n";

/// The "Environment:" and "Files:" sections of the help of a command that changes the host.
inline constexpr const char* k_environment_help =
    "Environment:\n"
    "  SYSTEM_UPGRADE_PLAN_LATEST_VERSION  the version when --version is not given (a SUC Job's)\n"
    "  SYSTEM_UPGRADE_PLAN_NAME            the Plan the run belongs to (a SUC Job's)\n"
    "  HOIST_TERMINATION_MESSAGE_PATH      the outcome's file (default: /dev/termination-log)\n"
    "\n"
    "Files:\n"
    "  /var/lib/hoist/COMPONENT/state.json  what is installed, staged and owed (--state-dir)\n"
    "  /run/hoist/hoist.lock                one run at a time (--lock-file)\n";

/// The width help is wrapped to: the terminal's columns when stdout is one, else $COLUMNS, else 80; within
/// 40..200.
std::size_t help_width();

/// `text` wrapped to `width` columns at spaces, each line after the first indented by `indent` spaces (a word
/// longer than a line stands alone). Newlines in `text` are kept as paragraph breaks, each wrapped alike.
std::string wrap_text(std::string_view text, std::size_t width, std::size_t indent);

/// Help that reads like a tool's: each option's value named by what it takes (`--keep N (default: 3)`,
/// `--reboot never|if-needed|always`), never by CLI11's type tags, and its description wrapped to help_width().
class HelpFormatter final : public CLI::Formatter {
 public:
  HelpFormatter();
  std::string make_option(const CLI::Option* option, bool is_positional) const override;
  std::string make_option_opts(const CLI::Option* option) const override;
  std::string make_description(const CLI::App* app) const override;
  std::string make_subcommand(const CLI::App* sub) const override;
  std::string make_footer(const CLI::App* app) const override;

 private:
  std::size_t m_width;
};

/// The option of `app` (or of its parents, whose options a subcommand also takes) whose name is closest to
/// `word` (`--destinaton` → `--destination`), or "" when none is close: at most 2 edits, or a prefix of one.
std::string closest_option(const CLI::App& app, std::string_view word);

/// Of `names`, the one closest to `word` by closest_option()'s rule, or "".
std::string closest_word(std::string_view word, const std::vector<std::string>& names);

/// The option of `app` (or of one of its parents) named `name` (`--component`, `-n`), or nullptr.
const CLI::Option* find_option(const CLI::App& app, const std::string& name);

/// Checks of a number in hoist's words (`--keep: expects a whole number of 1 or more, not '0'`), in place of CLI11's
/// own, which print their bounds as doubles (`Value 0 not in range 0.000000 to 1797...`, 309 digits) and leave a
/// value that is not a whole number to a conversion error (`Could not convert: --health-settle = 1.5`).
/// whole_number_in(): digits only, within [min, max]; with RangeInHelp::yes the help shows the range (`N (1-64)`).
enum class RangeInHelp { no, yes };
CLI::Validator whole_number_in(std::uint64_t min, std::uint64_t max, RangeInHelp shown);
/// A whole number from `min` to `max`, shown in the help.
inline CLI::Validator whole_number(std::uint64_t min, std::uint64_t max) {
  return whole_number_in(min, max, RangeInHelp::yes);
}
/// A whole number of `min` or more that the option's type `T` holds: a larger one is refused with T's bound
/// (`--keep: expects a whole number from 1 to 4294967295, not '5000000000'`), not left to CLI11's conversion.
template <typename T>
CLI::Validator whole_number(std::uint64_t min) {
  return whole_number_in(min, std::numeric_limits<T>::max(), RangeInHelp::no);
}
/// One of `words`, in hoist's words (`--reboot: expects never, if-needed, always or delegate, not 'sometimes'`) in
/// place of CLI11's IsMember (`sometimes not in {never,if-needed,always,delegate}`); the help lists them as
/// `never|if-needed|always|delegate`.
CLI::Validator one_of(const std::vector<std::string>& words);
/// A decimal number (`0.5`, `30`) above 0, or of 0 or more with Zero::allowed: seconds to wait.
enum class Zero { allowed, refused };
CLI::Validator number_of_seconds(Zero zero);

}  // namespace hoist::cli
