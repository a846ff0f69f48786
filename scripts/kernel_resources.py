#!/usr/bin/env python3
"""Registers, spills, shared memory and predicted H100 occupancy of every CUDA kernel.

Compiles every .cu file under engine/kernels/ (found by globbing) for sm_90 with the
build's own nvcc command for it (its cuda_library genrule's, which
//scripts:kernel_resources.bzl hands over) and `-Xptxas -v`; reads ptxas's report and each
entry's .maxntid from the PTX; and fails when
  1. a kernel or a device function spills registers (spill stores or loads > 0 bytes);
  2. a __global__ kernel has no __launch_bounds__(N) (occupancy needs threads per block);
  3. a kernel's static + dynamic shared memory exceeds 48 KB without an opt-in, or
     227 KB with one;
  4. not one block of a kernel fits on an SM (e.g. 255 registers x 1024 threads);
  5. a shared-memory marker (below) is malformed, stale or missing;
  6. the occupancy arithmetic disagrees with NVIDIA's cuda_occupancy.h (checked on every
     kernel and on a grid of configurations);
  7. the table in bench/GPU_NOTES.md (between <!-- kernel-resources:begin --> and
     <!-- kernel-resources:end -->) differs from what this build gives: a published figure
     must stay true. --update rewrites the table instead (and still reports 1-6).

Dynamic shared memory and the opt-in past 48 KB are launch-time facts that ptxas cannot
see, so the launcher declares them in a comment this tool reads:

    // kernel-resources: flash::FlashForwardKernel dynamic_smem=2*64*128*4 opt_in
    CUDA_RETURN_IF_ERROR(cudaFuncSetAttribute(flash::FlashForwardKernel<T, kD>,
                                              cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));

The marker names the kernel as the table does (with template arguments for one
instantiation, without them for all; a trailing part such as FlashForwardKernel also
matches) and gives the most dynamic shared memory, in bytes, that any launch passes it
(integer literals with + - * and parentheses). `opt_in` says the launcher raises
cudaFuncAttributeMaxDynamicSharedMemorySize: such a marker sits at most 3 lines above that
call, and every such call needs one. A <<<grid, block, smem>>> launch whose smem is not 0
needs a marker naming its kernel. Launches through cudaLaunchKernelEx are not scanned:
declare their kernels' dynamic shared memory all the same.

Occupancy is NVIDIA's Occupancy Calculator, cudaOccMaxActiveBlocksPerMultiprocessor in the
toolkit's include/cuda_occupancy.h, for an H100 (compute capability 9.0; limits from the CUDA
C++ Programming Guide, "Compute Capabilities", technical specifications table), with the
default shared-memory carveout:
  warps       = ceil(threads / 32)
  by regs     = floor(4 * floor(16384 / ceil256(regs * 32)) / warps): 4 sub-partitions of the
                65,536-register file, registers allocated per warp in units of 256; 0 when
                ceil256(regs * 32) * roundup(warps, 4) > 65,536 (the launch would fail)
  by warps    = floor(64 / warps);  by blocks = 32
  by smem     = floor(228 KB / ceil128(static + dynamic + 1 KB reserved per block)); 0 past the
                per-block limit of 48 KB (227 KB opted in) plus the reserved 1 KB
  by barriers = floor(64 / named barriers used), where ptxas reports any
  blocks/SM   = the least of these; occupancy = blocks * warps of the 64 an SM holds.

Usage: through Bazel, which passes the build's nvcc commands:
  bazel test //engine/kernels:kernel_resources_test                 the check
  bazel run //engine/kernels:kernel_resources_test -- --update      rewrite the table
Exit status: 0 when every check passes, 1 when one fails, 2 when the tool cannot run (nvcc
failing, a .cu that no cuda_library compiles). In a build without CUDA (--skip) prints
"SKIP: why" and exits 0.
"""
import argparse
import concurrent.futures
import difflib
import glob
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kernel_resources_lib as lib  # noqa: E402


def _read(path):
    with open(path, errors="replace") as f:
        return f.read()


class ToolError(Exception):
    """The tool could not produce its figures (not a failed check)."""


def compile_source(nvcc, flags, root, source, tmp):
    """nvcc -cubin -Xptxas -v on one .cu -> (ptxas report, PTX text)."""
    keep = tempfile.mkdtemp(dir=tmp)
    command = [nvcc] + flags + ["-cubin", "-Xptxas", "-v", "-keep", "-keep-dir", keep,
                                "-o", os.path.join(keep, "out.cubin"), source]
    done = subprocess.run(command, cwd=root, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          env=dict(os.environ, TMPDIR=keep))
    if done.returncode != 0:
        raise ToolError("nvcc failed on %s (exit %d):\n%s\n%s" % (source, done.returncode, " ".join(command), done.stdout))
    ptx = "".join(_read(p) for p in sorted(glob.glob(os.path.join(keep, "*.ptx"))))
    return done.stdout, ptx


def demangle(names):
    if not names:
        return {}
    done = subprocess.run(["c++filt"], input="\n".join(names) + "\n", stdout=subprocess.PIPE, text=True, check=True)
    return dict(zip(names, done.stdout.splitlines()))


_OCCUPANCY_PROGRAM = r"""
#include <cstdio>
#include "cuda_occupancy.h"
// Reads "registers threads static_smem dynamic_smem barriers opt_in" lines; prints blocks per SM
// on an H100 (-1 where the calculator returns an error).
int main() {
  cudaOccDeviceProp p;
  p.computeMajor = 9; p.computeMinor = 0; p.maxThreadsPerBlock = 1024; p.maxThreadsPerMultiprocessor = 2048;
  p.regsPerBlock = 65536; p.regsPerMultiprocessor = 65536; p.warpSize = 32; p.sharedMemPerBlock = 48 * 1024;
  p.sharedMemPerMultiprocessor = 228 * 1024; p.numSms = 132; p.sharedMemPerBlockOptin = 227 * 1024;
  p.reservedSharedMemPerBlock = 1024;
  cudaOccDeviceState state;
  int regs, threads, barriers, opt_in;
  size_t smem, dynamic;
  while (std::scanf("%d %d %zu %zu %d %d", &regs, &threads, &smem, &dynamic, &barriers, &opt_in) == 6) {
    cudaOccFuncAttributes a;
    a.maxThreadsPerBlock = 1024; a.numRegs = regs; a.sharedSizeBytes = smem; a.numBlockBarriers = barriers;
    a.shmemLimitConfig = opt_in ? FUNC_SHMEM_LIMIT_OPTIN : FUNC_SHMEM_LIMIT_DEFAULT;
    a.maxDynamicSharedSizeBytes = opt_in ? dynamic : 0;
    cudaOccResult r;
    cudaOccError e = cudaOccMaxActiveBlocksPerMultiprocessor(&r, &p, &a, &state, threads, dynamic);
    std::printf("%d\n", e == CUDA_OCC_SUCCESS ? r.activeBlocksPerMultiprocessor : -1);
  }
}
"""


def occupancy_cases(kernels):
    """Every kernel's configuration and a grid around the limits: (regs, threads, smem, dynamic,
    barriers, opt_in)."""
    cases = [(k.registers, k.threads, k.smem, k.dynamic_smem, k.barriers, int(k.opt_in))
             for k in kernels if k.threads is not None]
    for regs in list(range(0, 256, 9)) + [32, 64, 65, 128, 168, 255]:
        for threads in (1, 32, 64, 96, 128, 192, 256, 384, 512, 640, 1024):
            for smem, dynamic, opt_in in ((0, 0, 0), (16384, 0, 0), (33024, 0, 0), (47 * 1024, 1024, 0),
                                          (41600, 8192, 0), (16384, 65536, 1), (0, 227 * 1024, 1),
                                          (1024, 227 * 1024, 1), (0, 100 * 1024, 1)):
                for barriers in (0, 1, 3):
                    cases.append((regs, threads, smem, dynamic, barriers, opt_in))
    return cases


def check_occupancy(cuda_path, kernels, tmp):
    """[mismatch] between lib.occupancy and NVIDIA's cuda_occupancy.h."""
    program, binary = os.path.join(tmp, "occupancy.cc"), os.path.join(tmp, "occupancy")
    with open(program, "w") as f:
        f.write(_OCCUPANCY_PROGRAM)
    built = subprocess.run(["c++", "-std=c++17", "-O1", "-I", os.path.join(cuda_path, "include"), program, "-o", binary],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=dict(os.environ, TMPDIR=tmp))
    if built.returncode != 0:
        raise ToolError("cannot build the cuda_occupancy.h cross-check:\n" + built.stdout)
    cases = occupancy_cases(kernels)
    run = subprocess.run([binary], input="".join("%d %d %d %d %d %d\n" % c for c in cases),
                         stdout=subprocess.PIPE, text=True, check=True)
    mismatches = []
    for case, theirs in zip(cases, run.stdout.split()):
        ours = lib.occupancy(case[0], case[1], case[2], case[3], case[4], bool(case[5])).blocks
        if ours != int(theirs):
            mismatches.append("occupancy of (registers, threads, static smem, dynamic smem, barriers, opt_in) = %r: "
                              "%d blocks/SM here, %s by cuda_occupancy.h" % (case, ours, theirs))
    if len(run.stdout.split()) != len(cases):
        mismatches.append("the cuda_occupancy.h cross-check answered %d of %d cases" % (len(run.stdout.split()), len(cases)))
    if len(mismatches) > 10:
        mismatches = mismatches[:10] + ["... and %d more occupancy mismatches" % (len(mismatches) - 10)]
    return mismatches


def measure(root, cuda_path, build_commands, jobs, tmp):
    """Compiles every kernel source -> (kernels, failures, toolkit version line).
    build_commands: {source relative to engine/kernels: the build's nvcc command}."""
    paths = sorted(glob.glob(os.path.join(root, lib.KERNEL_DIR, "**", "*.cu"), recursive=True))
    sources = [os.path.relpath(p, root) for p in paths]
    if not sources:
        raise ToolError("no .cu files under %s" % os.path.join(root, lib.KERNEL_DIR))
    commands = {}
    for source in sources:
        command = build_commands.get(os.path.relpath(source, lib.KERNEL_DIR))
        if command is None:
            raise ToolError("%s is in no cuda_library above kernel_resources_test in %s/BUILD: the build does "
                            "not compile it" % (source, lib.KERNEL_DIR))
        try:
            commands[source] = lib.flags_from_build_command(command)
        except ValueError as e:
            raise ToolError("%s: %s" % (source, e))
    nvcc = commands[sources[0]][0]
    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
        futures = [pool.submit(compile_source, commands[s][0], commands[s][1], root, s, tmp) for s in sources]
        outputs = [f.result() for f in futures]
    texts = {}
    for pattern in ("*.cu", "*.cuh", "*.h"):
        for p in glob.glob(os.path.join(root, lib.KERNEL_DIR, "**", pattern), recursive=True):
            texts[os.path.relpath(p, root)] = _read(p)
    markers, errors = lib.collect_markers(texts)
    parsed = [(s, lib.parse_ptxas(log), lib.parse_ptx_threads(ptx)) for s, (log, ptx) in zip(sources, outputs)]
    demangled = demangle(sorted({f.name for _, fns, _ in parsed for f in fns if f.entry}))
    kernels, device_functions = [], []
    for source, functions, threads in parsed:
        found, bad = lib.kernels_of(os.path.relpath(source, lib.KERNEL_DIR), functions, threads, demangled, markers)
        kernels += found
        errors += bad
        device_functions += [(source, f) for f in functions if not f.entry]
    errors += lib.check_declarations(texts, markers, [k.name for k in kernels])
    errors += lib.failures(kernels, device_functions)
    errors += check_occupancy(cuda_path, kernels, tmp)
    version = subprocess.run([nvcc, "--version"], stdout=subprocess.PIPE, text=True).stdout.strip().splitlines()
    toolkit = next((line for line in version if "release" in line), version[-1] if version else "nvcc")
    return kernels, errors, toolkit


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--build-command", action="append", default=[], metavar="SRC=COMMAND",
                        help="the build's nvcc command for SRC (relative to %s)" % lib.KERNEL_DIR)
    parser.add_argument("--cuda-path", help="the CUDA toolkit (for cuda_occupancy.h)")
    parser.add_argument("--skip", metavar="WHY", help="this build has no CUDA: print SKIP and exit 0")
    parser.add_argument("--update", action="store_true",
                        help="rewrite %s's table instead of checking it (in $BUILD_WORKSPACE_DIRECTORY "
                             "under bazel run, else under --root)" % lib.NOTES)
    parser.add_argument("--root", default=".", help="the repository root or the test's runfiles")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="nvcc processes at once")
    args = parser.parse_args(argv)
    if args.skip is not None:
        print("SKIP: this build has no CUDA (%s): kernel resources not measured" % args.skip)
        return 0
    if not args.cuda_path or not args.build_command:
        parser.error("--cuda-path and --build-command are required (run it through bazel)")
    build_commands = dict(arg.split("=", 1) for arg in args.build_command)

    # Under `bazel run` the test's TEST_TMPDIR is in the execroot, which the next Bazel command
    # (anyone's) empties: work in the system's temporary directory there.
    tmp_parent = None if "BUILD_WORKSPACE_DIRECTORY" in os.environ else os.environ.get("TEST_TMPDIR")
    try:
        with tempfile.TemporaryDirectory(dir=tmp_parent) as tmp:
            kernels, errors, toolkit = measure(args.root, args.cuda_path, build_commands, max(1, args.jobs), tmp)
    except (ToolError, subprocess.CalledProcessError, OSError) as e:
        print("kernel_resources: %s" % e, file=sys.stderr)
        return 2

    section = lib.render_section(kernels, toolkit)
    print(section)
    if args.update:
        notes_path = os.path.join(os.environ.get("BUILD_WORKSPACE_DIRECTORY", args.root), lib.NOTES)
        notes = _read(notes_path) if os.path.exists(notes_path) else None
        updated = lib.replace_section(notes, section)
        if updated != notes:
            with open(notes_path, "w") as f:
                f.write(updated)
        print("%s %s" % ("wrote" if updated != notes else "unchanged:", notes_path))
    else:
        notes_path = os.path.join(args.root, lib.NOTES)
        committed = lib.read_section(_read(notes_path)) if os.path.exists(notes_path) else None
        if committed != section:
            diff = difflib.unified_diff((committed or "").splitlines(), section.splitlines(),
                                        "%s (committed)" % lib.NOTES, "%s (this build)" % lib.NOTES, lineterm="")
            print("\n".join(diff))
            errors.append("%s's kernel-resources table is %s; refresh it with: %s"
                          % (lib.NOTES, "stale" if committed else "missing", lib.REFRESH))
    for error in errors:
        print("FAIL: %s" % error)
    print("%d kernels under %s, %d failures" % (len(kernels), lib.KERNEL_DIR, len(errors)))
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
