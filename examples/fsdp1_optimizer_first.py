"""Train a small causal LM with FSDP1 (FullyShardedDataParallel).

Launch: torchrun --nproc_per_node=8 examples/fsdp1_optimizer_first.py
Toy run on CPU (gloo): torchrun --nproc_per_node=2 examples/fsdp1_optimizer_first.py --dim 32 --layers 2 --heads 4 --vocab 128 --seq-len 16 --batch-size 2

Seeded bug (SL101): AdamW is built from model.parameters() before FSDP(model).
FSDP1 without use_orig_params=True flattens the parameters into FlatParameters,
so the optimizer keeps stale tensors that never get a gradient: the loss stays flat.
"""
import argparse
import functools
import os

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
from torch.distributed.fsdp import MixedPrecision
from torch.distributed.fsdp.wrap import transformer_auto_wrap_policy


class TinyLM(nn.Module):
    def __init__(self, vocab_size=32000, dim=1024, n_layers=12, n_heads=16):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, dim)
        self.layers = nn.ModuleList(
            nn.TransformerEncoderLayer(dim, n_heads, 4 * dim, batch_first=True, norm_first=True)
            for _ in range(n_layers)
        )
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, vocab_size, bias=False)

    def forward(self, tokens):
        x = self.embed(tokens)
        mask = nn.Transformer.generate_square_subsequent_mask(tokens.size(1), device=tokens.device)
        for layer in self.layers:
            x = layer(x, src_mask=mask, is_causal=True)
        return self.head(self.norm(x))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--lr", type=float, default=3e-4)
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--seq-len", type=int, default=512)
    parser.add_argument("--vocab", type=int, default=32000)
    parser.add_argument("--dim", type=int, default=1024)
    parser.add_argument("--layers", type=int, default=12)
    parser.add_argument("--heads", type=int, default=16)
    args = parser.parse_args()

    if torch.cuda.is_available():
        device = torch.device("cuda", int(os.environ["LOCAL_RANK"]))
        torch.cuda.set_device(device)
    else:
        device = torch.device("cpu")
    dist.init_process_group("nccl" if device.type == "cuda" else "gloo")
    torch.manual_seed(0)

    model = TinyLM(args.vocab, args.dim, args.layers, args.heads)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.1)  # BUG: SL101 built before FSDP(model)

    policy = functools.partial(transformer_auto_wrap_policy, transformer_layer_cls={nn.TransformerEncoderLayer})
    model = FSDP(
        model,
        auto_wrap_policy=policy,
        mixed_precision=MixedPrecision(param_dtype=torch.bfloat16, reduce_dtype=torch.float32),
        device_id=device,
    )

    model.train()
    for step in range(args.steps):
        tokens = torch.randint(0, args.vocab, (args.batch_size, args.seq_len + 1), device=device)
        logits = model(tokens[:, :-1])
        loss = F.cross_entropy(logits.flatten(0, 1).float(), tokens[:, 1:].flatten())
        loss.backward()
        model.clip_grad_norm_(1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        if step % 50 == 0 and dist.get_rank() == 0:
            print(f"step {step} loss {loss.item():.4f}")

    dist.destroy_process_group()


if __name__ == "__main__":
    main()
