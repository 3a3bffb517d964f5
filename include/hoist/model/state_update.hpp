#pragma once

#include <optional>
#include <string>
#include <vector>

#include "hoist/model/component.hpp"
#include "hoist/model/state.hpp"

namespace hoist {

/// The outcomes recorded in LastResult::outcome.
namespace outcome {
inline constexpr const char* k_succeeded = "succeeded";
inline constexpr const char* k_unchanged = "unchanged";
inline constexpr const char* k_failed = "failed";
inline constexpr const char* k_refused = "refused";
}  // namespace outcome

/// The state of a component hoist has not installed yet: its identity, nothing current.
ComponentState new_state(const ComponentSpec& spec);

/// Refuses (UsageError) a spec that names an installed component with another
/// kind or destination: the versions on the host belong to the old ones.
void check_identity(const ComponentState& state, const ComponentSpec& spec);

/// Sets the last result, stamped now.
void set_last_result(ComponentState& state, const std::string& command, const std::string& outcome,
                     const std::string& version, const std::string& message = {});

/// Records a switch to `version`: the old current becomes previous (unless it is
/// `version` itself), `version` moves to the end of the kept versions with the
/// time now; `adopted` (the pre-hoist file kept by the file kind) becomes
/// previous when nothing was current.
void record_switch(ComponentState& state, const std::string& version, const std::optional<std::string>& adopted);

/// The versions that `--keep keep` removes, oldest first: the oldest beyond
/// `keep`, never the current or the previous one.
std::vector<std::string> versions_to_collect(const ComponentState& state, unsigned keep);

/// Removes `version` from the kept versions.
void forget_version(ComponentState& state, const std::string& version);

/// Saves a state that records a failure: a state directory that cannot be
/// written is logged, not thrown, so that the original error is what the run
/// reports.
void save_failure_record(const StateStore& store, const ComponentState& state);

}  // namespace hoist
