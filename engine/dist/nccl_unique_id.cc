#include "engine/dist/nccl_unique_id.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "engine/core/cuda_status.h"
#include "engine/dist/nccl_comm.h"

namespace ringmaster::engine::dist {

std::string NcclUniqueIdKey(const std::string& key_prefix) {
  return key_prefix.empty() ? "nccl_unique_id" : absl::StrCat(key_prefix, "/nccl_unique_id");
}

namespace {

absl::StatusOr<ncclUniqueId> PublishNew(Store& store, const std::string& key) {
  ncclUniqueId id;
  NCCL_RETURN_IF_ERROR(ncclGetUniqueId(&id));
  RETURN_IF_ERROR(Annotate(store.Set(key, std::string(id.internal, sizeof id.internal)),
                           absl::StrCat("publishing the NCCL unique id at ", key)));
  return id;
}

absl::StatusOr<ncclUniqueId> Fetch(Store& store, const std::string& key, absl::Duration timeout) {
  absl::StatusOr<std::string> value = store.Get(key, timeout);
  if (!value.ok()) {
    return Annotate(value.status(),
                    absl::StrCat("waiting ", absl::FormatDuration(timeout),
                                 " for rank 0 to publish the NCCL unique id at ", key));
  }
  ncclUniqueId id;
  if (value->size() != sizeof id.internal) {
    return absl::DataLossError(absl::StrFormat("the NCCL unique id at %s has %d bytes, not %d", key,
                                               value->size(), sizeof id.internal));
  }
  std::memcpy(id.internal, value->data(), sizeof id.internal);
  return id;
}

}  // namespace

absl::StatusOr<ncclUniqueId> ExchangeNcclUniqueId(Store& store, const std::string& key, int rank,
                                                  absl::Duration timeout) {
  return rank == 0 ? PublishNew(store, key) : Fetch(store, key, timeout);
}

}  // namespace ringmaster::engine::dist
