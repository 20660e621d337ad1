# Pure-PyTorch mimic of the benchmark's RecNet around fla's KimiDeltaAttention (fla commit
# bc3b101d, fla/layers/kda.py), built as KimiDeltaAttention(hidden_size=d, head_dim=d//H,
# num_heads=H) with fla's other defaults (expand_v=1, short convs of size 4, softplus gate with
# A_log, no lower bound, sigmoid-gated RMSNorm). Modules are created in fla's order so that the
# initial weights after torch.manual_seed(seed) are fla's; the recurrence is written from
# fla/ops/kda/naive.py (decay first, then the delta update). fla itself needs triton.
#
#   /usr/bin/python3 mimic.py vectors OUT.json   reference of tests/unit/test_dplr*.c
#   /usr/bin/python3 mimic.py check CKPT DUMP    a selectivbench checkpoint against the mimic
import json, math, os, sys
import torch, torch.nn as nn, torch.nn.functional as F
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..'))
import mimic_common  # noqa: E402
from mimic_common import heads  # noqa: E402
torch.set_default_dtype(torch.float32)


def conv(C):
    return nn.Conv1d(C, C, 4, groups=C, padding=3, bias=False)


def short_conv(m, x):  # x [B, T, C] -> silu(causal depthwise conv)
    T = x.shape[1]
    return F.silu(m(x.transpose(1, 2))[..., :T].transpose(1, 2))


def l2n(x, eps=1e-6):
    return x * torch.rsqrt((x * x).sum(-1, keepdim=True) + eps)


class Weight(nn.Module):  # a norm's weight alone (o_norm.weight)
    def __init__(s, n):
        super().__init__()
        s.weight = nn.Parameter(torch.ones(n))


class KDA(nn.Module):
    def __init__(s, d, H, layer_idx=None, n_layers=None):
        super().__init__()
        s.H, s.K = H, d // H
        K, V = s.K, s.K  # expand_v = 1
        s.q_proj = nn.Linear(d, H * K, bias=False)
        s.k_proj = nn.Linear(d, H * K, bias=False)
        s.v_proj = nn.Linear(d, H * V, bias=False)
        s.q_conv1d, s.k_conv1d, s.v_conv1d = conv(H * K), conv(H * K), conv(H * V)
        s.f_proj = nn.Sequential(nn.Linear(d, V, bias=False), nn.Linear(V, H * K, bias=False))
        s.b_proj = nn.Linear(d, H, bias=False)
        s.A_log = nn.Parameter(torch.log(torch.empty(H, dtype=torch.float32).uniform_(1, 16)))
        dt = torch.exp(torch.rand(H * K, dtype=torch.float32) * (math.log(0.1) - math.log(0.001))
                       + math.log(0.001)).clamp(min=1e-4)
        s.dt_bias = nn.Parameter(dt + torch.log(-torch.expm1(-dt)))
        s.g_proj = nn.Sequential(nn.Linear(d, V, bias=False), nn.Linear(V, H * V, bias=True))
        s.o_norm = Weight(V)
        s.o_proj = nn.Linear(H * V, d, bias=False)

    def forward(s, x):
        B, T, d = x.shape
        H, K = s.H, s.K
        V = K
        q = l2n(short_conv(s.q_conv1d, s.q_proj(x)).view(B, T, H, K))
        k = l2n(short_conv(s.k_conv1d, s.k_proj(x)).view(B, T, H, K))
        v = short_conv(s.v_conv1d, s.v_proj(x)).view(B, T, H, V)
        g = -s.A_log.exp().view(H, 1) * F.softplus(s.f_proj(x).view(B, T, H, K) + s.dt_bias.view(H, K))
        beta = s.b_proj(x).sigmoid()
        q = q * K ** -0.5
        S = x.new_zeros(B, H, K, V)
        o = []
        for t in range(T):
            S = S * g[:, t, :, :, None].exp()
            kt = k[:, t]
            u = v[:, t] - (kt[..., None] * S).sum(-2)
            S = S + torch.einsum('bhk,bhv->bhkv', beta[:, t, :, None] * kt, u)
            o.append(torch.einsum('bhk,bhkv->bhv', q[:, t], S))
        o = torch.stack(o, 1)
        z = s.g_proj(x).view(B, T, H, V)
        y = o * torch.rsqrt((o * o).mean(-1, keepdim=True) + 1e-5) * s.o_norm.weight * z.sigmoid()
        return s.o_proj(y.reshape(B, T, H * V))


class RecNet(mimic_common.RecNet):
    def __init__(s, I, d, O, L, H):
        super().__init__(I, d, O, L, lambda l: KDA(d, H, l, L))


def vectors(path):
    I, d, O, L, seed = 5, 16, 7, 2, 3
    H = heads(d)
    B, T = 2, 37  # crosses the op's 16-token blocks twice with a ragged tail
    x = mimic_common.fixed_input(B, T, I)
    torch.manual_seed(seed)
    net = RecNet(I, d, O, L, H)
    params = mimic_common.param_records(net)
    counts = {str(w): sum(p.numel() for p in RecNet(I, w, O, L, heads(w)).parameters()) for w in (16, 32)}
    with torch.no_grad():
        y = net.double()(x)
    out = {'config': dict(I=I, d=d, O=O, L=L, H=H, seed=seed, B=B, T=T),
           'note': 'pure-PyTorch mimic of RecNet with fla bc3b101d KimiDeltaAttention(hidden_size=d, '
                   'head_dim=d//H, num_heads=H); float64 forward from the float32 initial weights',
           'input': [float(v) for v in x.flatten()], 'counts': counts,
           'models': {'kda': {'params': params, 'count': counts[str(d)],
                              'logits': [float('%.12g' % v) for v in y.flatten()]}}}
    json.dump(out, open(path, 'w'), separators=(',', ':'))
    print('counts', counts)


def build(I, d, O, cfg):
    return RecNet(I, d, O, cfg['layers'], heads(d))


if __name__ == '__main__':
    mimic_common.main('kda', vectors, build)
