# Pure-PyTorch mimic of the reference's four *_layered models (train.py: an fla causal-LM
# model, its embedding replaced by an identity, inside CustomModel), for
# tests/unit/test_lm_stack.c. fla cannot run here (no triton), so the modules are rebuilt from
# fla v0.3.2's constructors in their construction order, and transformers' post_init is
# replayed: _init_weights on every module, children before parents, each module once
# (docs/models/layered.md). The forward follows the spec with naive recurrences, in
# float64 from the float32 parameters. fox_layered gets the lm_head of
# ForgettingTransformerForCausalLM (the deviation documented in docs/models/layered.md).
#   python3 make_layered_mimic.py layered_mimic.json        (made with torch 1.13, AVX2 CPU)
# The tests read the JSON only; they never need Python.
import json, math, sys
import torch, torch.nn as nn, torch.nn.functional as F
torch.set_default_dtype(torch.float32)

EPS = 1e-6

class RMSNorm(nn.Module):  # fla RMSNorm / FusedRMSNormGated: weight only, reset to ones
    def __init__(s, n):
        super().__init__()
        s.weight = nn.Parameter(torch.empty(n)); s.reset_parameters()
    def reset_parameters(s):
        nn.init.ones_(s.weight)

def conv(C):  # fla ShortConvolution is an nn.Conv1d
    return nn.Conv1d(C, C, 4, groups=C, padding=3, bias=False)

def short_conv(m, x):
    T = x.shape[1]
    return F.silu(m(x.transpose(1, 2))[..., :T].transpose(1, 2))

def rms(x, w):
    return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + EPS) * w

def l2n(x):
    return x * torch.rsqrt((x * x).sum(-1, keepdim=True) + 1e-6)

def delta_steps(q, k, v, beta, g, scale):  # q, k [B,T,H,K]; v [B,T,H,V]; beta, g [B,T,H]
    B, T, H, K = q.shape; V = v.shape[-1]
    S = q.new_zeros(B, H, K, V); o = []
    for t in range(T):
        if g is not None:
            S = S * g[:, t].exp()[..., None, None]
        kk = k[:, t]; u = beta[:, t][..., None] * (v[:, t] - torch.einsum('bhk,bhkv->bhv', kk, S))
        S = S + kk[..., None] * u[..., None, :]
        o.append(torch.einsum('bhk,bhkv->bhv', q[:, t] * scale, S))
    return torch.stack(o, 1)

class GLA(nn.Module):  # GatedLinearAttention(expand_k=0.5, expand_v=1, num_heads=4, no conv)
    def __init__(s, d, nb):
        super().__init__()
        s.H = 4; s.Ka = int(d * 0.5); s.Va = d
        s.q_proj = nn.Linear(d, s.Ka, bias=False); s.k_proj = nn.Linear(d, s.Ka, bias=False)
        s.v_proj = nn.Linear(d, s.Va, bias=False); s.g_proj = nn.Linear(d, s.Va, bias=False)
        s.gk_proj = nn.Sequential(nn.Linear(d, 16, bias=False), nn.Linear(16, s.Ka, bias=True))
        s.o_proj = nn.Linear(s.Va, d, bias=False)
        s.g_norm_swish_gate = RMSNorm(s.Va // s.H)
    def forward(s, x):
        B, T, d = x.shape; H = s.H; K = s.Ka // H; V = s.Va // H
        q = s.q_proj(x).view(B, T, H, K); k = s.k_proj(x).view(B, T, H, K)
        v = s.v_proj(x).view(B, T, H, V)
        gk = (F.logsigmoid(s.gk_proj(x)) / 16).view(B, T, H, K)
        S = x.new_zeros(B, H, K, V); o = []
        for t in range(T):
            S = S * gk[:, t].exp()[..., None] + k[:, t, :, :, None] * v[:, t, :, None, :]
            o.append(torch.einsum('bhk,bhkv->bhv', q[:, t] * K ** -0.5, S))
        o = torch.stack(o, 1)
        y = rms(o, s.g_norm_swish_gate.weight) * F.silu(s.g_proj(x).view(B, T, H, V))
        return s.o_proj(y.reshape(B, T, s.Va))

class DeltaNet(nn.Module):  # DeltaNet(expand_k=1, expand_v=1, num_heads=16, short conv)
    def __init__(s, d, nb):
        super().__init__()
        s.H = 16
        s.q_proj = nn.Linear(d, d, bias=False); s.k_proj = nn.Linear(d, d, bias=False)
        s.v_proj = nn.Linear(d, d, bias=False); s.b_proj = nn.Linear(d, s.H, bias=False)
        s.q_conv1d = conv(d); s.k_conv1d = conv(d); s.v_conv1d = conv(d)
        s.o_norm = RMSNorm(d // s.H)
        s.o_proj = nn.Linear(d, d, bias=False)
    def forward(s, x):
        B, T, d = x.shape; H = s.H; K = d // H
        q = l2n(short_conv(s.q_conv1d, s.q_proj(x)).view(B, T, H, K))
        k = l2n(short_conv(s.k_conv1d, s.k_proj(x)).view(B, T, H, K))
        v = short_conv(s.v_conv1d, s.v_proj(x)).view(B, T, H, K)
        beta = s.b_proj(x).sigmoid()
        o = delta_steps(q, k, v, beta, None, K ** -0.5)
        return s.o_proj(rms(o, s.o_norm.weight).reshape(B, T, d))

class GatedDeltaNet(nn.Module):  # GatedDeltaNet(head_dim=d/nb, num_heads=6, expand_v=2)
    def __init__(s, d, nb):
        super().__init__()
        s.H = 6; s.K = d // nb; s.V = 2 * s.K; Ka = s.H * s.K; Va = s.H * s.V
        s.q_proj = nn.Linear(d, Ka, bias=False); s.k_proj = nn.Linear(d, Ka, bias=False)
        s.v_proj = nn.Linear(d, Va, bias=False)
        s.a_proj = nn.Linear(d, s.H, bias=False); s.b_proj = nn.Linear(d, s.H, bias=False)
        A = torch.empty(s.H, dtype=torch.float32).uniform_(0, 16)
        s.A_log = nn.Parameter(torch.log(A))
        dt = torch.exp(torch.rand(s.H) * (math.log(0.1) - math.log(0.001)) + math.log(0.001))
        dt = torch.clamp(dt, min=1e-4)
        s.dt_bias = nn.Parameter(dt + torch.log(-torch.expm1(-dt)))
        s.q_conv1d = conv(Ka); s.k_conv1d = conv(Ka); s.v_conv1d = conv(Va)
        s.g_proj = nn.Linear(d, Va, bias=False)
        s.o_norm = RMSNorm(s.V)
        s.o_proj = nn.Linear(Va, d, bias=False)
    def forward(s, x):
        B, T, d = x.shape; H, K, V = s.H, s.K, s.V
        q = l2n(short_conv(s.q_conv1d, s.q_proj(x)).view(B, T, H, K))
        k = l2n(short_conv(s.k_conv1d, s.k_proj(x)).view(B, T, H, K))
        v = short_conv(s.v_conv1d, s.v_proj(x)).view(B, T, H, V)
        beta = s.b_proj(x).sigmoid()
        g = -s.A_log.exp() * F.softplus(s.a_proj(x) + s.dt_bias)
        o = delta_steps(q, k, v, beta, g, K ** -0.5)
        y = rms(o, s.o_norm.weight) * F.silu(s.g_proj(x).view(B, T, H, V))
        return s.o_proj(y.reshape(B, T, H * V))

class ForgettingAttention(nn.Module):  # num_heads=32, defaults otherwise
    def __init__(s, d, nb):
        super().__init__()
        s.H = 32; s.Dh = d // 32
        s.q_proj = nn.Linear(d, d, bias=False); s.k_proj = nn.Linear(d, d, bias=False)
        s.v_proj = nn.Linear(d, d, bias=False); s.f_proj = nn.Linear(d, s.H, bias=True)
        s.o_proj = nn.Linear(d, d, bias=False)
    def forward(s, x):
        B, T, d = x.shape; H, Dh = s.H, s.Dh
        q = s.q_proj(x).view(B, T, H, Dh); k = s.k_proj(x).view(B, T, H, Dh)
        v = s.v_proj(x).view(B, T, H, Dh)
        Fc = F.logsigmoid(s.f_proj(x)).cumsum(1)                       # [B,T,H]
        z = torch.einsum('bihe,bjhe->bhij', q, k) * Dh ** -0.5
        z = z + Fc.permute(0, 2, 1)[..., :, None] - Fc.permute(0, 2, 1)[..., None, :]
        mask = torch.ones(T, T, dtype=torch.bool).tril()
        p = z.masked_fill(~mask, float('-inf')).softmax(-1)
        o = torch.einsum('bhij,bjhe->bihe', p, v)
        return s.o_proj(o.reshape(B, T, d))

class GatedMLP(nn.Module):
    def __init__(s, d):
        super().__init__()
        I = int(d * 4 * 2 / 3); I = 256 * ((I + 255) // 256)
        s.gate_proj = nn.Linear(d, I, bias=False); s.up_proj = nn.Linear(d, I, bias=False)
        s.down_proj = nn.Linear(I, d, bias=False)
    def forward(s, z):
        return s.down_proj(F.silu(s.gate_proj(z)) * s.up_proj(z))

class Block(nn.Module):
    def __init__(s, mixer, d, nb):
        super().__init__()
        s.attn_norm = RMSNorm(d); s.attn = mixer(d, nb); s.mlp_norm = RMSNorm(d); s.mlp = GatedMLP(d)
    def forward(s, x):
        h = x + s.attn(rms(x, s.attn_norm.weight))
        return h + s.mlp(rms(h, s.mlp_norm.weight))

class PreTrained(nn.Module):
    """transformers' post_init: _init_weights on every module not yet initialised, children
    first, a nested pre-trained model with its own hook (fla v0.3.2 _init_weights, called with
    the module only)."""
    def post_init(s):
        s.smart_apply(s._initialize_weights)
    def smart_apply(s, fn):
        def walk(module, fn):
            for child in module.children():
                if isinstance(child, PreTrained):
                    walk(child, child._initialize_weights)
                else:
                    walk(child, fn)
            fn(module)
        walk(s, fn)
    def _initialize_weights(s, module):
        if getattr(module, '_is_hf_initialized', False):
            return
        s._init_weights(module)
        module._is_hf_initialized = True
    def _init_weights(s, module):
        if isinstance(module, GatedDeltaNet):
            with torch.no_grad():
                module.A_log.copy_(nn.init.uniform_(module.A_log, a=0, b=16).log())
                dt = torch.exp(nn.init.uniform_(module.dt_bias) * (math.log(0.1) - math.log(0.001))
                               + math.log(0.001)).clamp(min=1e-4)
                module.dt_bias.copy_(dt + torch.log(-torch.expm1(-dt)))
        elif isinstance(module, (nn.Linear, nn.Conv1d)):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
        elif hasattr(module, 'reset_parameters'):
            module.reset_parameters()

class Backbone(PreTrained):
    def __init__(s, mixer, d, nb, L, vocab):
        super().__init__()
        s.embeddings = nn.Embedding(vocab, d)
        s.layers = nn.ModuleList([Block(mixer, d, nb) for _ in range(L)])
        s.norm = RMSNorm(d)
        s.post_init()
    def forward(s, x):
        for b in s.layers:
            x = b(x)
        return rms(x, s.norm.weight)

class CausalLM(PreTrained):
    def __init__(s, mixer, d, nb, L, vocab):
        super().__init__()
        s.model = Backbone(mixer, d, nb, L, vocab)
        s.lm_head = nn.Linear(d, vocab, bias=False)
        s.post_init()
    def forward(s, x):
        return s.lm_head(s.model(x))

class CustomModel(nn.Module):
    def __init__(s, base, F_, d):
        super().__init__()
        s.base_model = base; s.proj = nn.Linear(F_, d)
    def forward(s, x):
        return s.base_model(s.proj(x))

def build(mixer, F_, d, nb, L, C, seed):
    torch.manual_seed(seed)
    lm = CausalLM(mixer, d, nb, L, C)
    lm.model.embeddings = nn.Identity()
    return CustomModel(lm, F_, d)

# fox_layered's state_dict keeps the reference backbone's names (base_model.layers...,
# base_model.norm) and adds base_model.lm_head: rename the causal LM's keys accordingly
def fox_name(k):
    return k.replace('base_model.model.', 'base_model.')

configs = {
    'gla_layered': (GLA, 16),
    'delta_net_layered': (DeltaNet, 16),
    'gated_delta_net_layered': (GatedDeltaNet, 16),
    'fox_layered': (ForgettingAttention, 32),
}
F_, C, L, seed, B, T = 5, 7, 2, 3, 2, 21
torch.manual_seed(1234)
x = torch.tensor([[[round(float(v), 6) for v in r] for r in b] for b in torch.randn(B, T, F_)],
                 dtype=torch.float32).double()
out = {'config': dict(F=F_, C=C, L=L, seed=seed, B=B, T=T),
       'note': 'pure-PyTorch mimic of the *_layered models (fla v0.3.2 construction order, '
               'transformers post_init replayed), float64 forward from the float32 parameters',
       'input': [float(v) for v in x.flatten()], 'models': {}}
for name, (mixer, d) in configs.items():
    nb = 4  # get_num_heads(d, 128) for d <= 512
    net = build(mixer, F_, d, nb, L, C, seed)
    params = []
    for k, t in net.state_dict().items():
        flat = t.flatten()
        n = flat.numel()
        picks = sorted(set([0, 1, n // 3, n // 2, (2 * n) // 3, n - 2, n - 1]))
        picks = [i for i in picks if 0 <= i < n]
        params.append({'name': fox_name(k) if name == 'fox_layered' else k,
                       'shape': list(t.shape),
                       'sum': float(t.double().sum()), 'sumsq': float((t.double() ** 2).sum()),
                       'at': picks, 'values': [float(flat[i]) for i in picks]})
    net64 = net.double()
    with torch.no_grad():
        y = net64(x)
    out['models'][name] = {'d': d, 'nb': nb, 'params': params,
                           'count': sum(p.numel() for p in net.parameters()),
                           'logits': [float('%.12g' % v) for v in y.flatten()]}
json.dump(out, open(sys.argv[1], 'w'), separators=(',', ':'))
print({k: v['count'] for k, v in out['models'].items()})
