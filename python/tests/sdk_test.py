"""The SDK's module functions against a FakeAgent (python/tests/fake_agent.py)."""

import hashlib
import json
import os
import shutil
import unittest

import grpc

import ringmaster
from fake_agent import FakeAgent
from ringmaster._proto import checkpoint_pb2


class SdkTest(unittest.TestCase):
    def setUp(self):
        self.fake = FakeAgent(keep=2).start()
        self.addCleanup(shutil.rmtree, self.fake.dir, True)
        self.addCleanup(self.fake.stop)
        self.addCleanup(ringmaster.shutdown)
        os.environ.pop("RINGMASTER_RANK_CONTEXT", None)

    def init(self, **kwargs):
        os.environ["RINGMASTER_RANK_CONTEXT"] = self.fake.write_context(**kwargs)
        self.addCleanup(os.environ.pop, "RINGMASTER_RANK_CONTEXT", None)
        return ringmaster.init(report_interval=0.01, commit_patience=0.5)

    def write(self, step, name, data):
        path = os.path.join(ringmaster.checkpoint_dir(step), name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(data)
        return path

    # init()
    def test_init_outside_a_worker_says_so(self):
        self.assertFalse(ringmaster.under_worker())
        with self.assertRaisesRegex(ringmaster.NotUnderWorkerError, "RINGMASTER_RANK_CONTEXT is not set"):
            ringmaster.init()
        with self.assertRaisesRegex(ringmaster.NotUnderWorkerError, r"ringmaster.init\(\) has not been called"):
            ringmaster.report(1, loss=1.0)

    def test_init_names_an_unreadable_or_malformed_context(self):
        with self.assertRaisesRegex(ringmaster.RankContextError, "missing.json: cannot read it"):
            ringmaster.init(os.path.join(self.fake.dir, "missing.json"))
        bad = os.path.join(self.fake.dir, "bad.json")
        with open(bad, "w") as f:
            f.write('{"generation": "many"}')
        with self.assertRaisesRegex(ringmaster.RankContextError, "bad.json: not a rank context"):
            ringmaster.init(bad)
        with open(bad, "w") as f:
            json.dump({"job_id": "j-1", "a_field_of_a_newer_worker": 1}, f)
        with self.assertRaisesRegex(ringmaster.RankContextError, "agent: empty"):
            ringmaster.init(bad)

    def test_init_reads_the_context(self):
        ctx = self.init(rank=1, world_size=2)
        self.assertTrue(ringmaster.under_worker())
        self.assertEqual((ctx.job_id, ctx.generation, ctx.rank, ctx.world_size), ("j-1", 1, 1, 2))
        self.assertEqual((ctx.local_rank, ctx.local_world_size, ctx.node_rank, ctx.nodes), (1, 2, 0, 1))
        self.assertEqual(ctx.checkpoint_dir, self.fake.generation_dir())
        self.assertEqual((ctx.device, ctx.checkpoint_interval_steps, ctx.resume_from), ("cpu", 5, None))
        self.assertNotIn("s3cret", repr(ctx))
        self.assertIs(ringmaster.init(), ctx)
        self.assertIs(ringmaster.context(), ctx)

    # report() and should_checkpoint_and_exit()
    def test_report_sends_step_metrics_with_the_secret(self):
        self.init()
        ringmaster.report(7, loss=0.5, samples=1000, tokens=0, total_steps=100, grad_norm=2.5, epoch=1)
        [request] = self.fake.wait_for_calls("ReportMetrics", 1)
        m = request.metrics
        self.assertEqual((request.job_id, request.generation, request.global_rank), ("j-1", 1, 0))
        self.assertEqual((m.step, m.loss, m.samples_per_second, m.total_steps, m.grad_norm, m.epoch),
                         (7, 0.5, 1000.0, 100, 2.5, 1))
        self.assertGreater(m.memory_bytes, 0)  # peak RSS by default
        self.assertGreater(m.time.seconds, 0)
        self.assertFalse(ringmaster.should_checkpoint_and_exit())

    def test_report_sends_other_names_as_the_programs_own_gauges(self):
        self.init()
        ringmaster.report(3, loss=0.5, accuracy=0.9, grad_scale=2)
        [request] = self.fake.wait_for_calls("ReportMetrics", 1)
        self.assertEqual(dict(request.metrics.gauges), {"accuracy": 0.9, "grad_scale": 2.0})
        self.assertEqual(request.metrics.loss, 0.5)

    def test_report_refuses_bad_names_and_bad_values(self):
        self.init()
        with self.assertRaisesRegex(ValueError, "report: bad-name: not a step metric .* nor a gauge name"):
            ringmaster.report(1, **{"bad-name": 0.9})
        with self.assertRaisesRegex(ValueError, "nor a gauge name"):
            ringmaster.report(1, **{"g%d" % i: i for i in range(65)})
        with self.assertRaisesRegex(TypeError, "report: loss: a number is required"):
            ringmaster.report(1, loss="low")
        with self.assertRaisesRegex(ValueError, "step must be an integer >= 0"):
            ringmaster.report(-1, loss=1.0)

    def test_checkpoint_request_is_learned_from_a_report(self):
        self.init()
        self.fake.checkpoint_ranks.add(0)
        ringmaster.report(1, loss=1.0)
        self.assertTrue(ringmaster._session()[1].flush(5))
        self.assertTrue(ringmaster.should_checkpoint_and_exit())

    def test_a_fenced_generation_is_told_to_stop(self):
        self.fake.generation = 2
        self.init(generation=1)
        ringmaster.report(1, loss=1.0)
        self.assertTrue(ringmaster._session()[1].flush(5))
        self.assertTrue(ringmaster.should_checkpoint_and_exit())

    # checkpoint_dir() and commit()
    def test_checkpoint_dir_is_the_engine_layout(self):
        self.init()
        path = ringmaster.checkpoint_dir(30)
        self.assertEqual(path, os.path.join(self.fake.base, "j-1", "gen-1", "step-000000030"))
        self.assertTrue(os.path.isdir(path))

    def test_commit_records_sizes_and_sha256(self):
        self.init()
        self.write(10, "model.pt", b"weights")
        self.write(10, "optim/state.pt", b"x" * 3000000)
        ckpt = ringmaster.commit(10, ["model.pt", os.path.join(ringmaster.checkpoint_dir(10), "optim/state.pt")])
        [request] = self.fake.requests("Commit")
        self.assertEqual((request.step, request.rank, request.whole_model, request.pipeline_stages), (10, 0, True, 1))
        self.assertEqual(request.path, ringmaster.checkpoint_dir(10))
        files = {f.path: (f.size_bytes, f.checksum.algorithm, f.checksum.hex) for f in request.files}
        sha = checkpoint_pb2.FileChecksum.SHA256
        self.assertEqual(files, {
            "model.pt": (7, sha, hashlib.sha256(b"weights").hexdigest()),
            "optim/state.pt": (3000000, sha, hashlib.sha256(b"x" * 3000000).hexdigest()),
        })
        self.assertEqual((ckpt.step, ckpt.path, len(ckpt.files)), (10, request.path, 2))

    def test_commit_deletes_what_retention_pruned(self):
        self.init()
        for step in (5, 10, 15):
            self.write(step, "model.pt", b"w%d" % step)
            ringmaster.commit(step, ["model.pt"])
        self.assertEqual(sorted(os.listdir(self.fake.generation_dir())), ["step-000000010", "step-000000015"])

    def test_commit_prunes_an_older_generations_directory_with_its_last_checkpoint(self):
        old = os.path.join(self.fake.generation_dir(1), "step-000000005")
        os.makedirs(old)
        with open(os.path.join(old, "model.pt"), "wb") as f:
            f.write(b"old")
        self.fake.committed.append(checkpoint_pb2.CheckpointInfo(generation=1, step=5, path=old, complete=True))
        self.fake.generation = 2
        self.fake.keep = 1
        self.init(generation=2)
        self.write(10, "model.pt", b"new")
        ringmaster.commit(10, ["model.pt"])
        self.assertFalse(os.path.exists(self.fake.generation_dir(1)))
        self.assertTrue(os.path.isdir(ringmaster.checkpoint_dir(10)))

    def test_commit_refuses_bad_files_and_other_ranks(self):
        self.init()
        self.write(10, "model.pt", b"w")
        with self.assertRaisesRegex(ringmaster.CheckpointError, "missing.pt: cannot open it"):
            ringmaster.commit(10, ["missing.pt"])
        with self.assertRaisesRegex(ringmaster.CheckpointError, "not inside the step's directory"):
            ringmaster.commit(10, ["../../elsewhere.pt"])
        with self.assertRaisesRegex(ringmaster.CheckpointError, "at least one file"):
            ringmaster.commit(10, [])
        os.symlink("/etc/hostname", os.path.join(ringmaster.checkpoint_dir(10), "link.pt"))
        with self.assertRaisesRegex(ringmaster.CheckpointError, "link.pt: is a symbolic link"):
            ringmaster.commit(10, ["link.pt"])
        self.assertEqual(self.fake.requests("Commit"), [])
        ringmaster.shutdown()
        self.init(rank=1, world_size=2)
        with self.assertRaisesRegex(ringmaster.CheckpointError, "only global rank 0 commits .* this is rank 1"):
            ringmaster.commit(10, ["model.pt"])

    def test_commit_of_a_fenced_generation_raises_generation_over(self):
        self.init()
        self.write(10, "model.pt", b"w")
        self.fake.generation = 2
        with self.assertRaisesRegex(ringmaster.GenerationOverError, "generation 1 is over; current is 2"):
            ringmaster.commit(10, ["model.pt"])

    def test_commit_refused_by_the_coordinator_is_a_checkpoint_error(self):
        self.init()
        self.write(10, "model.pt", b"w")
        self.fake.commit_error = (grpc.StatusCode.PERMISSION_DENIED, "path: not where the coordinator put it")
        with self.assertRaisesRegex(ringmaster.CheckpointError, "permission denied: path: not where") as caught:
            ringmaster.commit(10, ["model.pt"])
        self.assertEqual(caught.exception.code, grpc.StatusCode.PERMISSION_DENIED)

    def test_commit_gives_up_after_its_patience_when_unreachable(self):
        self.init()
        self.write(10, "model.pt", b"w")
        self.fake.stop()
        with self.assertRaisesRegex(ringmaster.CheckpointError, "commit of checkpoint .*: unavailable") as caught:
            ringmaster.commit(10, ["model.pt"])
        self.assertEqual(caught.exception.code, grpc.StatusCode.UNAVAILABLE)

    # resume_checkpoint()
    def committed_info(self, data):
        self.init()
        self.write(10, "model.pt", data)
        ringmaster.commit(10, ["model.pt"])
        info = self.fake.committed[-1]
        ringmaster.shutdown()
        self.fake.generation = 2
        return info

    def test_resume_checkpoint_is_none_from_scratch(self):
        self.init()
        self.assertIsNone(ringmaster.resume_checkpoint())

    def test_resume_checkpoint_returns_the_verified_commit(self):
        info = self.committed_info(b"weights")
        self.init(generation=2, resume_from=info)
        ckpt = ringmaster.resume_checkpoint()
        self.assertEqual((ckpt.generation, ckpt.step, ckpt.path), (1, 10, info.path))
        self.assertEqual(ckpt.files[0].sha256, hashlib.sha256(b"weights").hexdigest())

    def test_a_damaged_checkpoint_is_reported_and_raised(self):
        info = self.committed_info(b"weights")
        with open(os.path.join(info.path, "model.pt"), "wb") as f:
            f.write(b"WEIGHTS")
        self.init(generation=2, resume_from=info)
        with self.assertRaisesRegex(ringmaster.CheckpointError, "cannot be resumed from: .*model.pt: sha256 mismatch"):
            ringmaster.resume_checkpoint()
        [report] = self.fake.requests("ReportDamaged")
        self.assertEqual((report.generation, report.checkpoint_generation, report.checkpoint_step), (2, 1, 10))
        self.assertIn("sha256 mismatch", report.reason)


if __name__ == "__main__":
    unittest.main()
