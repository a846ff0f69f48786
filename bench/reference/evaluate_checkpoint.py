#!/usr/bin/env python3
"""Loads a Ringmaster checkpoint's model.safetensors into the PyTorch twin of the
model (docs/models.md) with load_state_dict(strict=True) and evaluates it on the
Fashion-MNIST test set: the check that a PyTorch user can use our checkpoints.

The `safetensors` Python package is not in the registries our machines reach,
so the file (8-byte little-endian header length, JSON header, raw tensors) is
parsed here with numpy; safetensors.torch.load_file reads the same bytes.

Usage: /usr/bin/python3 bench/reference/evaluate_checkpoint.py STEP_DIR mlp|cnn
Prints test_accuracy=0.XXXX (compare with the trainer's last line).
"""
import gzip
import json
import struct
import sys

import numpy as np
import torch
import torch.nn as nn

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from train_step_bench import cnn, mlp  # noqa: E402  the same torch.nn models

DTYPES = {"F32": np.float32, "F16": np.float16, "I32": np.int32, "I64": np.int64}


class Net(nn.Module):
    """The twin of docs/models.md: the Sequential as `self.layers`."""

    def __init__(self, layers):
        super().__init__()
        self.layers = layers

    def forward(self, x):
        return self.layers(x)


def load_safetensors(path):
    data = open(path, "rb").read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    base = 8 + n
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        array = np.frombuffer(data[base + begin:base + end], dtype=DTYPES[info["dtype"]]).reshape(info["shape"])
        out[name] = torch.from_numpy(array.copy())
    return out


def read_idx(path):
    raw = gzip.open(path).read()
    ndim = raw[3]
    dims = struct.unpack(">" + "I" * ndim, raw[4:4 + 4 * ndim])
    return np.frombuffer(raw[4 + 4 * ndim:], dtype=np.uint8).reshape(dims)


def main():
    step_dir, kind = sys.argv[1], sys.argv[2]
    model = Net(mlp() if kind == "mlp" else cnn())
    state = load_safetensors(step_dir + "/model.safetensors")
    # BatchNorm's step counter is an f32 scalar in our files, int64 in PyTorch.
    for name in state:
        if name.endswith("num_batches_tracked"):
            state[name] = state[name].to(torch.int64).reshape(())
    model.load_state_dict(state, strict=True)
    model.eval()
    d = "/usr/share/datasets/fashion-mnist"
    images = read_idx(d + "/t10k-images-idx3-ubyte.gz").astype(np.float32)
    labels = torch.from_numpy(read_idx(d + "/t10k-labels-idx1-ubyte.gz").astype(np.int64))
    x = torch.from_numpy((images / 255.0 - 0.2860) / 0.3530).reshape(-1, 1, 28, 28)
    with torch.no_grad():
        correct = (model(x).argmax(dim=1) == labels).sum().item()
    print("test_accuracy=%.4f" % (correct / len(labels)))


if __name__ == "__main__":
    main()
