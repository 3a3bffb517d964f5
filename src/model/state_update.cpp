#include "hoist/model/state_update.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <utility>

#include "hoist/util/error.hpp"

namespace hoist {

ComponentState new_state(const ComponentSpec& spec) {
  ComponentState state;
  state.component = spec.name;
  state.kind = std::string(to_string(spec.kind));
  state.destination = spec.destination;
  state.version_scheme = std::string(to_string(spec.version_scheme));
  return state;
}

void check_identity(const ComponentState& state, const ComponentSpec& spec) {
  // "/opt/app/" and "/opt//app" name the destination "/opt/app" names.
  if (state.kind != to_string(spec.kind) ||
      normal_destination(state.destination) != normal_destination(spec.destination)) {
    throw UsageError("component '" + spec.name + "' is installed as kind " + state.kind + " at '" + state.destination +
                     "'; refusing to install it as kind " + std::string(to_string(spec.kind)) + " at '" +
                     spec.destination + "' (use another component name)");
  }
  if (state.version_scheme != to_string(spec.version_scheme)) {
    throw UsageError("component '" + spec.name + "' is installed with version scheme " + state.version_scheme +
                     "; refusing version scheme " + std::string(to_string(spec.version_scheme)));
  }
}

void set_last_result(ComponentState& state, const std::string& command, const std::string& outcome,
                     const std::string& version, const std::string& message) {
  state.last_result = LastResult{command, outcome, version, now_rfc3339(), message};
}

void forget_version(ComponentState& state, const std::string& version) {
  std::erase_if(state.versions, [&](const VersionRecord& record) { return record.version == version; });
}

void record_switch(ComponentState& state, const std::string& version, const std::optional<std::string>& adopted) {
  if (state.current != version) {
    state.previous = state.current;
  }
  if (state.previous.empty() && adopted) {
    state.previous = *adopted;
  }
  if (adopted) {
    forget_version(state, *adopted);
    state.versions.insert(state.versions.begin(), VersionRecord{*adopted, now_rfc3339()});
  }
  state.current = version;
  state.switching.reset();
  std::erase_if(state.quarantined, [&](const QuarantinedVersion& q) { return q.version == version; });
  forget_version(state, version);
  state.versions.push_back(VersionRecord{version, now_rfc3339()});
}

void owe_restarts(ComponentState& state, const std::vector<std::string>& units) {
  for (const auto& unit : units) {
    if (std::find(state.owed_restarts.begin(), state.owed_restarts.end(), unit) == state.owed_restarts.end()) {
      state.owed_restarts.push_back(unit);
    }
  }
}

std::vector<std::string> versions_to_collect(const ComponentState& state, unsigned keep) {
  std::vector<std::string> collected;
  size_t kept = state.versions.size();
  for (const auto& record : state.versions) {
    if (kept <= keep) {
      break;
    }
    if (record.version == state.current || record.version == state.previous) {
      continue;
    }
    collected.push_back(record.version);
    --kept;
  }
  return collected;
}

void record_rollback(ComponentState& state) {
  const RollbackIntent intent = state.rollback.value();
  // The version rolled back to is wanted again (a second rollback goes forward).
  std::erase_if(state.quarantined,
                [&](const QuarantinedVersion& q) { return q.version == intent.from || q.version == intent.to; });
  if (intent.quarantine) {
    state.quarantined.push_back(QuarantinedVersion{
        intent.from, now_rfc3339(), intent.reason.empty() ? "rolled back to " + intent.to : intent.reason});
  }
  state.current = intent.to;
  // A sync's one backup is used up; the links of the other kinds swap.
  state.previous = state.kind == to_string(ComponentKind::sync) ? std::string() : intent.from;
  // This switch's restarts replace what the version it left still owed: they were owed to that version.
  state.owed_restarts = intent.owed_restarts;
  // The checks were owed by the version left; the one switched back to owes none.
  state.owed_health_checks.clear();
  state.rollback.reset();
  ++state.rollbacks;  // hoist_rollbacks_total: every rollback recorded, also one a killed run began
  if (intent.reason.empty()) {
    set_last_result(state, "rollback", outcome::k_succeeded, intent.to);
  }
}

namespace {

// What the switch of a killed run made owed, as its own save would have recorded it.
void owe_switch(ComponentState& state, const SwitchIntent& intent) {
  owe_restarts(state, intent.owed_restarts);
  state.owed_health_checks = intent.owed_health_checks;
}

}  // namespace

Reconciled reconcile_with_host(ComponentState& state, const std::string& host_current) {
  const std::optional<SwitchIntent> switching = std::exchange(state.switching, std::nullopt);
  if (host_current.empty() || host_current == state.current) {
    if (state.rollback) {
      state.rollback.reset();  // killed before its switch: the host never left `from`
      return Reconciled::intent_gone;
    }
    if (switching && !host_current.empty() && switching->to == state.current) {
      // A repair of the current version: whether it switched cannot be told, so what it owes is owed (a restart
      // too many rather than one lost).
      owe_switch(state, *switching);
      return Reconciled::switched;
    }
    return switching ? Reconciled::switch_gone : Reconciled::agreed;
  }
  if (state.rollback && state.rollback->from == state.current && state.rollback->to == host_current) {
    record_rollback(state);
    return Reconciled::rolled_back;
  }
  // An upgrade's switch: the version it switched to becomes current, as its own save would have made it.
  state.rollback.reset();
  state.previous = state.current;
  state.current = host_current;
  const bool kept = std::any_of(state.versions.begin(), state.versions.end(),
                                [&](const VersionRecord& record) { return record.version == host_current; });
  if (!kept) {
    state.versions.push_back(VersionRecord{host_current, now_rfc3339()});
  }
  if (switching && switching->to == host_current) {
    owe_switch(state, *switching);
  }
  return Reconciled::switched;
}

const QuarantinedVersion* find_quarantined(const ComponentState& state, const std::string& version) {
  const auto it = std::find_if(state.quarantined.begin(), state.quarantined.end(),
                               [&](const QuarantinedVersion& q) { return q.version == version; });
  return it == state.quarantined.end() ? nullptr : &*it;
}

void save_failure_record(const StateStore& store, const ComponentState& state) {
  try {
    store.save(state);
  } catch (const std::exception& e) {
    spdlog::warn("could not record the failure in the state of {}: {}", state.component, e.what());
  }
}

}  // namespace hoist
