#include "hoist/kube/list_pager.hpp"

#include "hoist/util/text.hpp"

namespace hoist {

std::string list_pages(const std::function<ObjectList(const std::string& continue_token)>& fetch,
                       const std::function<void(std::vector<nlohmann::json>&& items)>& on_items,
                       const std::function<void(const KubeError& expired)>& on_restart, const std::string& doing) {
  int restarts = 0;
  std::string token;
  for (;;) {
    ObjectList page;
    try {
      page = fetch(token);
    } catch (const KubeError& error) {
      if (error.kind() != KubeError::Kind::gone || token.empty() || restarts == k_max_list_restarts) {
        throw;
      }
      ++restarts;
      on_restart(error);
      token.clear();
      continue;
    }
    on_items(std::move(page.items));
    if (page.continue_token.empty()) {
      return page.resource_version;
    }
    if (page.continue_token == token) {
      throw KubeError(KubeError::Kind::bad_response, 200,
                      doing + ": the server answered continue token " + in_quotes(token) + " with the same token");
    }
    token = std::move(page.continue_token);
  }
}

}  // namespace hoist
