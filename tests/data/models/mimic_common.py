"""What every model's PyTorch mimic shares (tests/data/models/<model>/mimic.py, issue 20): the
RecNet around the model's layer, the checkpoint check and the command line. Each mimic.py
keeps its own layer and its own `vectors` (the shapes and the note of its test's JSON).

  mimic.py vectors OUT.json    the reference JSON its C test reads
  mimic.py check CKPT DUMP     a selectivbench checkpoint loaded by state_dict name
                               (strict) into the mimic; its logits on the dumped batch
                               compared with ours (tests/cli/test_mimics.sh)
"""
import json
import os
import sys

import torch
import torch.nn as nn

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', '..',
                                'tools'))
from check_checkpoint_with_torch import heads, read_safetensors  # noqa: E402,F401


class RecNet(nn.Module):
    """The benchmark's RecNet: encoder, L blocks x = LayerNorm(x + layer(x)), decoder; built
    in the reference's order (encoder, then each block's norm before its layer, decoder), so
    that torch.manual_seed(seed) gives the same initial weights as ours. make_layer(l) builds
    layer l."""

    def __init__(s, I, d, O, L, make_layer):
        super().__init__()
        s.encoder = nn.Linear(I, d)
        s.norms, s.layers = nn.ModuleList(), nn.ModuleList()
        for l in range(L):
            s.norms.append(nn.LayerNorm(d))
            s.layers.append(make_layer(l))
        s.decoder = nn.Linear(d, O)

    def forward(s, x):
        x = s.encoder(x)
        for layer, norm in zip(s.layers, s.norms):
            x = norm(x + layer(x))
        return s.decoder(x)


def check(model, ckpt, dump_path, build, relative=False):
    """Loads the checkpoint of a `model` run into build(I, d, O, cfg) (cfg: the checkpoint's
    configuration),
    runs the dumped inputs in float64, prints one line and exits 1 when a valid frame's logit
    differs by more than 1e-4 (times max(1, max |logit|) when relative)."""
    weights, meta = read_safetensors(ckpt)
    dump, _ = read_safetensors(dump_path)
    cfg = json.loads(meta['config'])
    assert cfg['model'] == model, cfg['model']
    I = dump['inputs'].shape[-1]
    O, d = weights['decoder.bias'].shape[0], weights['encoder.bias'].shape[0]
    net = build(I, d, O, cfg)
    net.load_state_dict(weights, strict=True)
    net = net.double().eval()
    with torch.no_grad():
        logits = net(dump['inputs'].double())
    mask = dump['mask'].bool()
    diff = (logits - dump['logits'].double()).abs()[mask].max().item()
    scale = dump['logits'].abs()[mask].max().item()
    print(f"{cfg['model']}: {int(mask.sum())} frames, max |logit difference| {diff:.3g} "
          f"(logits up to {scale:.3g})")
    sys.exit(0 if diff <= 1e-4 * (max(1.0, scale) if relative else 1.0) else 1)


def main(model, vectors, build, relative=False):
    """The command line of a mimic.py: `vectors OUT.json` or `check CKPT DUMP`."""
    if len(sys.argv) == 3 and sys.argv[1] == 'vectors':
        vectors(sys.argv[2])
    elif len(sys.argv) == 4 and sys.argv[1] == 'check':
        check(model, sys.argv[2], sys.argv[3], build, relative)
    else:
        sys.exit(__doc__)


def fixed_input(B, T, I):
    """The vectors' input: torch.randn(B, T, I) after torch.manual_seed(1234), rounded to 6
    digits (so that the JSON holds it exactly), in float64."""
    torch.manual_seed(1234)
    return torch.tensor([[[round(float(v), 6) for v in r] for r in b]
                         for b in torch.randn(B, T, I)], dtype=torch.float32).double()


def param_records(net):
    """Every state_dict entry as the C tests compare it: name, shape, sum, first values."""
    return [{'name': k, 'shape': list(t.shape), 'sum': float(t.double().sum()),
             'first': [float(v) for v in t.flatten()[:3]]} for k, t in net.state_dict().items()]
