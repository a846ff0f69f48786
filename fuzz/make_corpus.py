#!/usr/bin/env python3
"""Writes the seed corpora of the RPC fuzz targets (fuzz/corpus/<target>/),
and the inflation seeds of spec_fuzzer (fuzz/corpus/spec_fuzzer/inflate_*).

Each RPC file is a sequence of calls, [op][fixups][length u16 LE][payload],
the payload a request in protobuf wire format, encoded here by hand (no
protobuf module needed); an op with bit 7 set (INFLATE) carries an
inflation, [target][amount u24 LE], after fixups (fuzz/fuzz_input.h). Run
from the repository root; idempotent.
"""
import os
import struct
import subprocess

FIX_JOB, FIX_GEN, FIX_NODE, FIX_VALID, ADVANCE = 1, 2, 4, 8, 0x80
LIVE = FIX_JOB | FIX_GEN | FIX_NODE | FIX_VALID
INFLATE = 0x80
MIB = 1 << 20


def varint(v):
    v &= (1 << 64) - 1
    out = b""
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out += bytes([b | 0x80])
        else:
            return out + bytes([b])


def field(num, value):
    if isinstance(value, int):
        return varint(num << 3) + varint(value)
    if isinstance(value, str):
        value = value.encode()
    return varint(num << 3 | 2) + varint(len(value)) + value


def msg(*fields):
    return b"".join(field(n, v) for n, v in fields)


def call(op, fixups=LIVE, payload=b"", inflate=None):
    """One record; inflate=(target, amount) grows the decoded request."""
    if inflate is None:
        return bytes([op, fixups]) + struct.pack("<H", len(payload)) + payload
    target, amount = inflate
    return (bytes([op | INFLATE, fixups, target]) + struct.pack("<I", amount)[:3] +
            struct.pack("<H", len(payload)) + payload)


_SITES = {}


def site(request_type, path):
    """The inflation target that grows `path` of `request_type`, as
    bazel-bin/fuzz/inflate_sites lists them (bazel build //fuzz:inflate_sites
    first)."""
    if request_type not in _SITES:
        out = subprocess.run([os.path.join("bazel-bin", "fuzz", "inflate_sites"), "ringmaster.v1." + request_type],
                             check=True, capture_output=True, text=True).stdout
        _SITES[request_type] = {line.split()[2]: int(line.split()[1]) for line in out.splitlines()}
    return _SITES[request_type][path]


def write(target, name, *calls):
    """A seed of `target`; target "<name>.oversized": replayed, not mutated."""
    d = os.path.join("fuzz", "corpus", target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(b"".join(calls))


def scope(job="", gen=0, rank=0):
    return msg((1, job), (2, gen), (3, rank)) if job or gen or rank else b""


# RendezvousService: 0 Publish, 1 GetNccl, 2 KvSet, 3 KvGet, 4 KvWait, 5 KvAdd.
R = "rendezvous_service_fuzzer"
write(R, "every_rpc_live", *[call(op) for op in range(6)])
write(R, "set_then_wait", call(2, LIVE, msg((2, "addr"), (3, "127.0.0.1:1"))),
      call(4, LIVE, msg((2, "addr"))), call(3, LIVE, msg((2, "addr"))))
write(R, "publish_then_get", call(0, LIVE, msg((2, "pp"), (3, b"\x01" * 128))), call(1, LIVE, msg((2, "pp"))))
write(R, "unknown_job", call(2, 0, msg((1, scope("job-x", 1, 0)), (2, "k"), (3, "v"))),
      call(5, 0, msg((1, scope("job-x", 1, 0)), (2, "c"), (3, -5))))
write(R, "stale_generation", call(2, FIX_JOB | FIX_VALID, msg((1, scope(gen=99, rank=1)))),
      call(4, FIX_JOB | FIX_VALID, msg((1, scope(gen=-1, rank=1)), (3, msg((1, 10**12))))))
write(R, "bad_keys", call(2, LIVE, msg((2, ""))), call(3, LIVE, msg((2, "x" * 600))),
      call(5, LIVE, msg((2, "c"), (3, 2**63 - 1))), call(5, LIVE, msg((2, "c"), (3, 2**63 - 1))))
write(R, "rank_out_of_range", call(2, LIVE, msg((1, scope(rank=-3)))), call(0, LIVE, msg((1, scope(rank=1 << 30)))))
write(R, "clock_runs_out", call(4, LIVE | ADVANCE | 0x70), call(2, LIVE | ADVANCE | 0x70), call(1, LIVE))
write(R, "empty", b"")

# CheckpointService: 0 Commit, 1 GetLatestCheckpoint.
C = "checkpoint_service_fuzzer"
write(C, "commit_then_latest", call(0), call(1))
write(C, "commit_two_steps", call(0), call(0), call(0, LIVE, msg((3, 5))), call(1))
write(C, "bad_files", call(0, LIVE, msg((8, msg((1, "../escape"), (2, -1))))),
      call(0, LIVE, msg((8, msg((1, "/abs"))))), call(0, LIVE, msg((6, 3), (7, 2))))
write(C, "stale_generation", call(0, FIX_JOB | FIX_VALID, msg((2, 99))), call(1, 0, msg((1, "nope"))))
write(C, "bad_path", call(0, LIVE, msg((4, "relative/dir"))), call(0, LIVE, msg((4, ""))),
      call(0, LIVE, msg((3, -7))))
write(C, "empty_job", call(1, 0), call(0, 0))
write(C, "after_clock", call(0, LIVE | ADVANCE | 0x70), call(1, LIVE))

# JobService: 0 Submit, 1 GetJob, 2 ListJobs, 3 CancelJob, 4 StreamLogs,
# 5 WatchJob, 6 ListNodes, 7 ListCheckpoints.
J = "job_service_fuzzer"
mlp_spec = msg((1, "j"), (2, msg((1, msg()))), (9, msg((1, 1), (2, 2), (3, 1))))
write(J, "every_rpc_live", *[call(op) for op in range(8)])
write(J, "submit_validate_only", call(0, LIVE, msg((3, 1))), call(0, LIVE, msg((2, "req-1"))),
      call(0, LIVE, msg((2, "req-1"))))
zero_nodes = msg((9, msg((1, 0))))
odd_labels = msg((12, -5), (13, msg((1, ""), (2, "x"))))
write(J, "submit_bad_specs", call(0, 0, msg((1, mlp_spec))), call(0, LIVE, msg((1, zero_nodes))),
      call(0, LIVE, msg((1, odd_labels))), call(0, 0, b""))
write(J, "cancel_then_watch", call(3, LIVE, msg((2, "fuzz"))), call(5, LIVE), call(1, LIVE, msg((2, 1))),
      call(3, LIVE))
write(J, "list_pages", call(2, 0, msg((3, 1))), call(2, 0, msg((3, -1), (4, "garbage"))),
      call(2, 0, msg((1, 4), (1, 99), (2, msg((1, "team"), (2, "x"))))), call(6, 0, msg((1, 3))))
write(J, "logs", call(4, LIVE, msg((2, 0), (3, 1), (4, 10))), call(4, LIVE, msg((4, -1), (3, -7))),
      call(4, LIVE, msg((5, 1))), call(4, 0, msg((1, "no-such-job"))))
write(J, "checkpoints", call(7, LIVE, msg((2, 1))), call(7, 0), call(1, 0, msg((1, "x" * 300))))
write(J, "after_clock", call(1, LIVE | ADVANCE | 0x70), call(5, LIVE, msg((2, 3))))

# NodeService: 0 Register, 1 Session, 2 ReportRankExit, 3 PushLogs.
N = "node_service_fuzzer"


def seq(*messages):
    return b"".join(struct.pack("<H", len(m)) + m for m in messages)


node = msg((2, "fuzz-node"), (3, "127.0.0.1:29500"), (5, 2))
open_ = msg((1, msg()))
heartbeat = msg((2, msg()))
progress = msg((4, msg((3, 0), (4, msg((1, 3))))))
start_result = msg((3, msg((3, 0), (3, 1))))
write(N, "session_live", call(1, LIVE, seq(open_, heartbeat, progress, start_result, heartbeat)))
write(N, "session_bad_open", call(1, 0, seq(open_)), call(1, 0, seq(heartbeat)), call(1, 0, b""),
      call(1, LIVE, seq(open_, open_)))
running = msg((3, 0), (4, 42))
write(N, "register", call(0, 0, msg((1, node))), call(0, LIVE, msg((1, node), (2, running))),
      call(0, 0, msg((1, msg((5, -1))))), call(0, 0, b""))
write(N, "rank_exit", call(2, LIVE, msg((4, 0), (5, 1))), call(2, LIVE, msg((4, 1), (6, 9), (7, 1))),
      call(2, LIVE, msg((4, 77))), call(2, 0, msg((1, "n"), (2, "j"))))
line = msg((3, 0), (4, 1), (5, 1), (7, "hello"))
bad_line = msg((3, -1), (5, -5))
write(N, "push_logs", call(3, LIVE, seq(msg((1, line)), msg((1, line)), msg((1, bad_line)))),
      call(3, 0, seq(msg((1, msg((1, "j")))))))
write(N, "lease_runs_out", call(1, LIVE | ADVANCE | 0x70, seq(open_, heartbeat)), call(2, LIVE | ADVANCE | 0x70),
      call(1, LIVE, seq(open_, progress)))

# The worker's agent socket: 0 ReportMetrics, 1-6 the rendezvous calls,
# 7 Commit, 8 GetLatestCheckpoint, 9 ReportDamaged, 10 Rejoin.
A = "agent_service_fuzzer"
write(A, "every_rpc_live", *[call(op) for op in range(11)])
# Rank 1 runs rejoinable: its call waits until its deadline withdraws it.
# Rank 0 is not rejoinable; a rank, job or generation not running here, and
# generation 0, are refused.
write(A, "rejoin", call(10), call(10, LIVE, msg((3, 0))), call(10, LIVE, msg((3, 7))),
      call(10, 0, msg((1, "other"), (2, 1), (3, 1))), call(10, FIX_JOB | FIX_VALID, msg((2, 0))), call(10))
write(A, "worker_fills_scope", call(0, FIX_VALID, msg((1, ""), (2, 0), (3, 1))),
      call(3, FIX_VALID | FIX_GEN, msg((1, scope()))), call(4, FIX_VALID | FIX_GEN, msg((1, scope(rank=0)))))
write(A, "not_this_node", call(0, 0, msg((1, "other"), (2, 1), (3, 0))), call(3, 0, msg((1, scope("other", 1, 0)))),
      call(7, 0, msg((1, "other"), (2, 1))))
write(A, "stale_generation", call(0, FIX_JOB, msg((2, 99), (3, 0))), call(5, FIX_JOB | FIX_VALID, msg((1, scope(gen=-4)))))
write(A, "set_then_wait", call(3, LIVE, msg((2, "addr"), (3, "x"))), call(5, LIVE, msg((2, "addr"))),
      call(6, LIVE, msg((2, "c"), (3, 2**63 - 1))), call(6, LIVE, msg((2, "c"), (3, 1))))

# Inflated requests (op | INFLATE), each seed in two sizes: just past the
# bounds, and megabytes (70,000 entries, strings of 1-8 MiB). Only one small
# seed per target is in the mutated corpus: a mutation that hits an amount
# inflates to megabytes, and each such input costs up to a second under
# ASan. The others are in <target>.oversized/, replayed once each by the
# suite (scripts/fuzz.sh mutates them too).
def both(target, name, small, big, mutate=False):
    write(target if mutate else target + ".oversized", "inflate_" + name, *small)
    write(target + ".oversized", name, *big)


def kv(op, path, amount, payload=b"", fixups=LIVE, request="KvSetRequest"):
    return call(op, fixups, payload, inflate=(site(request, path), amount))


both(R, "big_values",
     [kv(2, "value", 64 << 10, msg((2, "big"))), call(3, LIVE, msg((2, "big"))),
      kv(0, "unique_id", 4096, request="PublishNcclUniqueIdRequest"), kv(2, "key", 4096)],
     [kv(2, "value", 8 * MIB, msg((2, "big"))), call(3, LIVE, msg((2, "big"))),
      kv(0, "unique_id", MIB, request="PublishNcclUniqueIdRequest"), kv(2, "key", MIB)], mutate=True)
both(R, "many_keys",
     [kv(4, "keys", 1000, msg((2, "k")), request="KvWaitRequest"), kv(2, "scope.job_id", 4096, fixups=FIX_VALID)],
     [kv(4, "keys", 70000, msg((2, "k")), request="KvWaitRequest"), kv(2, "scope.job_id", 8 * MIB, fixups=FIX_VALID),
      kv(2, "scope.secret", MIB, fixups=FIX_VALID | FIX_JOB)])
both(C, "commit",
     [kv(0, "files", 1000, request="CommitCheckpointRequest"), kv(0, "path", 8192, request="CommitCheckpointRequest"),
      kv(0, "files[].path", 8192, request="CommitCheckpointRequest"), call(1)],
     [kv(0, "files", 70000, request="CommitCheckpointRequest"), kv(0, "path", 8 * MIB, request="CommitCheckpointRequest"),
      kv(0, "files[].path", MIB, request="CommitCheckpointRequest"), call(1)], mutate=True)
both(C, "damaged", [kv(2, "reason", 8192, request="ReportDamagedCheckpointRequest"), call(1)],
     [kv(2, "reason", 8 * MIB, request="ReportDamagedCheckpointRequest"),
      kv(1, "job_id", 8 * MIB, fixups=0, request="GetLatestCheckpointRequest")])
big_hidden = msg((1, msg((2, msg((1, msg((1, 1 << 28))))))))  # spec.model.mlp.hidden_sizes: [2^28]
long_label = msg((1, msg((13, msg((1, "team"), (2, "v" * 255))))))


def submit(path, amount, payload=b""):
    return kv(0, path, amount, payload, request="SubmitJobRequest")


both(J, "submit_past_limits",
     [submit("spec.labels", 65), submit("spec.data.path", 4097), submit("spec.resources.node_selector", 33),
      submit("spec.env", 65), submit("overrides", 257), submit("request_id", 129), call(2, 0, msg((3, 1000)))],
     [submit("spec.labels", 70000), submit("spec.data.path", 8 * MIB), submit("spec.resources.node_selector", 70000),
      submit("spec.model.mlp.hidden_sizes", 70000, big_hidden), submit("overrides", 70000),
      submit("request_id", MIB), submit("spec.name", 8 * MIB), call(2, 0, msg((3, 1000)))], mutate=True)
both(J, "submit_at_limits",
     [submit("spec.labels", 63, long_label), submit("spec.checkpoint.directory", 4096), call(2, 0, msg((3, 1000))),
      call(5, LIVE)],
     [submit("spec.labels", 63, long_label)] * 8 + [call(2, 0, msg((3, 1000))), call(5, LIVE)])
both(J, "queries",
     [kv(2, "label_selector", 1000, fixups=0, request="ListJobsRequest"),
      kv(1, "job_id", 4096, fixups=0, request="GetJobRequest")],
     [kv(2, "label_selector", 70000, fixups=0, request="ListJobsRequest"),
      kv(2, "states", 70000, fixups=0, request="ListJobsRequest"),
      kv(1, "job_id", 8 * MIB, fixups=0, request="GetJobRequest"),
      kv(5, "job_id", MIB, msg((1, "j")), fixups=0, request="WatchJobRequest")])


def node_call(op, path, amount, payload, request, fixups=LIVE):
    return kv(op, path, amount, payload, fixups=fixups, request=request)


both(N, "register",
     [node_call(0, "running_ranks", 1000, msg((1, node), (2, running)), "RegisterNodeRequest"),
      node_call(0, "node.hostname", 8192, msg((1, node)), "RegisterNodeRequest", fixups=0)],
     [node_call(0, "running_ranks", 70000, msg((1, node), (2, running)), "RegisterNodeRequest"),
      node_call(0, "node.hostname", 8 * MIB, msg((1, node)), "RegisterNodeRequest", fixups=0),
      node_call(0, "node.labels", 70000, msg((1, node)), "RegisterNodeRequest", fixups=0)])
both(N, "push_logs",
     [node_call(3, "lines", 1000, seq(msg((1, line))), "LogChunk"),
      node_call(3, "lines[].text", 64 << 10, seq(msg((1, line))), "LogChunk")],
     [node_call(3, "lines", 70000, seq(msg((1, line))), "LogChunk"),
      node_call(3, "lines[].text", 4 * MIB, seq(msg((1, line)), msg((1, line))), "LogChunk")], mutate=True)
both(N, "session",
     [node_call(1, "start_result.started_ranks", 1000, seq(open_, heartbeat, start_result), "WorkerMessage"),
      node_call(2, "stderr_tail", 8192, msg((4, 0), (5, 1)), "ReportRankExitRequest")],
     [node_call(1, "start_result.started_ranks", 70000, seq(open_, heartbeat, start_result), "WorkerMessage"),
      node_call(1, "heartbeat.running_ranks", 70000, seq(open_, heartbeat), "WorkerMessage"),
      node_call(2, "stderr_tail", 8 * MIB, msg((4, 0), (5, 1)), "ReportRankExitRequest")])
both(A, "forwarded",
     [kv(3, "value", 64 << 10, msg((2, "big"))), kv(7, "files", 1000, request="CommitCheckpointRequest"),
      kv(0, "job_id", 4096, fixups=FIX_VALID, request="ReportMetricsRequest")],
     [kv(3, "value", 8 * MIB, msg((2, "big"))), kv(7, "files", 70000, request="CommitCheckpointRequest"),
      kv(0, "job_id", MIB, fixups=FIX_VALID, request="ReportMetricsRequest"),
      kv(5, "keys", 70000, request="KvWaitRequest"), kv(2, "scope.job_id", 8 * MIB, fixups=FIX_VALID)], mutate=True)

# spec_fuzzer inflation seeds: [flags: JSON | INFLATE][target][amount u24]
# [document]. Targets 0-7 grow a bounded part of a valid spec (see
# fuzz/spec_fuzzer.cc); 8 and up any field, by reflection.
S = "spec_fuzzer"
SPEC_JSON, SPEC_INFLATE = 1, 2
valid_spec = (b'{"name": "big", "model": {"mlp": {"hidden_sizes": [8]}}, "data": {"dataset": "synthetic"}, '
              b'"resources": {"nodes": 1, "ranks_per_node": 2, "device": "cpu"}}')


def spec(name, target, amount, document=valid_spec):
    write(S, "inflate_" + name, bytes([SPEC_JSON | SPEC_INFLATE, target]) + struct.pack("<I", amount)[:3] + document)


spec("labels_70000", 0, 70000)
spec("labels_within", 0, 64)
spec("node_selector_33", 1, 33)
spec("data_path_8mib", 2, 8 * MIB)
spec("checkpoint_directory_4097", 3, 4097)
spec("env_65", 4, 65)
spec("env_value_4097", 5, 4097)
spec("label_value_256", 6, 256)
spec("whole_spec", 7, 64)
spec("whole_spec_within", 7, 16)
spec("any_field", 8 + 5, 200000)
spec("any_field_string", 8 + 1, 1 * MIB)
