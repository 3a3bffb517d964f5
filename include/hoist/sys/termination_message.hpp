#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "hoist/util/expected.hpp"

namespace hoist {

/// Where Kubernetes mounts a container's termination message file (the default terminationMessagePath): what
/// a container writes there, `kubectl describe pod` and the pod's status show after it ended, and after its
/// logs are gone.
inline constexpr std::string_view k_termination_message_path = "/dev/termination-log";

/// The kubelet reads at most this many bytes of it.
inline constexpr std::size_t k_termination_message_max = 4096;

/// Replaces the content of the file at `path` with `text`, cut to k_termination_message_max bytes, when that file
/// exists and is a regular file; never creates one (outside a pod there is none). The error is for a debug line:
/// no run's outcome depends on it.
Expected<void> write_termination_message(const std::string& path, std::string_view text);

}  // namespace hoist
