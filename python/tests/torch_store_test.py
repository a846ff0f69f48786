"""ringmaster.torch against a FakeAgent: the Store's operations and errors,
and a real 2-process Gloo process group whose rendezvous goes through it."""

import datetime
import os
import shutil
import subprocess
import sys
import time
import unittest

import ringmaster
import ringmaster.torch
from fake_agent import FakeAgent

# One rank: joins a Gloo group through the store, all-reduces, and agrees on
# should_checkpoint_and_exit (only rank 1 is asked to checkpoint).
_RANK = r"""
import torch, torch.distributed as dist, ringmaster, ringmaster.torch
ctx = ringmaster.init(report_interval=0.01)
dist.init_process_group("gloo", store=ringmaster.torch.store(), rank=ctx.rank, world_size=ctx.world_size,
                        timeout=__import__("datetime").timedelta(seconds=20))
t = torch.tensor([float(ctx.rank + 1)])
dist.all_reduce(t)
ringmaster.report(1, loss=1.0)
ringmaster._session()[1].flush(5)
agreed = ringmaster.torch.should_checkpoint_and_exit()
print("sum=%g local=%s agreed=%s" % (t.item(), ringmaster.should_checkpoint_and_exit(), agreed), flush=True)
dist.destroy_process_group()
"""


class TorchStoreTest(unittest.TestCase):
    def setUp(self):
        self.fake = FakeAgent().start()
        self.addCleanup(shutil.rmtree, self.fake.dir, True)
        self.addCleanup(self.fake.stop)
        self.addCleanup(ringmaster.shutdown)

    def store(self, timeout=1.0, **kwargs):
        ctx = ringmaster.init(self.fake.write_context(**kwargs))
        return ringmaster.torch.RendezvousStore(ctx, datetime.timedelta(seconds=timeout))

    def test_set_get_add_wait_check(self):
        store = self.store()
        store.set("k", b"v")
        store.set("text", "str")
        self.assertEqual(store.get("k"), b"v")
        self.assertEqual(store.get("text"), b"str")
        self.assertEqual(store.add("n", 2), 2)
        self.assertEqual(store.add("n", 3), 5)
        self.assertEqual(store.get("n"), b"5")
        store.wait(["k", "n"])
        store.wait(["k"], datetime.timedelta(seconds=1))
        self.assertTrue(store.check(["k", "n"]))
        self.assertFalse(store.check(["k", "absent"]))
        [scope] = {(r.scope.job_id, r.scope.generation, r.scope.rank, r.scope.secret)
                   for r in self.fake.requests("KvSet")}
        self.assertEqual(scope, ("j-1", 1, 0, "s3cret"))

    def test_timeouts_raise_store_timeout(self):
        store = self.store(timeout=0.2)
        start = time.monotonic()
        with self.assertRaisesRegex(ringmaster.StoreTimeoutError, "key 'absent' was not set within 0.2s"):
            store.get("absent")
        with self.assertRaisesRegex(ringmaster.StoreTimeoutError, "keys 'a', 'b' were not set within 0.1s"):
            store.wait(["a", "b"], datetime.timedelta(seconds=0.1))
        self.assertLess(time.monotonic() - start, 5)
        self.assertAlmostEqual(self.fake.requests("KvWait")[0].timeout.ToNanoseconds() / 1e9, 0.2, delta=0.05)

    def test_a_fenced_generation_raises_generation_over(self):
        store = self.store()
        self.fake.generation = 2
        with self.assertRaisesRegex(ringmaster.GenerationOverError, "generation 1 is over; current is 2"):
            store.set("k", b"v")
        with self.assertRaisesRegex(ringmaster.GenerationOverError, "generation 1 is over"):
            store.get("k")

    def test_a_non_integer_add_and_unsupported_operations(self):
        store = self.store()
        store.set("k", b"text")
        with self.assertRaisesRegex(ringmaster.RingmasterError, "add to key 'k'.*not an integer"):
            store.add("k", 1)
        with self.assertRaisesRegex(ringmaster.RingmasterError, "compare_set: the rendezvous service has no"):
            store.compare_set("k", b"text", b"new")

    def test_should_checkpoint_and_exit_without_a_process_group_is_local(self):
        ringmaster.init(self.fake.write_context())
        self.assertFalse(ringmaster.torch.should_checkpoint_and_exit())

    def test_gloo_process_group_over_the_store(self):
        self.fake.checkpoint_ranks.add(1)
        procs = []
        for rank in range(2):
            env = dict(os.environ, RINGMASTER_RANK_CONTEXT=self.fake.write_context(rank=rank, world_size=2),
                       PYTHONPATH=os.pathsep.join(sys.path), GLOO_SOCKET_IFNAME="lo", OMP_NUM_THREADS="1")
            procs.append(subprocess.Popen([sys.executable, "-c", _RANK], env=env, stdout=subprocess.PIPE,
                                          stderr=subprocess.STDOUT, text=True))
        outputs = []
        for p in procs:
            try:
                outputs.append(p.communicate(timeout=60)[0])
            finally:
                p.kill()
        for rank, (p, out) in enumerate(zip(procs, outputs)):
            self.assertEqual(p.returncode, 0, out)
            self.assertIn("sum=3 local=%s agreed=True" % (rank == 1), out)
        self.assertTrue(self.fake.requests("KvWait"))  # the keys went through the fake


if __name__ == "__main__":
    unittest.main()
