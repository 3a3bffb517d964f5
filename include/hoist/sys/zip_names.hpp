#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "hoist/util/expected.hpp"

namespace hoist {

/// The names of a zip file's entries as their local headers store them (bytes,
/// whatever the UTF-8 flag says), in the order of the local headers' offsets:
/// the order libarchive's seekable zip reader returns the entries in. Reads the
/// end of central directory record (zip64 too), the central directory and each
/// local header with pread. libarchive converts a name flagged UTF-8 to the
/// locale's charset, which the static binary's C locale cannot hold: it then
/// loses the name, and this gives it back.
/// Fails (EILSEQ) when the file is not a zip whose records can be followed.
Expected<std::vector<std::string>> zip_local_names(int fd, uint64_t file_size);

}  // namespace hoist
