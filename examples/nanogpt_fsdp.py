"""nanoGPT-style training script moved from DDP to FSDP1 (torchrun --nproc_per_node=8).
Toy run on CPU (gloo): torchrun --nproc_per_node=2 examples/nanogpt_fsdp.py --dim 32 --layers 2 --heads 4 --vocab 128 --seq-len 16 --batch-size 2

Seeded bug (SL101): GPT.configure_optimizers() builds AdamW before FSDP(model). Fine under
DDP, but FSDP1 without use_orig_params=True replaces the parameters: step() is a no-op.
"""
import argparse
import math
import os

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
from torch.distributed.fsdp.wrap import ModuleWrapPolicy

learning_rate, weight_decay, beta1, beta2 = 6e-4, 1e-1, 0.9, 0.95
parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=5000)
parser.add_argument("--batch-size", type=int, default=12)
parser.add_argument("--seq-len", type=int, default=1024)
parser.add_argument("--vocab", type=int, default=50304)
parser.add_argument("--dim", type=int, default=768)
parser.add_argument("--layers", type=int, default=12)
parser.add_argument("--heads", type=int, default=12)
args = parser.parse_args()
max_iters, batch_size, block_size = args.steps, args.batch_size, args.seq_len


class Block(nn.Module):
    def __init__(self, n_embd, n_head):
        super().__init__()
        self.ln_1 = nn.LayerNorm(n_embd)
        self.attn = nn.MultiheadAttention(n_embd, n_head, batch_first=True)
        self.ln_2 = nn.LayerNorm(n_embd)
        self.mlp = nn.Sequential(nn.Linear(n_embd, 4 * n_embd), nn.GELU(), nn.Linear(4 * n_embd, n_embd))

    def forward(self, x):
        h = self.ln_1(x)
        causal = nn.Transformer.generate_square_subsequent_mask(x.size(1), device=x.device)
        x = x + self.attn(h, h, h, attn_mask=causal, need_weights=False)[0]
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, vocab_size=50304, n_layer=12, n_head=12, n_embd=768):
        super().__init__()
        self.wte = nn.Embedding(vocab_size, n_embd)
        self.wpe = nn.Embedding(block_size, n_embd)
        self.h = nn.ModuleList([Block(n_embd, n_head) for _ in range(n_layer)])
        self.ln_f = nn.LayerNorm(n_embd)
        self.lm_head = nn.Linear(n_embd, vocab_size, bias=False)

    def forward(self, idx, targets):
        pos = torch.arange(idx.size(1), device=idx.device)
        x = self.wte(idx) + self.wpe(pos)
        for block in self.h:
            x = block(x)
        logits = self.lm_head(self.ln_f(x))
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))

    def configure_optimizers(self, weight_decay, learning_rate, betas):
        param_dict = {pn: p for pn, p in self.named_parameters()}
        param_dict = {pn: p for pn, p in param_dict.items() if p.requires_grad}
        decay_params = [p for n, p in param_dict.items() if p.dim() >= 2]
        nodecay_params = [p for n, p in param_dict.items() if p.dim() < 2]
        optim_groups = [
            {"params": decay_params, "weight_decay": weight_decay},
            {"params": nodecay_params, "weight_decay": 0.0},
        ]
        return torch.optim.AdamW(optim_groups, lr=learning_rate, betas=betas)


backend = "nccl" if torch.cuda.is_available() else "gloo"
dist.init_process_group(backend=backend)
device = torch.device(f"cuda:{os.environ['LOCAL_RANK']}" if backend == "nccl" else "cpu")
if device.type == "cuda":
    torch.cuda.set_device(device)

model = GPT(args.vocab, args.layers, args.heads, args.dim)
optimizer = model.configure_optimizers(weight_decay, learning_rate, (beta1, beta2))  # BUG: SL101 optimizer built before FSDP
model = FSDP(model, auto_wrap_policy=ModuleWrapPolicy({Block}), device_id=device)

for it in range(max_iters):
    lr = learning_rate * 0.5 * (1.0 + math.cos(math.pi * it / max_iters))
    for param_group in optimizer.param_groups:
        param_group["lr"] = lr
    x = torch.randint(0, args.vocab, (batch_size, block_size + 1), device=device)
    loss = model(x[:, :-1], x[:, 1:].contiguous())
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
