#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "hoist/kube/kube_client.hpp"

namespace hoist {

/// How many times one paged LIST starts over after its continue token expired before the 410 is
/// thrown: a server that compacts faster than a client can page keeps failing, and the caller's backoff
/// should take over.
inline constexpr int k_max_list_restarts = 3;

/// The pages of a LIST, apart from the transport so that it can be tested on its own. `fetch` is asked
/// for the first page (token "") and then for the page each continue token names, until a page has
/// none; each page's items go to `on_items` as they arrive, so that a big collection is never held
/// whole in its JSON form. A continued page answered with KubeError `gone` (410 Expired: the server
/// compacted the snapshot the list reads) calls `on_restart`, which must forget the items handed over
/// so far, and starts over from the first page, at most k_max_list_restarts times; then that
/// 410 is thrown, as is one on a first page. A token that repeats the one just used is a bad_response
/// (`doing` begins its message): it would page forever. Returns the list's resourceVersion (the last
/// page's: every page of a list carries the same).
std::string list_pages(const std::function<ObjectList(const std::string& continue_token)>& fetch,
                       const std::function<void(std::vector<nlohmann::json>&& items)>& on_items,
                       const std::function<void(const KubeError& expired)>& on_restart, const std::string& doing);

}  // namespace hoist
