#include <CLI/CLI.hpp>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "hoist/model/context.hpp"
#include "hoist/model/state.hpp"
#include "hoist/model/state_update.hpp"
#include "hoist/run/host_truth.hpp"
#include "hoist/util/error.hpp"
#include "hoist/util/text.hpp"

namespace hoist::cli {

namespace {

// Why a component needs an operator, each reason one phrase; none when it is as its last run meant it to be.
// `status` exits 1 when any shown component has one (docs/observability.md, "status").
std::vector<std::string> attention(const ComponentState& state) {
  std::vector<std::string> reasons;
  if (state.last_result) {
    const auto& outcome = state.last_result->outcome;
    if (outcome == outcome::k_failed || outcome == outcome::k_refused || outcome == outcome::k_rolled_back) {
      reasons.push_back("its last run " + std::string(outcome == outcome::k_refused ? "was refused" : "failed"));
    }
  }
  if (!state.owed_restarts.empty()) {
    reasons.emplace_back("restarts are owed");
  }
  if (!state.owed_health_checks.empty()) {
    reasons.emplace_back("health checks are owed");
  }
  if (state.kept_for_datastore) {
    reasons.emplace_back("a failed version is kept for its datastore");
  }
  return reasons;
}

void print_result(const char* label, const LastResult& r) {
  std::printf("  %-9s %s %s %s at %s%s%s\n", label, r.command.c_str(), r.version.c_str(), r.outcome.c_str(),
              r.time.c_str(), r.message.empty() ? "" : ": ", r.message.c_str());
}

void print_text(const ComponentState& state, bool staged_complete) {
  std::printf("%s (%s at %s)\n", state.component.c_str(), state.kind.c_str(), state.destination.c_str());
  std::printf("  current:  %s\n", state.current.empty() ? "(none)" : state.current.c_str());
  if (!state.previous.empty()) {
    std::printf("  previous: %s\n", state.previous.c_str());
  }
  if (state.versions.empty()) {
    std::printf("  kept:     (none)\n");
  }
  for (size_t i = 0; i < state.versions.size(); ++i) {  // oldest first, each with when it was installed
    std::printf("  %-9s %s, installed %s\n", i == 0 ? "kept:" : "", state.versions[i].version.c_str(),
                state.versions[i].installed_at.c_str());
  }
  // The last change apart from the last run: a re-run that changed nothing does not hide when the version came.
  if (state.last_change && state.last_change != state.last_result) {
    print_result("changed:", *state.last_change);
  }
  if (state.last_result) {
    print_result("last:", *state.last_result);
  }
  for (const auto& q : state.quarantined) {
    std::printf("  quarantined: %s since %s (%s)\n", q.version.c_str(), q.since.c_str(), q.reason.c_str());
  }
  if (state.health) {
    const auto& h = *state.health;
    std::printf("  health:   %s %s at %s: %s%s%s\n", h.version.c_str(), h.verdict.c_str(), h.time.c_str(),
                h.check.c_str(), h.check.empty() ? "" : ": ", h.detail.c_str());
  }
  if (!state.owed_health_checks.empty()) {
    std::printf("  checks owed for %s: %s\n", state.current.c_str(), joined(state.owed_health_checks, ", ").c_str());
  }
  for (const auto& snapshot : state.datastore_snapshots) {
    std::printf("  datastore snapshot of %s (before %s, %s): %s, taken at %s\n", snapshot.from.c_str(),
                snapshot.to.c_str(), snapshot.kind.c_str(), snapshot.path.c_str(), snapshot.taken_at.c_str());
  }
  if (state.kept_for_datastore) {
    std::printf("  kept %s since %s, not switched back: %s\n", state.kept_for_datastore->version.c_str(),
                state.kept_for_datastore->since.c_str(), state.kept_for_datastore->reason.c_str());
  }
  if (state.staged) {
    // Never current nor kept: a version `hoist stage` staged for the next switch.
    const auto& staged = *state.staged;
    std::printf("  staged:   %s at %s%s%s, not switched to%s\n", staged.version.c_str(), staged.started_at.c_str(),
                staged.plan.empty() ? "" : " for plan ", staged.plan.c_str(),
                staged_complete ? "" : " (its staging did not complete)");
  }
  if (state.pending_reboot) {
    std::printf("  pending reboot to %s (requested at %s from boot %s)\n", state.pending_reboot->target.c_str(),
                state.pending_reboot->requested_at.c_str(), state.pending_reboot->boot_id.c_str());
  }
  if (const auto reasons = attention(state); !reasons.empty()) {
    std::printf("  needs attention: %s\n", joined(reasons, "; ").c_str());
  }
}

// Empty means null in hoist's JSON outputs: "previous": null as "health": null, never "".
void empty_strings_to_null(nlohmann::json& value) {
  if (value.is_string() && value.get_ref<const std::string&>().empty()) {
    value = nullptr;
  } else if (value.is_structured()) {
    for (auto& item : value) {
      empty_strings_to_null(item);
    }
  }
}

class StatusCommand final : public Command {
 public:
  CLI::App* add_to(CLI::App& app) override {
    CLI::App* sub = app.add_subcommand("status", "show what is installed: components, versions, last result");
    sub->add_option("--component", m_component, "only this component");
    sub->add_flag("--json", m_json, "print JSON");
    sub->footer(
        "Examples:\n"
        "  hoist status\n"
        "  hoist status --component k3s --json\n"
        "  podman run --rm --privileged -v /:/host IMAGE status\n"
        "\n"
        "Exit status:\n"
        "  0  every component shown is as its last run left it, nothing owed\n"
        "  1  a component needs attention: its last run failed or was refused, restarts or health checks are\n"
        "     owed, or a failed version is kept for its datastore (each named under \"needs attention\")\n"
        "  2  bad usage, or --component names no component\n"
        "\n"
        "Files:\n"
        "  /var/lib/hoist/COMPONENT/state.json  what it reads (--state-dir)\n");
    return sub;
  }

  ExitCode run(Context& context) override {
    const StateStore store(context.root(), context.options.state_dir);
    std::vector<ComponentState> states;
    if (!m_component.empty()) {
      auto state = store.load(m_component);
      if (!state) {
        const std::string known = joined(store.components(), ", ");
        throw UsageError("--component: no component '" + m_component + "' in hoist's state (" +
                         (known.empty() ? std::string("none has a state yet") : "components: " + known) + "; " +
                         store.state_dir() + " on the host root " + context.root().path().string() + ")");
      }
      states.push_back(std::move(*state));
    } else {
      for (const auto& name : store.components()) {
        if (auto state = store.load(name)) {
          states.push_back(std::move(*state));
        }
      }
    }
    std::vector<bool> staged_complete;
    for (auto& state : states) {
      // What a killed run switched to and did not record is what the host runs: status says that.
      const InstallTarget target{state.component, parse_component_kind(state.kind), state.destination,
                                 store.state_dir()};
      const auto installer = make_installer(context.root(), target, Durability::syncfs);
      agree_with_host(*installer, state);
      staged_complete.push_back(state.staged && installer->has_complete(state.staged->version));
    }
    bool needs_attention = false;
    for (const auto& state : states) {
      needs_attention = needs_attention || !attention(state).empty();
    }
    if (m_json) {
      // docs/schemas/status.schema.json: its version, then the host's components without their state files' own.
      nlohmann::json out{{"schema_version", 1},
                         {"host_root", context.root().path().string()},
                         {"state_dir", store.state_dir()},
                         {"components", nlohmann::json::array()}};
      for (size_t i = 0; i < states.size(); ++i) {
        auto component = nlohmann::json::parse(to_json_text(states[i]));
        component.erase("schema");  // the state file's format, not this output's
        if (states[i].staged) {
          component["staged"]["complete"] = static_cast<bool>(staged_complete[i]);
        }
        component.emplace("last_change", nullptr);  // none yet, or a state from before it was recorded
        empty_strings_to_null(component);
        component["attention"] = attention(states[i]);
        out["components"].push_back(std::move(component));
      }
      std::printf("%s\n", out.dump(2).c_str());
    } else if (states.empty()) {
      std::printf("no components installed (no state under %s)\n", context.root().display(store.state_dir()).c_str());
    } else {
      for (size_t i = 0; i < states.size(); ++i) {
        print_text(states[i], staged_complete[i]);
      }
    }
    return needs_attention ? ExitCode::failed : ExitCode::ok;
  }

 private:
  std::string m_component;
  bool m_json = false;
};

}  // namespace

std::unique_ptr<Command> make_status_command() {
  return std::make_unique<StatusCommand>();
}

}  // namespace hoist::cli
