#!/usr/bin/env python3
"""Writes the seed corpora of the RPC fuzz targets (fuzz/corpus/<target>/).

Each file is a sequence of calls, [op][fixups][length u16 LE][payload], the
payload a request in protobuf wire format, encoded here by hand (no protobuf
module needed). Run from the repository root; idempotent.
"""
import os
import struct

FIX_JOB, FIX_GEN, FIX_NODE, FIX_VALID, ADVANCE = 1, 2, 4, 8, 0x80
LIVE = FIX_JOB | FIX_GEN | FIX_NODE | FIX_VALID


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


def call(op, fixups=LIVE, payload=b""):
    return bytes([op, fixups]) + struct.pack("<H", len(payload)) + payload


def write(target, name, *calls):
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
# 7 Commit, 8 GetLatestCheckpoint.
A = "agent_service_fuzzer"
write(A, "every_rpc_live", *[call(op) for op in range(9)])
write(A, "worker_fills_scope", call(0, FIX_VALID, msg((1, ""), (2, 0), (3, 1))),
      call(3, FIX_VALID | FIX_GEN, msg((1, scope()))), call(4, FIX_VALID | FIX_GEN, msg((1, scope(rank=0)))))
write(A, "not_this_node", call(0, 0, msg((1, "other"), (2, 1), (3, 0))), call(3, 0, msg((1, scope("other", 1, 0)))),
      call(7, 0, msg((1, "other"), (2, 1))))
write(A, "stale_generation", call(0, FIX_JOB, msg((2, 99), (3, 0))), call(5, FIX_JOB | FIX_VALID, msg((1, scope(gen=-4)))))
write(A, "set_then_wait", call(3, LIVE, msg((2, "addr"), (3, "x"))), call(5, LIVE, msg((2, "addr"))),
      call(6, LIVE, msg((2, "c"), (3, 2**63 - 1))), call(6, LIVE, msg((2, "c"), (3, 1))))
