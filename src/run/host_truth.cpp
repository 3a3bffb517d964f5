#include "hoist/run/host_truth.hpp"

#include <spdlog/spdlog.h>

#include "hoist/model/state_update.hpp"

namespace hoist {

bool agree_with_host(Installer& installer, ComponentState& state) {
  const std::string recorded = state.current;
  const std::optional<RollbackIntent> intent = state.rollback;
  const std::optional<SwitchIntent> switching = state.switching;
  switch (reconcile_with_host(state, installer.host_current(state))) {
    case Reconciled::agreed: return false;
    case Reconciled::intent_gone:
      spdlog::info("{}: the rollback from {} to {} that a killed run began never switched", state.component,
                   intent->from, intent->to);
      return true;
    case Reconciled::switch_gone:
      spdlog::info("{}: the switch to {} that an earlier run began is not on the host (stopped before it, or undone)",
                   state.component, switching->to);
      return true;
    case Reconciled::switched:
      if (recorded == state.current) {
        spdlog::warn("{}: a run that repaired {} was stopped before recording it; owing what it owed", state.component,
                     recorded);
        return true;
      }
      spdlog::warn(
          "{}: the state said {}, the host has {}: a run stopped after its switch (killed, or its switch could not be "
          "undone); recording {}",
          state.component, recorded, state.current, state.current);
      return true;
    case Reconciled::rolled_back:
      spdlog::warn("{}: the rollback from {} to {} that a killed run began had switched; recording it", state.component,
                   intent->from, intent->to);
      return true;
  }
  return true;
}

}  // namespace hoist
