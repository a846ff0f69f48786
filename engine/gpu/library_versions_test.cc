// What gpu-versions reports: the libraries this test loads (every machine
// that builds with CUDA has them), at or above the floors, found where the
// loader found them; the report's lines for a machine without a driver and
// for a library missing or too old.
#include "engine/gpu/library_versions.h"

#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "engine/gpu/library_floors.h"
#include "gtest/gtest.h"

namespace ringmaster::engine::gpu {
namespace {

TEST(LibraryFloorsTest, AskOnlyForWhatTheCodeUses) {
  EXPECT_EQ(kMinNcclVersion, 21800) << "ncclCommSplit: NCCL 2.18";
  EXPECT_EQ(kMinCudnnVersion, 90000u) << "cuDNN 9.0";
  EXPECT_EQ(kMinCublasLtVersion, static_cast<size_t>(kToolkitMajor) * 10000) << "cuBLASLt of the toolkit's major";
  EXPECT_EQ(kMinRuntimeVersion, kToolkitMajor * 1000);
  EXPECT_EQ(kMinDriverVersion, kToolkitMajor * 1000) << "a driver for the toolkit's major version";
}

TEST(LibraryVersionsTest, ReadsTheLibrariesThisProcessLoads) {
  const LibraryVersions v = ReadLibraryVersions();
  for (const LoadedLibrary* lib : {&v.runtime, &v.cublaslt, &v.cudnn, &v.nccl}) {
    EXPECT_EQ(lib->error, "") << lib->name;
    EXPECT_GE(lib->version, lib->floor) << lib->name << " " << lib->version_text;
    EXPECT_TRUE(absl::StrContains(lib->path, lib->soname)) << lib->name << ": " << lib->path;
    EXPECT_TRUE(lib->ok()) << lib->name;
  }
  EXPECT_EQ(v.cublaslt.soname, "libcublasLt.so." + std::to_string(kToolkitMajor));
  EXPECT_EQ(v.nccl.soname, "libnccl.so.2");
  EXPECT_EQ(v.cudnn.soname, "libcudnn.so.9");
  const std::vector<std::string> lines = FormatLibraryVersions(v);
  ASSERT_GE(lines.size(), 6u);
  EXPECT_TRUE(absl::StartsWith(lines[0], "CUDA driver: ")) << lines[0];
  EXPECT_TRUE(absl::StartsWith(lines[4], "NCCL: ")) << lines[4];
  EXPECT_TRUE(absl::StrContains(lines[4], ", needs >= 2.18.0: ok, ")) << lines[4];
  if (v.device_count == 0) {
    EXPECT_NE(v.device_error, "");
    EXPECT_TRUE(absl::StartsWith(lines.back(), "devices: none (")) << lines.back();
    EXPECT_TRUE(v.ok()) << "no device is not a library problem";
  } else {
    EXPECT_EQ(v.devices.size(), static_cast<size_t>(v.device_count));
    EXPECT_TRUE(absl::StartsWith(lines.back(), "device ")) << lines.back();
    EXPECT_GE(v.driver_version, kMinDriverVersion);
    EXPECT_TRUE(v.ok());
  }
}

TEST(LibraryVersionsTest, ReportsAMissingOrOldLibraryAndAnOldDriver) {
  LibraryVersions v;
  v.driver_version = 12080;
  v.driver_floor = 13000;
  v.device_error = "cudaErrorInsufficientDriver: CUDA driver version is insufficient for CUDA runtime version";
  v.runtime = {"CUDA runtime", "libcudart.so.13", "/x/libcudart.so.13.0.96", 13000, "13.0", 13000, "13.0", ""};
  v.cublaslt = {"cuBLASLt", "libcublasLt.so.13", "/x/libcublasLt.so.13.1.0.3", 130100, "13.1.0", 130000, "13.0.0", "",
                "13.0"};
  v.cudnn = {"cuDNN", "libcudnn.so.9", "/x/libcudnn.so.9.19.0", 91900, "9.19.0", 90000, "9.0.0", ""};
  v.nccl = {"NCCL", "libnccl.so.2", "", 0, "", 21800, "2.18.0", "libnccl.so.2: cannot open shared object file"};
  EXPECT_FALSE(v.ok());
  const std::vector<std::string> lines = FormatLibraryVersions(v);
  ASSERT_EQ(lines.size(), 6u);
  EXPECT_EQ(lines[0], "CUDA driver: supports CUDA 12.8 (12080), needs >= 13.0: TOO OLD");
  EXPECT_EQ(lines[1], "CUDA runtime: 13.0 (13000), needs >= 13.0: ok, /x/libcudart.so.13.0.96");
  EXPECT_EQ(lines[2],
            "cuBLASLt: 13.1.0 (130100, built for CUDA 13.0), needs >= 13.0.0: ok, /x/libcublasLt.so.13.1.0.3");
  EXPECT_EQ(lines[4], "NCCL: not loaded (libnccl.so.2: cannot open shared object file), needs >= 2.18.0: MISSING");
  EXPECT_EQ(lines[5],
            "devices: none (cudaErrorInsufficientDriver: CUDA driver version is insufficient for CUDA runtime "
            "version)");

  v.nccl = {"NCCL", "libnccl.so.2", "/x/libnccl.so.2.17.1", 21701, "2.17.1", 21800, "2.18.0", ""};
  v.driver_version = 0;  // no driver: not a failure of its own
  EXPECT_FALSE(v.ok());
  EXPECT_EQ(FormatLibraryVersions(v)[4], "NCCL: 2.17.1 (21701), needs >= 2.18.0: TOO OLD, /x/libnccl.so.2.17.1");
  EXPECT_EQ(FormatLibraryVersions(v)[0], "CUDA driver: none (no NVIDIA driver loaded), needs >= 13.0");
  v.nccl.version = 22707;
  EXPECT_TRUE(v.ok());
}

}  // namespace
}  // namespace ringmaster::engine::gpu
