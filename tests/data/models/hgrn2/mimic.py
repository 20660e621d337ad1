# Pure-PyTorch mimic of the benchmark's RecNet around fla's HGRN2Attention
# (fla/layers/hgrn2.py, commit bc3b101d) with hidden_size=d, num_heads=H, expand_ratio=None
# (so expand_ratio = d / H), every other argument at fla's default (no short convolution, no
# lower bound): construction order and inits as fla, the forward written from fla's naive
# GLA recurrence (fla/ops/gla/naive.py: S = diag(exp(g)) S + k v^T, scale K^-1/2) with
# q = silu(q_proj x), g = logsigmoid(f_proj x), k = 1 - exp(g), v = i_proj x, then RMSNorm over
# the whole width and o_proj.
#   python3 mimic.py vectors OUT.json   reference of tests/unit/test_gla_family.c (+ _float.c)
#   python3 mimic.py check CKPT DUMP    a selectivbench checkpoint against this mimic: CKPT from
#                                       `selectivbench train`, DUMP from `selectivbench eval
#                                       CKPT --dump DUMP`; exit 1 when logits differ > 1e-4
# Needs torch and numpy only (made with torch 1.13).
import json, os, sys
import torch, torch.nn as nn, torch.nn.functional as F
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..'))
import mimic_common  # noqa: E402
from mimic_common import heads  # noqa: E402

MODEL = 'hgrn2'


def rms(x, w, eps=1e-5):
    return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + eps) * w


class Layer(nn.Module):
    """HGRN2Attention(hidden_size=d, num_heads=H, expand_ratio=None)."""
    def __init__(s, d, H):
        super().__init__()
        s.H = H
        s.q_proj = nn.Linear(d, d, bias=False); s.f_proj = nn.Linear(d, d, bias=False)
        s.i_proj = nn.Linear(d, d, bias=False)
        s.g_norm = nn.Module(); s.g_norm.weight = nn.Parameter(torch.ones(d))
        s.o_proj = nn.Linear(d, d, bias=False)

    def forward(s, x):
        B, T, d = x.shape; H = s.H; K = d // H
        q = F.silu(s.q_proj(x)).view(B, T, H, K)
        g = F.logsigmoid(s.f_proj(x)).view(B, T, H, K)
        k = 1 - g.exp()
        v = s.i_proj(x).view(B, T, H, K)
        S = x.new_zeros(B, H, K, K); o = []
        for t in range(T):
            S = S * g[:, t].exp()[..., None] + k[:, t, :, :, None] * v[:, t, :, None, :]
            o.append(torch.einsum('bhk,bhkv->bhv', q[:, t] * K ** -0.5, S))
        o = torch.stack(o, 1).reshape(B, T, d)
        return s.o_proj(rms(o, s.g_norm.weight))


class RecNet(mimic_common.RecNet):
    def __init__(s, I, d, O, L, H):
        super().__init__(I, d, O, L, lambda l: Layer(d, H))


def vectors(path):
    I, d, O, L, H, seed, B, T = 5, 16, 7, 2, 4, 3, 2, 70  # T = 32 + 32 + 6: K1's chunks
    x = mimic_common.fixed_input(B, T, I)
    torch.manual_seed(seed)
    net = RecNet(I, d, O, L, H)
    params = mimic_common.param_records(net)
    count = sum(p.numel() for p in net.parameters())
    count32 = sum(p.numel() for p in RecNet(I, 32, O, L, H).parameters())
    with torch.no_grad():
        y = net.double()(x)
    out = {'config': dict(I=I, d=d, O=O, L=L, H=H, seed=seed, B=B, T=T),
           'note': 'pure-PyTorch mimic of RecNet with fla HGRN2Attention (bc3b101d; hidden_size=d, '
                   'num_heads=H, expand_ratio=None, other defaults), float64 forward from the '
                   'float32 initial weights',
           'input': [float(v) for v in x.flatten()],
           'models': {MODEL: {'params': params, 'count': count, 'count_d32': count32,
                              'logits': [float('%.12g' % v) for v in y.flatten()]}}}
    json.dump(out, open(path, 'w'), separators=(',', ':'))
    print(MODEL, 'parameters: d=16', count, 'd=32', count32)


def build(I, d, O, cfg):
    return RecNet(I, d, O, cfg['layers'], heads(d))


if __name__ == '__main__':
    mimic_common.main('hgrn2', vectors, build)
