#!/usr/bin/env python3
"""PyTorch twin of Ringmaster's GPT (engine/nn/gpt.cc, docs/models.md) for the
GPU benchmark: the same blocks and shapes (pre-LN, fused c_attn,
causal attention, tanh GELU MLP of width 4C, final LayerNorm, LM head tied to
the token embedding, biases on every Linear, LayerNorm eps 1e-5), AdamW with
decoupled weight decay on matrices and embeddings only (as the engine: biases
and norms are not decayed), gradient clipping, synthetic tokens.

Precision: bf16 autocast (the default), fp16 autocast with a GradScaler, or
fp32. torch.compile unless --no-compile. Prints the same key=value line as
bench/gpu_vs_pytorch.sh reads:
  impl=pytorch model=gpt layers=12 width=768 ... tokens_per_s=123456.7 ms_per_step=... params=124439808
Runs on the CPU too (tiny sizes, for the smoke test; Debian's torch 1.13 has no
torch.compile: pass --no-compile).
"""
import argparse
import math
import statistics
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, c, n_head):
        super().__init__()
        self.n_head = n_head
        self.ln_1 = nn.LayerNorm(c, eps=1e-5)
        self.c_attn = nn.Linear(c, 3 * c)
        self.attn_proj = nn.Linear(c, c)
        self.ln_2 = nn.LayerNorm(c, eps=1e-5)
        self.c_fc = nn.Linear(c, 4 * c)
        self.c_proj = nn.Linear(4 * c, c)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(c, dim=2)
        q, k, v = (z.view(b, t, self.n_head, c // self.n_head).transpose(1, 2) for z in (q, k, v))
        if hasattr(F, "scaled_dot_product_attention"):  # PyTorch >= 2.0: flash attention on the GPU
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:  # Debian's torch 1.13 (the CPU smoke test)
            att = (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
            mask = torch.ones(t, t, dtype=torch.bool, device=x.device).tril()
            y = att.masked_fill(~mask, float("-inf")).softmax(-1) @ v
        x = x + self.attn_proj(y.transpose(1, 2).contiguous().view(b, t, c))
        return x + self.c_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))


class Gpt(nn.Module):
    def __init__(self, layers, width, heads, context, vocab):
        super().__init__()
        self.wte = nn.Embedding(vocab, width)
        self.wpe = nn.Embedding(context, width)
        self.h = nn.ModuleList(Block(width, heads) for _ in range(layers))
        self.ln_f = nn.LayerNorm(width, eps=1e-5)
        self.apply(self._init)

    @staticmethod
    def _init(m):  # GPT-2's: N(0, 0.02) weights, zero biases
        if isinstance(m, (nn.Linear, nn.Embedding)):
            nn.init.normal_(m.weight, 0.0, 0.02)
        if isinstance(m, nn.Linear) and m.bias is not None:
            nn.init.zeros_(m.bias)

    def forward(self, tokens, targets):
        t = tokens.shape[1]
        x = self.wte(tokens) + self.wpe(torch.arange(t, device=tokens.device))
        for block in self.h:
            x = block(x)
        logits = F.linear(self.ln_f(x), self.wte.weight)  # tied LM head
        return F.cross_entropy(logits.float().view(-1, logits.shape[-1]), targets.view(-1))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--layers", type=int, default=12)
    p.add_argument("--width", type=int, default=768)
    p.add_argument("--heads", type=int, default=12)
    p.add_argument("--context", type=int, default=1024)
    p.add_argument("--vocab", type=int, default=50257)
    p.add_argument("--batch", type=int, default=16, help="sequences per step")
    p.add_argument("--steps", type=int, default=30, help="timed steps")
    p.add_argument("--warmup", type=int, default=10, help="untimed steps first (compilation included)")
    p.add_argument("--precision", choices=["bf16", "fp16", "fp32"], default="bf16")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--no-compile", action="store_true", help="skip torch.compile")
    p.add_argument("--lr", type=float, default=6e-4)
    a = p.parse_args()
    for name in ("layers", "width", "heads", "context", "vocab", "batch", "steps"):
        if getattr(a, name) <= 0:
            p.error("--%s must be > 0, got %d" % (name, getattr(a, name)))
    if a.width % a.heads:
        p.error("--width (%d) must be a multiple of --heads (%d)" % (a.width, a.heads))

    torch.manual_seed(1)
    dev = torch.device(a.device)
    if dev.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    model = Gpt(a.layers, a.width, a.heads, a.context, a.vocab).to(dev)
    params = sum(p.numel() for p in model.parameters())
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    fused = {"fused": True} if dev.type == "cuda" else {}
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=a.lr, betas=(0.9, 0.95), eps=1e-8, **fused)
    step_model = model if a.no_compile else torch.compile(model)
    amp_dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(a.precision)
    scaler = None
    if a.precision == "fp16":
        scaler = torch.amp.GradScaler(dev.type) if hasattr(torch.amp, "GradScaler") else torch.cuda.amp.GradScaler()
    gen = torch.Generator(device="cpu").manual_seed(2)

    def batch():
        d = torch.randint(0, a.vocab, (a.batch, a.context + 1), generator=gen)
        return d[:, :-1].contiguous().to(dev), d[:, 1:].contiguous().to(dev)

    def step(tokens, targets):
        with torch.autocast(dev.type, dtype=amp_dtype, enabled=amp_dtype is not None):
            loss = step_model(tokens, targets)
        if scaler is not None:
            scaler.scale(loss).backward()
            scaler.unscale_(opt)
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            scaler.step(opt)
            scaler.update()
        else:
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
        opt.zero_grad(set_to_none=True)
        return loss

    def sync():
        if dev.type == "cuda":
            torch.cuda.synchronize()

    data = [batch() for _ in range(4)]  # rotated: no host data work inside the timed steps
    for i in range(a.warmup):
        step(*data[i % 4])
    sync()
    times = []
    loss = None
    for i in range(a.steps):
        start = time.perf_counter()
        loss = step(*data[i % 4])
        sync()
        times.append(time.perf_counter() - start)
    median = statistics.median(times)
    peak_mem = torch.cuda.max_memory_allocated() if dev.type == "cuda" else 0
    print("impl=pytorch model=gpt layers=%d width=%d heads=%d context=%d vocab=%d batch=%d precision=%s "
          "compile=%d params=%d steps=%d ms_per_step=%.2f tokens_per_s=%.1f loss=%.4f peak_mem_bytes=%d torch=%s"
          % (a.layers, a.width, a.heads, a.context, a.vocab, a.batch, a.precision, 0 if a.no_compile else 1,
             params, a.steps, 1000 * median, a.batch * a.context / median, loss.item(), peak_mem,
             torch.__version__), flush=True)
    if not math.isfinite(loss.item()):
        raise SystemExit("the loss is not finite")


if __name__ == "__main__":
    main()
