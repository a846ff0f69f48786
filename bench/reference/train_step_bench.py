#!/usr/bin/env python3
"""PyTorch twin of bench/train_step_bench.cc: the same Fashion-MNIST MLP and CNN
(docs/models.md), batch, SGD-momentum step and thread count, on the CPU.

Prints lines in the same format:
  model=cnn batch=64 threads=2 steps=30 samples_per_s=812.4 ms_per_step=78.8
Run with Debian's python3-torch: /usr/bin/python3 bench/reference/train_step_bench.py
"""
import argparse
import time

import torch
import torch.nn as nn


def mlp():
    return nn.Sequential(nn.Flatten(), nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU(),
                         nn.Linear(128, 10))


def cnn():
    return nn.Sequential(
        nn.Conv2d(1, 32, 3, padding=1, bias=False), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, padding=1, bias=False), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(3136, 128), nn.ReLU(), nn.Dropout(0.0), nn.Linear(128, 10))


def bench(name, batch, threads, steps, warmup):
    torch.manual_seed(1)
    model = mlp() if name == "mlp" else cnn()
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x = torch.randn(batch, 1, 28, 28)
    y = torch.randint(0, 10, (batch,))
    loss_fn = nn.CrossEntropyLoss()

    def step():
        opt.zero_grad(set_to_none=False)
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()

    for _ in range(warmup):
        step()
    start = time.perf_counter()
    for _ in range(steps):
        step()
    seconds = time.perf_counter() - start
    print("model=%s batch=%d threads=%d steps=%d samples_per_s=%.1f ms_per_step=%.2f" %
          (name, batch, threads, steps, batch * steps / seconds, 1000 * seconds / steps), flush=True)


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--model", default="both", choices=["mlp", "cnn", "both"])
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--warmup", type=int, default=5)
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    if a.model != "cnn":
        bench("mlp", a.batch, a.threads, a.steps * 10, a.warmup)
    if a.model != "mlp":
        bench("cnn", a.batch, a.threads, a.steps, a.warmup)


if __name__ == "__main__":
    main()
