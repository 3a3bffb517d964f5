#include "hoist/kube/yaml_document.hpp"

#include <yaml.h>

#include <memory>
#include <string>

#include <nlohmann/json.hpp>

namespace hoist {

namespace {

// Deeper than any kubeconfig; bounds the recursion on hostile input.
constexpr int k_max_depth = 64;

struct ParserDelete {
  void operator()(yaml_parser_t* parser) const noexcept {
    yaml_parser_delete(parser);
    delete parser;  // NOLINT(cppcoreguidelines-owning-memory)
  }
};
struct DocumentDelete {
  void operator()(yaml_document_t* document) const noexcept {
    yaml_document_delete(document);
    delete document;  // NOLINT(cppcoreguidelines-owning-memory)
  }
};

std::string scalar_text(const yaml_node_t& node) {
  return {reinterpret_cast<const char*>(node.data.scalar.value), node.data.scalar.length};
}

Expected<nlohmann::json> convert(yaml_document_t* document, const yaml_node_t* node, int depth,
                                 std::string_view source) {
  if (node == nullptr) {
    return nlohmann::json();
  }
  if (depth > k_max_depth) {
    return SysError{
        "failed to parse '" + std::string(source) + "': nested deeper than " + std::to_string(k_max_depth) + " levels",
        EINVAL};
  }
  switch (node->type) {
    case YAML_SCALAR_NODE: {
      std::string text = scalar_text(*node);
      if (node->data.scalar.style == YAML_PLAIN_SCALAR_STYLE && (text.empty() || text == "null" || text == "~")) {
        return nlohmann::json();
      }
      return nlohmann::json(std::move(text));
    }
    case YAML_SEQUENCE_NODE: {
      nlohmann::json array = nlohmann::json::array();
      for (yaml_node_item_t* item = node->data.sequence.items.start; item < node->data.sequence.items.top; ++item) {
        auto value = convert(document, yaml_document_get_node(document, *item), depth + 1, source);
        if (!value) {
          return value.error();
        }
        array.push_back(std::move(*value));
      }
      return array;
    }
    case YAML_MAPPING_NODE: {
      nlohmann::json object = nlohmann::json::object();
      for (yaml_node_pair_t* pair = node->data.mapping.pairs.start; pair < node->data.mapping.pairs.top; ++pair) {
        const yaml_node_t* key = yaml_document_get_node(document, pair->key);
        if (key == nullptr || key->type != YAML_SCALAR_NODE) {
          return SysError{"failed to parse '" + std::string(source) + "' line " +
                              std::to_string(node->start_mark.line + 1) + ": a mapping key is not a string",
                          EINVAL};
        }
        auto value = convert(document, yaml_document_get_node(document, pair->value), depth + 1, source);
        if (!value) {
          return value.error();
        }
        object[scalar_text(*key)] = std::move(*value);
      }
      return object;
    }
    case YAML_NO_NODE: break;
  }
  return nlohmann::json();
}

}  // namespace

Expected<nlohmann::json> parse_yaml(std::string_view text, std::string_view source) {
  std::unique_ptr<yaml_parser_t, ParserDelete> parser(new yaml_parser_t{});
  if (yaml_parser_initialize(parser.get()) != 1) {
    return SysError{"failed to set up a YAML parser", ENOMEM};
  }
  yaml_parser_set_input_string(parser.get(), reinterpret_cast<const unsigned char*>(text.data()), text.size());
  auto* raw_document = new yaml_document_t{};  // NOLINT(cppcoreguidelines-owning-memory)
  if (yaml_parser_load(parser.get(), raw_document) != 1) {
    delete raw_document;  // NOLINT(cppcoreguidelines-owning-memory): not initialized on failure
    const char* problem = parser->problem != nullptr ? parser->problem : "unknown error";
    return SysError{"failed to parse '" + std::string(source) + "' line " +
                        std::to_string(parser->problem_mark.line + 1) + " column " +
                        std::to_string(parser->problem_mark.column + 1) + ": " + problem,
                    EINVAL};
  }
  std::unique_ptr<yaml_document_t, DocumentDelete> document(raw_document);
  return convert(document.get(), yaml_document_get_root_node(document.get()), 0, source);
}

}  // namespace hoist
