#ifndef RINGMASTER_ENGINE_DATA_DATA_FILE_H_
#define RINGMASTER_ENGINE_DATA_DATA_FILE_H_

// Opening a data set's files. Under a worker, the trainer knows the data root
// its data.path lies beneath (RankContext.data_root, one of the worker's
// --data-roots): every file is opened from the root's descriptor without
// following a symbolic link that leads out of it (common/beneath.h; a
// relative link that stays beneath the root is followed where the kernel has
// openat2, none without it). A link planted in a data directory cannot make a
// trainer read the worker's key, its join token or another user's data.
// `root` empty (a rank started by hand, on its user's own files): the path
// is opened as given. Stateless; thread-safe.

#include <string>

#include "absl/status/statusor.h"
#include "common/beneath.h"

namespace ringmaster::engine {

// Opens `path` for reading. PERMISSION_DENIED naming the path when it is not
// beneath `root` or leads out of it through a link; otherwise the errno
// Status of the open ("open <path>: No such file or directory (errno 2)").
absl::StatusOr<UniqueFd> OpenDataFile(const std::string& path, const std::string& root);

}  // namespace ringmaster::engine

#endif  // RINGMASTER_ENGINE_DATA_DATA_FILE_H_
