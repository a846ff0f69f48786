#!/usr/bin/env python3
"""PyTorch twin of examples/fashion_mnist_cnn.yaml on one device, for the GPU
benchmark: the same CNN (docs/models.md: conv 3x3 32 and 64
channels, each + BatchNorm + ReLU + max-pool 2x2, Linear 3136->128, ReLU,
Linear 128->10), the same normalisation ((x / 255 - 0.2860) / 0.3530), batch,
SGD with Nesterov momentum 0.9 and L2 weight decay 5e-4 on weights only, the
engine's warm-up + cosine schedule, the last partial batch dropped, and a test
evaluation at the end of every epoch. The whole dataset is held on the device
(the fastest loader PyTorch has for data this small).

Prints one line per epoch, then
  impl=pytorch model=cnn batch=64 ... images_per_s=... seconds_to_target=... test_accuracy=...
seconds_to_target: from the start of the script (imports excluded, data loading
and torch.compile included) to the end of the first evaluation at or above
--target; -1 when never reached.
"""
import argparse
import gzip
import math
import os
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

START = time.perf_counter()


def read_idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    dims = data[3]
    shape = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(dims)]
    return torch.frombuffer(bytearray(data[4 + 4 * dims:]), dtype=torch.uint8).view(*shape)


def load(data_dir, split, dev):
    images = read_idx(os.path.join(data_dir, "%s-images-idx3-ubyte.gz" % split))
    labels = read_idx(os.path.join(data_dir, "%s-labels-idx1-ubyte.gz" % split))
    x = ((images.float() / 255.0 - 0.2860) / 0.3530).unsqueeze(1)
    return x.to(dev), labels.long().to(dev)


def cnn():
    return nn.Sequential(
        nn.Conv2d(1, 32, 3, padding=1, bias=False), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, padding=1, bias=False), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(3136, 128), nn.ReLU(), nn.Linear(128, 10))


def learning_rate(step, base, warmup, decay_steps, min_lr):  # engine/optim/lr_schedule.cc
    if step < warmup:
        return base * (step + 1) / warmup
    p = step - warmup
    if p >= decay_steps:
        return min_lr
    return min_lr + (base - min_lr) * 0.5 * (1.0 + math.cos(math.pi * p / decay_steps))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", default="/usr/share/datasets/fashion-mnist", help="folder of the four idx .gz files")
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--epochs", type=int, default=8)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--warmup", type=int, default=100)
    p.add_argument("--min-lr", type=float, default=0.0005)
    p.add_argument("--target", type=float, default=0.92, help="test accuracy to time")
    p.add_argument("--max-steps", type=int, default=0, help="stop early (smoke runs); 0: all epochs")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--no-compile", action="store_true")
    a = p.parse_args()
    if a.batch <= 0 or a.epochs <= 0:
        p.error("--batch and --epochs must be > 0")

    torch.manual_seed(1)
    dev = torch.device(a.device)
    train_x, train_y = load(a.data, "train", dev)
    test_x, test_y = load(a.data, "t10k", dev)
    model = cnn().to(dev).to(memory_format=torch.channels_last if dev.type == "cuda" else torch.contiguous_format)
    decay = [q for q in model.parameters() if q.dim() >= 2]
    no_decay = [q for q in model.parameters() if q.dim() < 2]
    opt = torch.optim.SGD([{"params": decay, "weight_decay": 5e-4}, {"params": no_decay, "weight_decay": 0.0}],
                          lr=a.lr, momentum=0.9, nesterov=True)
    step_model = model if a.no_compile else torch.compile(model)
    steps_per_epoch = train_x.shape[0] // a.batch
    total = steps_per_epoch * a.epochs
    decay_steps = max(total - a.warmup, 1)

    def evaluate():
        model.eval()
        correct = 0
        with torch.no_grad():
            for i in range(0, test_x.shape[0], 1000):
                correct += (step_model(test_x[i:i + 1000]).argmax(1) == test_y[i:i + 1000]).sum().item()
        model.train()
        return correct / test_x.shape[0]

    step = 0
    train_seconds = 0.0
    reached = -1.0
    accuracy = 0.0
    for epoch in range(a.epochs):
        order = torch.randperm(train_x.shape[0], device=dev)
        epoch_start = time.perf_counter()
        for i in range(steps_per_epoch):
            if a.max_steps and step >= a.max_steps:
                break
            idx = order[i * a.batch:(i + 1) * a.batch]
            for group in opt.param_groups:
                group["lr"] = learning_rate(step, a.lr, a.warmup, decay_steps, a.min_lr)
            loss = F.cross_entropy(step_model(train_x[idx]), train_y[idx])
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            step += 1
        if dev.type == "cuda":
            torch.cuda.synchronize()
        train_seconds += time.perf_counter() - epoch_start
        accuracy = evaluate()
        print("epoch %d step %d loss %.4f test_accuracy %.4f elapsed %.2f s" %
              (epoch + 1, step, loss.item(), accuracy, time.perf_counter() - START), flush=True)
        if reached < 0 and accuracy >= a.target:
            reached = time.perf_counter() - START
        if a.max_steps and step >= a.max_steps:
            break
    print("impl=pytorch model=cnn batch=%d epochs=%d steps=%d compile=%d images_per_s=%.1f seconds_to_target=%.2f "
          "target=%.2f test_accuracy=%.4f torch=%s" %
          (a.batch, a.epochs, step, 0 if a.no_compile else 1, step * a.batch / train_seconds, reached, a.target,
           accuracy, torch.__version__), flush=True)


if __name__ == "__main__":
    main()
