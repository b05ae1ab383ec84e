"""Lightning + FSDP: the optimizer is built in configure_optimizers(). No findings expected.

Launch: python examples/lightning_module.py   (Lightning starts one process per GPU)

Lightning's FSDPStrategy wraps the model first and only then calls
configure_optimizers(), so self.parameters() already returns the parameters FSDP
manages. This script never builds an optimizer itself.
"""
import lightning as L
import torch
import torch.nn as nn
import torch.nn.functional as F
from lightning.pytorch.strategies import FSDPStrategy
from torch.utils.data import DataLoader, TensorDataset


class LitLM(L.LightningModule):
    def __init__(self, vocab_size=32000, dim=1024, n_layers=8, n_heads=16, lr=3e-4):
        super().__init__()
        self.save_hyperparameters()
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

    def training_step(self, batch, batch_idx):
        (tokens,) = batch
        logits = self(tokens[:, :-1])
        loss = F.cross_entropy(logits.flatten(0, 1).float(), tokens[:, 1:].flatten())
        self.log("train_loss", loss, prog_bar=True)
        return loss

    def configure_optimizers(self):
        optimizer = torch.optim.AdamW(self.parameters(), lr=self.hparams.lr, weight_decay=0.1)
        scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=10000)
        return {"optimizer": optimizer, "lr_scheduler": scheduler}


if __name__ == "__main__":
    data = TensorDataset(torch.randint(0, 32000, (8192, 513)))
    trainer = L.Trainer(
        accelerator="gpu",
        devices=8,
        strategy=FSDPStrategy(auto_wrap_policy={nn.TransformerEncoderLayer}),
        precision="bf16-mixed",
        max_steps=10000,
    )
    trainer.fit(LitLM(), DataLoader(data, batch_size=8, shuffle=True, num_workers=4))
