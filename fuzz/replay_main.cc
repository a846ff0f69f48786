// The test suite's fuzzing driver: a main() for a libFuzzer target built
// with gcc (no -fsanitize=fuzzer). It replays every file of the corpus
// directories given on the command line, then runs a bounded number of
// deterministic mutations of them (bit flips, byte sets, inserts, erases,
// duplications, splices between entries, and inserted protobuf fields), and
// reports how many inputs ran. A crash, a CHECK failure or a sanitizer report
// ends the process (the test fails); the input that caused it is written to
// $TEST_UNDECLARED_OUTPUTS_DIR (else the current directory) as
// crash-<target>-<n> and printed as hex, to be added to the corpus.
//
//   <target> [--runs=N] [--max_seconds=S] [--timeout=T] [--seed=K]
//            [--replay_only=DIR_OR_FILE]... DIR_OR_FILE...
//
// --replay_only entries (fuzz/corpus/<target>.oversized/: inputs that
// inflate requests to megabytes, fuzz_input.h) are replayed but not
// mutated, so that the bounded mutations stay fast;
// --runs bounds the mutations (default 2000); --max_seconds stops earlier
// on a slow machine (default 30; a bound, not an expectation); one input
// running longer than --timeout seconds (default 20) is reported as a hang. Long runs
// with coverage feedback use libFuzzer itself: scripts/fuzz.sh.

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <thread>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) __attribute__((weak));
extern "C" void __sanitizer_set_death_callback(void (*callback)()) __attribute__((weak));

namespace {

constexpr size_t kMaxInputBytes = 64 << 10;

// The input being run, for the crash handlers (written before each run).
const std::string* g_current = nullptr;
char g_crash_path[4096];

void WriteAll(int fd, const char* p, size_t n) {
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w <= 0) return;
    p += w;
    n -= static_cast<size_t>(w);
  }
}

// Async-signal-safe: open/write/close only.
void DumpCurrentInput() {
  if (g_current == nullptr) return;
  const int fd = ::open(g_crash_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd >= 0) {
    WriteAll(fd, g_current->data(), g_current->size());
    ::close(fd);
  }
  static const char kHex[] = "0123456789abcdef";
  const char header[] = "\n==fuzz== the crashing input was written to ";
  WriteAll(2, header, sizeof(header) - 1);
  WriteAll(2, g_crash_path, std::strlen(g_crash_path));
  const char hex_header[] = "\n==fuzz== input (hex, first 512 bytes): ";
  WriteAll(2, hex_header, sizeof(hex_header) - 1);
  const size_t n = std::min<size_t>(g_current->size(), 512);
  for (size_t i = 0; i < n; ++i) {
    const unsigned char c = static_cast<unsigned char>((*g_current)[i]);
    const char pair[2] = {kHex[c >> 4], kHex[c & 15]};
    WriteAll(2, pair, 2);
  }
  WriteAll(2, "\n", 1);
}

void OnFatalSignal(int sig) {
  DumpCurrentInput();
  g_current = nullptr;
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}

void InstallCrashHandlers(const std::string& target) {
  const char* dir = std::getenv("TEST_UNDECLARED_OUTPUTS_DIR");
  std::snprintf(g_crash_path, sizeof(g_crash_path), "%s/crash-%s-%d", dir != nullptr ? dir : ".", target.c_str(),
                static_cast<int>(::getpid()));
  // A sanitizer reports SEGV and its own errors, then calls the callback.
  if (__sanitizer_set_death_callback != nullptr) {
    __sanitizer_set_death_callback(DumpCurrentInput);
  } else {
    for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL}) ::signal(sig, OnFatalSignal);
  }
  ::signal(SIGABRT, OnFatalSignal);  // CHECK failures, std::terminate
}

std::string ReadFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// Deterministic mutations of corpus entries (no coverage feedback: that is
// libFuzzer's job in long runs).
class Mutator {
 public:
  Mutator(uint64_t seed, const std::vector<std::string>* corpus) : rng_(seed), corpus_(corpus) {}

  std::string Mutate() {
    // Half the time start again from an earlier mutant, so changes stack.
    std::string s = (!recent_.empty() && Coin()) ? recent_[Below(recent_.size())] : (*corpus_)[Below(corpus_->size())];
    const size_t rounds = 1 + Below(4);
    for (size_t i = 0; i < rounds; ++i) MutateOnce(s);
    if (s.size() > kMaxInputBytes) s.resize(kMaxInputBytes);
    if (recent_.size() < 64) {
      recent_.push_back(s);
    } else {
      recent_[Below(recent_.size())] = s;
    }
    return s;
  }

 private:
  size_t Below(size_t n) { return n == 0 ? 0 : static_cast<size_t>(rng_() % n); }
  bool Coin() { return (rng_() & 1) != 0; }
  char RandomByte() {
    static const unsigned char kInteresting[] = {0, 1, 2, 0x7f, 0x80, 0xff, 0xfe, 0x40, '0', '-', ':', '\n', '"'};
    return Coin() ? static_cast<char>(rng_()) : static_cast<char>(kInteresting[Below(sizeof(kInteresting))]);
  }

  // A protobuf field: a tag of field 1..15 with a varint or a short
  // length-delimited value, in wire format.
  std::string ProtoField() {
    std::string f;
    const uint32_t field = 1 + static_cast<uint32_t>(Below(15));
    if (Coin()) {
      f.push_back(static_cast<char>(field << 3 | 0));
      uint64_t v = Coin() ? Below(300) : rng_();
      do {
        f.push_back(static_cast<char>((v & 0x7f) | (v > 0x7f ? 0x80 : 0)));
        v >>= 7;
      } while (v != 0);
    } else {
      f.push_back(static_cast<char>(field << 3 | 2));
      const size_t n = Below(16);
      f.push_back(static_cast<char>(n));
      for (size_t i = 0; i < n; ++i) f.push_back(RandomByte());
    }
    return f;
  }

  void MutateOnce(std::string& s) {
    switch (Below(8)) {
      case 0:  // flip a bit
        if (!s.empty()) s[Below(s.size())] ^= static_cast<char>(1 << Below(8));
        break;
      case 1:  // set a byte
        if (!s.empty()) s[Below(s.size())] = RandomByte();
        break;
      case 2: {  // insert bytes
        const size_t n = 1 + Below(8);
        std::string bytes;
        for (size_t i = 0; i < n; ++i) bytes.push_back(RandomByte());
        s.insert(Below(s.size() + 1), bytes);
        break;
      }
      case 3:  // erase a range
        if (!s.empty()) {
          const size_t at = Below(s.size());
          s.erase(at, 1 + Below(std::min<size_t>(16, s.size() - at)));
        }
        break;
      case 4:  // duplicate a range
        if (!s.empty()) {
          const size_t at = Below(s.size());
          s.insert(Below(s.size() + 1), s.substr(at, 1 + Below(32)));
        }
        break;
      case 5: {  // splice: a prefix of s and a suffix of another entry
        const std::string& other = (*corpus_)[Below(corpus_->size())];
        s = s.substr(0, Below(s.size() + 1)) + other.substr(Below(other.size() + 1));
        break;
      }
      case 6:  // insert a protobuf field
        s.insert(Below(s.size() + 1), ProtoField());
        break;
      default:  // truncate
        s.resize(Below(s.size() + 1));
        break;
    }
  }

  std::mt19937_64 rng_;
  const std::vector<std::string>* corpus_;
  std::vector<std::string> recent_;
};

// When the input now running started (steady clock, ns); 0 between inputs.
std::atomic<int64_t> g_started_ns{0};

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void RunOne(const std::string& input) {
  g_current = &input;
  g_started_ns = NowNs();
  LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(input.data()), input.size());
  g_started_ns = 0;
  g_current = nullptr;
}

// As libFuzzer's -timeout: one input running longer than `seconds` is a
// finding (a hang); its input is dumped and the process aborts.
void StartWatchdog(double seconds) {
  std::thread([seconds] {
    for (;;) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      const int64_t started = g_started_ns;
      if (started != 0 && (NowNs() - started) / 1e9 > seconds) {
        std::fprintf(stderr, "==fuzz== an input ran for more than %.0f s (--timeout)\n", seconds);
        DumpCurrentInput();
        std::_Exit(70);
      }
    }
  }).detach();
}

// Appends the files of `paths` (directories: their files, sorted) to
// `inputs`; false (after saying why) when one does not exist.
bool ReadInputs(const std::vector<std::filesystem::path>& paths, std::vector<std::string>* inputs) {
  for (const auto& path : paths) {
    if (std::filesystem::is_directory(path)) {
      std::vector<std::filesystem::path> files;
      for (const auto& entry : std::filesystem::directory_iterator(path)) files.push_back(entry.path());
      std::sort(files.begin(), files.end());  // a deterministic order
      for (const auto& f : files) inputs->push_back(ReadFile(f));
    } else if (std::filesystem::exists(path)) {
      inputs->push_back(ReadFile(path));
    } else {
      std::fprintf(stderr, "fuzz: %s does not exist\n", path.c_str());
      return false;
    }
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (LLVMFuzzerInitialize != nullptr) LLVMFuzzerInitialize(&argc, &argv);
  long runs = 2000;
  double max_seconds = 30;
  double timeout = 20;
  uint64_t seed = 1;
  std::vector<std::filesystem::path> paths;
  std::vector<std::filesystem::path> replay_only;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg.rfind("--runs=", 0) == 0) {
      runs = std::atol(arg.c_str() + 7);
    } else if (arg.rfind("--max_seconds=", 0) == 0) {
      max_seconds = std::atof(arg.c_str() + 14);
    } else if (arg.rfind("--timeout=", 0) == 0) {
      timeout = std::atof(arg.c_str() + 10);
    } else if (arg.rfind("--seed=", 0) == 0) {
      seed = std::strtoull(arg.c_str() + 7, nullptr, 10);
    } else if (arg.rfind("--replay_only=", 0) == 0) {
      replay_only.emplace_back(arg.substr(14));
    } else {
      paths.emplace_back(arg);
    }
  }
  std::vector<std::string> corpus;
  std::vector<std::string> replayed_only;
  if (!ReadInputs(paths, &corpus) || !ReadInputs(replay_only, &replayed_only)) return 2;
  if (corpus.empty()) {
    std::fprintf(stderr, "fuzz: no corpus (give corpus directories or files)\n");
    return 2;
  }
  InstallCrashHandlers(std::filesystem::path(argv[0]).filename().string());
  StartWatchdog(timeout);

  const auto start = std::chrono::steady_clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
  for (const std::string& input : corpus) RunOne(input);
  for (const std::string& input : replayed_only) RunOne(input);
  const double replay_seconds = elapsed();
  Mutator mutator(seed, &corpus);
  long mutations = 0;
  while (mutations < runs && elapsed() < max_seconds) {
    RunOne(mutator.Mutate());
    ++mutations;
  }
  const double total = elapsed();
  const double mutate_seconds = total - replay_seconds;
  std::printf("fuzz: replayed %zu corpus inputs (%zu not mutated) in %.2f s, then %ld mutated inputs in %.2f s (%.0f execs/s, seed %llu)%s; 0 crashes\n",
              corpus.size() + replayed_only.size(), replayed_only.size(), replay_seconds, mutations, mutate_seconds,
              mutate_seconds > 0 ? static_cast<double>(mutations) / mutate_seconds : 0.0,
              static_cast<unsigned long long>(seed), mutations < runs ? " (stopped by --max_seconds)" : "");
  return 0;
}
