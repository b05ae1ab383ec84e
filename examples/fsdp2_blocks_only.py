"""Pretraining loop sharded with FSDP2 (fully_shard), torchtitan style.

Launch: torchrun --nproc_per_node=8 examples/fsdp2_blocks_only.py
Toy run on CPU (gloo): torchrun --nproc_per_node=2 examples/fsdp2_blocks_only.py --dim 32 --layers 2 --heads 4 --vocab 128 --seq-len 16 --batch-size 2

Seeded bug (SL103): every transformer block is passed to fully_shard, the root
module never is. tok_embeddings, norm and output belong to no FSDP group: they stay
plain replicated tensors whose gradients are never reduced, so the ranks drift apart.
"""
import argparse
import os

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard


class Transformer(nn.Module):
    def __init__(self, vocab_size=32000, dim=2048, n_layers=16, n_heads=16):
        super().__init__()
        self.tok_embeddings = nn.Embedding(vocab_size, dim)
        self.layers = nn.ModuleList(
            nn.TransformerEncoderLayer(dim, n_heads, 4 * dim, batch_first=True, norm_first=True)
            for _ in range(n_layers)
        )
        self.norm = nn.LayerNorm(dim)
        self.output = nn.Linear(dim, vocab_size, bias=False)

    def forward(self, tokens):
        h = self.tok_embeddings(tokens)
        mask = nn.Transformer.generate_square_subsequent_mask(tokens.size(1), device=tokens.device)
        for layer in self.layers:
            h = layer(h, src_mask=mask, is_causal=True)
        return self.output(self.norm(h))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--batch-size", type=int, default=4)
    parser.add_argument("--seq-len", type=int, default=2048)
    parser.add_argument("--vocab", type=int, default=32000)
    parser.add_argument("--dim", type=int, default=2048)
    parser.add_argument("--layers", type=int, default=16)
    parser.add_argument("--heads", type=int, default=16)
    args = parser.parse_args()

    device_type = "cuda" if torch.cuda.is_available() else "cpu"
    dist.init_process_group("nccl" if device_type == "cuda" else "gloo")
    if device_type == "cuda":
        torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    mesh = init_device_mesh(device_type, (dist.get_world_size(),))

    with torch.device(device_type):
        model = Transformer(args.vocab, args.dim, args.layers, args.heads)
    mp_policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32, output_dtype=torch.float32)
    for layer in model.layers:
        fully_shard(layer, mesh=mesh, mp_policy=mp_policy)  # BUG: SL103 blocks sharded, root module never sharded

    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1)

    for step in range(args.steps):
        tokens = torch.randint(0, args.vocab, (args.batch_size, args.seq_len + 1), device=device_type)
        logits = model(tokens[:, :-1])
        loss = F.cross_entropy(logits.flatten(0, 1).float(), tokens[:, 1:].flatten())
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        if step % 100 == 0 and dist.get_rank() == 0:
            print(f"step {step} loss {loss.item():.4f}")

    dist.destroy_process_group()


if __name__ == "__main__":
    main()
