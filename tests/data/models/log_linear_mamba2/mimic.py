# Pure-PyTorch mimic of the benchmark's RecNet with fla's LogLinearMamba2 (fla commit bc3b101d,
# fla/layers/log_linear_mamba2.py) as its layer: the module's construction order and inits at
# fla's defaults (hidden_size=d, num_heads=H, head_dim=2d/H, state_size=N), the forward written
# from the log-linear attention's quadratic masked form (fla/ops/log_linear_attn/naive.py and
# the paper): per head, scores (C_t . B_s) exp(sum of dt A over (s, t]) lam_t^(level(t, s)) on
# dt_s x_s, Fenwick levels built from the bit rule of the paper. fla itself needs triton.
#
#   python3 mimic.py vectors OUT.json    reference of tests/unit/test_log_linear*.c (torch 1.13)
#   python3 mimic.py check CKPT DUMP     a selectivbench checkpoint and its `eval --dump` file:
#                                        loads it strictly, compares the logits (<= 1e-4)
import json, math, os, sys
import torch, torch.nn as nn, torch.nn.functional as F
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..'))
import mimic_common  # noqa: E402
from mimic_common import heads  # noqa: E402
torch.set_default_dtype(torch.float32)

LEVELS = 15  # fla: ceil(log2(2048 * 8)) + 1 level weights per head


def level_matrix(T):
    """lev[t, s] for s <= t: 0 on the diagonal; level l >= 1 holds, when bit l-1 of t is set,
    the 2^(l-1) frames just before t with its low l-1 bits cleared. -1 above the diagonal."""
    lev = torch.full((T, T), -1, dtype=torch.long)
    for t in range(T):
        lev[t, t] = 0
        for l in range(1, LEVELS + 4):
            w = 1 << (l - 1)
            if (t >> (l - 1)) & 1:
                end = (t >> (l - 1)) << (l - 1)
                lev[t, end - w:end] = min(l, LEVELS - 1)
    assert (lev.tril() >= 0).all() or T == 0
    return lev


class GatedNorm(nn.Module):  # RMSNormGated(E, eps=1e-5, norm_before_gate=False, one group)
    def __init__(s, E):
        super().__init__()
        s.weight = nn.Parameter(torch.ones(E))
    def forward(s, y, z):
        g = y * F.silu(z)
        return g * torch.rsqrt((g * g).mean(-1, keepdim=True) + 1e-5) * s.weight


class LogLinearMamba2(nn.Module):
    def __init__(s, d, H, N):
        super().__init__()
        E = 2 * d
        s.H, s.N, s.E, s.P = H, N, E, E // H
        conv_dim = E + 2 * N
        s.conv1d = nn.Conv1d(conv_dim, conv_dim, 4, groups=conv_dim, padding=3, bias=False)
        s.in_proj = nn.Linear(d, E + conv_dim + H * (LEVELS + 1), bias=True)
        dt = torch.exp(torch.rand(H) * (math.log(0.1) - math.log(0.001)) + math.log(0.001))
        dt = torch.clamp(dt, min=1e-4)
        s.dt_bias = nn.Parameter(dt + torch.log(-torch.expm1(-dt)))
        s.A_log = nn.Parameter(torch.log(torch.arange(1, H + 1)))
        s.L = nn.Parameter(torch.ones(H, LEVELS))
        s.norm = GatedNorm(E)
        s.D = nn.Parameter(torch.ones(H))
        s.out_proj = nn.Linear(E, d, bias=True)

    def forward(s, u):
        Bsz, T, _ = u.shape
        H, N, E, P = s.H, s.N, s.E, s.P
        z, xBC, dt, dl = torch.split(s.in_proj(u), [E, E + 2 * N, H, H * LEVELS], -1)
        xBC = F.silu(s.conv1d(xBC.transpose(1, 2))[..., :T].transpose(1, 2))
        x, Bm, Cm = torch.split(xBC, [E, N, N], -1)
        dt = F.softplus(dt + s.dt_bias)                        # [B, T, H]
        a = -torch.exp(s.A_log) * dt                           # log decay per frame
        v = x.view(Bsz, T, H, P) * dt[..., None]
        lam = F.softplus(s.L * dl.view(Bsz, T, H, LEVELS))     # [B, T, H, LEVELS]
        c = torch.cumsum(a, 1).permute(0, 2, 1)                # [B, H, T]
        causal = torch.ones(T, T, dtype=torch.bool).tril()
        seg = (c[..., :, None] - c[..., None, :]).masked_fill(~causal, -math.inf)
        lev = level_matrix(T).clamp(min=0)
        lam_ts = torch.gather(lam.permute(0, 2, 1, 3), 3,
                              lev[None, None].expand(Bsz, H, T, T))  # lam[b, t, h, lev(t, s)]
        cb = torch.einsum('btn,bsn->bts', Cm, Bm)[:, None]
        W = cb * torch.exp(seg) * lam_ts * causal
        y = torch.einsum('bhts,bshp->bthp', W, v) + s.D[:, None] * x.view(Bsz, T, H, P)
        return s.out_proj(s.norm(y.reshape(Bsz, T, E), z))


class RecNet(mimic_common.RecNet):
    def __init__(s, I, d, O, L, H, N):
        super().__init__(I, d, O, L, lambda l: LogLinearMamba2(d, H, N))


def vectors(path):
    I, O, L, N, seed = 5, 7, 2, 8, 3
    B, T = 2, 150  # crosses the 64-frame query block twice with a ragged tail, and 128
    torch.manual_seed(1234)
    x = torch.tensor([[[round(float(v), 6) for v in r] for r in b] for b in torch.randn(B, T, I)],
                     dtype=torch.float64)
    out = {'config': dict(I=I, d=16, O=O, L=L, H=heads(16), N=N, seed=seed, B=B, T=T),
           'note': 'pure-PyTorch mimic of RecNet with fla LogLinearMamba2 (bc3b101d) at its defaults; '
                   'quadratic masked form; float64 forward from the float32 initial parameters; '
                   'the d32 entry gives the layout and count at width 32 (no logits)',
           'input': [float(v) for v in x.flatten()], 'models': {}}
    for d, name in ((16, 'log_linear_mamba2'), (32, 'log_linear_mamba2_d32')):
        torch.manual_seed(seed)
        net = RecNet(I, d, O, L, heads(d), N)
        ref = {'params': [{'name': k, 'shape': list(t.shape), 'sum': float(t.double().sum()),
                           'first': [float(v) for v in t.flatten()[:3]]}
                          for k, t in net.state_dict().items()],
               'count': sum(p.numel() for p in net.parameters())}
        if d == 16:
            with torch.no_grad():
                y = net.double()(x)
            ref['logits'] = [float('%.12g' % v) for v in y.flatten()]
        out['models'][name] = ref
    json.dump(out, open(path, 'w'), separators=(',', ':'))
    print({k: v['count'] for k, v in out['models'].items()})


def build(I, d, O, cfg):
    return RecNet(I, d, O, cfg['layers'], heads(d), cfg['d_state'])


if __name__ == '__main__':
    mimic_common.main('log_linear_mamba2', vectors, build, relative=True)
