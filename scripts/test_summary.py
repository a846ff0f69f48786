#!/usr/bin/env python3
"""Counts test cases from a `bazel test` run: reads the targets' status lines
from the log and their test.xml files, and prints per-config totals.

Usage: test_summary.py LABEL LOG TESTLOGS_DIR
Prints "LABEL: P passed, F failed, S skipped (T targets)" and writes the three
numbers to stdout's last line as "counts P F S" for the caller to add up.
A target that failed without a test.xml (a crash, a build failure, a timeout)
counts as one failed case; a shell test whose last line is "SKIP: why" counts as
one skipped case.
"""
import glob
import os
import re
import sys
import xml.etree.ElementTree as ET

# Debian's /etc/bazel/bazelrc sets --sandbox_debug: linux-sandbox appends its
# own lines ("1795785816.88: src/main/tools/linux-sandbox...") to every test.log.
SANDBOX_DEBUG = re.compile(r"^\d+\.\d+: src/main/tools/linux-sandbox")
STATUS = re.compile(r"^(//\S+)\s+(?:\(cached\)\s+)?(PASSED|FAILED TO BUILD|FAILED|TIMEOUT|FLAKY|NO STATUS|INCOMPLETE|REMOTE FAILURE|SKIPPED)\b")


def count_xml(path):
    passed = failed = skipped = 0
    try:
        root = ET.parse(path).getroot()
    except ET.ParseError:
        return None
    for case in root.iter("testcase"):
        if case.find("failure") is not None or case.find("error") is not None:
            failed += 1
        elif case.get("result") == "skipped" or case.find("skipped") is not None or case.get("status") == "notrun":
            skipped += 1
        else:
            passed += 1
    return passed, failed, skipped


def skipped_as_a_whole(xml, counts):
    """A shell test that could not run here exits 0 with a last line "SKIP: why";
    Bazel's XML calls it one passed case: count it as skipped."""
    passed, failed, skipped = counts
    if (passed, failed, skipped) != (1, 0, 0):
        return counts
    try:
        lines = [l for l in open(os.path.join(os.path.dirname(xml), "test.log"), errors="replace")
                 if l.strip() and not SANDBOX_DEBUG.match(l)]
    except OSError:
        return counts
    return (0, 0, 1) if lines and lines[-1].startswith("SKIP:") else counts


def main():
    label, log, testlogs = sys.argv[1:4]
    passed = failed = skipped = targets = 0
    failed_targets = []
    for line in open(log, errors="replace"):
        m = STATUS.match(line)
        if not m:
            continue
        target, status = m.groups()
        targets += 1
        if status == "SKIPPED":  # incompatible target, not built here
            continue
        pkg, name = target[2:].split(":")
        xmls = glob.glob(os.path.join(testlogs, pkg, name, "test.xml")) + glob.glob(
            os.path.join(testlogs, pkg, name, "shard_*", "test.xml"))
        counts = [skipped_as_a_whole(x, c) for x, c in ((x, count_xml(x)) for x in xmls) if c]
        p = sum(c[0] for c in counts)
        f = sum(c[1] for c in counts)
        s = sum(c[2] for c in counts)
        if status not in ("PASSED", "FLAKY") and f == 0:
            f = 1
        if f:
            failed_targets.append(target)
        passed, failed, skipped = passed + p, failed + f, skipped + s
    print("%s: %d passed, %d failed, %d skipped (%d test targets)" % (label, passed, failed, skipped, targets))
    for t in failed_targets:
        print("  failed: %s" % t)
    print("counts %d %d %d" % (passed, failed, skipped))


if __name__ == "__main__":
    main()
