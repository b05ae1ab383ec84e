"""Contrastive image-text (CLIP-style) training with FSDP2.

Launch: torchrun --nproc_per_node=8 examples/clip_logit_scale.py
Toy run on CPU (gloo): torchrun --nproc_per_node=2 examples/clip_logit_scale.py --dim 32 --layers 2 --embed-dim 16 --batch-size 8

Seeded bug (SL102): the learnable temperature `logit_scale` is a free nn.Parameter
created in the script and added to the optimizer after fully_shard(model). No FSDP
group manages it: it stays a plain tensor next to DTensor parameters (a foreach
AdamW mixes torch.Tensor and DTensor) and its gradient is never reduced across ranks.
"""
import argparse
import math
import os

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed.fsdp import fully_shard


def make_tower(in_dim, width, depth):
    layers = [nn.Linear(in_dim, width)]
    for _ in range(depth):
        layers += [nn.GELU(), nn.Linear(width, width)]
    return nn.Sequential(*layers)


class DualEncoder(nn.Module):
    def __init__(self, image_dim=1024, text_dim=768, width=1024, embed_dim=512, depth=6):
        super().__init__()
        self.image_tower = make_tower(image_dim, width, depth)
        self.text_tower = make_tower(text_dim, width, depth)
        self.image_proj = nn.Linear(width, embed_dim, bias=False)
        self.text_proj = nn.Linear(width, embed_dim, bias=False)

    def forward(self, images, texts):
        img = F.normalize(self.image_proj(self.image_tower(images)), dim=-1)
        txt = F.normalize(self.text_proj(self.text_tower(texts)), dim=-1)
        return img, txt


parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=10000)
parser.add_argument("--batch-size", type=int, default=256)
parser.add_argument("--dim", type=int, default=1024)
parser.add_argument("--layers", type=int, default=6)
parser.add_argument("--embed-dim", type=int, default=512)
args = parser.parse_args()

device = torch.device(f"cuda:{os.environ['LOCAL_RANK']}" if torch.cuda.is_available() else "cpu")
dist.init_process_group("nccl" if device.type == "cuda" else "gloo")
if device.type == "cuda":
    torch.cuda.set_device(device)

model = DualEncoder(width=args.dim, embed_dim=args.embed_dim, depth=args.layers).to(device)
fully_shard(model.image_tower)
fully_shard(model.text_tower)
fully_shard(model)
optimizer = torch.optim.AdamW(model.parameters(), lr=5e-4, weight_decay=0.2)

logit_scale = nn.Parameter(torch.tensor(math.log(1 / 0.07), device=device))
optimizer.add_param_group({"params": [logit_scale], "weight_decay": 0.0})  # BUG: SL102 free nn.Parameter, no FSDP group

for step in range(args.steps):
    images = torch.randn(args.batch_size, 1024, device=device)
    texts = torch.randn(args.batch_size, 768, device=device)
    img, txt = model(images, texts)
    logits = logit_scale.exp().clamp(max=100.0) * img @ txt.t()
    labels = torch.arange(logits.size(0), device=device)
    loss = (F.cross_entropy(logits, labels) + F.cross_entropy(logits.t(), labels)) / 2
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    if step % 100 == 0 and dist.get_rank() == 0:
        print(f"step {step} loss {loss.item():.4f} scale {logit_scale.exp().item():.2f}")
