// libFuzzer target: hoist's option parsing, the first half of `hoist`'s main()
// (CLI11 with every command's options and their checks, the empty-value and
// option-like-value refusals, the naming of an unknown command). The input is
// the command line after "hoist", one word per line ('\n' cannot be in a word
// here; a Plan's args can hold any other byte). Whatever the words, parsing
// ends in one of three ways: a command to run, exit 0 (help, version) or exit 2
// (refused); never an exception or another code.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "hoist/cli/app.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  std::vector<std::string> words{"hoist"};
  for (std::size_t start = 0; start <= input.size();) {
    const std::size_t end = std::min(input.find('\n', start), input.size());
    words.emplace_back(input.substr(start, end - start));
    start = end + 1;
  }
  if (words.size() > 64) {
    return -1;  // a longer line adds nothing a shorter one does not find
  }
  std::vector<char*> argv;
  for (std::string& word : words) {
    argv.push_back(word.data());
  }
  argv.push_back(nullptr);
  const auto code = hoist::cli::parse_command_line(static_cast<int>(words.size()), argv.data());
  if (code && *code != 0 && *code != 2) {
    std::abort();
  }
  return 0;
}
