#!/usr/bin/env python3
"""kernel_resources_lib on recorded ptxas -v and PTX output (nvcc 13.0, sm_90), so that the
parsing, the checks, the occupancy arithmetic and the table are tested without nvcc."""
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kernel_resources_lib as lib  # noqa: E402

# engine/kernels/flash_attention.cu as nvcc 13.0 compiled it for sm_90 (issue #25): both
# backward kernels spill. Plus a device function ptxas compiled on its own, with a spill, and
# an sm_80 entry that must be ignored.
PTXAS_LOG = """\
ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function '_ZN10ringmaster7kernels5flash20FlashBackwardQKernelEPKfS3_S3_S3_NS0_13AttentionDimsEfPfNS0_9FloatTypeE' for 'sm_90'
ptxas info    : Function properties for _ZN10ringmaster7kernels5flash20FlashBackwardQKernelEPKfS3_S3_S3_NS0_13AttentionDimsEfPfNS0_9FloatTypeE
    160 bytes stack frame, 156 bytes spill stores, 156 bytes spill loads
ptxas info    : Used 255 registers, used 1 barriers, 160 bytes cumulative stack size, 33024 bytes smem
ptxas info    : Compile time = 164.764 ms
ptxas info    : Compiling entry function '_ZN10ringmaster7kernels5flash21FlashBackwardKvKernelEPKfS3_S3_S3_NS0_13AttentionDimsEfPfNS0_9FloatTypeE' for 'sm_90'
ptxas info    : Function properties for _ZN10ringmaster7kernels5flash21FlashBackwardKvKernelEPKfS3_S3_S3_NS0_13AttentionDimsEfPfNS0_9FloatTypeE
    48 bytes stack frame, 76 bytes spill stores, 140 bytes spill loads
ptxas info    : Used 255 registers, used 1 barriers, 48 bytes cumulative stack size, 41600 bytes smem
ptxas info    : Function properties for __internal_accurate_pow
    8 bytes stack frame, 4 bytes spill stores, 4 bytes spill loads
ptxas info    : Compiling entry function '_ZN10ringmaster7kernels5flash12RowDotKernelEPKfS3_NS0_13AttentionDimsEPf' for 'sm_90'
ptxas info    : Function properties for _ZN10ringmaster7kernels5flash12RowDotKernelEPKfS3_NS0_13AttentionDimsEPf
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 28 registers, used 0 barriers
ptxas info    : Compiling entry function '_ZN10ringmaster7kernels5flash12RowDotKernelEPKfS3_NS0_13AttentionDimsEPf' for 'sm_80'
ptxas info    : Function properties for _ZN10ringmaster7kernels5flash12RowDotKernelEPKfS3_NS0_13AttentionDimsEPf
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 30 registers, 380 bytes cmem[0]
ptxas info    : Compiling entry function '_ZN10ringmaster7kernels5flash18FlashForwardKernelEPKfNS0_13AttentionDimsEfPfS5_NS0_9FloatTypeE' for 'sm_90'
ptxas info    : Function properties for _ZN10ringmaster7kernels5flash18FlashForwardKernelEPKfNS0_13AttentionDimsEfPfS5_NS0_9FloatTypeE
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 226 registers, used 1 barriers, 16384 bytes smem, 380 bytes cmem[0]
"""
BWD_Q = "_ZN10ringmaster7kernels5flash20FlashBackwardQKernelEPKfS3_S3_S3_NS0_13AttentionDimsEfPfNS0_9FloatTypeE"
BWD_KV = "_ZN10ringmaster7kernels5flash21FlashBackwardKvKernelEPKfS3_S3_S3_NS0_13AttentionDimsEfPfNS0_9FloatTypeE"
ROW_DOT = "_ZN10ringmaster7kernels5flash12RowDotKernelEPKfS3_NS0_13AttentionDimsEPf"
FWD = "_ZN10ringmaster7kernels5flash18FlashForwardKernelEPKfNS0_13AttentionDimsEfPfS5_NS0_9FloatTypeE"
DEMANGLED = {
    BWD_Q: "ringmaster::kernels::flash::FlashBackwardQKernel(float const*, float const*, float const*, float const*, "
           "ringmaster::kernels::AttentionDims, float, float*, ringmaster::kernels::FloatType)",
    BWD_KV: "ringmaster::kernels::flash::FlashBackwardKvKernel(float const*, float const*, float const*, float const*, "
            "ringmaster::kernels::AttentionDims, float, float*, ringmaster::kernels::FloatType)",
    ROW_DOT: "ringmaster::kernels::flash::RowDotKernel(float const*, float const*, ringmaster::kernels::AttentionDims, float*)",
    FWD: "ringmaster::kernels::flash::FlashForwardKernel(float const*, ringmaster::kernels::AttentionDims, float, float*, "
         "float*, ringmaster::kernels::FloatType)",
}

# The PTX of the same file, cut to the entries' heads; RowDotKernel has no __launch_bounds__.
PTX = """\
.visible .entry %s(
\t.param .u64 %s_param_0,
\t.param .align 8 .b8 %s_param_1[40]
)
.maxntid 64, 1, 1
{
\t.reg .pred %%p<90>;
}
.visible .entry %s(
\t.param .u64 %s_param_0
)
{
}
.entry _ZN10ringmaster7kernels2TkI6__halfLi64EEEvPKT_(
\t.param .u64 p0
)
.reqntid 16, 8, 1
.minnctapersm 2
{
}
""" % (FWD, FWD, FWD, ROW_DOT, ROW_DOT)


def kernel(name="K", threads=128, registers=32, smem=0, dynamic_smem=0, opt_in=False, stores=0, loads=0, barriers=0):
    return lib.Kernel("k.cu", name, "_Z1Kv", threads, registers, barriers, smem, dynamic_smem, opt_in, 0, stores, loads)


class PtxasTest(unittest.TestCase):
    def test_reads_registers_spills_smem_of_each_sm90_entry_in_order(self):
        functions = lib.parse_ptxas(PTXAS_LOG)
        self.assertEqual([f.name for f in functions], [BWD_Q, BWD_KV, "__internal_accurate_pow", ROW_DOT, FWD])
        q = functions[0]
        self.assertEqual((q.entry, q.registers, q.barriers, q.smem, q.stack, q.spill_stores, q.spill_loads),
                         (True, 255, 1, 33024, 160, 156, 156))
        kv = functions[1]
        self.assertEqual((kv.registers, kv.smem, kv.spill_stores, kv.spill_loads), (255, 41600, 76, 140))
        row_dot = functions[3]  # the sm_90 figures, not the sm_80 ones
        self.assertEqual((row_dot.registers, row_dot.smem, row_dot.barriers), (28, 0, 0))
        fwd = functions[4]
        self.assertEqual((fwd.registers, fwd.smem, fwd.spill_stores, fwd.spill_loads), (226, 16384, 0, 0))

    def test_a_device_function_is_not_a_kernel(self):
        pow_fn = lib.parse_ptxas(PTXAS_LOG)[2]
        self.assertEqual((pow_fn.entry, pow_fn.stack, pow_fn.spill_stores, pow_fn.spill_loads), (False, 8, 4, 4))

    def test_threads_per_block_come_from_maxntid_or_reqntid(self):
        threads = lib.parse_ptx_threads(PTX)
        self.assertEqual(threads, {FWD: 64, "_ZN10ringmaster7kernels2TkI6__halfLi64EEEvPKT_": 128})


class NameTest(unittest.TestCase):
    def test_plain_kernel(self):
        self.assertEqual(lib.readable_name(DEMANGLED[ROW_DOT]),
                         ("flash::RowDotKernel", "(float const*, float const*, AttentionDims, float*)"))

    def test_template_instantiation_loses_return_type_and_project_namespaces(self):
        name, params = lib.readable_name(
            "void ringmaster::kernels::(anonymous namespace)::MapKernel<8, ringmaster::kernels::(anonymous namespace)"
            "::AddOp<__nv_bfloat16> >(__nv_bfloat16 const*, long)")
        self.assertEqual(name, "MapKernel<8, AddOp<__nv_bfloat16>>")
        self.assertEqual(params, "(__nv_bfloat16 const*, long)")

    def test_colliding_names_keep_their_parameters(self):
        functions = [lib.FunctionResources("_Z1a", True, 10, 0, 0, 0, 0, 0),
                     lib.FunctionResources("_Z1b", True, 12, 0, 0, 0, 0, 0)]
        demangled = {"_Z1a": "ringmaster::kernels::Axpy(float*)", "_Z1b": "ringmaster::kernels::Axpy(double*)"}
        kernels, errors = lib.kernels_of("k.cu", functions, {}, demangled, [])
        self.assertEqual(sorted(k.name for k in kernels), ["Axpy(double*)", "Axpy(float*)"])
        self.assertEqual(errors, [])


class OccupancyTest(unittest.TestCase):
    """Worked by hand from cuda_occupancy.h (the test on nvcc checks the header itself)."""

    def test_flash_backward_today_four_blocks_by_registers(self):
        # 255 regs x 32 = 8160 -> 8192 per warp; 16384 per sub-partition / 8192 = 2 warps, x 4 = 8
        # warps per SM = 4 blocks of 2 warps. Shared memory would allow 233472 / 34048 = 6.
        self.assertEqual(lib.occupancy(255, 64, 33024, barriers=1), lib.Occupancy(4, 8, ("registers",)))

    def test_flash_forward_226_registers(self):
        # 226 x 32 = 7232 -> 7424; 16384 / 7424 = 2 warps per sub-partition -> 8 warps.
        self.assertEqual(lib.occupancy(226, 64, 16384, barriers=1), lib.Occupancy(4, 8, ("registers",)))

    def test_full_occupancy_limited_by_registers_and_warps_at_once(self):
        # 32 regs: 1024 per warp, 16 warps per sub-partition = 64 warps; 64 / 8 warps = 8 blocks.
        self.assertEqual(lib.occupancy(32, 256, 0), lib.Occupancy(8, 64, ("registers", "warps")))

    def test_registers_round_up_to_256_per_warp(self):
        # 36 x 32 = 1152 -> 1280 per warp; 16384 / 1280 = 12 warps per sub-partition, 48 per SM.
        self.assertEqual(lib.occupancy(36, 256, 0), lib.Occupancy(6, 48, ("registers",)))

    def test_registers_are_divided_among_four_sub_partitions(self):
        # 192 x 32 = 6144 per warp: 16384 / 6144 = 2 warps per sub-partition, so 8 (not 65536 / 6144 = 10).
        self.assertEqual(lib.occupancy(192, 64, 0), lib.Occupancy(4, 8, ("registers",)))

    def test_the_hardware_check_rounds_warps_up_to_the_sub_partitions(self):
        # 200 x 32 = 6400 per warp: 10 warps take 64000 registers, but the check assumes 12: 76800.
        self.assertEqual(lib.occupancy(200, 320, 0).blocks, 0)

    def test_small_blocks_hit_the_32_block_limit(self):
        self.assertEqual(lib.occupancy(16, 32, 0), lib.Occupancy(32, 32, ("blocks",)))

    def test_barriers_limit_blocks(self):
        # 64 barriers per SM / 3 per block = 21 blocks.
        self.assertEqual(lib.occupancy(16, 32, 0, barriers=3), lib.Occupancy(21, 21, ("barriers",)))

    def test_a_block_that_cannot_fit_in_the_register_file(self):
        # 8192 registers per warp x 32 warps = 262144 > 65536.
        self.assertEqual(lib.occupancy(255, 1024, 0).blocks, 0)
        self.assertEqual(lib.occupancy(255, 1024, 0).limits, ("registers",))
        self.assertEqual(lib.occupancy(32, 1025, 0).blocks, 0)

    def test_shared_memory_past_48_kb_needs_the_opt_in(self):
        self.assertEqual(lib.occupancy(32, 128, 0, dynamic_smem=100 * 1024).blocks, 0)
        # 100 KB + 1 KB reserved = 103424 bytes per block; 233472 / 103424 = 2.
        self.assertEqual(lib.occupancy(32, 128, 0, dynamic_smem=100 * 1024, opt_in=True),
                         lib.Occupancy(2, 8, ("shared memory",)))

    def test_227_kb_is_the_most_one_block_may_have(self):
        self.assertEqual(lib.occupancy(32, 128, 0, dynamic_smem=227 * 1024, opt_in=True).blocks, 1)
        self.assertEqual(lib.occupancy(32, 128, 128, dynamic_smem=227 * 1024, opt_in=True).blocks, 0)

    def test_shared_memory_rounds_to_128_bytes_with_1_kb_reserved(self):
        # 1056 static + 1024 = 2080 -> 2176; 233472 / 2176 = 107, so blocks and warps limit instead.
        self.assertEqual(lib.occupancy(32, 256, 1056).blocks, 8)
        # 45576 + 1024 = 46600 -> 46720: 233472 / 46720 = 4 (unrounded, 46600 would fit 5).
        self.assertEqual(lib.occupancy(32, 64, 45576), lib.Occupancy(4, 8, ("shared memory",)))
        # 41600 + 1024 = 42624 (a multiple of 128): 233472 / 42624 = 5.
        self.assertEqual(lib.occupancy(16, 64, 41600), lib.Occupancy(5, 10, ("shared memory",)))


FLASH_SOURCE = """\
template <typename T, int kD>
Status LaunchForward(...) {
  const size_t bytes = SmemBytes<T, kD>();
  // kernel-resources: flash::FlashForwardKernel dynamic_smem=2*64*128*4 opt_in
  RETURN_IF_ERROR(CudaCall(cudaFuncSetAttribute(flash::FlashForwardKernel<T, kD>,
                                                cudaFuncAttributeMaxDynamicSharedMemorySize, bytes)));
  flash::FlashForwardKernel<T, kD><<<grid, 64, bytes, stream>>>(qkv, d);
  RowDotKernel<<<GridFor(n), kThreads, 0, stream>>>(out);
  // kernel-resources: TileKernel dynamic_smem=4096
  TileKernel<<<grid, dim3(16, 16), kTileBytes, stream>>>(x);
}
"""


class DeclarationTest(unittest.TestCase):
    def test_markers_parse_with_expressions_and_opt_in(self):
        markers, errors = lib.parse_markers(FLASH_SOURCE, "f.cu")
        self.assertEqual(errors, [])
        self.assertEqual(markers, [lib.Marker("f.cu", 4, "flash::FlashForwardKernel", 65536, True),
                                   lib.Marker("f.cu", 9, "TileKernel", 4096, False)])

    def test_a_malformed_marker_is_an_error(self):
        _, errors = lib.parse_markers("// kernel-resources: Foo dynamic_smem=bytes opt_in\n", "f.cu")
        self.assertEqual(len(errors), 1)
        self.assertIn("f.cu:1: malformed marker", errors[0])

    def test_well_declared_sources_pass(self):
        sources = {"f.cu": FLASH_SOURCE}
        markers, errors = lib.collect_markers(sources)
        names = ["flash::FlashForwardKernel<float, 64>", "flash::RowDotKernel", "TileKernel"]
        self.assertEqual(errors + lib.check_declarations(sources, markers, names), [])

    def test_an_opt_in_call_without_a_marker_fails(self):
        sources = {"f.cu": FLASH_SOURCE.replace("  // kernel-resources: flash::FlashForwardKernel dynamic_smem=2*64*128*4 opt_in\n", "")}
        markers, _ = lib.collect_markers(sources)
        errors = lib.check_declarations(sources, markers, ["flash::FlashForwardKernel<float, 64>", "TileKernel"])
        self.assertEqual(len(errors), 2, errors)
        self.assertIn("f.cu:4: cudaFuncSetAttribute(MaxDynamicSharedMemorySize) without", errors[0])
        self.assertIn("f.cu:6: the launch of flash::FlashForwardKernel<T, kD> passes bytes", errors[1])

    def test_the_opt_in_marker_must_be_right_above_the_call(self):
        source = FLASH_SOURCE.replace("  const size_t bytes = SmemBytes<T, kD>();\n", "").replace(
            "opt_in\n", "opt_in\n  a();\n  b();\n  c();\n")
        sources = {"f.cu": source}
        markers, _ = lib.collect_markers(sources)
        errors = lib.check_declarations(sources, markers, ["flash::FlashForwardKernel<float, 64>", "TileKernel"])
        self.assertEqual(errors, [
            "f.cu:7: cudaFuncSetAttribute(MaxDynamicSharedMemorySize) without a '// kernel-resources: KERNEL "
            "dynamic_smem=BYTES opt_in' marker in the 3 lines above it",
            "f.cu:3: the marker for flash::FlashForwardKernel says opt_in, but no cudaFuncSetAttribute("
            "MaxDynamicSharedMemorySize) call follows within 3 lines"])

    def test_an_opt_in_marker_without_its_call_fails(self):
        sources = {"f.cu": "// kernel-resources: K dynamic_smem=65536 opt_in\nK<<<1, 64, 65536>>>();\n"}
        markers, _ = lib.collect_markers(sources)
        errors = lib.check_declarations(sources, markers, ["K"])
        self.assertEqual(errors, ["f.cu:1: the marker for K says opt_in, but no cudaFuncSetAttribute("
                                  "MaxDynamicSharedMemorySize) call follows within 3 lines"])

    def test_a_commented_out_call_or_launch_is_not_code(self):
        sources = {"f.cu": "// cudaFuncSetAttribute(K, cudaFuncAttributeMaxDynamicSharedMemorySize, 1);\n"
                           "/* K<<<1, 64, bytes>>>(); */\n"}
        self.assertEqual(lib.check_declarations(sources, [], ["K"]), [])

    def test_a_marker_for_no_kernel_fails(self):
        sources = {"f.cu": "// kernel-resources: GoneKernel dynamic_smem=1024\n"}
        markers, _ = lib.collect_markers(sources)
        self.assertEqual(lib.check_declarations(sources, markers, ["K"]),
                         ["f.cu:1: the marker names GoneKernel, which no compiled kernel matches"])

    def test_an_instantiation_marker_wins_over_the_template_marker(self):
        markers = [lib.Marker("f.cu", 1, "FlashForwardKernel", 1000, False),
                   lib.Marker("f.cu", 2, "FlashForwardKernel<__half, 128>", 90000, True)]
        self.assertEqual(lib.dynamic_smem_for("flash::FlashForwardKernel<__half, 128>", markers), (90000, True, None))
        self.assertEqual(lib.dynamic_smem_for("flash::FlashForwardKernel<float, 64>", markers), (1000, False, None))
        self.assertEqual(lib.dynamic_smem_for("flash::RowDotKernel", markers), (0, False, None))

    def test_disagreeing_markers_are_an_error(self):
        markers = [lib.Marker("a.cu", 1, "K", 1000, False), lib.Marker("b.cu", 7, "K", 2000, False)]
        self.assertEqual(lib.dynamic_smem_for("K", markers)[2], "K: conflicting markers at a.cu:1, b.cu:7")


class FailureTest(unittest.TestCase):
    def test_todays_flash_kernels_fail_on_spills_and_missing_launch_bounds(self):
        functions = lib.parse_ptxas(PTXAS_LOG)
        kernels, errors = lib.kernels_of("flash_attention.cu", functions, lib.parse_ptx_threads(PTX), DEMANGLED, [])
        self.assertEqual(errors, [])
        device = [("engine/kernels/flash_attention.cu", f) for f in functions if not f.entry]
        self.assertEqual(lib.failures(kernels, device), [
            "engine/kernels/flash_attention.cu: flash::FlashBackwardKvKernel spills registers: 76 bytes stored, "
            "140 bytes loaded (255 registers, 48-byte stack frame)",
            "engine/kernels/flash_attention.cu: flash::FlashBackwardKvKernel has no __launch_bounds__(N): its "
            "threads per block, and so its occupancy, are unknown",
            "engine/kernels/flash_attention.cu: flash::FlashBackwardQKernel spills registers: 156 bytes stored, "
            "156 bytes loaded (255 registers, 160-byte stack frame)",
            "engine/kernels/flash_attention.cu: flash::FlashBackwardQKernel has no __launch_bounds__(N): its "
            "threads per block, and so its occupancy, are unknown",
            "engine/kernels/flash_attention.cu: flash::RowDotKernel has no __launch_bounds__(N): its threads per "
            "block, and so its occupancy, are unknown",
            "engine/kernels/flash_attention.cu: device function __internal_accurate_pow spills registers: "
            "4 bytes stored, 4 bytes loaded",
        ])

    def test_spill_loads_alone_fail(self):
        self.assertEqual(lib.failures([kernel(loads=8)], []), [
            "engine/kernels/k.cu: K spills registers: 0 bytes stored, 8 bytes loaded (32 registers, 0-byte stack frame)"])

    def test_a_clean_kernel_passes(self):
        self.assertEqual(lib.failures([kernel()], []), [])

    def test_over_48_kb_without_opt_in_fails_and_with_it_passes(self):
        over = kernel(smem=16384, dynamic_smem=40000)
        self.assertEqual(lib.failures([over], []), [
            "engine/kernels/k.cu: K uses 56384 bytes of shared memory per block (static 16384 + dynamic 40000), "
            "over 49152 without an opt-in (cudaFuncSetAttribute(MaxDynamicSharedMemorySize) with an opt_in marker)"])
        self.assertEqual(lib.failures([over._replace(opt_in=True)], []), [])

    def test_over_227_kb_fails_even_opted_in(self):
        self.assertEqual(lib.failures([kernel(smem=1024, dynamic_smem=227 * 1024, opt_in=True)], []), [
            "engine/kernels/k.cu: K uses 233472 bytes of shared memory per block (static 1024 + dynamic 232448), "
            "over the 232448 a block can have even opted in"])

    def test_a_block_too_big_for_the_register_file_fails(self):
        self.assertEqual(lib.failures([kernel(threads=1024, registers=255)], []),
                         ["engine/kernels/k.cu: K: not one block of 1024 threads fits on an SM (registers)"])


class TableTest(unittest.TestCase):
    def setUp(self):
        functions = lib.parse_ptxas(PTXAS_LOG)
        self.kernels, _ = lib.kernels_of("flash_attention.cu", functions, lib.parse_ptx_threads(PTX), DEMANGLED, [])
        self.section = lib.render_section(self.kernels, "Cuda compilation tools, release 13.0, V13.0.88")

    def test_rows_are_sorted_and_carry_the_figures(self):
        rows = [l for l in self.section.splitlines() if l.startswith("| flash_attention.cu")]
        self.assertEqual(rows, [
            "| flash_attention.cu | `flash::FlashBackwardKvKernel` | none | 255 | 76 / 140 | 41600 | 0 | 48 | ? | ? "
            "| no `__launch_bounds__` |",
            "| flash_attention.cu | `flash::FlashBackwardQKernel` | none | 255 | 156 / 156 | 33024 | 0 | 160 | ? | ? "
            "| no `__launch_bounds__` |",
            "| flash_attention.cu | `flash::FlashForwardKernel` | 64 | 226 | 0 / 0 | 16384 | 0 | 0 | 4 | 8 warps, 12.5% "
            "| registers |",
            "| flash_attention.cu | `flash::RowDotKernel` | none | 28 | 0 / 0 | 0 | 0 | 0 | ? | ? "
            "| no `__launch_bounds__` |",
        ])
        self.assertTrue(self.section.startswith(lib.BEGIN) and self.section.endswith(lib.END))
        self.assertIn("release 13.0, V13.0.88", self.section)

    def test_a_new_notes_file_gets_the_intro_heading_and_section(self):
        notes = lib.replace_section(None, self.section)
        self.assertTrue(notes.startswith("# GPU notes\n"))
        self.assertIn(lib.HEADING + "\n\n" + self.section + "\n", notes)
        self.assertEqual(lib.read_section(notes), self.section)

    def test_only_the_section_is_replaced(self):
        notes = "# GPU notes\n\n## Bandwidth\n\nhand-written\n\n## K\n\n%s\nold\n%s\n\n## Later\n\nmore\n" % (lib.BEGIN, lib.END)
        updated = lib.replace_section(notes, self.section)
        self.assertEqual(updated, notes.replace("%s\nold\n%s" % (lib.BEGIN, lib.END), self.section))
        self.assertEqual(lib.read_section(updated), self.section)
        self.assertIsNone(lib.read_section("# GPU notes\n"))


# A cuda_library genrule's command as third_party/cuda.bzl writes it (make-variables unexpanded).
BUILD_COMMAND = ("/usr/local/cuda/bin/nvcc -c -O3 -std=c++17 -lineinfo --expt-relaxed-constexpr "
                 "-Xcompiler=-fPIC,-Wall -I. -I$(GENDIR) -gencode=arch=compute_80,code=sm_80 "
                 "-gencode=arch=compute_90,code=sm_90 -gencode=arch=compute_90,code=compute_90 "
                 "-DKERNEL_FLAVOUR=2 -o $@ $(location attention.cu)")


class BuildCommandTest(unittest.TestCase):
    def test_the_build_command_for_sm_90_sass_alone(self):
        self.assertEqual(lib.flags_from_build_command(BUILD_COMMAND), (
            "/usr/local/cuda/bin/nvcc",
            ["-O3", "-std=c++17", "-lineinfo", "--expt-relaxed-constexpr", "-Xcompiler=-fPIC,-Wall", "-I.",
             "-gencode=arch=compute_90,code=sm_90", "-DKERNEL_FLAVOUR=2"]))

    def test_split_gencode_and_a_literal_output(self):
        self.assertEqual(lib.flags_from_build_command("nvcc -o $@ -DX=1 -gencode arch=compute_90,code=[sm_90,compute_90] "
                                                      "-o out.o a.cu"),
                         ("nvcc", ["-DX=1", "-gencode=arch=compute_90,code=[sm_90,compute_90]"]))

    def test_a_build_without_sm_90_sass_is_an_error(self):
        with self.assertRaisesRegex(ValueError, "makes no sm_90 SASS"):
            lib.flags_from_build_command("nvcc -c -gencode=arch=compute_80,code=sm_80 -gencode=arch=compute_90,"
                                         "code=compute_90 -o $@ $(location a.cu)")


if __name__ == "__main__":
    unittest.main()
