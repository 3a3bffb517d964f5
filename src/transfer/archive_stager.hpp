#pragma once

// Internal to the transfer engine: stage_tree() for archive payloads.

#include "hoist/transfer/transfer.hpp"

namespace hoist::transfer {

/// stage_tree() of an archive: entries streamed straight into `staging_dir`,
/// each name checked before anything is written for it.
TransferStats stage_archive(const Payload& payload, int staging_dir, int link_dest, const TransferOptions& options);

}  // namespace hoist::transfer
