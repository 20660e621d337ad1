#!/usr/bin/env python3
"""PyTorch eager baseline for `selectivbench bench`: training tokens/s and peak memory.

usage: torch_bench.py SSM_MODELS_PY MODEL small|large [--steps N] [--threads N]

SSM_MODELS_PY is the reference's models/ssm_models.py (symseqbench/selectivbench at 54609fb);
its RecNet (encoder, post-norm blocks with dropout 0.2, decoder) is imported, not copied. The
layers the reference takes from mamba_ssm and fla need CUDA or Triton, so this script installs
pure-PyTorch stand-ins under those module names, each in the fastest plain-PyTorch form we know
that a researcher without a GPU would use:

  mamba                 selective scan as a time loop over exp(dt A) and dt B u (mamba_ssm's
                        own reference form)
  mamba2                chunked SSD (chunk 256, the reference's chunk size)
  gla                   chunked linear attention with per-channel decay (chunk 64)
  delta_net, gated_delta_net, gated_delta_product
                        chunked WY form of the (gated) delta rule (chunk 64); Gated
                        DeltaProduct on the interleaved sequence of 4 Householder steps
  transformer, gru      the reference's own layers (attention as an explicit masked softmax:
                        Debian's torch 1.13 has no scaled_dot_product_attention)

The Mamba stand-ins return (y, None): the reference's `z, _ = layer(z)` then succeeds at once
instead of failing and running the layer a second time (a cost quirk of the reference that is
left out here so the baseline is not slowed by it).

Shapes and parameter counts follow ../shared/spec; initialisation is PyTorch's default (it does
not change the cost). One step = forward, cross-entropy, backward, clip_grad_norm_(1), AdamW,
as train.py. Prints one JSON line: tokens/s (median step) and peak memory, measured as the
growth of the process's peak resident set over its size after `import torch` (so it counts
parameters, gradients, optimiser state, activations and batch, like `selectivbench bench`).
The C tests never run this; it is a cross-check tool only.
"""
import json
import math
import resource
import statistics
import sys
import time
import types

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from make_torch_vectors import load_reference  # noqa: E402


def rss_mib():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize() / 1048576.0


def peak_rss_mib():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def short_conv(x, weight, bias=None):
    """Causal depthwise convolution over time; x [B,T,C], weight [C,1,K]."""
    K = weight.shape[-1]
    y = F.conv1d(F.pad(x.transpose(1, 2), (K - 1, 0)), weight, bias, groups=x.shape[-1])
    return y.transpose(1, 2)


def rms_norm_gated(y, gate, weight, eps):
    """fla's fused gated RMSNorm per head (gate after the norm); gate None = plain RMSNorm."""
    y = y * torch.rsqrt(y.pow(2).mean(-1, keepdim=True) + eps) * weight
    return y if gate is None else y * F.silu(gate)


def conv_weight(channels, K=4):
    return nn.Parameter(torch.empty(channels, 1, K).uniform_(-0.5, 0.5))


# ----------------------------------------------------------------------------------------------
# mamba_ssm stand-ins


class Mamba(nn.Module):
    def __init__(self, d_model, d_state=16, d_conv=4, expand=2, layer_idx=None, **kw):
        super().__init__()
        E, R, N = expand * d_model, math.ceil(d_model / 16), d_state
        self.E, self.R, self.N = E, R, N
        self.in_proj = nn.Linear(d_model, 2 * E, bias=False)
        self.conv1d = nn.Conv1d(E, E, d_conv, groups=E, padding=d_conv - 1)
        self.x_proj = nn.Linear(E, R + 2 * N, bias=False)
        self.dt_proj = nn.Linear(R, E)
        self.A_log = nn.Parameter(torch.log(torch.arange(1, N + 1, dtype=torch.float32)).repeat(E, 1))
        self.D = nn.Parameter(torch.ones(E))
        self.out_proj = nn.Linear(E, d_model, bias=False)

    def forward(self, x):
        T = x.shape[1]
        u, z = self.in_proj(x).chunk(2, dim=-1)
        u = F.silu(self.conv1d(u.transpose(1, 2))[..., :T]).transpose(1, 2)  # [B,T,E]
        dt, Bm, Cm = self.x_proj(u).split([self.R, self.N, self.N], dim=-1)
        dt = F.softplus(self.dt_proj(dt))  # [B,T,E]
        A = -torch.exp(self.A_log)  # [E,N]
        decay = torch.exp(dt.unsqueeze(-1) * A)  # [B,T,E,N]
        inject = (dt * u).unsqueeze(-1) * Bm.unsqueeze(2)  # [B,T,E,N]
        h = torch.zeros_like(decay[:, 0])
        ys = []
        # unbind once: indexing decay[:, t] inside the loop would make autograd build a
        # full-size zero gradient for every step
        for a_t, b_t, c_t in zip(decay.unbind(1), inject.unbind(1), Cm.unbind(1)):
            h = a_t * h + b_t
            ys.append((h @ c_t.unsqueeze(-1)).squeeze(-1))
        y = torch.stack(ys, dim=1) + u * self.D
        return self.out_proj(y * F.silu(z)), None


class Mamba2(nn.Module):
    def __init__(self, d_model, d_state=64, d_conv=4, expand=2, headdim=64, layer_idx=None,
                 chunk_size=256, **kw):
        super().__init__()
        E, N = expand * d_model, d_state
        M = E // headdim
        self.E, self.N, self.M, self.P, self.Q = E, N, M, headdim, chunk_size
        self.in_proj = nn.Linear(d_model, 2 * E + 2 * N + M, bias=False)
        self.conv1d = nn.Conv1d(E + 2 * N, E + 2 * N, d_conv, groups=E + 2 * N, padding=d_conv - 1)
        self.dt_bias = nn.Parameter(torch.rand(M) * 0.1)
        self.A_log = nn.Parameter(torch.log(torch.empty(M).uniform_(1, 16)))
        self.D = nn.Parameter(torch.ones(M))
        self.norm_weight = nn.Parameter(torch.ones(E))
        self.out_proj = nn.Linear(E, d_model, bias=False)

    def forward(self, x):
        Bsz, T, _ = x.shape
        E, N, M, P, Q = self.E, self.N, self.M, self.P, self.Q
        z, xBC, dt = self.in_proj(x).split([E, E + 2 * N, M], dim=-1)
        xBC = F.silu(self.conv1d(xBC.transpose(1, 2))[..., :T]).transpose(1, 2)
        u, Bm, Cm = xBC.split([E, N, N], dim=-1)
        dt = F.softplus(dt + self.dt_bias)  # [B,T,M]
        A = -torch.exp(self.A_log)
        pad = (-T) % Q
        c = (T + pad) // Q
        # layout [B, M, c, Q, .]; contractions that share B and C across heads go through
        # einsum, which folds the heads into the matrix rows instead of broadcasting
        u4 = F.pad(u, (0, 0, 0, pad)).view(Bsz, c, Q, M, P).permute(0, 3, 1, 2, 4).contiguous()
        dt4 = F.pad(dt, (0, 0, 0, pad)).view(Bsz, c, Q, M).permute(0, 3, 1, 2).contiguous()  # [B,M,c,Q]
        xb = u4 * dt4.unsqueeze(-1)
        Bc = F.pad(Bm, (0, 0, 0, pad)).view(Bsz, c, Q, N)
        Cc = F.pad(Cm, (0, 0, 0, pad)).view(Bsz, c, Q, N)
        a_cum = torch.cumsum(dt4 * A.view(1, M, 1, 1), dim=-1)
        seg = (a_cum.unsqueeze(-1) - a_cum.unsqueeze(-2)).masked_fill(
            ~torch.tril(torch.ones(Q, Q, dtype=torch.bool)), float("-inf"))
        scores = (Cc @ Bc.transpose(-1, -2)).unsqueeze(1)  # [B,1,c,Q,Q], shared by the heads
        y = (scores * torch.exp(seg)) @ xb  # intra-chunk, [B,M,c,Q,P]
        to_end = torch.exp(a_cum[..., -1:] - a_cum).unsqueeze(-1)
        chunk_states = torch.einsum("bmclp,bcln->bmcpn", xb * to_end, Bc)
        F_prev = u.new_zeros(Bsz, M, P, N)
        y_off = []
        from_start = torch.exp(a_cum).unsqueeze(-1)  # [B,M,c,Q,1]
        whole = torch.exp(a_cum[..., -1]).view(Bsz, M, c, 1, 1)
        for C_k, s_k, a_k, S_k in zip(Cc.unbind(1), from_start.unbind(2), whole.unbind(2),
                                      chunk_states.unbind(2)):  # pass the state between chunks
            y_off.append(torch.einsum("bln,bmpn->bmlp", C_k, F_prev) * s_k)
            F_prev = a_k * F_prev + S_k
        y = y + torch.stack(y_off, dim=2)
        y = y.permute(0, 2, 3, 1, 4).reshape(Bsz, c * Q, M, P)[:, :T] + u.view(Bsz, T, M, P) * self.D.view(M, 1)
        y = y.reshape(Bsz, T, E) * F.silu(z)
        y = y * torch.rsqrt(y.pow(2).mean(-1, keepdim=True) + 1e-5) * self.norm_weight
        return self.out_proj(y), None


# ----------------------------------------------------------------------------------------------
# fla stand-ins


def chunk_gla(q, k, v, g, C=64):
    """Per-channel decayed linear attention, chunked. q,k,g [B,H,T,dk], v [B,H,T,dv]."""
    Bsz, H, T, dk = q.shape
    pad = (-T) % C
    q, k, v, g = (F.pad(t, (0, 0, 0, pad)) for t in (q, k, v, g))
    n = (T + pad) // C
    q, k, v, g = (t.view(Bsz, H, n, C, t.shape[-1]) for t in (q, k, v, g))
    b = torch.cumsum(g, dim=3)  # log decay from the chunk start, <= 0
    qe, ke = q * torch.exp(b), k * torch.exp(-b)
    mask = torch.tril(torch.ones(C, C, dtype=torch.bool))
    attn = (qe @ ke.transpose(-1, -2)).masked_fill(~mask, 0.0)
    o_intra = attn @ v
    k_end = k * torch.exp(b[:, :, :, -1:] - b)
    S = q.new_zeros(Bsz, H, dk, v.shape[-1])
    outs = []
    chunk_decay = torch.exp(b[:, :, :, -1]).unsqueeze(-1)  # [B,H,n,dk,1]
    for o_c, qe_c, k_c, v_c, a_c in zip(o_intra.unbind(2), qe.unbind(2), k_end.unbind(2),
                                        v.unbind(2), chunk_decay.unbind(2)):
        outs.append(o_c + qe_c @ S)
        S = a_c * S + k_c.transpose(-1, -2) @ v_c
    return torch.stack(outs, dim=2).reshape(Bsz, H, n * C, -1)[:, :, :T]


def chunk_delta(q, k, v, beta, g=None, C=64):
    """(Gated) delta rule in the chunked WY form. q,k [B,H,T,dk], v [B,H,T,dv], beta, g [B,H,T]."""
    Bsz, H, T, dk = q.shape
    dv = v.shape[-1]
    if g is None:
        g = q.new_zeros(Bsz, H, T)
    pad = (-T) % C
    q, k, v = (F.pad(t, (0, 0, 0, pad)) for t in (q, k, v))
    beta, g = F.pad(beta, (0, pad)), F.pad(g, (0, pad))
    n = (T + pad) // C
    q, k, v = (t.view(Bsz, H, n, C, t.shape[-1]) for t in (q, k, v))
    beta, g = beta.view(Bsz, H, n, C), g.view(Bsz, H, n, C)
    b = torch.cumsum(g, dim=-1)
    gamma = torch.exp((b.unsqueeze(-1) - b.unsqueeze(-2)).masked_fill(
        ~torch.tril(torch.ones(C, C, dtype=torch.bool)), float("-inf")))  # [B,H,n,C,C]
    strict = torch.tril(torch.ones(C, C, dtype=torch.bool), diagonal=-1)
    A = ((k @ k.transpose(-1, -2)) * gamma * beta.unsqueeze(-1)).masked_fill(~strict, 0.0)
    eye = torch.eye(C)
    Tinv = torch.linalg.solve_triangular(eye + A, eye.expand_as(A), upper=False, unitriangular=True)
    w = Tinv @ (k * (beta * torch.exp(b)).unsqueeze(-1))
    u = Tinv @ (v * beta.unsqueeze(-1))
    qk = (q @ k.transpose(-1, -2)) * gamma
    k_end = k * torch.exp(b[..., -1:] - b).unsqueeze(-1)
    S = q.new_zeros(Bsz, H, dk, dv)
    outs = []
    q_decayed = q * torch.exp(b).unsqueeze(-1)
    chunk_decay = torch.exp(b[..., -1]).view(Bsz, H, n, 1, 1)
    for u_c, w_c, q_c, qk_c, k_c, a_c in zip(u.unbind(2), w.unbind(2), q_decayed.unbind(2),
                                             qk.unbind(2), k_end.unbind(2), chunk_decay.unbind(2)):
        v_new = u_c - w_c @ S
        outs.append(q_c @ S + qk_c @ v_new)
        S = a_c * S + k_c.transpose(-1, -2) @ v_new
    return torch.stack(outs, dim=2).reshape(Bsz, H, n * C, dv)[:, :, :T]


def heads(x, H):
    Bsz, T, W = x.shape
    return x.view(Bsz, T, H, W // H).transpose(1, 2)


def unheads(x):
    Bsz, H, T, w = x.shape
    return x.transpose(1, 2).reshape(Bsz, T, H * w)


class GatedLinearAttention(nn.Module):
    def __init__(self, hidden_size, num_heads, use_short_conv=True, expand_k=1, expand_v=2,
                 conv_size=4, **kw):
        super().__init__()
        d, H = hidden_size, num_heads
        self.H = H
        self.q_proj, self.k_proj = nn.Linear(d, d, bias=False), nn.Linear(d, d, bias=False)
        self.v_proj, self.g_proj = nn.Linear(d, 2 * d, bias=False), nn.Linear(d, 2 * d, bias=False)
        self.q_conv, self.k_conv, self.v_conv = conv_weight(d), conv_weight(d), conv_weight(2 * d)
        self.gk_proj = nn.Sequential(nn.Linear(d, 16, bias=False), nn.Linear(16, d))
        self.o_proj = nn.Linear(2 * d, d, bias=False)
        self.norm_weight = nn.Parameter(torch.ones(2 * d // H))

    def forward(self, x):
        H = self.H
        q = heads(F.silu(short_conv(self.q_proj(x), self.q_conv)), H)
        k = heads(F.silu(short_conv(self.k_proj(x), self.k_conv)), H)
        v = heads(F.silu(short_conv(self.v_proj(x), self.v_conv)), H)
        g = heads(F.logsigmoid(self.gk_proj(x)) / 16, H)
        o = chunk_gla(q * q.shape[-1] ** -0.5, k, v, g)
        o = rms_norm_gated(o, heads(self.g_proj(x), H), self.norm_weight, 1e-5)
        return self.o_proj(unheads(o)), None, None


class DeltaNet(nn.Module):
    def __init__(self, hidden_size, num_heads, use_short_conv=True, expand_k=1, expand_v=2,
                 conv_size=4, **kw):
        super().__init__()
        d, H = hidden_size, num_heads
        self.H = H
        self.q_proj, self.k_proj = nn.Linear(d, d, bias=False), nn.Linear(d, d, bias=False)
        self.v_proj, self.b_proj = nn.Linear(d, 2 * d, bias=False), nn.Linear(d, H, bias=False)
        self.q_conv, self.k_conv, self.v_conv = conv_weight(d), conv_weight(d), conv_weight(2 * d)
        self.norm_weight = nn.Parameter(torch.ones(2 * d // H))
        self.o_proj = nn.Linear(2 * d, d, bias=False)

    def forward(self, x):
        H = self.H
        q = F.normalize(heads(F.silu(short_conv(self.q_proj(x), self.q_conv)), H), dim=-1, eps=1e-6)
        k = F.normalize(heads(F.silu(short_conv(self.k_proj(x), self.k_conv)), H), dim=-1, eps=1e-6)
        v = heads(F.silu(short_conv(self.v_proj(x), self.v_conv)), H)
        beta = torch.sigmoid(self.b_proj(x)).transpose(1, 2)
        o = chunk_delta(q * q.shape[-1] ** -0.5, k, v, beta)
        return self.o_proj(unheads(rms_norm_gated(o, None, self.norm_weight, 1e-5))), None, None


class GatedDeltaNet(nn.Module):
    householder = 1
    neg_eigval = False

    def __init__(self, hidden_size, head_dim, num_heads, use_short_conv=True, expand_v=2,
                 conv_size=4, num_householder=None, **kw):
        super().__init__()
        d, H, n = hidden_size, num_heads, num_householder or self.householder
        self.H, self.n = H, n
        self.q_proj, self.k_proj = nn.Linear(d, d, bias=False), nn.Linear(d, n * d, bias=False)
        self.v_proj = nn.Linear(d, 2 * n * d, bias=False)
        self.a_proj, self.b_proj = nn.Linear(d, H, bias=False), nn.Linear(d, n * H, bias=False)
        self.A_log = nn.Parameter(torch.log(torch.empty(H).uniform_(0, 16)))
        self.dt_bias = nn.Parameter(torch.rand(H) * 0.1)
        self.q_conv, self.k_conv, self.v_conv = conv_weight(d), conv_weight(n * d), conv_weight(2 * n * d)
        self.g_proj = nn.Linear(d, 2 * d, bias=False)
        self.norm_weight = nn.Parameter(torch.ones(2 * d // H))
        self.o_proj = nn.Linear(2 * d, d, bias=False)

    def forward(self, x):
        Bsz, T, d = x.shape
        H, n = self.H, self.n
        q = F.normalize(heads(F.silu(short_conv(self.q_proj(x), self.q_conv)), H), dim=-1, eps=1e-6)
        kk = F.silu(short_conv(self.k_proj(x), self.k_conv)).view(Bsz, T, n, H, d // H)
        vv = F.silu(short_conv(self.v_proj(x), self.v_conv)).view(Bsz, T, n, H, 2 * d // H)
        beta = torch.sigmoid(self.b_proj(x)).view(Bsz, T, n, H) * (2.0 if self.neg_eigval else 1.0)
        g = -torch.exp(self.A_log) * F.softplus(self.a_proj(x) + self.dt_bias)  # [B,T,H]
        kk = F.normalize(kk, dim=-1, eps=1e-6)
        scale = (d // H) ** -0.5
        if n == 1:
            o = chunk_delta(q * scale, kk[:, :, 0].transpose(1, 2), vv[:, :, 0].transpose(1, 2),
                            beta[:, :, 0].transpose(1, 2), g.transpose(1, 2))
        else:  # interleave the Householder steps: position (t, j) -> t * n + j
            k_i = kk.permute(0, 3, 1, 2, 4).reshape(Bsz, H, T * n, d // H)
            v_i = vv.permute(0, 3, 1, 2, 4).reshape(Bsz, H, T * n, 2 * d // H)
            b_i = beta.permute(0, 3, 1, 2).reshape(Bsz, H, T * n)
            g_i = F.pad(g.transpose(1, 2).unsqueeze(-1), (0, n - 1)).reshape(Bsz, H, T * n)
            q_i = F.pad((q * scale).unsqueeze(3), (0, 0, n - 1, 0)).reshape(Bsz, H, T * n, d // H)
            o = chunk_delta(q_i, k_i, v_i, b_i, g_i).view(Bsz, H, T, n, -1)[:, :, :, -1]
        o = rms_norm_gated(o, heads(self.g_proj(x), H), self.norm_weight, 1e-5)
        return self.o_proj(unheads(o)), None, None


class GatedDeltaProduct(GatedDeltaNet):
    householder = 4
    neg_eigval = True


def install_stand_ins():
    mamba = types.ModuleType("mamba_ssm")
    mamba.Mamba, mamba.Mamba2 = Mamba, Mamba2
    fla = types.ModuleType("fla")
    layers = types.ModuleType("fla.layers")
    layers.GatedLinearAttention, layers.DeltaNet = GatedLinearAttention, DeltaNet
    layers.GatedDeltaNet, layers.GatedDeltaProduct = GatedDeltaNet, GatedDeltaProduct
    fla.layers = layers
    sys.modules.update({"mamba_ssm": mamba, "fla": fla, "fla.layers": layers})


CONFIGS = {"small": dict(B=16, T=256, d=64, L=2, inp=9, out=65),
           "large": dict(B=16, T=400, d=128, L=4, inp=41, out=1601)}


def main():
    args = sys.argv[1:]
    if len(args) < 3 or args[2] not in CONFIGS:
        sys.exit(__doc__.split("\n\n")[1])
    steps = int(args[args.index("--steps") + 1]) if "--steps" in args else 3
    torch.set_num_threads(int(args[args.index("--threads") + 1]) if "--threads" in args else 2)
    # The Mamba scan's exp(dt A) reaches subnormal floats, where x86 arithmetic is about a
    # hundred times slower; flushing them (as GPUs do) keeps the baseline honest.
    torch.set_flush_denormal(True)
    base = rss_mib()
    install_stand_ins()
    mod = load_reference(args[0])
    model, cfg = args[1], CONFIGS[args[2]]
    torch.manual_seed(1)
    net = mod.RecNet(model=model, inp_size=cfg["inp"], d_output=cfg["out"], lr=1e-3, dropout=0.2,
                     layers=cfg["L"], d_model=cfg["d"], d_state=128, n_head=4, reg=True,
                     rope_base=1000)
    opt = torch.optim.AdamW(net.parameters(), lr=1e-3, eps=1e-15, weight_decay=0.01)
    x = F.one_hot(torch.randint(0, cfg["inp"], (cfg["B"], cfg["T"])), cfg["inp"]).float()
    target = torch.randint(0, cfg["out"], (cfg["B"], cfg["T"]))
    times = []
    for step in range(steps + 1):
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(net(x).reshape(-1, cfg["out"]), target.reshape(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0)
        opt.step()
        if step > 0:  # the first step pays for allocations and thread start-up
            times.append(time.perf_counter() - t0)
    sec = statistics.median(times)
    print(json.dumps({"model": model, "config": args[2], "torch": torch.__version__,
                      "threads": torch.get_num_threads(),
                      "params": sum(p.numel() for p in net.parameters()),
                      "step_ms": round(sec * 1e3, 1),
                      "tokens_per_s": round(cfg["B"] * cfg["T"] / sec),
                      "peak_mib": round(peak_rss_mib() - base, 1)}))


if __name__ == "__main__":
    main()
