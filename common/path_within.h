#ifndef RINGMASTER_COMMON_PATH_WITHIN_H_
#define RINGMASTER_COMMON_PATH_WITHIN_H_

// Whether a path lies inside a directory, by path components after lexical
// normalisation ("/a/b/../c" is "/a/c"; "/data2" is not inside "/data").
// Symbolic links are not followed: a caller that opens the path resolves
// both first (std::filesystem::weakly_canonical). Pure; thread-safe.

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

namespace ringmaster {

inline bool PathWithin(const std::filesystem::path& path, const std::filesystem::path& root) {
  if (!path.is_absolute() || !root.is_absolute()) return false;
  std::filesystem::path p = path.lexically_normal();
  std::filesystem::path r = root.lexically_normal();
  // "/a/b/" normalises to "/a/b/" (an empty last component): drop it.
  if (!r.has_filename() && r != r.root_path()) r = r.parent_path();
  if (!p.has_filename() && p != p.root_path()) p = p.parent_path();
  auto [r_end, p_end] = std::mismatch(r.begin(), r.end(), p.begin(), p.end());
  return r_end == r.end();
}

// PathWithin one of `roots`.
inline bool PathWithinAny(const std::filesystem::path& path, const std::vector<std::string>& roots) {
  return std::any_of(roots.begin(), roots.end(), [&](const std::string& root) { return PathWithin(path, root); });
}

}  // namespace ringmaster

#endif  // RINGMASTER_COMMON_PATH_WITHIN_H_
