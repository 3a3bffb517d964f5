#include "hoist/kube/label_selector.hpp"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "hoist/util/error.hpp"

namespace hoist {

namespace {

using Operator = LabelRequirement::Operator;

Operator parse_operator(const std::string& name, const std::string& where) {
  if (name == "In") {
    return Operator::in;
  }
  if (name == "NotIn") {
    return Operator::not_in;
  }
  if (name == "Exists") {
    return Operator::exists;
  }
  if (name == "DoesNotExist") {
    return Operator::does_not_exist;
  }
  throw UsageError(where + ": unknown operator '" + name + "' (expected In, NotIn, Exists or DoesNotExist)");
}

LabelRequirement make_requirement(std::string key, Operator op, std::vector<std::string> values,
                                  const std::string& where) {
  if (key.empty()) {
    throw UsageError(where + ": empty label key");
  }
  const bool takes_values = op == Operator::in || op == Operator::not_in;
  if (takes_values && values.empty()) {
    throw UsageError(where + ": operator on key '" + key + "' needs at least one value");
  }
  if (!takes_values && !values.empty()) {
    throw UsageError(where + ": operator on key '" + key + "' takes no values");
  }
  std::sort(values.begin(), values.end());
  values.erase(std::unique(values.begin(), values.end()), values.end());
  return LabelRequirement{std::move(key), op, std::move(values)};
}

std::string as_string(const nlohmann::json& value, const std::string& where) {
  if (!value.is_string()) {
    throw UsageError(where + ": expected a string, got " + value.dump());
  }
  return value.get<std::string>();
}

}  // namespace

bool LabelRequirement::matches(const Labels& labels) const {
  const auto it = labels.find(key);
  const bool present = it != labels.end();
  switch (op) {
    case Operator::in: return present && std::binary_search(values.begin(), values.end(), it->second);
    case Operator::not_in: return !present || !std::binary_search(values.begin(), values.end(), it->second);
    case Operator::exists: return present;
    case Operator::does_not_exist: return !present;
  }
  return false;
}

std::string LabelRequirement::to_string() const {
  auto joined = [this] {
    std::string text;
    for (const auto& value : values) {
      if (!text.empty()) {
        text += ',';
      }
      text += value;
    }
    return text;
  };
  switch (op) {
    case Operator::in: return key + " in (" + joined() + ")";
    case Operator::not_in: return key + " notin (" + joined() + ")";
    case Operator::exists: return key;
    case Operator::does_not_exist: return "!" + key;
  }
  return key;
}

LabelSelector LabelSelector::from_json(const nlohmann::json& selector, const std::string& what) {
  if (selector.is_null()) {
    return nothing();
  }
  if (!selector.is_object()) {
    throw UsageError(what + ": expected an object, got " + selector.dump());
  }
  LabelSelector result = everything();
  if (const auto labels = selector.find("matchLabels"); labels != selector.end() && !labels->is_null()) {
    if (!labels->is_object()) {
      throw UsageError(what + ".matchLabels: expected an object");
    }
    for (const auto& [key, value] : labels->items()) {
      std::string where = what;
      where.append(".matchLabels.").append(key);
      result.add(make_requirement(key, Operator::in, {as_string(value, where)}, where));
    }
  }
  if (const auto expressions = selector.find("matchExpressions");
      expressions != selector.end() && !expressions->is_null()) {
    if (!expressions->is_array()) {
      throw UsageError(what + ".matchExpressions: expected an array");
    }
    for (size_t i = 0; i < expressions->size(); ++i) {
      const auto& expression = (*expressions)[i];
      const std::string where = what + ".matchExpressions[" + std::to_string(i) + "]";
      if (!expression.is_object()) {
        throw UsageError(where + ": expected an object");
      }
      std::vector<std::string> values;
      if (const auto list = expression.find("values"); list != expression.end() && !list->is_null()) {
        if (!list->is_array()) {
          throw UsageError(where + ".values: expected an array");
        }
        for (const auto& value : *list) {
          values.push_back(as_string(value, where + ".values"));
        }
      }
      result.add(make_requirement(
          as_string(expression.value("key", nlohmann::json()), where + ".key"),
          parse_operator(as_string(expression.value("operator", nlohmann::json()), where + ".operator"), where),
          std::move(values), where));
    }
  }
  return result;
}

LabelSelector& LabelSelector::add(LabelRequirement requirement) {
  if (m_kind == Kind::nothing) {
    return *this;
  }
  // Kept sorted by key (stable for equal keys), as apimachinery does, so that
  // to_query() is canonical and a changed Plan is detected by comparison.
  const auto at = std::upper_bound(m_requirements.begin(), m_requirements.end(), requirement,
                                   [](const auto& a, const auto& b) { return a.key < b.key; });
  m_requirements.insert(at, std::move(requirement));
  return *this;
}

bool LabelSelector::matches(const Labels& labels) const {
  if (m_kind == Kind::nothing) {
    return false;
  }
  return std::all_of(m_requirements.begin(), m_requirements.end(),
                     [&labels](const auto& requirement) { return requirement.matches(labels); });
}

std::optional<std::string> LabelSelector::to_query() const {
  if (m_kind == Kind::nothing) {
    return std::nullopt;
  }
  std::string query;
  for (const auto& requirement : m_requirements) {
    query += (query.empty() ? "" : ",") + requirement.to_string();
  }
  return query;
}

std::string plan_label(const std::string& plan) {
  return "plan.upgrade.cattle.io/" + plan;
}

LabelSelector plan_node_selector(const nlohmann::json& plan) {
  if (!plan.is_object()) {
    throw UsageError("the plan is not a JSON object");
  }
  std::string name;
  if (const auto metadata = plan.find("metadata"); metadata != plan.end() && metadata->is_object()) {
    if (const auto value = metadata->find("name"); value != metadata->end() && value->is_string()) {
      name = value->get<std::string>();
    }
  }
  const nlohmann::json* spec_selector = nullptr;
  if (const auto spec = plan.find("spec"); spec != plan.end() && spec->is_object()) {
    if (const auto selector = spec->find("nodeSelector"); selector != spec->end()) {
      spec_selector = &*selector;
    }
  }
  LabelSelector selector = LabelSelector::from_json(spec_selector ? *spec_selector : nlohmann::json(),
                                                    "plan '" + name + "' spec.nodeSelector");
  selector.add(LabelRequirement{"kubernetes.io/hostname", LabelRequirement::Operator::exists, {}});
  selector.add(LabelRequirement{plan_label(name), LabelRequirement::Operator::not_in, {"disabled"}});
  return selector;
}

}  // namespace hoist
