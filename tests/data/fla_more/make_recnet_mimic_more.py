# Pure-PyTorch mimic of the benchmark's RecNet with fla v0.3.2's MultiScaleRetention (retnet)
# and MesaNet (mesa_net): construction order and inits of fla v0.3.2, forward written from
# docs/models/retnet.md with naive recurrences (fla itself needs triton).
# Writes the reference of tests/unit/test_retnet_mesa.c (both of its builds):
#   python3 make_recnet_mimic_more.py recnet_mimic_more_seed3.json    (made with torch 1.13)
# The tests read the JSON only; they never need Python.
import json, sys
import torch, torch.nn as nn, torch.nn.functional as F
torch.set_default_dtype(torch.float32)

def conv(C):
    return nn.Conv1d(C, C, 4, groups=C, padding=3, bias=False)

def short_conv(m, x):  # x [B,T,C]
    T = x.shape[1]
    return F.silu(m(x.transpose(1, 2))[..., :T].transpose(1, 2))

def l2n(x, eps=1e-6):
    return x * torch.rsqrt((x * x).sum(-1, keepdim=True) + eps)

def rms(x, w, eps=1e-5):
    return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + eps) * w

class RetNet(nn.Module):
    def __init__(s, d, H):
        super().__init__()
        s.H = H; K = d // H
        s.q_proj = nn.Linear(d, d, bias=False); s.k_proj = nn.Linear(d, d, bias=False)
        s.v_proj = nn.Linear(d, 2 * d, bias=False); s.g_proj = nn.Linear(d, 2 * d, bias=False)
        s.q_conv1d = conv(d); s.k_conv1d = conv(d); s.v_conv1d = conv(2 * d)
        s.o_proj = nn.Linear(2 * d, d, bias=False)
        s.g_norm_swish_gate = nn.Module(); s.g_norm_swish_gate.weight = nn.Parameter(torch.ones(2 * d // H))
        # fla RotaryEmbedding(dim=K): float32 inv_freq, non-persistent
        s.register_buffer('inv_freq', 1.0 / (10000.0 ** (torch.arange(0, K, 2, dtype=torch.float32) / K)), persistent=False)
        # chunk_retention's g_gamma, float32
        s.register_buffer('g_gamma', (1 - torch.tensor(2.).pow(-5. - torch.arange(H, dtype=torch.float))).log(), persistent=False)
    def forward(s, x):
        B, T, d = x.shape; H = s.H; K = d // H; V = 2 * d // H
        q = short_conv(s.q_conv1d, s.q_proj(x)).view(B, T, H, K)
        k = short_conv(s.k_conv1d, s.k_proj(x)).view(B, T, H, K)
        v = short_conv(s.v_conv1d, s.v_proj(x)).view(B, T, H, V)
        freqs = torch.outer(torch.arange(T, dtype=x.dtype), s.inv_freq)
        cos, sin = freqs.cos()[None, :, None, :], freqs.sin()[None, :, None, :]
        def rot(u):
            u1, u2 = u[..., :K // 2], u[..., K // 2:]
            return torch.cat([u1 * cos - u2 * sin, u2 * cos + u1 * sin], -1)
        q, k = rot(q), rot(k)
        S = x.new_zeros(B, H, K, V); o = []
        gam = s.g_gamma.exp()
        for t in range(T):
            S = S * gam[None, :, None, None] + k[:, t, :, :, None] * v[:, t, :, None, :]
            o.append(torch.einsum('bhk,bhkv->bhv', q[:, t] * K ** -0.5, S))
        o = torch.stack(o, 1)
        g = s.g_proj(x).view(B, T, H, V)
        y = rms(o, s.g_norm_swish_gate.weight) * F.silu(g)
        return s.o_proj(y.reshape(B, T, 2 * d))

def cg(A, q, steps):
    # fla's chunk CG: x = 0, fixed count, 1e-5 guards
    x = torch.zeros_like(q); r = q.clone(); p = r.clone(); delta = (r * r).sum(-1)
    for _ in range(steps):
        m = torch.einsum('...ij,...j->...i', A, p)
        a = delta / ((p * m).sum(-1) + 1e-5)
        x = x + a[..., None] * p; r = r - a[..., None] * m
        dn = (r * r).sum(-1)
        p = r + (dn / (delta + 1e-5))[..., None] * p
        delta = dn
    return x

class MesaNet(nn.Module):
    steps = 30  # 0: exact solve
    def __init__(s, d, H):
        super().__init__()
        s.H = H
        s.q_proj = nn.Linear(d, d, bias=False); s.k_proj = nn.Linear(d, d, bias=False)
        s.v_proj = nn.Linear(d, d, bias=False)   # expand_v=2 is ignored by fla's MesaNet
        s.a_proj = nn.Linear(d, H, bias=True); s.b_proj = nn.Linear(d, H, bias=True)
        init = torch.log(torch.exp(torch.tensor(1.0 - 0.25)) - 1.0)
        s.lambda_params = nn.Parameter(torch.empty(d, dtype=torch.float32).fill_(init))
        s.q_conv1d = conv(d); s.k_conv1d = conv(d)
        s.o_norm = nn.Module(); s.o_norm.weight = nn.Parameter(torch.ones(d // H))
        s.o_proj = nn.Linear(d, d, bias=False)
    def forward(s, x):
        B, T, d = x.shape; H = s.H; K = d // H
        q = l2n(short_conv(s.q_conv1d, s.q_proj(x)).view(B, T, H, K))
        k = l2n(short_conv(s.k_conv1d, s.k_proj(x)).view(B, T, H, K))
        v = s.v_proj(x).view(B, T, H, K)
        beta = s.b_proj(x).sigmoid(); g = F.logsigmoid(s.a_proj(x))
        lam = (F.softplus(s.lambda_params) + 0.25).view(H, K)
        Hs = x.new_zeros(B, H, K, K); Gs = x.new_zeros(B, H, K, K); o = []
        for t in range(T):
            a = g[:, t].exp()[..., None, None]; bk = beta[:, t, :, None] * k[:, t]
            Hs = a * Hs + bk[..., :, None] * k[:, t, :, None, :]
            Gs = a * Gs + bk[..., :, None] * v[:, t, :, None, :]
            A = Hs + torch.diag_embed(lam)[None]
            xs = cg(A, q[:, t], s.steps) if s.steps > 0 else torch.linalg.solve(A, q[:, t])
            o.append(torch.einsum('bhk,bhkv->bhv', xs, Gs))
        o = torch.stack(o, 1)
        return s.o_proj(rms(o, s.o_norm.weight).reshape(B, T, d))

class MesaNetExact(MesaNet):
    steps = 0

class RecNet(nn.Module):
    def __init__(s, cls, I, d, O, L, H):
        super().__init__()
        s.encoder = nn.Linear(I, d)
        s.norms = nn.ModuleList(); s.layers = nn.ModuleList()
        for _ in range(L):
            s.norms.append(nn.LayerNorm(d)); s.layers.append(cls(d, H))
        s.decoder = nn.Linear(d, O)
    def forward(s, x):
        x = s.encoder(x)
        for layer, norm in zip(s.layers, s.norms):
            x = norm(x + layer(x))
        return s.decoder(x)

models = {'retnet': RetNet, 'mesa_net': MesaNet, 'mesa_net_exact': MesaNetExact}
I, d, O, L, H, seed = 5, 16, 7, 2, 4, 3
B, T = 2, 70
torch.manual_seed(1234)
x = torch.tensor([[[round(float(v), 6) for v in r] for r in b] for b in torch.randn(B, T, I)], dtype=torch.float32).double()
out = {'config': dict(I=I, d=d, O=O, L=L, H=H, seed=seed, B=B, T=T),
       'note': 'pure-PyTorch mimic (construction order, fla v0.3.2 inits, forward from the spec with naive recurrences; mesa_net: 30 CG steps as fla, mesa_net_exact: exact solves), float64 forward',
       'input': [float(v) for v in x.flatten()], 'models': {}}
for name, cls in models.items():
    torch.manual_seed(seed)
    net = RecNet(cls, I, d, O, L, H)
    sd = net.state_dict()
    params = []
    for k, t in sd.items():
        params.append({'name': k, 'shape': list(t.shape), 'sum': float(t.double().sum()),
                       'first': [float(v) for v in t.flatten()[:3]]})
    # forward in float64 from the float32 parameters (and buffers)
    net64 = net.double()
    with torch.no_grad():
        y = net64(x.double())
    out['models'][name] = {'params': params, 'count': sum(p.numel() for p in net.parameters()),
                           'logits': [float('%.12g' % v) for v in y.flatten()]}
json.dump(out, open(sys.argv[1], 'w'), separators=(',', ':'))
print({k: v['count'] for k, v in out['models'].items()})
l0 = torch.tensor(out['models']['mesa_net']['logits']); l1 = torch.tensor(out['models']['mesa_net_exact']['logits'])
print('mesa CG vs exact logits: max abs diff', float((l0 - l1).abs().max()), 'max |logit|', float(l1.abs().max()))
