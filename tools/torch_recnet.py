"""A PyTorch RecNet with GRU layers, written from docs/models/recnet.md and docs/models/gru.md.

It stands in for the reference's RecNet (symseqbench/selectivbench models/ssm_models.py,
which this repository does not contain) in tools/torch_roundtrip.py when no path to the
reference file is given: the same modules under the same state_dict names (encoder,
layers.{l} = nn.GRU, norms.{l} = nn.LayerNorm, drops.{l}, decoder), so a checkpoint that
loads into it with strict=True has the reference's names, shapes and layouts, and its
forward is the reference's:

    x = encoder(X); for each layer l: x = norms[l](x + drops[l](gru_l(x)[0])); decoder(x)

Only the GRU: the other layer types need the reference's own modules.
"""
import torch.nn as nn


class RecNet(nn.Module):
    """RecNet(model="gru", inp_size, d_output, dropout, layers, d_model, ...): the keyword
    arguments of the reference's constructor; those a GRU RecNet does not use are accepted
    and ignored."""

    def __init__(self, model, inp_size, d_output, dropout=0.2, layers=4, d_model=256,
                 **unused):
        super().__init__()
        if model != "gru":
            raise ValueError(f"the spec RecNet has only GRU layers, not {model!r}: "
                             "give the reference's models/ssm_models.py for other models")
        self.encoder = nn.Linear(inp_size, d_model)
        self.norms = nn.ModuleList(nn.LayerNorm(d_model) for _ in range(layers))
        self.drops = nn.ModuleList(nn.Dropout(dropout) for _ in range(layers))
        self.layers = nn.ModuleList(
            nn.GRU(d_model, d_model, num_layers=1, batch_first=True) for _ in range(layers))
        self.decoder = nn.Linear(d_model, d_output)

    def forward(self, x):
        """x: [B, T, inp_size] frames -> logits [B, T, d_output] (every frame)."""
        x = self.encoder(x)
        for layer, drop, norm in zip(self.layers, self.drops, self.norms):
            z, _ = layer(x)  # the output sequence; the final state is discarded
            x = norm(x + drop(z))
        return self.decoder(x)
