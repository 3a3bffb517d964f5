#pragma once

namespace hoist {

/// Whether the mounts a run writes to are made writable for it (`--remount`, the
/// manifest's `remount`).
enum class Remount { no, yes };

}  // namespace hoist
