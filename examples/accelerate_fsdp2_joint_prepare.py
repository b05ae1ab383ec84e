"""Fine-tuning with accelerate + FSDP2, optimizer built before prepare(). No findings expected.

Launch: accelerate launch --num_processes 8 examples/accelerate_fsdp2_joint_prepare.py

Building the optimizer before prepare() is the normal accelerate pattern. With
fsdp_version=2 and the model and optimizer passed to the SAME prepare() call, accelerate
shards the model and re-points every optimizer entry to the new sharded parameter.
Every entry here is a parameter of `model`, so the re-pointing succeeds.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
from accelerate import Accelerator, FullyShardedDataParallelPlugin
from torch.utils.data import DataLoader, TensorDataset


class Block(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x):
        return x + self.mlp(self.norm(x))


class Classifier(nn.Module):
    def __init__(self, vocab_size=32000, dim=1024, n_layers=8, n_classes=4):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, dim)
        self.blocks = nn.ModuleList(Block(dim) for _ in range(n_layers))
        self.head = nn.Linear(dim, n_classes)

    def forward(self, tokens):
        x = self.embed(tokens)
        for block in self.blocks:
            x = block(x)
        return self.head(x.mean(dim=1))


plugin = FullyShardedDataParallelPlugin(
    fsdp_version=2,
    auto_wrap_policy="transformer_based_wrap",
    transformer_cls_names_to_wrap=["Block"],
    state_dict_type="SHARDED_STATE_DICT",
)
accelerator = Accelerator(mixed_precision="bf16", fsdp_plugin=plugin)

model = Classifier()
decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
optimizer = torch.optim.AdamW(
    [{"params": decay, "weight_decay": 0.05}, {"params": no_decay, "weight_decay": 0.0}], lr=2e-5
)

data = TensorDataset(torch.randint(0, 32000, (2048, 256)), torch.randint(0, 4, (2048,)))
loader = DataLoader(data, batch_size=16, shuffle=True)
model, optimizer, loader = accelerator.prepare(model, optimizer, loader)

model.train()
for epoch in range(2):
    for tokens, labels in loader:
        loss = F.cross_entropy(model(tokens), labels)
        accelerator.backward(loss)
        accelerator.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad()
    accelerator.print(f"epoch {epoch} loss {loss.item():.4f}")

accelerator.wait_for_everyone()
accelerator.save_state("checkpoints/final")
