#include "engine/dist/nccl_unique_id.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "engine/core/cuda_status.h"
#include "engine/dist/nccl_comm.h"

namespace ringmaster::engine::dist {
namespace {

std::string Named(const std::string& communicator) { return absl::StrCat("communicator \"", communicator, "\""); }

absl::StatusOr<ncclUniqueId> PublishNew(UniqueIdExchange& ids, const std::string& communicator) {
  ncclUniqueId id;
  NCCL_RETURN_IF_ERROR(ncclGetUniqueId(&id));
  RETURN_IF_ERROR(Annotate(ids.Publish(communicator, std::string(id.internal, sizeof id.internal)),
                           absl::StrCat("publishing the NCCL unique id of ", Named(communicator))));
  return id;
}

absl::StatusOr<ncclUniqueId> Fetch(UniqueIdExchange& ids, const std::string& communicator, absl::Duration timeout) {
  absl::StatusOr<std::string> value = ids.Fetch(communicator, timeout);
  if (!value.ok()) {
    return Annotate(value.status(), absl::StrCat("waiting ", absl::FormatDuration(timeout),
                                                 " for rank 0 to publish the NCCL unique id of ", Named(communicator)));
  }
  ncclUniqueId id;
  if (value->size() != sizeof id.internal) {
    return absl::DataLossError(absl::StrFormat("the NCCL unique id of %s has %d bytes, not %d", Named(communicator),
                                               value->size(), sizeof id.internal));
  }
  std::memcpy(id.internal, value->data(), sizeof id.internal);
  return id;
}

}  // namespace

absl::StatusOr<ncclUniqueId> ExchangeNcclUniqueId(UniqueIdExchange& ids, const std::string& communicator, int rank,
                                                  absl::Duration timeout) {
  return rank == 0 ? PublishNew(ids, communicator) : Fetch(ids, communicator, timeout);
}

}  // namespace ringmaster::engine::dist
