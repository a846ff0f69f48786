"""The pure part of scripts/kernel_resources.py: ptxas and PTX parsing, kernel names, the
source's shared-memory declarations, the checks, H100 occupancy and the table. No I/O here,
so scripts/kernel_resources_test.py tests it on recorded compiler output without nvcc.

Sizes are in bytes, threads per block, registers per thread.
"""
import ast
import collections
import re
import shlex

BEGIN = "<!-- kernel-resources:begin -->"
END = "<!-- kernel-resources:end -->"
NOTES = "bench/GPU_NOTES.md"
KERNEL_DIR = "engine/kernels"
REFRESH = "bazel run //engine/kernels:kernel_resources_test -- --update"
TEST = "//engine/kernels:kernel_resources_test"
ARCH = "sm_90"

# H100 (compute capability 9.0), as cuda_occupancy.h and the Programming Guide give them.
WARP_SIZE = 32
MAX_THREADS_PER_BLOCK = 1024
MAX_REGS_PER_THREAD = 255
REGS_PER_SM = 65536
REGS_PER_BLOCK = 65536
REG_ALLOC_UNIT = 256  # registers, allocated per warp
SUB_PARTITIONS = 4
MAX_WARPS_PER_SM = 64
MAX_BLOCKS_PER_SM = 32
BARRIERS_PER_SM = 2 * MAX_BLOCKS_PER_SM
SMEM_PER_SM = 228 * 1024
SMEM_PER_BLOCK = 48 * 1024
SMEM_PER_BLOCK_OPTIN = 227 * 1024
SMEM_RESERVED_PER_BLOCK = 1024
SMEM_ALLOC_UNIT = 128

FunctionResources = collections.namedtuple(
    "FunctionResources", "name entry registers barriers smem stack spill_stores spill_loads")
Occupancy = collections.namedtuple("Occupancy", "blocks warps limits")
Marker = collections.namedtuple("Marker", "path line kernel dynamic_smem opt_in")
Kernel = collections.namedtuple(
    "Kernel", "source name mangled threads registers barriers smem dynamic_smem opt_in stack "
    "spill_stores spill_loads")


def _round_up(x, unit):
    return -(-x // unit) * unit


# ---------------------------------------------------------------- occupancy

def occupancy(registers, threads, smem, dynamic_smem=0, barriers=0, opt_in=False):
    """Resident blocks and warps per H100 SM, and what limits them (cuda_occupancy.h's
    cudaOccMaxActiveBlocksPerMultiprocessor with the default carveout). Bytes; threads per
    block. limits names every factor that reaches the minimum."""
    if threads > MAX_THREADS_PER_BLOCK:
        return Occupancy(0, 0, ("threads",))
    warps = -(-threads // WARP_SIZE)
    by = {"warps": MAX_WARPS_PER_SM // warps, "blocks": MAX_BLOCKS_PER_SM}
    regs_per_warp = _round_up(registers * WARP_SIZE, REG_ALLOC_UNIT)
    if (regs_per_warp * _round_up(warps, SUB_PARTITIONS) > REGS_PER_BLOCK or
            regs_per_warp * warps > REGS_PER_BLOCK or registers > MAX_REGS_PER_THREAD + 1):
        by["registers"] = 0
    elif regs_per_warp:
        warps_per_partition = REGS_PER_SM // SUB_PARTITIONS // regs_per_warp
        by["registers"] = warps_per_partition * SUB_PARTITIONS // warps
    # An opted-in kernel's limit is its declared dynamic size; cuda_occupancy.h compares that
    # (with the static and reserved parts) to the default limit to pick the opt-in one.
    per_block = _round_up(smem + SMEM_RESERVED_PER_BLOCK + dynamic_smem, SMEM_ALLOC_UNIT)
    opted = opt_in and smem + SMEM_RESERVED_PER_BLOCK + dynamic_smem > SMEM_PER_BLOCK
    limit = SMEM_PER_BLOCK_OPTIN if opted else SMEM_PER_BLOCK
    by["shared memory"] = 0 if per_block > limit + SMEM_RESERVED_PER_BLOCK else SMEM_PER_SM // per_block
    if barriers:
        by["barriers"] = BARRIERS_PER_SM // barriers
    blocks = min(by.values())
    order = ("registers", "shared memory", "warps", "blocks", "barriers")
    return Occupancy(blocks, blocks * warps, tuple(k for k in order if by.get(k) == blocks))


# ---------------------------------------------------------------- ptxas and PTX

_ENTRY = re.compile(r"Compiling entry function '([^']+)' for '(\w+)'")
_PROPS = re.compile(r"Function properties for (\S+)")
_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_USED = re.compile(r"Used (\d+) registers")


def parse_ptxas(log, arch=ARCH):
    """ptxas -v output -> [FunctionResources] in order: entries (kernels) and the device
    functions ptxas compiled on their own (entry=False; registers None). Bytes."""
    found, entries, current, props = [], {}, None, None
    for line in log.splitlines():
        m = _ENTRY.search(line)
        if m:
            current = m.group(1) if m.group(2) == arch else None
            if current:
                entries[current] = FunctionResources(current, True, None, 0, 0, 0, 0, 0)
                found.append(current)
            continue
        m = _PROPS.search(line)
        if m:
            props = m.group(1)
            continue
        m = _FRAME.search(line)
        if m and props:
            stack, stores, loads = map(int, m.groups())
            if props in entries:
                entries[props] = entries[props]._replace(stack=stack, spill_stores=stores, spill_loads=loads)
            else:
                found.append(FunctionResources(props, False, None, 0, 0, stack, stores, loads))
            props = None
            continue
        m = _USED.search(line)
        if m and current:
            barriers = re.search(r"used (\d+) barriers", line)
            smem = re.search(r"(\d+) bytes smem", line)
            entries[current] = entries[current]._replace(
                registers=int(m.group(1)), barriers=int(barriers.group(1)) if barriers else 0,
                smem=int(smem.group(1)) if smem else 0)
            current = None
    return [entries[f] if isinstance(f, str) else f for f in found]


def parse_ptx_threads(ptx):
    """PTX text -> {entry: threads per block from .maxntid/.reqntid} for entries that have one."""
    threads = {}
    for m in re.finditer(r"\.entry\s+([\w$.]+)\s*\(", ptx):
        body = ptx.find("{", m.end())
        bounds = re.search(r"\.(?:maxntid|reqntid)\s+(\d+)(?:\s*,\s*(\d+))?(?:\s*,\s*(\d+))?",
                           ptx[m.end():body if body >= 0 else len(ptx)])
        if bounds:
            n = 1
            for dim in bounds.groups():
                n *= int(dim or 1)
            threads[m.group(1)] = n
    return threads


def readable_name(demangled):
    """`void ringmaster::kernels::(anonymous namespace)::K<__half, 64>(__half const*)` ->
    (`K<__half, 64>`, `(__half const*)`): the namespaces of the project dropped, the return type
    that templates carry dropped, the parameter list apart."""
    text = demangled.replace("ringmaster::kernels::", "").replace("(anonymous namespace)::", "")
    params = ""
    if text.endswith(")"):
        depth = 0
        for i in range(len(text) - 1, -1, -1):
            depth += {")": 1, "(": -1}.get(text[i], 0)
            if depth == 0:
                text, params = text[:i], text[i:]
                break
    if text.startswith("void "):
        text = text[len("void "):]
    while "> >" in text:
        text = text.replace("> >", ">>")
    return text.strip(), params


def _template_free(name):
    depth, out = 0, []
    for ch in name:
        depth += {"<": 1, ">": -1}.get(ch, 0)
        if depth == 0 and ch != ">":
            out.append(ch)
    return "".join(out)


def _names_match(pattern, name):
    """A marker's kernel matches a table name exactly, without template arguments, or as a
    trailing part (`FlashForwardKernel` for `flash::FlashForwardKernel<float, 64>`)."""
    pattern = pattern.replace(" ", "")
    for candidate in (name.replace(" ", ""), _template_free(name).replace(" ", "")):
        if candidate == pattern or candidate.endswith("::" + pattern):
            return True
    return False


# ---------------------------------------------------------------- source declarations

_MARKER = re.compile(r"//\s*kernel-resources:(.*)$")
_MARKER_BODY = re.compile(r"^\s*(?P<kernel>\S.*?)\s+dynamic_smem=(?P<bytes>[0-9+\-*() ]+?)"
                          r"(?P<opt_in>\s+opt_in)?\s*$")


def _eval_bytes(expr):
    def walk(node):
        if isinstance(node, ast.Constant) and isinstance(node.value, int):
            return node.value
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub, ast.Mult)):
            a, b = walk(node.left), walk(node.right)
            return a + b if isinstance(node.op, ast.Add) else a - b if isinstance(node.op, ast.Sub) else a * b
        raise ValueError(expr)
    return walk(ast.parse(expr.strip(), mode="eval").body)


def parse_markers(text, path):
    """Source text -> ([Marker], [error]); lines are 1-based."""
    markers, errors = [], []
    for number, line in enumerate(text.splitlines(), 1):
        m = _MARKER.search(line)
        if not m:
            continue
        body = _MARKER_BODY.match(m.group(1))
        try:
            size = _eval_bytes(body.group("bytes")) if body else None
        except (ValueError, SyntaxError):
            size = None
        if size is None or size < 0:
            errors.append("%s:%d: malformed marker %r; expected "
                          "'// kernel-resources: KERNEL dynamic_smem=BYTES [opt_in]'" % (path, number, line.strip()))
            continue
        markers.append(Marker(path, number, body.group("kernel"), size, bool(body.group("opt_in"))))
    return markers, errors


def strip_comments(code):
    """C++ text with comments blanked (newlines kept, so line numbers stay)."""
    return re.sub(r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"',
                  lambda m: m.group(0) if m.group(0).startswith('"') else re.sub(r"[^\n]", " ", m.group(0)),
                  code, flags=re.S)


def _split_args(text, start):
    """Top-level comma-separated arguments from text[start:] up to the closing ')' or '>>>'."""
    args, depth, i, begin = [], 0, start, start
    while i < len(text):
        if text.startswith(">>>", i) and depth == 0:
            break
        ch = text[i]
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            if depth == 0:
                break
            depth -= 1
        elif ch == "," and depth == 0:
            args.append(text[begin:i].strip())
            begin = i + 1
        i += 1
    args.append(text[begin:i].strip())
    return args


def find_opt_in_calls(code):
    """Comment-free source -> [line] of cudaFuncSetAttribute/cuFuncSetAttribute calls that raise
    the dynamic shared memory limit."""
    lines = []
    for m in re.finditer(r"\bcu(?:da)?FuncSetAttribute\s*\(", code):
        args = _split_args(code, m.end())
        if any(re.search(r"MaxDynamicSharedMemorySize|MAX_DYNAMIC_SHARED_SIZE_BYTES", a) for a in args):
            lines.append(code.count("\n", 0, m.start()) + 1)
    return lines


def find_dynamic_launches(code):
    """Comment-free source -> [(line, kernel, smem expression)] of <<<>>> launches that pass
    dynamic shared memory (a third argument other than 0)."""
    found = []
    for m in re.finditer(r"<<<", code):
        args = _split_args(code, m.end())
        if len(args) < 3 or re.fullmatch(r"0[uUlL]*|size_t\{0\}", args[2]):
            continue
        head = code[:m.start()].rstrip()
        i, depth = len(head), 0
        while i > 0:
            ch = head[i - 1]
            if ch == ">":
                depth += 1
            elif ch == "<":
                depth -= 1
            elif depth == 0 and not (ch.isalnum() or ch in "_:"):
                break
            i -= 1
        found.append((code.count("\n", 0, m.start()) + 1, head[i:].strip(), args[2]))
    return found


def collect_markers(sources):
    """sources: {path: text} -> ([Marker], [error]) over all of them."""
    markers, errors = [], []
    for path in sorted(sources):
        found, bad = parse_markers(sources[path], path)
        markers += found
        errors += bad
    return markers, errors


def check_declarations(sources, markers, kernel_names):
    """What is wrong with the markers, the opt-in calls and the launches that pass dynamic shared
    memory. kernel_names: the table names of every compiled kernel."""
    errors = []
    last_part = lambda name: _template_free(name).split("::")[-1].strip()
    declared = {last_part(mk.kernel) for mk in markers}
    for path in sorted(sources):
        code = strip_comments(sources[path])
        calls = find_opt_in_calls(code)
        opt_ins = [mk for mk in markers if mk.opt_in and mk.path == path]
        for line in calls:
            if not any(0 < line - mk.line <= 3 for mk in opt_ins):
                errors.append("%s:%d: cudaFuncSetAttribute(MaxDynamicSharedMemorySize) without a "
                              "'// kernel-resources: KERNEL dynamic_smem=BYTES opt_in' marker in the 3 "
                              "lines above it" % (path, line))
        for mk in opt_ins:
            if not any(0 < line - mk.line <= 3 for line in calls):
                errors.append("%s:%d: the marker for %s says opt_in, but no cudaFuncSetAttribute("
                              "MaxDynamicSharedMemorySize) call follows within 3 lines" % (path, mk.line, mk.kernel))
        for line, kernel, smem in find_dynamic_launches(code):
            if last_part(kernel) not in declared:
                errors.append("%s:%d: the launch of %s passes %s bytes of dynamic shared memory, but no "
                              "kernel-resources marker declares how many" % (path, line, kernel, smem))
    for mk in markers:
        if not any(_names_match(mk.kernel, name) for name in kernel_names):
            errors.append("%s:%d: the marker names %s, which no compiled kernel matches" % (mk.path, mk.line, mk.kernel))
    return errors


def dynamic_smem_for(name, markers):
    """(bytes, opt_in, error) that the markers give a kernel: a marker with template arguments
    wins over one without; markers of equal standing must agree."""
    matching = [mk for mk in markers if _names_match(mk.kernel, name)]
    exact = [mk for mk in matching if "<" in mk.kernel]
    chosen = exact or matching
    if not chosen:
        return 0, False, None
    if len({(mk.dynamic_smem, mk.opt_in) for mk in chosen}) > 1:
        return max(mk.dynamic_smem for mk in chosen), any(mk.opt_in for mk in chosen), (
            "%s: conflicting markers at %s" % (name, ", ".join("%s:%d" % (mk.path, mk.line) for mk in chosen)))
    return chosen[0].dynamic_smem, chosen[0].opt_in, None


# ---------------------------------------------------------------- kernels and checks

def kernels_of(source, functions, threads, demangled, markers):
    """One .cu file's ptxas functions -> ([Kernel], [error]). threads: parse_ptx_threads;
    demangled: {mangled: demangled}. Kernels whose names collide keep their parameter lists."""
    entries = [f for f in functions if f.entry]
    names = {f.name: readable_name(demangled.get(f.name, f.name)) for f in entries}
    counts = collections.Counter(name for name, _ in names.values())
    kernels, errors = [], []
    for f in entries:
        name, params = names[f.name]
        if counts[name] > 1:
            name += params
        dynamic, opt_in, error = dynamic_smem_for(name, markers)
        if error:
            errors.append(error)
        kernels.append(Kernel(source, name, f.name, threads.get(f.name), f.registers, f.barriers, f.smem,
                              dynamic, opt_in, f.stack, f.spill_stores, f.spill_loads))
    return kernels, errors


def kernel_occupancy(kernel):
    return occupancy(kernel.registers, kernel.threads, kernel.smem, kernel.dynamic_smem, kernel.barriers,
                     kernel.opt_in)


def failures(kernels, device_functions):
    """What the kernels break. device_functions: [(source, FunctionResources)] of the functions
    ptxas compiled apart from the kernels."""
    out = []
    for k in sorted(kernels, key=lambda k: (k.source, k.name)):
        who = "%s/%s: %s" % (KERNEL_DIR, k.source, k.name)
        if k.spill_stores or k.spill_loads:
            out.append("%s spills registers: %d bytes stored, %d bytes loaded (%d registers, %d-byte stack frame)"
                       % (who, k.spill_stores, k.spill_loads, k.registers, k.stack))
        if k.threads is None:
            out.append("%s has no __launch_bounds__(N): its threads per block, and so its occupancy, are unknown" % who)
        total, reported = k.smem + k.dynamic_smem, len(out)
        if total > SMEM_PER_BLOCK_OPTIN:
            out.append("%s uses %d bytes of shared memory per block (static %d + dynamic %d), over the %d a block "
                       "can have even opted in" % (who, total, k.smem, k.dynamic_smem, SMEM_PER_BLOCK_OPTIN))
        elif total > SMEM_PER_BLOCK and not k.opt_in:
            out.append("%s uses %d bytes of shared memory per block (static %d + dynamic %d), over %d without an "
                       "opt-in (cudaFuncSetAttribute(MaxDynamicSharedMemorySize) with an opt_in marker)"
                       % (who, total, k.smem, k.dynamic_smem, SMEM_PER_BLOCK))
        smem_failed = len(out) > reported
        if k.threads is not None and not smem_failed and kernel_occupancy(k).blocks == 0:
            out.append("%s: not one block of %d threads fits on an SM (%s)"
                       % (who, k.threads, ", ".join(kernel_occupancy(k).limits)))
    seen = set()
    for source, f in sorted(device_functions, key=lambda sf: (sf[0], sf[1].name)):
        if (f.spill_stores or f.spill_loads) and (source, f.name) not in seen:
            seen.add((source, f.name))
            out.append("%s: device function %s spills registers: %d bytes stored, %d bytes loaded"
                       % (source, f.name, f.spill_stores, f.spill_loads))
    return out


# ---------------------------------------------------------------- the table

INTRO = """# GPU notes

Figures about Ringmaster's CUDA kernels on the GPUs it targets, each with where it comes from.
A section between `<!-- NAME:begin -->` and `<!-- NAME:end -->` is written by the tool its first
line names, and a test fails when it no longer matches the code: refresh it with that tool, never
by hand. The rest of this file is written by hand.
"""
HEADING = "## Kernel resources on an H100 (sm_90)"


def render_section(kernels, toolkit):
    """The table, between BEGIN and END, for kernels of any order. toolkit: nvcc's version line."""
    lines = [
        BEGIN,
        "<!-- Written by `%s`; %s fails when it is stale. -->" % (REFRESH, TEST),
        "",
        "Every kernel under engine/kernels/, compiled for sm_90 with the build's nvcc flags (%s)." % toolkit,
        "Threads: the kernel's `__launch_bounds__`. Shared memory and stack are bytes per block and per",
        "thread; dynamic shared memory is what a `kernel-resources:` marker beside the launcher declares.",
        "Occupancy: resident blocks and warps (of 64) per H100 SM, by the CUDA Occupancy Calculator's",
        "arithmetic (the toolkit's `cuda_occupancy.h`; the formula is in scripts/kernel_resources.py).",
        "",
        "| Source | Kernel | Threads | Registers | Spill stores / loads | Static smem | Dynamic smem "
        "| Stack frame | Blocks/SM | Occupancy | Limited by |",
        "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|---|",
    ]
    for k in sorted(kernels, key=lambda k: (k.source, k.name)):
        if k.threads is None:
            threads, blocks, occ, limits = "none", "?", "?", "no `__launch_bounds__`"
        else:
            result = kernel_occupancy(k)
            threads, blocks = str(k.threads), str(result.blocks)
            occ = "%d warps, %g%%" % (result.warps, round(100.0 * result.warps / MAX_WARPS_PER_SM, 1))
            limits = ", ".join(result.limits)
        dynamic = "%d%s" % (k.dynamic_smem, " (opt-in)" if k.opt_in else "")
        lines.append("| %s | `%s` | %s | %d | %d / %d | %d | %s | %d | %s | %s | %s |" % (
            k.source, k.name, threads, k.registers, k.spill_stores, k.spill_loads, k.smem, dynamic, k.stack,
            blocks, occ, limits))
    lines.append(END)
    return "\n".join(lines)


def read_section(notes):
    """The BEGIN..END section of GPU_NOTES.md's text, or None."""
    begin, end = notes.find(BEGIN), notes.find(END)
    return notes[begin:end + len(END)] if 0 <= begin < end else None


def replace_section(notes, section):
    """GPU_NOTES.md's text (None: the file is new) with section in place of the old one, or
    appended under its heading."""
    notes = INTRO if notes is None else notes
    begin, end = notes.find(BEGIN), notes.find(END)
    if 0 <= begin < end:
        return notes[:begin] + section + notes[end + len(END):]
    return notes.rstrip("\n") + "\n\n" + HEADING + "\n\n" + section + "\n"


# ---------------------------------------------------------------- the build's nvcc command

def flags_from_build_command(command, arch=ARCH):
    """A cuda_library genrule's nvcc command (with its make-variables, as the BUILD file has it)
    -> (nvcc, flags) that compile the same way to `arch` SASS alone: -c, -o, the source and the
    $(...) and $@ make-variables (the output, the source, the genfiles include directory: no
    kernel includes a generated header) dropped; of the -gencode flags only those with code=arch.
    Raises ValueError when the command makes no `arch` SASS."""
    tokens = shlex.split(re.sub(r"-o\s+\$@|\$\([^)]*\)|\$@", "", command))
    if not tokens:
        raise ValueError("empty nvcc command")
    # "-gencode X" and "-o X" as one token each.
    joined, i = [], 1
    while i < len(tokens):
        if tokens[i] in ("-o", "-gencode", "--generate-code") and i + 1 < len(tokens):
            joined.append(tokens[i] + "=" + tokens[i + 1])
            i += 2
        else:
            joined.append(tokens[i])
            i += 1
    flags, gencodes = [], []
    for token in joined:
        if token in ("-c", "-o") or token.startswith("-o=") or token.endswith(".cu") or token == "-I":
            continue
        if token.startswith(("-gencode=", "--generate-code=")):
            gencodes.append(token)
            if re.search(r"code=\[?([\w,]*,)?%s\b" % arch, token):
                flags.append(token)
        else:
            flags.append(token)
    if not any(f in gencodes for f in flags):
        raise ValueError("the build's nvcc command makes no %s SASS (%s)" % (arch, " ".join(gencodes) or "no -gencode"))
    return tokens[0], flags
