#include "hoist/model/state_update.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <utility>

#include "hoist/model/version.hpp"
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
  // A staging changes nothing the component runs; an upgrade, a rollback or a switch back that ended does.
  if (command != "stage" && (outcome == outcome::k_succeeded || outcome == outcome::k_rolled_back)) {
    state.last_change = state.last_result;
  }
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
  state.kept_for_datastore.reset();  // a switch of any kind ends what a kept version waited for
  // What was staged ahead of this switch is now current, no longer staged.
  if (state.staged && state.staged->version == version) {
    state.staged.reset();
  }
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

namespace {

bool is_quarantined(const ComponentState& state, const std::string& version) {
  return find_quarantined(state, version) != nullptr;
}

// "1.0.0, 1.1.0 (quarantined)": the kept versions, for a message.
std::string kept_list(const ComponentState& state) {
  std::string kept;
  for (const auto& record : state.versions) {
    kept +=
        (kept.empty() ? "" : ", ") + record.version + (is_quarantined(state, record.version) ? " (quarantined)" : "");
  }
  return kept.empty() ? "none" : kept;
}

// Whether `version` is older than `current` by `scheme`. `pre-hoist`, what was there before hoist, is older than
// every version; a text the scheme does not read (a state edited by hand) is older than nothing.
bool older(VersionScheme scheme, const std::string& version, const std::string& current) {
  if (current == k_pre_hoist_version || version == current) {
    return false;
  }
  if (version == k_pre_hoist_version) {
    return true;
  }
  try {
    return Version::parse(scheme, version) < Version::parse(scheme, current);
  } catch (const UsageError&) {
    return false;
  }
}

}  // namespace

std::vector<std::string> versions_to_collect(const ComponentState& state, unsigned keep) {
  auto never_collected = [&](const std::string& version) {
    return version == state.current || version == state.previous ||
           (state.last_rollback && version == state.last_rollback->to);
  };
  size_t good = 0;
  for (const auto& record : state.versions) {
    good += is_quarantined(state, record.version) ? 0 : 1;
  }
  size_t total = state.versions.size();
  std::vector<std::string> collected;
  // The quarantined first: no rollback goes to one by itself, and none displaces a version that is not.
  for (const auto& record : state.versions) {
    if (total > keep && is_quarantined(state, record.version) && !never_collected(record.version)) {
      collected.push_back(record.version);
      --total;
    }
  }
  for (const auto& record : state.versions) {
    if (good > keep && !is_quarantined(state, record.version) && !never_collected(record.version)) {
      collected.push_back(record.version);
      --good;
    }
  }
  return collected;
}

std::string walk_back_target(const ComponentState& state) {
  if (state.current.empty() || (state.kind == to_string(ComponentKind::sync) && state.previous.empty())) {
    throw UsageError("component '" + state.component + "' has no previous version to roll back to");
  }
  const VersionScheme scheme = parse_version_scheme(state.version_scheme);
  if (state.kind == to_string(ComponentKind::sync)) {
    const std::string why = !older(scheme, state.previous, state.current) ? "which is not older than " + state.current
                            : is_quarantined(state, state.previous)       ? "which is quarantined"
                                                                          : "";
    if (!why.empty()) {
      throw UsageError("cannot roll back " + state.component + ": a sync component keeps one backup, of " +
                       state.previous + ", " + why + " (--to " + state.previous + " restores it)");
    }
    return state.previous;
  }
  const VersionRecord* newest = nullptr;
  for (const auto& record : state.versions) {
    if (older(scheme, record.version, state.current) && !is_quarantined(state, record.version) &&
        (newest == nullptr || older(scheme, newest->version, record.version))) {
      newest = &record;
    }
  }
  if (newest == nullptr) {
    throw UsageError("component '" + state.component + "' has no kept version older than " + state.current +
                     " that is not quarantined to roll back to (kept: " + kept_list(state) +
                     "); --to VERSION names one");
  }
  return newest->version;
}

bool rolled_back_by_plan(const ComponentState& state, const std::string& plan, const std::string& plan_hash) {
  return state.last_rollback && !plan.empty() && !plan_hash.empty() && state.last_rollback->plan == plan &&
         state.last_rollback->plan_hash == plan_hash;
}

void record_rollback(ComponentState& state) {
  const RollbackIntent intent = state.rollback.value();
  // The version rolled back to is wanted again: a rollback never lands on a quarantined version.
  std::erase_if(state.quarantined,
                [&](const QuarantinedVersion& q) { return q.version == intent.from || q.version == intent.to; });
  if (intent.quarantine) {
    state.quarantined.push_back(QuarantinedVersion{
        intent.from, now_rfc3339(), intent.reason.empty() ? "rolled back to " + intent.to : intent.reason});
  }
  state.current = intent.to;
  state.kept_for_datastore.reset();
  // A sync's one backup is used up; the links of the other kinds swap.
  state.previous = state.kind == to_string(ComponentKind::sync) ? std::string() : intent.from;
  // This switch's restarts replace what the version it left still owed: they were owed to that version.
  state.owed_restarts = intent.owed_restarts;
  // The checks were owed by the version left; the one switched back to owes none.
  state.owed_health_checks.clear();
  state.last_rollback = RollbackRecord{intent.from, intent.to, now_rfc3339(), intent.plan, intent.plan_hash};
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
  // A version staged ahead and switched to is current, no longer staged.
  if (state.staged && state.staged->version == host_current) {
    state.staged.reset();
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
