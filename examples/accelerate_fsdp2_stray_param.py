"""Multi-task fine-tuning with accelerate + FSDP2 and learnable loss weights.

Launch: accelerate launch --num_processes 8 examples/accelerate_fsdp2_stray_param.py
Toy run on CPU: torchrun --nproc_per_node=2 examples/accelerate_fsdp2_stray_param.py --dim 32 --samples 64 --batch-size 8
(accelerate enables FSDP only on accelerators: on CPU it wraps the model in DDP and the KeyError below does not show)

Seeded bug (SL102): `task_log_vars` (learned per-task loss weights) is a free
nn.Parameter that goes into the optimizer next to the model's parameters. The FSDP2
prepare() re-points every optimizer entry to the sharded model parameter with the same
data_ptr; this one is not a parameter of the model, so prepare() raises
  KeyError: A parameter in the optimizer couldn't be switched to its sharded version
"""
import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F
from accelerate import Accelerator, FullyShardedDataParallelPlugin
from torch.utils.data import DataLoader, TensorDataset


class MultiTaskModel(nn.Module):
    def __init__(self, in_dim=512, hidden=2048, n_classes=10):
        super().__init__()
        self.trunk = nn.Sequential(nn.Linear(in_dim, hidden), nn.GELU(), nn.Linear(hidden, hidden), nn.GELU())
        self.cls_head = nn.Linear(hidden, n_classes)
        self.reg_head = nn.Linear(hidden, 1)

    def forward(self, x):
        h = self.trunk(x)
        return self.cls_head(h), self.reg_head(h).squeeze(-1)


parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=3)
parser.add_argument("--batch-size", type=int, default=64)
parser.add_argument("--samples", type=int, default=4096)
parser.add_argument("--dim", type=int, default=2048)
args = parser.parse_args()

accelerator = Accelerator(
    cpu=not torch.cuda.is_available(),
    mixed_precision="bf16",
    fsdp_plugin=FullyShardedDataParallelPlugin(fsdp_version=2, reshard_after_forward=True),
)

model = MultiTaskModel(hidden=args.dim)
task_log_vars = nn.Parameter(torch.zeros(2, device=accelerator.device))
optimizer = torch.optim.AdamW([  # BUG: SL102 task_log_vars is not a parameter of model
    {"params": model.parameters()},
    {"params": [task_log_vars], "lr": 1e-2, "weight_decay": 0.0},
], lr=3e-4, weight_decay=0.01)

n = args.samples
data = TensorDataset(torch.randn(n, 512), torch.randint(0, 10, (n,)), torch.randn(n))
loader = DataLoader(data, batch_size=args.batch_size, shuffle=True)
model, optimizer, loader = accelerator.prepare(model, optimizer, loader)

model.train()
for epoch in range(args.epochs):
    for x, y_cls, y_reg in loader:
        logits, pred = model(x)
        losses = torch.stack([F.cross_entropy(logits, y_cls), F.mse_loss(pred.float(), y_reg)])
        loss = (torch.exp(-task_log_vars) * losses + task_log_vars).sum()
        accelerator.backward(loss)
        optimizer.step()
        optimizer.zero_grad()
    accelerator.print(f"epoch {epoch} loss {loss.item():.4f}")
