#!/usr/bin/env python3
"""scripts/test_summary.py counts a shell test whose last line is "SKIP: why" as
skipped, also when linux-sandbox has appended its debug lines to the log (Debian's
/etc/bazel/bazelrc sets --sandbox_debug), and as passed otherwise."""
import importlib.util
import os
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location("test_summary", os.path.join(HERE, "test_summary.py"))
test_summary = importlib.util.module_from_spec(spec)
spec.loader.exec_module(test_summary)

SANDBOX_TAIL = (
    "1795785816.882641675: src/main/tools/linux-sandbox-pid1.cc:423: wait returned pid=2, status=0x00\n"
    "1795785816.883008599: src/main/tools/linux-sandbox.cc:233: child exited normally with code 0\n")


class SkippedAsAWholeTest(unittest.TestCase):
    def counts(self, log):
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, "test.log"), "w") as f:
                f.write(log)
            return test_summary.skipped_as_a_whole(os.path.join(d, "test.xml"), (1, 0, 0))

    def test_skip_line_last(self):
        self.assertEqual(self.counts("checking\nSKIP: no GPU here\n"), (0, 0, 1))

    def test_skip_line_before_sandbox_debug(self):
        self.assertEqual(self.counts("checking\nSKIP: no GPU here\n" + SANDBOX_TAIL), (0, 0, 1))

    def test_pass_with_sandbox_debug(self):
        self.assertEqual(self.counts("SKIP: not the last line\nall good\n" + SANDBOX_TAIL), (1, 0, 0))


if __name__ == "__main__":
    unittest.main()
