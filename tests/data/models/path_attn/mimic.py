# Pure-PyTorch mimic of the benchmark's RecNet with fla's PaTHAttention (fla/layers/path_attn.py
# at commit bc3b101d, its defaults: no forget gate, no q/k norm, low-rank w of rank 32, short
# convolution of 3 on w, beta = 2 sigmoid). Construction order and inits as fla's module; the
# forward is written from the paper's decoding form (every cached key is multiplied by the
# new token's I - beta w w^T before the new key is appended), in float64.
#   python3 mimic.py vectors OUT.json   the reference of tests/unit/test_path_attn*.c
#   python3 mimic.py check CKPT DUMP     a selectivbench checkpoint and its `eval --dump` file:
#                                        load with strict=True, compare logits (<= 1e-4)
# Needs torch and numpy only (made with torch 1.13).
import json, os, sys
import torch, torch.nn as nn, torch.nn.functional as F
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..'))
import mimic_common  # noqa: E402
from mimic_common import heads  # noqa: E402
torch.set_default_dtype(torch.float32)


def l2n(x, eps=1e-6):
    return x * torch.rsqrt((x * x).sum(-1, keepdim=True) + eps)


class PaTHAttention(nn.Module):
    def __init__(s, d, H):
        super().__init__()
        s.H = H
        s.q_proj = nn.Linear(d, d, bias=False)
        s.k_proj = nn.Linear(d, d, bias=False)
        s.v_proj = nn.Linear(d, d, bias=False)
        s.w_proj = nn.Sequential(nn.Linear(d, 32, bias=False), nn.Linear(32, d, bias=False))
        # fla's ShortConvolution is an nn.Conv1d(groups=C, padding=W-1) with a silu after it
        s.w_conv1d = nn.Conv1d(d, d, 3, groups=d, padding=2, bias=False)
        s.bt_proj = nn.Linear(d, H, bias=True)
        s.o_proj = nn.Linear(d, d, bias=False)

    def forward(s, x):
        B, T, d = x.shape
        H = s.H
        Dh = d // H
        q = s.q_proj(x).view(B, T, H, Dh)
        k = s.k_proj(x).view(B, T, H, Dh)
        v = s.v_proj(x).view(B, T, H, Dh)
        w = s.w_proj(x)
        w = F.silu(s.w_conv1d(w.transpose(1, 2))[..., :T].transpose(1, 2))
        w = l2n(w.view(B, T, H, Dh))
        beta = s.bt_proj(x).sigmoid() * 2
        kc = x.new_zeros(B, H, 0, Dh)   # the key cache, already carried to the current token
        vc = x.new_zeros(B, H, 0, Dh)
        out = []
        for t in range(T):
            wt, bt = w[:, t], beta[:, t]                   # [B, H, Dh], [B, H]
            kc = kc - bt[..., None, None] * (kc @ wt[..., None]) * wt[:, :, None, :]
            kc = torch.cat([kc, k[:, t, :, None, :]], 2)
            vc = torch.cat([vc, v[:, t, :, None, :]], 2)
            z = (kc @ q[:, t, :, :, None]).squeeze(-1) * Dh ** -0.5   # [B, H, t+1]
            out.append((z.softmax(-1)[..., None] * vc).sum(2))
        o = torch.stack(out, 1).reshape(B, T, d)
        return s.o_proj(o)


class RecNet(mimic_common.RecNet):
    def __init__(s, I, d, O, L, H):
        super().__init__(I, d, O, L, lambda l: PaTHAttention(d, H))


def vectors(path):
    I, d, O, L, seed = 5, 16, 7, 2, 3
    H = heads(d)
    B, T = 2, 40
    torch.manual_seed(1234)
    x = torch.tensor([[[round(float(v), 6) for v in r] for r in b] for b in torch.randn(B, T, I)],
                     dtype=torch.float64)
    torch.manual_seed(seed)
    net = RecNet(I, d, O, L, H)
    params = mimic_common.param_records(net)
    counts = {str(w): sum(p.numel() for p in RecNet(I, w, O, L, heads(w)).parameters())
              for w in (16, 32)}
    with torch.no_grad():
        y = net.double()(x)
    out = {'config': dict(I=I, d=d, O=O, L=L, H=H, seed=seed, B=B, T=T),
           'note': 'pure-PyTorch mimic of RecNet with fla PaTHAttention (bc3b101d defaults), '
                   'forward in float64 from the decoding form',
           'input': [float(v) for v in x.flatten()],
           'counts': counts,
           'models': {'path_attn': {'params': params, 'count': counts['16'],
                                    'logits': [float('%.12g' % v) for v in y.flatten()]}}}
    json.dump(out, open(path, 'w'), separators=(',', ':'))
    print('counts', counts)


def build(I, d, O, cfg):
    return RecNet(I, d, O, cfg['layers'], heads(d))


if __name__ == '__main__':
    mimic_common.main('path_attn', vectors, build)
