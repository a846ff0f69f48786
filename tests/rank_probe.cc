// rank_probe: run by the worker in a rank's place (its --trainer), through
// the worker's real launch path, for rank_isolation_test. It says who it runs
// as, tries to read each "LABEL PATH" line of the file `probe-targets` beside
// it and prints one line per target:
//   probe read LABEL: OK | EACCES | ENOENT | ...
// then checks what a rank must reach (its rank.json, its TMPDIR, the
// worker's agent socket), and finally execs ringmaster-trainer beside it with
// its own arguments, so that the job trains as any other.
//
//   rank_probe --rank-context FILE
#include <dirent.h>
#include <fcntl.h>
#include <grp.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace {

std::string ErrnoName(int e) {
  switch (e) {
    case 0: return "OK";
    case EACCES: return "EACCES";
    case EPERM: return "EPERM";
    case ENOENT: return "ENOENT";
    case ENOTDIR: return "ENOTDIR";
    case ELOOP: return "ELOOP";
    default: return std::string("errno ") + std::to_string(e) + " (" + std::strerror(e) + ")";
  }
}

// 0 when `path` (a file, or a directory: listed) could be read; else errno.
int TryRead(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errno;
  char buf[64];
  ssize_t n = read(fd, buf, sizeof(buf));
  int error = 0;
  if (n < 0 && errno == EISDIR) {
    DIR* dir = fdopendir(fd);
    if (dir == nullptr) {
      error = errno;
      close(fd);
      return error;
    }
    errno = 0;
    if (readdir(dir) == nullptr && errno != 0) error = errno;
    closedir(dir);
    return error;
  }
  if (n < 0) error = errno;
  close(fd);
  return error;
}

std::string StatusLine(const char* key) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key, 0) == 0) {
      std::string value = line.substr(std::strlen(key));
      value.erase(0, value.find_first_not_of(" \t"));
      return value;
    }
  }
  return "?";
}

// The "agent" field of rank.json: "unix:<path>".
std::string AgentSocket(const std::string& context_path) {
  std::ifstream in(context_path);
  std::stringstream text;
  text << in.rdbuf();
  const std::string json = text.str();
  const std::string key = "\"agent\": \"unix:";
  size_t at = json.find(key);
  if (at == std::string::npos) return "";
  size_t end = json.find('"', at + key.size());
  return json.substr(at + key.size(), end - at - key.size());
}

int TryConnect(const std::string& path) {
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return errno;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  int error = connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 ? 0 : errno;
  close(fd);
  return error;
}

}  // namespace

int main(int argc, char** argv) {
  std::string context;
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], "--rank-context") == 0) context = argv[i + 1];
  }
  std::string self = argv[0];
  const std::string dir = self.substr(0, self.rfind('/'));
  std::vector<gid_t> groups(static_cast<size_t>(std::max(getgroups(0, nullptr), 0)));
  groups.resize(static_cast<size_t>(std::max(getgroups(static_cast<int>(groups.size()), groups.data()), 0)));
  std::string group_list;
  for (gid_t g : groups) group_list += (group_list.empty() ? "" : ",") + std::to_string(g);
  std::printf("probe uid=%d euid=%d gid=%d groups=%s no_new_privs=%s cap_eff=%s cap_prm=%s\n", getuid(), geteuid(),
              getgid(), group_list.empty() ? "none" : group_list.c_str(), StatusLine("NoNewPrivs:").c_str(),
              StatusLine("CapEff:").c_str(), StatusLine("CapPrm:").c_str());
  std::ifstream targets(dir + "/probe-targets");
  std::string label, path;
  while (targets >> label >> path) {
    std::printf("probe read %s: %s\n", label.c_str(), ErrnoName(TryRead(path)).c_str());
  }
  std::printf("probe own rank.json: %s\n", ErrnoName(TryRead(context)).c_str());
  const char* tmpdir = std::getenv("TMPDIR");
  std::printf("probe TMPDIR=%s\n", tmpdir ? tmpdir : "");
  std::string tmp_file = std::string(tmpdir ? tmpdir : "/nonexistent") + "/probe.tmp";
  int fd = open(tmp_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  std::printf("probe write TMPDIR: %s\n", ErrnoName(fd < 0 ? errno : 0).c_str());
  if (fd >= 0) close(fd);
  std::printf("probe connect agent socket: %s\n", ErrnoName(TryConnect(AgentSocket(context))).c_str());
  std::fflush(stdout);
  const std::string trainer = dir + "/ringmaster-trainer";
  argv[0] = const_cast<char*>(trainer.c_str());
  execv(trainer.c_str(), argv);
  std::printf("probe cannot exec %s: %s\n", trainer.c_str(), std::strerror(errno));
  return 127;
}
