# Pure-PyTorch mimic of the benchmark's RecNet with the fla layers (construction order and
# special inits of fla v0.3.2; forward written from docs/models/fla_layers.md and docs/models/linear_attention.md with naive recurrences).
# Writes the reference of tests/unit/test_linear_attn_layers.c and test_linear_attn_float.c:
#   python3 make_recnet_mimic.py recnet_mimic_seed3.json        (made with torch 1.13)
# The tests read the JSON only; they never need Python.
import json, math, sys
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

class GLA(nn.Module):
    def __init__(s, d, H):
        super().__init__()
        s.H = H
        s.q_proj = nn.Linear(d, d, bias=False); s.k_proj = nn.Linear(d, d, bias=False)
        s.v_proj = nn.Linear(d, 2 * d, bias=False); s.g_proj = nn.Linear(d, 2 * d, bias=False)
        s.q_conv1d = conv(d); s.k_conv1d = conv(d); s.v_conv1d = conv(2 * d)
        s.gk_proj = nn.Sequential(nn.Linear(d, 16, bias=False), nn.Linear(16, d, bias=True))
        s.o_proj = nn.Linear(2 * d, d, bias=False)
        s.g_norm_swish_gate = nn.Module(); s.g_norm_swish_gate.weight = nn.Parameter(torch.ones(2 * d // H))
    def forward(s, x):
        B, T, d = x.shape; H = s.H; K = d // H; V = 2 * d // H
        q = short_conv(s.q_conv1d, s.q_proj(x)).view(B, T, H, K)
        k = short_conv(s.k_conv1d, s.k_proj(x)).view(B, T, H, K)
        v = short_conv(s.v_conv1d, s.v_proj(x)).view(B, T, H, V)
        gk = (F.logsigmoid(s.gk_proj(x)) / 16).view(B, T, H, K)
        S = x.new_zeros(B, H, K, V); o = []
        for t in range(T):
            S = S * gk[:, t].exp()[..., None] + k[:, t, :, :, None] * v[:, t, :, None, :]
            o.append(torch.einsum('bhk,bhkv->bhv', q[:, t] * K ** -0.5, S))
        o = torch.stack(o, 1)
        g = s.g_proj(x).view(B, T, H, V)
        y = rms(o, s.g_norm_swish_gate.weight) * F.silu(g)
        return s.o_proj(y.reshape(B, T, 2 * d))

def delta_steps(q, k, v, beta, g, n, scale):
    # q [B,T,H,K]; k [B,T,n,H,K]; v [B,T,n,H,V]; beta [B,T,n,H]; g [B,T,H] or None
    B, T, H, K = q.shape; V = v.shape[-1]
    S = q.new_zeros(B, H, K, V); o = []
    for t in range(T):
        if g is not None:
            S = S * g[:, t].exp()[..., None, None]
        for j in range(n):
            kk = k[:, t, j]; u = beta[:, t, j][..., None] * (v[:, t, j] - torch.einsum('bhk,bhkv->bhv', kk, S))
            S = S + kk[..., None] * u[..., None, :]
        o.append(torch.einsum('bhk,bhkv->bhv', q[:, t] * scale, S))
    return torch.stack(o, 1)

class DeltaNet(nn.Module):
    def __init__(s, d, H):
        super().__init__()
        s.H = H
        s.q_proj = nn.Linear(d, d, bias=False); s.k_proj = nn.Linear(d, d, bias=False)
        s.v_proj = nn.Linear(d, 2 * d, bias=False); s.b_proj = nn.Linear(d, H, bias=False)
        s.q_conv1d = conv(d); s.k_conv1d = conv(d); s.v_conv1d = conv(2 * d)
        s.o_norm = nn.Module(); s.o_norm.weight = nn.Parameter(torch.ones(2 * d // H))
        s.o_proj = nn.Linear(2 * d, d, bias=False)
    def forward(s, x):
        B, T, d = x.shape; H = s.H; K = d // H; V = 2 * d // H
        q = l2n(short_conv(s.q_conv1d, s.q_proj(x)).view(B, T, H, K))
        k = l2n(short_conv(s.k_conv1d, s.k_proj(x)).view(B, T, 1, H, K))
        v = short_conv(s.v_conv1d, s.v_proj(x)).view(B, T, 1, H, V)
        beta = s.b_proj(x).sigmoid().view(B, T, 1, H)
        o = delta_steps(q, k, v, beta, None, 1, K ** -0.5)
        return s.o_proj(rms(o, s.o_norm.weight).reshape(B, T, 2 * d))

def gdn_inits(s, H):
    A = torch.empty(H, dtype=torch.float32).uniform_(0, 16)
    s.A_log = nn.Parameter(torch.log(A))
    dt = torch.exp(torch.rand(H) * (math.log(0.1) - math.log(0.001)) + math.log(0.001))
    dt = torch.clamp(dt, min=1e-4)
    s.dt_bias = nn.Parameter(dt + torch.log(-torch.expm1(-dt)))

class GDN(nn.Module):
    def __init__(s, d, H):
        super().__init__()
        s.H = H
        s.q_proj = nn.Linear(d, d, bias=False); s.k_proj = nn.Linear(d, d, bias=False)
        s.v_proj = nn.Linear(d, 2 * d, bias=False)
        s.a_proj = nn.Linear(d, H, bias=False); s.b_proj = nn.Linear(d, H, bias=False)
        gdn_inits(s, H)
        s.q_conv1d = conv(d); s.k_conv1d = conv(d); s.v_conv1d = conv(2 * d)
        s.g_proj = nn.Linear(d, 2 * d, bias=False)
        s.o_norm = nn.Module(); s.o_norm.weight = nn.Parameter(torch.ones(2 * d // H))
        s.o_proj = nn.Linear(2 * d, d, bias=False)
    def forward(s, x):
        B, T, d = x.shape; H = s.H; K = d // H; V = 2 * d // H
        q = l2n(short_conv(s.q_conv1d, s.q_proj(x)).view(B, T, H, K))
        k = l2n(short_conv(s.k_conv1d, s.k_proj(x)).view(B, T, 1, H, K))
        v = short_conv(s.v_conv1d, s.v_proj(x)).view(B, T, 1, H, V)
        beta = s.b_proj(x).sigmoid().view(B, T, 1, H)
        g = -s.A_log.exp() * F.softplus(s.a_proj(x) + s.dt_bias)
        o = delta_steps(q, k, v, beta, g, 1, K ** -0.5)
        y = rms(o, s.o_norm.weight) * F.silu(s.g_proj(x).view(B, T, H, V))
        return s.o_proj(y.reshape(B, T, 2 * d))

class GDP(nn.Module):
    def __init__(s, d, H, n=4):
        super().__init__()
        s.H = H; s.n = n
        s.q_proj = nn.Linear(d, d, bias=False); s.k_proj = nn.Linear(d, n * d, bias=False)
        s.v_proj = nn.Linear(d, 2 * n * d, bias=False); s.b_proj = nn.Linear(d, n * H, bias=False)
        s.a_proj = nn.Linear(d, H, bias=False)
        gdn_inits(s, H)
        s.q_conv1d = conv(d); s.k_conv1d = conv(n * d); s.v_conv1d = conv(2 * n * d)
        s.g_proj = nn.Linear(d, 2 * d, bias=False)
        s.o_norm = nn.Module(); s.o_norm.weight = nn.Parameter(torch.ones(2 * d // H))
        s.o_proj = nn.Linear(2 * d, d, bias=False)
    def forward(s, x):
        B, T, d = x.shape; H = s.H; K = d // H; V = 2 * d // H; n = s.n
        q = l2n(short_conv(s.q_conv1d, s.q_proj(x)).view(B, T, H, K))
        k = l2n(short_conv(s.k_conv1d, s.k_proj(x)).view(B, T, n, H, K))   # '(n h d)'
        v = short_conv(s.v_conv1d, s.v_proj(x)).view(B, T, n, H, V)
        beta = (s.b_proj(x).sigmoid() * 2.).view(B, T, n, H)
        g = -s.A_log.exp() * F.softplus(s.a_proj(x) + s.dt_bias)
        o = delta_steps(q, k, v, beta, g, n, K ** -0.5)
        y = rms(o, s.o_norm.weight) * F.silu(s.g_proj(x).view(B, T, H, V))
        return s.o_proj(y.reshape(B, T, 2 * d))

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

models = {'gla': GLA, 'delta_net': DeltaNet, 'gated_delta_net': GDN, 'gated_delta_product': GDP}
I, d, O, L, H, seed = 5, 16, 7, 2, 4, 3
B, T = 2, 70
torch.manual_seed(1234)
x = torch.tensor([[[round(float(v), 6) for v in r] for r in b] for b in torch.randn(B, T, I)], dtype=torch.float32).double()
out = {'config': dict(I=I, d=d, O=O, L=L, H=H, seed=seed, B=B, T=T),
       'note': 'pure-PyTorch mimic (construction order, fla v0.3.2 inits, forward from the spec with naive recurrences), float64 forward',
       'input': [float(v) for v in x.flatten()], 'models': {}}
for name, cls in models.items():
    torch.manual_seed(seed)
    net = RecNet(cls, I, d, O, L, H)
    sd = net.state_dict()
    params = []
    for k, t in sd.items():
        params.append({'name': k, 'shape': list(t.shape), 'sum': float(t.double().sum()),
                       'first': [float(v) for v in t.flatten()[:3]]})
    # forward in float64 from the float32 parameters
    net64 = net.double()
    with torch.no_grad():
        y = net64(x.double())
    out['models'][name] = {'params': params, 'count': sum(p.numel() for p in net.parameters()),
                           'logits': [float('%.10g' % v) for v in y.flatten()]}
json.dump(out, open(sys.argv[1], 'w'), separators=(',', ':'))
print({k: v['count'] for k, v in out['models'].items()})
