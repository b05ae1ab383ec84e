#!/usr/bin/env python3
"""Generate a synthetic corpus of FSDP training projects for scripts/bench/run.sh.

Usage: gen_corpus.py N OUTDIR

Writes N copies of one template into OUTDIR (which is emptied first): OUTDIR/copy_00 ..
copy_{N-1}, each holding the same PROJECTS_PER_UNIT small training projects of 18-19 files,
204 files in all, so N=1 is the 1x corpus and N=16 the 16x corpus with exactly 16 times the
files and bytes. The projects of one copy follow one layout:

    proj_NNNN/
      <pkg>/__init__.py, config.py, data.py, trainer.py (class-based trainer)
      <pkg>/utils/{__init__,optim,schedule,checkpoint,metrics}.py  (optim.py builds optimizers)
      <pkg>/parallel/{__init__,fsdp,policies}.py                   (fsdp.py shards models)
      <pkg>/models/{__init__,blocks,transformer,heads}.py           (nn.Module classes)
      train_*.py (2 or 3 scripts: FSDP2 fully_shard, FSDP1, accelerate)

with names, sizes, optimizers and helper counts varied from project to project. Some training
scripts and trainers are correct, some carry an SL101 bug (optimizer built before
the wrap) or an SL103 bug (blocks sharded, root never). Every file mentions FSDP and
optimizer names, so shardlint's cheap relevance filter never skips a file: the corpus
measures the full per-file pipeline.

Deterministic: project k is generated from random.Random(SEED * 1_000_003 + k) alone, and
reruns produce byte-identical files. Standard library only.
"""
import os
import random
import shutil
import sys

SEED = 20240611
PROJECTS_PER_UNIT = 11

WORDS = ["atlas", "boreal", "cobalt", "delta", "ember", "fjord", "granite", "helix", "iris", "jade",
         "kestrel", "lumen", "magma", "nimbus", "onyx", "prism", "quartz", "raven", "sierra", "tundra",
         "umbra", "vertex", "willow", "xenon", "yarrow", "zephyr"]
OPTIMIZERS = [("torch.optim.AdamW", "lr=cfg.lr, betas=(0.9, 0.95), weight_decay=cfg.weight_decay"),
              ("torch.optim.Adam", "lr=cfg.lr, eps=1e-8"),
              ("torch.optim.SGD", "lr=cfg.lr, momentum=0.9, nesterov=True"),
              ("torch.optim.RMSprop", "lr=cfg.lr, alpha=0.99")]
ACTIVATIONS = ["nn.GELU()", "nn.SiLU()", "nn.ReLU()", "nn.Tanh()"]
NORMS = ["nn.LayerNorm", "nn.RMSNorm"]


def header(pkg, what, rng):
    topic = rng.choice(["pretraining", "fine-tuning", "distillation", "instruction tuning", "continued pretraining"])
    return (f'"""{what} for the {pkg} {topic} stack.\n\n'
            f"The model is sharded with FSDP (fully_shard / FullyShardedDataParallel) and the optimizer\n"
            f"(torch.optim) is built from the sharded parameters after wrapping.\n"
            f'"""\n')


def padding_helpers(rng, prefix, count):
    """Plain helper functions so files vary in size like real code."""
    out = []
    for k in range(count):
        a, b = rng.randint(2, 9), rng.randint(10, 99)
        kind = rng.randrange(4)
        name = f"{prefix}_{rng.choice(WORDS)}_{k}"
        if kind == 0:
            out.append(f"""
def {name}(values, scale={a}):
    \"\"\"Scale and clip a list of optimizer statistics (FSDP rank-local).\"\"\"
    result = []
    for i, v in enumerate(values):
        if v is None:
            continue
        x = v * scale + i
        if x > {b}:
            x = {b}
        elif x < -{b}:
            x = -{b}
        result.append(x)
    return result
""")
        elif kind == 1:
            out.append(f"""
def {name}(state, key="{rng.choice(WORDS)}", default={a}):
    \"\"\"Read a nested value from an optimizer/FSDP state mapping.\"\"\"
    node = state
    for part in key.split("."):
        if isinstance(node, dict) and part in node:
            node = node[part]
        else:
            return default
    return node
""")
        elif kind == 2:
            out.append(f"""
class {name.title().replace('_', '')}:
    \"\"\"Running average used for logging (no FSDP or optimizer state of its own).\"\"\"

    def __init__(self, window={b}):
        self.window = window
        self.values = []

    def update(self, value):
        self.values.append(float(value))
        if len(self.values) > self.window:
            self.values.pop(0)

    @property
    def mean(self):
        return sum(self.values) / max(len(self.values), 1)

    def __repr__(self):
        return f"{{type(self).__name__}}(mean={{self.mean:.4f}}, n={{len(self.values)}})"
""")
        else:
            out.append(f"""
def {name}(step, warmup={b * 10}, total={b * 1000}, floor=0.{a}):
    \"\"\"Piecewise schedule factor (linear warmup, cosine decay) for the optimizer.\"\"\"
    import math

    if step < warmup:
        return (step + 1) / warmup
    progress = min(1.0, (step - warmup) / max(1, total - warmup))
    return floor + (1.0 - floor) * 0.5 * (1.0 + math.cos(math.pi * progress))
""")
    return "".join(out)


class Project:
    def __init__(self, index):
        self.index = index
        self.rng = rng = random.Random(SEED * 1_000_003 + index)
        self.word = rng.choice(WORDS)
        self.pkg = f"{self.word}_lm{index % 7}"
        self.model = rng.choice(["Transformer", "Decoder", "CausalLM", "Encoder", "VisionTransformer"]) + rng.choice(
            ["", "V2", "Lite", "XL"])
        self.block = rng.choice(["Block", "Layer", "DecoderLayer", "ResidualBlock"])
        self.dim = rng.choice([512, 768, 1024, 2048, 4096])
        self.layers = rng.choice([6, 12, 16, 24, 32])
        self.heads = rng.choice([8, 12, 16, 32])
        self.vocab = rng.choice([32000, 50257, 65536, 151936])
        self.opt, self.opt_args = rng.choice(OPTIMIZERS)
        self.act = rng.choice(ACTIVATIONS)
        self.norm = rng.choice(NORMS)
        self.scripts = rng.choice([["fsdp2", "fsdp1"], ["fsdp2", "accelerate"], ["fsdp2", "fsdp1", "accelerate"]])
        # Bugs: each script and the trainer independently correct (most), SL101 or SL103.
        self.bugs = {s: rng.choices(["ok", "SL101", "SL103"], weights=[6, 2, 2])[0] for s in self.scripts}
        self.bugs["fsdp1"] = self.bugs.get("fsdp1", "ok") if self.bugs.get("fsdp1") != "SL103" else "SL101"
        self.bugs["accelerate"] = "ok"  # accelerate FSDP2 re-points the optimizer: always fine
        self.bugs["trainer"] = rng.choices(["ok", "SL101"], weights=[3, 1])[0]

    def pad(self, prefix, lo=0, hi=4):
        return padding_helpers(self.rng, prefix, self.rng.randint(lo, hi))

    # ------------------------------------------------------------------ package files
    def files(self):
        p = self.pkg
        yield f"{p}/__init__.py", self.init_pkg()
        yield f"{p}/config.py", self.config()
        yield f"{p}/data.py", self.data()
        yield f"{p}/trainer.py", self.trainer()
        yield f"{p}/utils/__init__.py", self.init_utils()
        yield f"{p}/utils/optim.py", self.optim()
        yield f"{p}/utils/schedule.py", self.schedule()
        yield f"{p}/utils/checkpoint.py", self.checkpoint()
        yield f"{p}/utils/metrics.py", self.metrics()
        yield f"{p}/parallel/__init__.py", self.init_parallel()
        yield f"{p}/parallel/fsdp.py", self.fsdp()
        yield f"{p}/parallel/policies.py", self.policies()
        yield f"{p}/models/__init__.py", self.init_models()
        yield f"{p}/models/blocks.py", self.blocks()
        yield f"{p}/models/transformer.py", self.transformer()
        yield f"{p}/models/heads.py", self.heads_file()
        for s in self.scripts:
            yield f"train_{s}.py", getattr(self, f"train_{s}")()

    def init_pkg(self):
        return header(self.pkg, "Package root", self.rng) + f"""
from .config import TrainConfig
from .trainer import Trainer

__all__ = ["TrainConfig", "Trainer"]
__version__ = "0.{self.index % 10}.{self.rng.randint(0, 20)}"
# FSDP + optimizer wiring lives in {self.pkg}.parallel.fsdp and {self.pkg}.utils.optim.
"""

    def config(self):
        return header(self.pkg, "Training configuration", self.rng) + f"""
import dataclasses
from typing import Optional


@dataclasses.dataclass
class TrainConfig:
    vocab_size: int = {self.vocab}
    dim: int = {self.dim}
    n_layers: int = {self.layers}
    n_heads: int = {self.heads}
    seq_len: int = {self.rng.choice([512, 1024, 2048, 4096])}
    batch_size: int = {self.rng.choice([2, 4, 8, 16])}
    lr: float = {self.rng.choice(["3e-4", "1e-4", "6e-4", "2e-5"])}
    weight_decay: float = {self.rng.choice(["0.0", "0.01", "0.1"])}
    optimizer: str = "{self.opt.rsplit('.', 1)[1]}"
    fsdp_version: int = {self.rng.choice([1, 2])}
    reshard_after_forward: bool = {self.rng.choice([True, False])}
    steps: int = {self.rng.choice([1000, 5000, 20000])}
    grad_clip: Optional[float] = 1.0
    checkpoint_dir: str = "checkpoints/{self.pkg}"

    def validate(self):
        if self.dim % self.n_heads:
            raise ValueError(f"dim {{self.dim}} is not divisible by n_heads {{self.n_heads}}")
        if self.optimizer not in ("AdamW", "Adam", "SGD", "RMSprop"):
            raise ValueError(f"unknown optimizer {{self.optimizer}}")
        return self
""" + self.pad("cfg", 0, 2)

    def data(self):
        return header(self.pkg, "Synthetic token data", self.rng) + f"""
import torch
from torch.utils.data import DataLoader, Dataset
from torch.utils.data.distributed import DistributedSampler


class RandomTokens(Dataset):
    \"\"\"Random token windows; the FSDP ranks each read their own shard via DistributedSampler.\"\"\"

    def __init__(self, vocab_size, seq_len, length={self.rng.choice([10000, 50000, 100000])}):
        self.vocab_size = vocab_size
        self.seq_len = seq_len
        self.length = length

    def __len__(self):
        return self.length

    def __getitem__(self, idx):
        g = torch.Generator().manual_seed(idx)
        tokens = torch.randint(0, self.vocab_size, (self.seq_len + 1,), generator=g)
        return tokens[:-1], tokens[1:]


def make_loader(cfg, rank, world_size):
    ds = RandomTokens(cfg.vocab_size, cfg.seq_len)
    sampler = DistributedSampler(ds, num_replicas=world_size, rank=rank, shuffle=True)
    return DataLoader(ds, batch_size=cfg.batch_size, sampler=sampler, num_workers=2, pin_memory=True)
""" + self.pad("data")

    def init_utils(self):
        return header(self.pkg, "Utilities", self.rng) + """
from .optim import build_optimizer, param_groups
from .schedule import build_scheduler

__all__ = ["build_optimizer", "param_groups", "build_scheduler"]
"""

    def optim(self):
        return header(self.pkg, "Optimizer construction", self.rng) + f"""
import torch


def param_groups(model, weight_decay):
    \"\"\"Split parameters into decay / no-decay groups (call on the FSDP-wrapped model).\"\"\"
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        if not p.requires_grad:
            continue
        if p.ndim < 2 or name.endswith(".bias") or "norm" in name:
            no_decay.append(p)
        else:
            decay.append(p)
    return [
        {{"params": decay, "weight_decay": weight_decay}},
        {{"params": no_decay, "weight_decay": 0.0}},
    ]


def build_optimizer(model, cfg):
    \"\"\"Build the optimizer from the parameters of an already sharded (FSDP) model.\"\"\"
    groups = param_groups(model, cfg.weight_decay)
    if cfg.optimizer == "SGD":
        return torch.optim.SGD(groups, lr=cfg.lr, momentum=0.9)
    if cfg.optimizer == "Adam":
        return torch.optim.Adam(groups, lr=cfg.lr)
    return {self.opt}(groups, {self.opt_args})


def zero_grad(optimizer):
    optimizer.zero_grad(set_to_none=True)
""" + self.pad("optim")

    def schedule(self):
        return header(self.pkg, "Learning-rate schedules", self.rng) + """
import math

from torch.optim.lr_scheduler import LambdaLR


def build_scheduler(optimizer, cfg, warmup=200):
    def factor(step):
        if step < warmup:
            return (step + 1) / warmup
        progress = (step - warmup) / max(1, cfg.steps - warmup)
        return 0.1 + 0.9 * 0.5 * (1.0 + math.cos(math.pi * min(progress, 1.0)))

    return LambdaLR(optimizer, factor)
""" + self.pad("sched")

    def checkpoint(self):
        return header(self.pkg, "Sharded checkpoints", self.rng) + """
import os

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict


def save(model, optimizer, step, directory):
    \"\"\"Save FSDP model and optimizer state with torch.distributed.checkpoint.\"\"\"
    model_sd, optim_sd = get_state_dict(model, optimizer)
    path = os.path.join(directory, f"step_{step:07d}")
    dcp.save({"model": model_sd, "optim": optim_sd}, checkpoint_id=path)
    if dist.get_rank() == 0:
        print(f"saved {path}")
    return path


def load(model, optimizer, path):
    model_sd, optim_sd = get_state_dict(model, optimizer)
    state = {"model": model_sd, "optim": optim_sd}
    dcp.load(state, checkpoint_id=path)
    set_state_dict(model, optimizer, model_state_dict=state["model"], optim_state_dict=state["optim"])
""" + self.pad("ckpt")

    def metrics(self):
        return header(self.pkg, "Metrics", self.rng) + """
import torch
import torch.distributed as dist


def grad_norm(model):
    \"\"\"Global gradient norm of an FSDP model (what the optimizer step will see).\"\"\"
    total = torch.zeros((), device="cuda")
    for p in model.parameters():
        if p.grad is not None:
            total += p.grad.detach().float().pow(2).sum()
    dist.all_reduce(total)
    return total.sqrt().item()


def tokens_per_second(batch_size, seq_len, seconds, world_size):
    return batch_size * seq_len * world_size / max(seconds, 1e-9)
""" + self.pad("metric", 1, 5)

    def init_parallel(self):
        return header(self.pkg, "Parallelism", self.rng) + """
from .fsdp import shard_model
from .policies import mixed_precision

__all__ = ["shard_model", "mixed_precision"]
# The optimizer must be built after shard_model(); see utils.optim.build_optimizer.
"""

    def fsdp(self):
        return header(self.pkg, "FSDP sharding helpers", self.rng) + f"""
import functools

import torch
import torch.nn as nn
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
from torch.distributed.fsdp.wrap import transformer_auto_wrap_policy

from ..models.blocks import {self.block}


def shard_model(model, mesh, cfg):
    \"\"\"Shard every block and then the root; build the optimizer afterwards.\"\"\"
    mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    if cfg.fsdp_version == 2:
        for layer in model.layers:
            fully_shard(layer, mesh=mesh, mp_policy=mp, reshard_after_forward=cfg.reshard_after_forward)
        fully_shard(model, mesh=mesh, mp_policy=mp)
        return model
    policy = functools.partial(transformer_auto_wrap_policy, transformer_layer_cls={{{self.block}}})
    return FSDP(model, auto_wrap_policy=policy, use_orig_params=True, device_id=torch.cuda.current_device())


def count_sharded(model):
    return sum(1 for m in model.modules() if isinstance(m, nn.Module) and hasattr(m, "reshard"))
""" + self.pad("fsdp")

    def policies(self):
        return header(self.pkg, "FSDP policies", self.rng) + """
import torch
from torch.distributed.fsdp import MixedPrecision, MixedPrecisionPolicy


def mixed_precision(version=2, dtype=torch.bfloat16):
    \"\"\"Mixed-precision settings for FSDP1 or FSDP2 (the optimizer keeps fp32 state).\"\"\"
    if version == 2:
        return MixedPrecisionPolicy(param_dtype=dtype, reduce_dtype=torch.float32)
    return MixedPrecision(param_dtype=dtype, reduce_dtype=torch.float32, buffer_dtype=dtype)
""" + self.pad("policy")

    def init_models(self):
        return header(self.pkg, "Models", self.rng) + f"""
from .blocks import {self.block}
from .heads import LMHead
from .transformer import {self.model}

__all__ = ["{self.block}", "LMHead", "{self.model}"]
# Blocks are the FSDP units; the optimizer sees their sharded parameters.
"""

    def blocks(self):
        return header(self.pkg, "Transformer blocks (FSDP units)", self.rng) + f"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Attention(nn.Module):
    def __init__(self, dim, n_heads):
        super().__init__()
        self.n_heads = n_heads
        self.qkv = nn.Linear(dim, 3 * dim, bias=False)
        self.proj = nn.Linear(dim, dim, bias=False)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(x).split(c, dim=2)
        q = q.view(b, t, self.n_heads, c // self.n_heads).transpose(1, 2)
        k = k.view(b, t, self.n_heads, c // self.n_heads).transpose(1, 2)
        v = v.view(b, t, self.n_heads, c // self.n_heads).transpose(1, 2)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(y.transpose(1, 2).contiguous().view(b, t, c))


class MLP(nn.Module):
    def __init__(self, dim, hidden):
        super().__init__()
        self.up = nn.Linear(dim, hidden, bias=False)
        self.act = {self.act}
        self.down = nn.Linear(hidden, dim, bias=False)

    def forward(self, x):
        return self.down(self.act(self.up(x)))


class {self.block}(nn.Module):
    def __init__(self, dim, n_heads):
        super().__init__()
        self.norm1 = {self.norm}(dim)
        self.attn = Attention(dim, n_heads)
        self.norm2 = {self.norm}(dim)
        self.mlp = MLP(dim, 4 * dim)

    def forward(self, x):
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))
""" + self.pad("block")

    def transformer(self):
        return header(self.pkg, "The full model", self.rng) + f"""
import torch
import torch.nn as nn

from .blocks import {self.block}
from .heads import LMHead


class {self.model}(nn.Module):
    def __init__(self, vocab_size={self.vocab}, dim={self.dim}, n_layers={self.layers}, n_heads={self.heads}):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, dim)
        self.layers = nn.ModuleList({self.block}(dim, n_heads) for _ in range(n_layers))
        self.norm = {self.norm}(dim)
        self.head = LMHead(dim, vocab_size)

    def forward(self, tokens):
        h = self.embed(tokens)
        for layer in self.layers:
            h = layer(h)
        return self.head(self.norm(h))

    def num_params(self):
        return sum(p.numel() for p in self.parameters())
""" + self.pad("model")

    def heads_file(self):
        return header(self.pkg, "Output heads", self.rng) + """
import torch.nn as nn
import torch.nn.functional as F


class LMHead(nn.Module):
    def __init__(self, dim, vocab_size):
        super().__init__()
        self.proj = nn.Linear(dim, vocab_size, bias=False)

    def forward(self, h):
        return self.proj(h)

    def loss(self, logits, targets):
        return F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten())
""" + self.pad("head")

    def trainer(self):
        bug = self.bugs["trainer"]
        if bug == "SL101":
            build = f"""        self.model = {self.model}(cfg.vocab_size, cfg.dim, cfg.n_layers, cfg.n_heads)
        self.optimizer = {self.opt}(self.model.parameters(), {self.opt_args})  # BUG: SL101
        for layer in self.model.layers:
            fully_shard(layer, mesh=mesh)
        fully_shard(self.model, mesh=mesh)
        self.optimizer.zero_grad()
"""
        else:
            build = f"""        self.model = {self.model}(cfg.vocab_size, cfg.dim, cfg.n_layers, cfg.n_heads)
        for layer in self.model.layers:
            fully_shard(layer, mesh=mesh)
        fully_shard(self.model, mesh=mesh)
        self.optimizer = {self.opt}(self.model.parameters(), {self.opt_args})
        self.optimizer.zero_grad()
"""
        return header(self.pkg, "Class-based trainer", self.rng) + f"""
import time

import torch
import torch.distributed as dist
from torch.distributed.fsdp import fully_shard

from .data import make_loader
from .models import {self.model}
from .utils.checkpoint import save
from .utils.schedule import build_scheduler


class Trainer:
    \"\"\"Owns the FSDP-sharded model, its optimizer and the loop.\"\"\"

    def __init__(self, cfg, mesh):
        self.cfg = cfg
{build}        self.scheduler = build_scheduler(self.optimizer, cfg)
        self.step = 0

    def train_step(self, inputs, targets):
        logits = self.model(inputs)
        loss = self.model.head.loss(logits, targets)
        loss.backward()
        if self.cfg.grad_clip:
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.cfg.grad_clip)
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        self.scheduler.step()
        self.step += 1
        return loss.detach()

    def fit(self, rank, world_size):
        loader = make_loader(self.cfg, rank, world_size)
        t0 = time.time()
        for inputs, targets in loader:
            loss = self.train_step(inputs.cuda(), targets.cuda())
            if self.step % 100 == 0 and rank == 0:
                print(f"step {{self.step}} loss {{loss.item():.4f}} {{time.time() - t0:.1f}}s")
            if self.step % 1000 == 0:
                save(self.model, self.optimizer, self.step, self.cfg.checkpoint_dir)
            if self.step >= self.cfg.steps:
                break
        dist.barrier()
""" + self.pad("trainer", 0, 2)

    def _script_head(self, what):
        return header(self.pkg, what, self.rng) + f"""
import argparse
import os

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.distributed.device_mesh import init_device_mesh

from {self.pkg}.config import TrainConfig
from {self.pkg}.models import {self.model}
"""

    def _loop(self, model="model", opt="optimizer", extra=""):
        return f"""
    for step in range(cfg.steps):
        tokens = torch.randint(0, cfg.vocab_size, (cfg.batch_size, cfg.seq_len + 1), device="cuda")
        logits = {model}(tokens[:, :-1])
        loss = F.cross_entropy(logits.flatten(0, 1).float(), tokens[:, 1:].flatten())
        loss.backward(){extra}
        {opt}.step()
        {opt}.zero_grad(set_to_none=True)
        if step % 100 == 0 and dist.get_rank() == 0:
            print(f"step {{step}} loss {{loss.item():.4f}}")
"""

    def _main_tail(self):
        return """
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
"""

    def _setup(self):
        return f"""

def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--lr", type=float, default=None)
    parser.add_argument("--steps", type=int, default=None)
    args = parser.parse_args()
    cfg = TrainConfig()
    if args.lr is not None:
        cfg.lr = args.lr
    if args.steps is not None:
        cfg.steps = args.steps
    dist.init_process_group("nccl")
    torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    mesh = init_device_mesh("cuda", (dist.get_world_size(),))
    with torch.device("cuda"):
        model = {self.model}(cfg.vocab_size, cfg.dim, cfg.n_layers, cfg.n_heads)
"""

    def train_fsdp2(self):
        bug = self.bugs["fsdp2"]
        opt = f"    optimizer = {self.opt}(model.parameters(), {self.opt_args})"
        shard_blocks = """    for layer in model.layers:
        fully_shard(layer, mesh=mesh, reshard_after_forward=cfg.reshard_after_forward)
"""
        shard_root = "    fully_shard(model, mesh=mesh)\n"
        if bug == "SL101":
            body = opt + "  # BUG: SL101 built before fully_shard\n" + shard_blocks + shard_root
        elif bug == "SL103":
            body = shard_blocks + "    # BUG: SL103 the root module is never sharded\n" + opt + "\n"
        else:
            body = shard_blocks + shard_root + opt + "\n"
        return (self._script_head("FSDP2 (fully_shard) training script")
                + "from torch.distributed.fsdp import fully_shard\n" + self.pad("script", 0, 2)
                + self._setup() + body + self._loop() + self._main_tail())

    def train_fsdp1(self):
        bug = self.bugs["fsdp1"]
        opt = f"    optimizer = {self.opt}(model.parameters(), {self.opt_args})"
        wrap = f"""    policy = functools.partial(transformer_auto_wrap_policy, transformer_layer_cls={{{self.block}}})
    model = FSDP(model, auto_wrap_policy=policy, device_id=torch.cuda.current_device())
"""
        if bug == "SL101":
            body = opt + "  # BUG: SL101 FSDP1 flattens the parameters afterwards\n" + wrap
        else:
            body = wrap + opt + "\n"
        return (self._script_head("FSDP1 (FullyShardedDataParallel) training script")
                + "import functools\n\nfrom torch.distributed.fsdp import FullyShardedDataParallel as FSDP\n"
                + "from torch.distributed.fsdp.wrap import transformer_auto_wrap_policy\n"
                + f"from {self.pkg}.models.blocks import {self.block}\n" + self.pad("script", 0, 2)
                + self._setup() + body + self._loop(extra="\n        model.clip_grad_norm_(1.0)")
                + self._main_tail())

    def train_accelerate(self):
        return header(self.pkg, "accelerate FSDP2 training script", self.rng) + f"""
import torch
import torch.nn.functional as F
from accelerate import Accelerator
from accelerate.utils import FullyShardedDataParallelPlugin

from {self.pkg}.config import TrainConfig
from {self.pkg}.models import {self.model}
from {self.pkg}.utils.optim import param_groups
""" + self.pad("script", 0, 2) + f"""

def main():
    cfg = TrainConfig()
    plugin = FullyShardedDataParallelPlugin(fsdp_version=2, reshard_after_forward=True)
    accelerator = Accelerator(fsdp_plugin=plugin, mixed_precision="bf16")
    model = {self.model}(cfg.vocab_size, cfg.dim, cfg.n_layers, cfg.n_heads)
    optimizer = torch.optim.AdamW(model.parameters(), lr=cfg.lr)
    model, optimizer = accelerator.prepare(model, optimizer)
    for step in range(cfg.steps):
        tokens = torch.randint(0, cfg.vocab_size, (cfg.batch_size, cfg.seq_len + 1), device=accelerator.device)
        logits = model(tokens[:, :-1])
        loss = F.cross_entropy(logits.flatten(0, 1).float(), tokens[:, 1:].flatten())
        accelerator.backward(loss)
        optimizer.step()
        optimizer.zero_grad()
        if step % 100 == 0:
            accelerator.print(f"step {{step}} loss {{loss.item():.4f}}")


if __name__ == "__main__":
    main()
"""


def main(argv):
    if len(argv) != 3 or not argv[1].isdigit() or int(argv[1]) < 1:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    units, out = int(argv[1]), argv[2]
    if os.path.isdir(out):
        shutil.rmtree(out)
    os.makedirs(out)
    files = size = 0
    bugs = {"SL101": 0, "SL103": 0}
    projects = [Project(k) for k in range(PROJECTS_PER_UNIT)]
    template = [(f"proj_{p.index:04d}/{rel}", text) for p in projects for rel, text in p.files()]
    for p in projects:
        for key in ["trainer"] + p.scripts:
            if p.bugs[key] in bugs:
                bugs[p.bugs[key]] += units
    for u in range(units):
        for rel, text in template:
            path = os.path.join(out, f"copy_{u:02d}", rel)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w", encoding="utf-8", newline="\n") as f:
                f.write(text)
            files += 1
            size += len(text.encode("utf-8"))
    print(f"{out}: {units} x {PROJECTS_PER_UNIT} projects, {files} files, {size} bytes, "
          f"seeded bugs: SL101={bugs['SL101']} SL103={bugs['SL103']}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
