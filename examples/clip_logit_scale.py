"""Contrastive image-text (CLIP-style) training with FSDP2.

Launch: torchrun --nproc_per_node=8 examples/clip_logit_scale.py

Seeded bug (SL102): the learnable temperature `logit_scale` is a free nn.Parameter
created in the script and added to the optimizer after fully_shard(model). No FSDP
group manages it: it stays a plain tensor next to DTensor parameters (a foreach
AdamW mixes torch.Tensor and DTensor) and its gradient is never reduced across ranks.
"""
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
    def __init__(self, image_dim=1024, text_dim=768, width=1024, embed_dim=512):
        super().__init__()
        self.image_tower = make_tower(image_dim, width, 6)
        self.text_tower = make_tower(text_dim, width, 6)
        self.image_proj = nn.Linear(width, embed_dim, bias=False)
        self.text_proj = nn.Linear(width, embed_dim, bias=False)

    def forward(self, images, texts):
        img = F.normalize(self.image_proj(self.image_tower(images)), dim=-1)
        txt = F.normalize(self.text_proj(self.text_tower(texts)), dim=-1)
        return img, txt


dist.init_process_group("nccl")
torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))

model = DualEncoder().cuda()
fully_shard(model.image_tower)
fully_shard(model.text_tower)
fully_shard(model)
optimizer = torch.optim.AdamW(model.parameters(), lr=5e-4, weight_decay=0.2)

logit_scale = nn.Parameter(torch.tensor(math.log(1 / 0.07), device="cuda"))
optimizer.add_param_group({"params": [logit_scale], "weight_decay": 0.0})  # BUG: SL102 free nn.Parameter, no FSDP group

for step in range(10000):
    images = torch.randn(256, 1024, device="cuda")
    texts = torch.randn(256, 768, device="cuda")
    img, txt = model(images, texts)
    logits = logit_scale.exp().clamp(max=100.0) * img @ txt.t()
    labels = torch.arange(logits.size(0), device="cuda")
    loss = (F.cross_entropy(logits, labels) + F.cross_entropy(logits.t(), labels)) / 2
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    if step % 100 == 0 and dist.get_rank() == 0:
        print(f"step {step} loss {loss.item():.4f} scale {logit_scale.exp().item():.2f}")
