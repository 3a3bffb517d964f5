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

/// Where SUC mounts the Secrets a Plan lists without a path of their own, in the Job's container.
inline constexpr std::string_view k_plan_secrets_dir = "/run/system-upgrade/secrets";

/// Whether a message may quote what was read from an input file.
enum class InputQuoting {
  values,  ///< an ordinary file: a refusal quotes the value it refuses
  none,    ///< a file that may hold a secret: a refusal names the file and the field, never a value from it
};

/// How messages may quote what is read from `path` (a path in the container): InputQuoting::none for a file that
/// may hold a secret, because it is, as named or with its links resolved, under k_plan_secrets_dir or
/// /var/run/secrets (the service account), or in a volume the kubelet writes (a Secret at a path the Plan chose, a
/// ConfigMap, a projected volume: a directory on its way holds the kubelet's `..data` link). Whole-value redaction
/// cannot do this job: a refusal may quote a part of a value, or the value escaped.
InputQuoting quoting_for(const std::filesystem::path& path);

/// What a refusal says instead of a value read from `file` when it may not quote it:
/// "(the value is not shown: '<file>' may hold a secret)".
std::string value_not_shown(const std::filesystem::path& file);

}  // namespace hoist
