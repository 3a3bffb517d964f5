#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace hoist {

/// The labels of one Kubernetes object.
using Labels = std::map<std::string, std::string>;

/// One requirement of a label selector, with the meaning of apimachinery's
/// `labels.Requirement` (which SUC uses to pick nodes).
struct LabelRequirement {
  enum class Operator { in, not_in, exists, does_not_exist };

  std::string key;
  Operator op = Operator::exists;
  std::vector<std::string> values;  ///< sorted; empty for exists and does_not_exist

  /// Whether `labels` satisfy the requirement. `not_in` and `does_not_exist` hold
  /// when the key is absent, as in Kubernetes.
  [[nodiscard]] bool matches(const Labels& labels) const;

  /// The requirement in the syntax of the `labelSelector` query parameter.
  [[nodiscard]] std::string to_string() const;
};

/// A label selector as SUC evaluates a Plan's `spec.nodeSelector`:
/// `metav1.LabelSelectorAsSelector`, where an absent selector selects nothing and
/// an empty one selects everything, plus the requirements SUC adds on top.
class LabelSelector {
 public:
  /// A selector that selects every object.
  static LabelSelector everything() { return LabelSelector(Kind::everything); }
  /// A selector that selects no object (what an absent `nodeSelector` means).
  static LabelSelector nothing() { return LabelSelector(Kind::nothing); }

  /// Parses a `metav1.LabelSelector` (`matchLabels`, `matchExpressions`); JSON null
  /// gives nothing(). Throws hoist::UsageError naming `what` for an unknown
  /// operator, values on Exists/DoesNotExist, no values on In/NotIn, or an empty key:
  /// the same selectors that apimachinery refuses.
  static LabelSelector from_json(const nlohmann::json& selector, const std::string& what);

  /// Adds a requirement (no-op on nothing(), which stays nothing, as in apimachinery).
  LabelSelector& add(LabelRequirement requirement);

  [[nodiscard]] bool matches(const Labels& labels) const;
  [[nodiscard]] bool selects_nothing() const { return m_kind == Kind::nothing; }
  [[nodiscard]] const std::vector<LabelRequirement>& requirements() const { return m_requirements; }

  /// The `labelSelector` query value for a LIST or WATCH, requirements sorted by key
  /// as apimachinery prints them; nullopt for nothing(), which the syntax cannot say.
  [[nodiscard]] std::optional<std::string> to_query() const;

  friend bool operator==(const LabelSelector&, const LabelSelector&) = default;

 private:
  enum class Kind { nothing, everything };  // everything = the conjunction of m_requirements
  explicit LabelSelector(Kind kind) : m_kind(kind) {}

  Kind m_kind;
  std::vector<LabelRequirement> m_requirements;
};

inline bool operator==(const LabelRequirement& a, const LabelRequirement& b) {
  return a.key == b.key && a.op == b.op && a.values == b.values;
}

/// The label SUC puts on a node once it applied `plan`: `plan.upgrade.cattle.io/<plan>`.
std::string plan_label(const std::string& plan);

/// The nodes a Plan applies to, as SUC picks them: the Plan's `spec.nodeSelector`,
/// plus `kubernetes.io/hostname` Exists, plus the plan label NotIn (`disabled`), the
/// opt-out an operator sets on a node. Throws hoist::UsageError for an invalid selector.
LabelSelector plan_node_selector(const nlohmann::json& plan);

}  // namespace hoist
