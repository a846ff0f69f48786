#include "common/metrics_promtool.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

extern char** environ;

namespace ringmaster {
namespace {

std::string FindPromtool() {
  const char* path = std::getenv("PATH");
  std::vector<std::string> dirs = absl::StrSplit(path ? path : "", ':', absl::SkipEmpty());
  dirs.push_back("/usr/bin");
  for (const std::string& dir : dirs) {
    std::string candidate = absl::StrCat(dir, "/promtool");
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

absl::Status Errno(absl::string_view what) {
  return absl::InternalError(absl::StrCat(what, ": ", std::strerror(errno)));
}

// Writes `data` to a new temporary file and returns its path.
absl::StatusOr<std::string> WriteTempFile(const std::string& data) {
  const char* tmpdir = std::getenv("TEST_TMPDIR");
  std::string path = absl::StrCat(tmpdir ? tmpdir : "/tmp", "/promtool_input.XXXXXX");
  const int fd = mkstemp(path.data());
  if (fd < 0) return Errno(absl::StrCat("mkstemp ", path));
  absl::Cleanup close_fd = [fd] { close(fd); };
  for (size_t done = 0; done < data.size();) {
    const ssize_t n = write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      absl::Status s = Errno(absl::StrCat("write ", path));
      unlink(path.c_str());
      return s;
    }
    done += n;
  }
  return path;
}

}  // namespace

absl::StatusOr<PromtoolResult> RunPromtoolCheckMetrics(const std::string& exposition) {
  const std::string promtool = FindPromtool();
  if (promtool.empty()) {
    return absl::NotFoundError(
        "promtool not found on $PATH or in /usr/bin: run scripts/install-deps.sh test "
        "(it installs Debian's prometheus package, which provides /usr/bin/promtool)");
  }
  // promtool reads all of its stdin before it writes anything, but a file as
  // stdin avoids both a writer thread and SIGPIPE should it exit early.
  absl::StatusOr<std::string> input = WriteTempFile(exposition);
  if (!input.ok()) return input.status();
  absl::Cleanup remove_input = [&input] { unlink(input->c_str()); };

  int out_pipe[2];
  if (pipe2(out_pipe, O_CLOEXEC) != 0) return Errno("pipe2");
  absl::Cleanup close_read_end = [&out_pipe] { close(out_pipe[0]); };

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, input->c_str(), O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, out_pipe[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, out_pipe[1], STDERR_FILENO);
  std::vector<std::string> args = {promtool, "check", "metrics"};
  std::vector<char*> argv;
  for (std::string& arg : args) argv.push_back(arg.data());
  argv.push_back(nullptr);
  pid_t pid = -1;
  const int spawn_error =
      posix_spawn(&pid, promtool.c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  close(out_pipe[1]);
  if (spawn_error != 0) {
    return absl::InternalError(
        absl::StrCat("cannot start ", promtool, ": ", std::strerror(spawn_error)));
  }

  PromtoolResult result;
  char buf[4096];
  for (;;) {
    const ssize_t n = read(out_pipe[0], buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    result.output.append(buf, n);
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return Errno("waitpid promtool");
  }
  if (!WIFEXITED(status)) {
    return absl::InternalError(absl::StrCat(promtool, " died (wait status ", status,
                                            "); output: ", result.output));
  }
  result.exit_code = WEXITSTATUS(status);
  return result;
}

}  // namespace ringmaster
