#!/usr/bin/env python3
"""Fashion-MNIST CNN with PyTorch DDP, using Ringmaster's Python SDK.

Under a Ringmaster worker (`ringmaster submit examples/pytorch_ddp/job.yaml
--follow`) it resumes from the committed checkpoint, commits one every
--checkpoint-every steps, reports its progress, and saves when a drain asks.
Started by hand (torchrun's RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT, or one
process alone) it checkpoints into --checkpoint-dir and resumes from the
newest complete one there. README.md beside this file shows both.

Deterministic: the data order is a function of (seed, step), the model, the
optimizer state and the step are all in the checkpoint, and PyTorch runs
deterministic kernels on one thread, so a run killed and resumed from a
checkpoint ends with the same weights as one never interrupted."""

import argparse
import gzip
import os
import struct
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

DATA = "/usr/share/datasets/fashion-mnist"  # Debian's dataset-fashion-mnist


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", default=DATA, help="directory of the IDX files (default: %(default)s)")
    p.add_argument("--train-size", type=int, default=4096, help="first N training images used")
    p.add_argument("--steps", type=int, default=200, help="optimizer steps in all")
    p.add_argument("--batch-size", type=int, default=64, help="global batch, split over the ranks")
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--channels", default="8,16", help="conv channels (the engine's example: 32,64)")
    p.add_argument("--hidden", type=int, default=64, help="hidden units (the engine's example: 128)")
    p.add_argument("--checkpoint-every", type=int, default=0,
                   help="steps between checkpoints; 0: the job's checkpoint.interval_steps (50 by hand)")
    p.add_argument("--report-every", type=int, default=10, help="steps between progress reports")
    p.add_argument("--store", choices=["env", "ringmaster"], default="env",
                   help="rendezvous: env (MASTER_ADDR/MASTER_PORT) or ringmaster (the coordinator's store)")
    p.add_argument("--checkpoint-dir", default="", help="without a worker: where checkpoints go")
    p.add_argument("--final-weights", default="",
                   help="rank 0 saves the final state_dict here (default under a worker: <job dir>/final.pt)")
    p.add_argument("--step-seconds", type=float, default=0.0, help="least wall time per step (tests)")
    return p.parse_args(argv)


class Net(nn.Module):
    """conv 3x3 + ReLU + max-pool per channel count, then ReLU MLP: the
    shape of examples/fashion_mnist_cnn.yaml (1x28x28 -> ... -> 10)."""

    def __init__(self, channels, hidden):
        super().__init__()
        convs, c_in = [], 1
        for c in channels:
            convs.append(nn.Conv2d(c_in, c, 3, padding=1))
            c_in = c
        self.convs = nn.ModuleList(convs)
        side = 28 >> len(channels)
        self.fc1 = nn.Linear(c_in * side * side, hidden)
        self.fc2 = nn.Linear(hidden, 10)

    def forward(self, x):
        for conv in self.convs:
            x = F.max_pool2d(F.relu(conv(x)), 2)
        return self.fc2(F.relu(self.fc1(x.flatten(1))))


def read_idx(path, count):
    with gzip.open(path, "rb") as f:
        magic, n = struct.unpack(">II", f.read(8))
        dims = [struct.unpack(">I", f.read(4))[0] for _ in range((magic & 0xFF) - 1)]
        count = min(count, n)
        size = count
        for d in dims:
            size *= d
        data = torch.frombuffer(bytearray(f.read(size)), dtype=torch.uint8)
    return data.reshape(count, *dims)


def load_data(directory, count):
    images = read_idx(os.path.join(directory, "train-images-idx3-ubyte.gz"), count)
    labels = read_idx(os.path.join(directory, "train-labels-idx1-ubyte.gz"), count)
    return images.float().div_(255).unsqueeze(1), labels.long()


def batch_indices(seed, step, batch, n):
    """The global batch of `step`: a pure function of (seed, step)."""
    per_epoch = n // batch
    epoch, i = divmod(step, per_epoch)
    order = torch.randperm(n, generator=torch.Generator().manual_seed(seed * 100003 + epoch))
    return order[i * batch:(i + 1) * batch], epoch


class Run:
    """Where the rank is and where its checkpoints go: the SDK under a
    worker, plain torchrun conventions and a local directory otherwise."""

    def __init__(self, args):
        self.sdk = None
        if os.environ.get("RINGMASTER_RANK_CONTEXT"):
            import ringmaster
            self.sdk = ringmaster
            ctx = ringmaster.init()
            self.rank, self.world, self.local_rank = ctx.rank, ctx.world_size, ctx.local_rank
            self.every = args.checkpoint_every or ctx.checkpoint_interval_steps
            self.final = args.final_weights or os.path.join(os.path.dirname(ctx.checkpoint_dir), "final.pt")
            self.cuda = ctx.device == "cuda"
        else:
            self.rank = int(os.environ.get("RANK", "0"))
            self.world = int(os.environ.get("WORLD_SIZE", "1"))
            self.local_rank = int(os.environ.get("LOCAL_RANK", "0"))
            self.every = args.checkpoint_every or 50
            self.final = args.final_weights
            self.cuda = torch.cuda.is_available()
        self.dir = args.checkpoint_dir

    def resume(self):
        """The checkpoint file to resume from, or None."""
        if self.sdk:
            ckpt = self.sdk.resume_checkpoint()
            return os.path.join(ckpt.path, "state.pt") if ckpt else None
        steps = sorted(d for d in os.listdir(self.dir) if d.startswith("step-")) if self.dir and os.path.isdir(
            self.dir) else []
        complete = [d for d in steps if os.path.exists(os.path.join(self.dir, d, "COMMITTED"))]
        return os.path.join(self.dir, complete[-1], "state.pt") if complete else None

    def save(self, step, state):
        """Rank 0 writes and commits checkpoint `step`."""
        if self.sdk:
            path = self.sdk.checkpoint_dir(step)
        elif self.dir:
            path = os.path.join(self.dir, "step-%09d" % step)
            os.makedirs(path, exist_ok=True)
        else:
            return
        save_synced(state, os.path.join(path, "state.pt"))
        if self.sdk:
            self.sdk.commit(step, ["state.pt"])
        else:
            save_synced({}, os.path.join(path, "COMMITTED"))
        print("checkpoint step %d committed: %s" % (step, path), flush=True)

    def report(self, step, **metrics):
        if self.sdk:
            self.sdk.report(step, **metrics)

    def checkpoint_requested(self):
        if not self.sdk:
            return False
        import ringmaster.torch
        return ringmaster.torch.should_checkpoint_and_exit()


def save_synced(obj, path):
    with open(path, "wb") as f:
        torch.save(obj, f)
        f.flush()
        os.fsync(f.fileno())


def join(args, run, backend):
    if run.world == 1 and not os.environ.get("MASTER_ADDR") and args.store == "env":
        return False
    if args.store == "ringmaster":
        import ringmaster.torch
        dist.init_process_group(backend, store=ringmaster.torch.store(), rank=run.rank, world_size=run.world)
    else:
        dist.init_process_group(backend, init_method="env://", rank=run.rank, world_size=run.world)
    return True


def main(argv):
    args = parse_args(argv)
    run = Run(args)
    if run.cuda:
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # deterministic cuBLAS
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    torch.manual_seed(args.seed)
    device = torch.device("cuda", run.local_rank % torch.cuda.device_count()) if run.cuda else torch.device("cpu")
    distributed = join(args, run, "nccl" if run.cuda else "gloo")
    if args.batch_size % run.world:
        sys.exit("--batch-size %d is not divisible by the %d ranks" % (args.batch_size, run.world))

    images, labels = load_data(args.data, args.train_size)
    model = Net([int(c) for c in args.channels.split(",")], args.hidden).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    start = 0
    resume = run.resume()
    if resume:
        state = torch.load(resume, map_location=device)
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        start = state["step"]
        print("resumed from %s at step %d" % (resume, start), flush=True)
    ddp = nn.parallel.DistributedDataParallel(model) if distributed else model

    saved_on_request = False
    last_time, last_step = time.monotonic(), start
    for step in range(start, args.steps):
        began = time.monotonic()
        batch, epoch = batch_indices(args.seed, step, args.batch_size, len(images))
        mine = batch[run.rank::run.world]
        x, y = images[mine].to(device), labels[mine].to(device)
        optimizer.zero_grad()
        loss = F.cross_entropy(ddp(x), y)
        loss.backward()
        optimizer.step()
        done = step + 1
        if done % args.report_every == 0 or done == args.steps:
            mean = loss.detach().clone()
            if distributed:
                dist.all_reduce(mean)
                mean /= run.world
            now = time.monotonic()
            rate = (done - last_step) * args.batch_size / max(now - last_time, 1e-9)
            last_time, last_step = now, done
            run.report(done, loss=mean.item(), samples=rate, total_steps=args.steps, epoch=epoch)
            if run.rank == 0:
                print("step %d/%d loss %.4f %.0f samples/s" % (done, args.steps, mean.item(), rate), flush=True)
            # A drain: save now, once, then train on until the worker stops us.
            requested = not saved_on_request and run.checkpoint_requested()
            saved_on_request |= requested
        else:
            requested = False
        if run.rank == 0 and (done % run.every == 0 or done == args.steps or requested):
            run.save(done, {"model": model.state_dict(), "optimizer": optimizer.state_dict(), "step": done})
        if args.step_seconds > 0:
            time.sleep(max(0.0, args.step_seconds - (time.monotonic() - began)))

    if run.rank == 0 and run.final:
        save_synced({k: v.cpu() for k, v in model.state_dict().items()}, run.final)
        print("final weights: %s" % run.final, flush=True)
    if distributed:
        dist.barrier()
        dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1:])
