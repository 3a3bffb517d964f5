#pragma once

#include <cstddef>
#include <filesystem>
#include <string>
#include <string_view>

namespace hoist {

/// Reads a whole input file: a path in the container that the user or a file
/// of theirs named (the manifest, a kubeconfig and what it names, SHA256SUMS, a
/// signature, a public key). Refuses what read_file_at() refuses, and a file
/// larger than `max_bytes`. Every failure is bad input: UsageError naming the
/// path, and after it the option that named it when there is one ("(--manifest)").
std::string read_input_file(const std::filesystem::path& path, std::size_t max_bytes, std::string_view option = {});

}  // namespace hoist
