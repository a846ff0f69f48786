// Prints bench/GPU_NOTES.md's predicted-profile section (plan_notes.h), or
// with --update rewrites it in the workspace's copy of that file (the rest of
// the file is kept):
//   bazel run //engine/plan:gpu_profile_notes -- [--update] [--spec bench/gpt2_124m.yaml] [--gpu h100]
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>

#include "CLI/CLI.hpp"
#include "engine/plan/plan_notes.h"

int main(int argc, char** argv) {
  ringmaster::engine::plan::ProfileNotesOptions options;
  bool update = false;
  CLI::App app("The predicted GPU profile section of bench/GPU_NOTES.md");
  app.add_option("--spec", options.spec, "Job spec (relative to the workspace)")->capture_default_str();
  app.add_option("--gpu", options.gpu, "Device type")->capture_default_str();
  app.add_flag("--update", update, "Rewrite the section in $BUILD_WORKSPACE_DIRECTORY/bench/GPU_NOTES.md");
  CLI11_PARSE(app, argc, argv);
  absl::StatusOr<std::string> section = ringmaster::engine::plan::PredictedProfileSection(options);
  if (!section.ok()) {
    std::cerr << "gpu_profile_notes: " << section.status().message() << "\n";
    return 1;
  }
  if (!update) {
    std::cout << *section;
    return 0;
  }
  const char* workspace = std::getenv("BUILD_WORKSPACE_DIRECTORY");
  if (workspace == nullptr) {
    std::cerr << "gpu_profile_notes: --update needs `bazel run` (BUILD_WORKSPACE_DIRECTORY is not set)\n";
    return 1;
  }
  const std::string path = std::string(workspace) + "/bench/GPU_NOTES.md";
  std::stringstream current;
  if (std::ifstream in(path); in) current << in.rdbuf();
  std::string document = current.str();
  if (document.empty()) document = "# GPU notes\n";
  std::ofstream out(path, std::ios::trunc);
  out << ringmaster::engine::plan::ReplaceProfileSection(document, *section);
  if (!out) {
    std::cerr << "gpu_profile_notes: cannot write " << path << "\n";
    return 1;
  }
  std::cout << "updated " << path << "\n";
  return 0;
}
