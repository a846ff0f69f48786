#!/usr/bin/env python3
"""Lists the GPU code in an object file's CUDA fat binary, like `cuobjdump --list-elf --list-ptx`.

The CUDA toolkit on our build machines has no cuobjdump, so this reads the
.nv_fatbin section itself. Each fat binary is a 16-byte header (magic
0xBA55ED50, version, header size, payload size) followed by entries; each entry
header holds its kind (1 = PTX, 2 = ELF/SASS) and, at byte 28, the architecture
(80 = sm_80 / compute_80).

Usage: fatbin_archs.py OBJECT [--expect sm_80 sm_90 compute_90]
Prints one line per entry ("sm_90" for SASS, "compute_90" for PTX); with
--expect, exits 1 unless exactly those are present.
"""
import struct
import subprocess
import sys
import tempfile

FATBIN_MAGIC = 0xBA55ED50


def entries(obj_path):
    with tempfile.NamedTemporaryFile(suffix=".bin") as out:
        subprocess.run(["objcopy", "-O", "binary", "--only-section=.nv_fatbin", obj_path, out.name],
                       check=True)
        data = open(out.name, "rb").read()
    found = []
    offset = 0
    while offset + 16 <= len(data):
        magic, _version, header_size, fat_size = struct.unpack_from("<IHHQ", data, offset)
        if magic != FATBIN_MAGIC:
            break
        entry = offset + header_size
        end = entry + fat_size
        while entry < end:
            kind, _ver, entry_header, payload = struct.unpack_from("<HHIQ", data, entry)
            arch = struct.unpack_from("<I", data, entry + 28)[0]
            if kind == 2:
                found.append("sm_%d" % arch)
            elif kind == 1:
                found.append("compute_%d" % arch)
            else:
                found.append("unknown_kind_%d_%d" % (kind, arch))
            entry += entry_header + payload
        offset = (end + 7) // 8 * 8
    return found


def main(argv):
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    found = entries(argv[1])
    for name in found:
        print(name)
    if "--expect" in argv:
        want = sorted(argv[argv.index("--expect") + 1:])
        if sorted(found) != want:
            print("%s: expected %s, found %s" % (argv[1], want, sorted(found)), file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
