"""NumPy references of kgate's operators, written for these tests: fp64
throughout, kgate's layouts (activations N,D,H,W,C; conv3d weight
[Cout][KD][KH][KW][Cin/g]; conv_transpose3d weight [Cin][KD][KH][KW][Cout/g]),
PyTorch's semantics with per-side padding. Each function takes fp64 arrays
and returns fp64 arrays; `outputs` runs the one a problem names on a
kgate.Inputs and rounds every output once to its dtype, as a kernel that
accumulates exactly and stores with round-to-nearest-even would.

The defect parameters (`pad_shift`, `group_weights_from`, `drop_group`) exist
for the negative controls: each makes a kernel bug kgate must catch.
"""

import itertools

import numpy as np

import kgate


def _taps(kernel):
    return itertools.product(*(range(k) for k in kernel))


def _window(start, step, count):
    return slice(start, start + step * (count - 1) + 1, step)


def conv_out_extent(size, k, s, dil, pf, pb):
    return (size + pf + pb - dil * (k - 1) - 1) // s + 1


def conv_transpose_out_extent(size, k, s, dil, pf, pb, op):
    return (size - 1) * s - pf - pb + dil * (k - 1) + op + 1


def _group_weights(w, groups, axis_out, source):
    """w with every group's output-channel block replaced by group
    `source`'s (a kernel that indexes the weights of group 0 for every group)."""
    if source is None:
        return w
    w = w.copy()
    n = w.shape[axis_out] // groups
    idx = [slice(None)] * w.ndim
    idx[axis_out] = slice(source * n, (source + 1) * n)
    block = w[tuple(idx)]
    for g in range(groups):
        idx[axis_out] = slice(g * n, (g + 1) * n)
        w[tuple(idx)] = block
    return w


def conv3d_fwd(x, w, b, stride, dilation, pad_front, pad_back, groups):
    """y[n,o,k] = sum_{tap, c in group(k)} x[n, o*s + tap*dil - pf, c] w[k,tap,c] (+ b[k])."""
    N, C = x.shape[0], x.shape[4]
    K, kernel, Cg = w.shape[0], w.shape[1:4], w.shape[4]
    Kg = K // groups
    assert Cg * groups == C
    O = [conv_out_extent(x.shape[1 + i], kernel[i], stride[i], dilation[i], pad_front[i], pad_back[i])
         for i in range(3)]
    xp = np.pad(x, [(0, 0)] + [(pad_front[i], pad_back[i]) for i in range(3)] + [(0, 0)])
    y = np.zeros((N, *O, K))
    for tap in _taps(kernel):
        xs = xp[(slice(None), *(_window(tap[i] * dilation[i], stride[i], O[i]) for i in range(3)))]
        for g in range(groups):
            y[..., g * Kg:(g + 1) * Kg] += np.tensordot(
                xs[..., g * Cg:(g + 1) * Cg], w[g * Kg:(g + 1) * Kg, tap[0], tap[1], tap[2], :], axes=([4], [1]))
    if b is not None:
        y += b
    return y


def conv3d_bwd_data(dy, w, in_extent, stride, dilation, pad_front, pad_back, groups):
    """dx = the adjoint of conv3d_fwd in x."""
    N, O = dy.shape[0], dy.shape[1:4]
    K, kernel, Cg = w.shape[0], w.shape[1:4], w.shape[4]
    Kg = K // groups
    dxp = np.zeros((N, *(in_extent[i] + pad_front[i] + pad_back[i] for i in range(3)), Cg * groups))
    for tap in _taps(kernel):
        win = (slice(None), *(_window(tap[i] * dilation[i], stride[i], O[i]) for i in range(3)))
        for g in range(groups):
            dxp[win + (slice(g * Cg, (g + 1) * Cg),)] += np.tensordot(
                dy[..., g * Kg:(g + 1) * Kg], w[g * Kg:(g + 1) * Kg, tap[0], tap[1], tap[2], :], axes=([4], [0]))
    return dxp[(slice(None), *(slice(pad_front[i], pad_front[i] + in_extent[i]) for i in range(3)))]


def conv3d_bwd_weight(x, dy, kernel, stride, dilation, pad_front, pad_back, groups, bias):
    """dw = the adjoint of conv3d_fwd in w; db = sum of dy over n and space."""
    C, K, O = x.shape[4], dy.shape[4], dy.shape[1:4]
    Cg, Kg = C // groups, K // groups
    xp = np.pad(x, [(0, 0)] + [(pad_front[i], pad_back[i]) for i in range(3)] + [(0, 0)])
    dw = np.zeros((K, *kernel, Cg))
    for tap in _taps(kernel):
        xs = xp[(slice(None), *(_window(tap[i] * dilation[i], stride[i], O[i]) for i in range(3)))]
        for g in range(groups):
            dw[g * Kg:(g + 1) * Kg, tap[0], tap[1], tap[2], :] = np.tensordot(
                dy[..., g * Kg:(g + 1) * Kg], xs[..., g * Cg:(g + 1) * Cg], axes=([0, 1, 2, 3], [0, 1, 2, 3]))
    out = {"dw": dw}
    if bias:
        out["db"] = dy.sum(axis=(0, 1, 2, 3))
    return out


def _transpose_full(in_extent, kernel, stride, dilation, pad_front, out_extent):
    """Length of the scatter buffer of conv_transpose3d along each axis: the
    taps' reach, and at least pad_front + the output (output padding)."""
    return [max((in_extent[i] - 1) * stride[i] + dilation[i] * (kernel[i] - 1) + 1, pad_front[i] + out_extent[i])
            for i in range(3)]


def conv_transpose3d_fwd(x, w, b, stride, dilation, pad_front, pad_back, output_padding, groups):
    """y[n, i*s + tap*dil - pf, k] += x[n,i,c] w[c,tap,k - group offset] (+ b[k])."""
    N, I, C = x.shape[0], x.shape[1:4], x.shape[4]
    kernel, Kg = w.shape[1:4], w.shape[4]
    Cg = C // groups
    O = [conv_transpose_out_extent(I[i], kernel[i], stride[i], dilation[i], pad_front[i], pad_back[i],
                                   output_padding[i]) for i in range(3)]
    full = np.zeros((N, *_transpose_full(I, kernel, stride, dilation, pad_front, O), Kg * groups))
    for tap in _taps(kernel):
        win = (slice(None), *(_window(tap[i] * dilation[i], stride[i], I[i]) for i in range(3)))
        for g in range(groups):
            full[win + (slice(g * Kg, (g + 1) * Kg),)] += np.tensordot(
                x[..., g * Cg:(g + 1) * Cg], w[g * Cg:(g + 1) * Cg, tap[0], tap[1], tap[2], :], axes=([4], [0]))
    y = full[(slice(None), *(slice(pad_front[i], pad_front[i] + O[i]) for i in range(3)))]
    if b is not None:
        y = y + b
    return y


def _transpose_dy_full(dy, in_extent, kernel, stride, dilation, pad_front):
    """dy placed in the scatter buffer of conv_transpose3d (zeros outside)."""
    O = dy.shape[1:4]
    full = np.zeros((dy.shape[0], *_transpose_full(in_extent, kernel, stride, dilation, pad_front, O), dy.shape[4]))
    full[(slice(None), *(slice(pad_front[i], pad_front[i] + O[i]) for i in range(3)))] = dy
    return full


def conv_transpose3d_bwd_data(dy, w, in_extent, stride, dilation, pad_front, groups):
    """dx = the adjoint of conv_transpose3d_fwd in x."""
    kernel, Kg = w.shape[1:4], w.shape[4]
    C = w.shape[0]
    Cg = C // groups
    full = _transpose_dy_full(dy, in_extent, kernel, stride, dilation, pad_front)
    dx = np.zeros((dy.shape[0], *in_extent, C))
    for tap in _taps(kernel):
        win = (slice(None), *(_window(tap[i] * dilation[i], stride[i], in_extent[i]) for i in range(3)))
        for g in range(groups):
            dx[..., g * Cg:(g + 1) * Cg] += np.tensordot(
                full[win + (slice(g * Kg, (g + 1) * Kg),)], w[g * Cg:(g + 1) * Cg, tap[0], tap[1], tap[2], :],
                axes=([4], [1]))
    return dx


def conv_transpose3d_bwd_weight(x, dy, kernel, stride, dilation, pad_front, groups, bias):
    """dw = the adjoint of conv_transpose3d_fwd in w; db = sum of dy."""
    I, C, K = x.shape[1:4], x.shape[4], dy.shape[4]
    Cg, Kg = C // groups, K // groups
    full = _transpose_dy_full(dy, I, kernel, stride, dilation, pad_front)
    dw = np.zeros((C, *kernel, Kg))
    for tap in _taps(kernel):
        win = (slice(None), *(_window(tap[i] * dilation[i], stride[i], I[i]) for i in range(3)))
        for g in range(groups):
            dw[g * Cg:(g + 1) * Cg, tap[0], tap[1], tap[2], :] = np.tensordot(
                x[..., g * Cg:(g + 1) * Cg], full[win + (slice(g * Kg, (g + 1) * Kg),)],
                axes=([0, 1, 2, 3], [0, 1, 2, 3]))
    out = {"dw": dw}
    if bias:
        out["db"] = dy.sum(axis=(0, 1, 2, 3))
    return out


def _gn_stats(x, groups, eps):
    N, C = x.shape[0], x.shape[-1]
    xr = x.reshape(N, -1, groups, C // groups)
    mean = xr.mean(axis=(1, 3))
    var = ((xr - mean[:, None, :, None]) ** 2).mean(axis=(1, 3))  # two-pass, biased (PyTorch's)
    rstd = 1.0 / np.sqrt(var + eps)
    xhat = ((xr - mean[:, None, :, None]) * rstd[:, None, :, None]).reshape(x.shape)
    return mean, rstd, xhat


def groupnorm_fwd(x, gamma, beta, groups, eps, relu):
    """y = relu?((x - mean_g) rstd_g gamma + beta); mean, rstd per (n, group)."""
    mean, rstd, xhat = _gn_stats(x, groups, eps)
    y = xhat * (1.0 if gamma is None else gamma) + (0.0 if beta is None else beta)
    if relu:
        y = np.maximum(y, 0.0)
    return {"y": y, "mean": mean, "rstd": rstd}


def groupnorm_bwd(x, dy, gamma, beta, groups, eps, relu, mean=None, rstd=None):
    """The gradient of groupnorm_fwd's y at the forward's statistics `mean`,
    `rstd` as given (a kernel reads the forward's stored, e.g. fp32, values;
    None: computed from x). With mu, r those statistics, per (n, group):
      dy masked by [y > 0] with ReLU, y recomputed from x, mu, r, gamma, beta
      s1 = sum gamma_c dy (x - mu),  s2 = sum gamma_c dy
      dx = r gamma_c dy - s1 r^3 (x - mu) / M - s2 r / M
      dgamma_c = sum_n r sum dy (x - mu),  dbeta_c = sum dy"""
    N, C = x.shape[0], x.shape[-1]
    Cg = C // groups
    if mean is None or rstd is None:
        mean, rstd, _ = _gn_stats(x, groups, eps)
    shape = (N, -1, groups, Cg)
    mu = mean[:, None, :, None]
    r = rstd[:, None, :, None]
    xc = x.reshape(shape) - mu
    g = np.ones(C) if gamma is None else gamma
    gg = g.reshape(groups, Cg)
    dyr = dy.reshape(shape)
    if relu:
        b = np.zeros(C) if beta is None else beta
        y = xc * r * gg + b.reshape(groups, Cg)
        dyr = dyr * (y > 0)
    M = xc.shape[1] * Cg
    s1 = (gg * dyr * xc).sum(axis=(1, 3), keepdims=True)
    s2 = (gg * dyr).sum(axis=(1, 3), keepdims=True)
    dx = r * gg * dyr - s1 * r ** 3 * xc / M - s2 * r / M
    out = {"dx": dx.reshape(x.shape)}
    if gamma is not None:
        out["dgamma"] = (r * dyr * xc).sum(axis=(0, 1)).reshape(C)
        out["dbeta"] = dyr.sum(axis=(0, 1)).reshape(C)
    return out


def _shifted_pads(p, pad_shift):
    """Padding moved by pad_shift planes from front to back along D: the same
    output extent, every output read one plane off (a halo off by one)."""
    pf, pb = list(p["pad_front"]), list(p["pad_back"])
    pf[0] -= pad_shift
    pb[0] += pad_shift
    assert pf[0] >= 0 and pb[0] >= 0, "pad_shift needs padding to move"
    return pf, pb


def compute(problem, t, pad_shift=0, group_weights_from=None, drop_group=None):
    """fp64 outputs (role -> array) of `problem` (kgate's problem JSON) on
    fp64 inputs `t` (role -> array)."""
    op, d = problem["op"], problem["dir"]
    if op == "groupnorm":
        gamma, beta = t.get("gamma"), t.get("beta")
        if d == "fwd":
            return groupnorm_fwd(t["x"], gamma, beta, problem["groups"], problem["eps"], problem["relu"])
        return groupnorm_bwd(t["x"], t["dy"], gamma, beta, problem["groups"], problem["eps"], problem["relu"],
                             t.get("mean"), t.get("rstd"))
    s, dil, groups = problem["stride"], problem["dilation"], problem["groups"]
    pf, pb = _shifted_pads(problem, pad_shift)
    kernel, bias = problem["kernel"], problem["bias"]
    w = t.get("w")
    if op == "conv3d":
        if w is not None:
            w = _group_weights(w, groups, 0, group_weights_from)
        if d == "fwd":
            out = {"y": conv3d_fwd(t["x"], w, t.get("b"), s, dil, pf, pb, groups)}
        elif d == "bwd_data":
            out = {"dx": conv3d_bwd_data(t["dy"], w, problem["in"], s, dil, pf, pb, groups)}
        else:
            out = conv3d_bwd_weight(t["x"], t["dy"], kernel, s, dil, pf, pb, groups, bias)
    elif op == "conv_transpose3d":
        if w is not None:
            w = _group_weights(w, groups, 0, group_weights_from)
        if d == "fwd":
            out = {"y": conv_transpose3d_fwd(t["x"], w, t.get("b"), s, dil, pf, pb, problem["output_padding"], groups)}
        elif d == "bwd_data":
            out = {"dx": conv_transpose3d_bwd_data(t["dy"], w, problem["in"], s, dil, pf, groups)}
        else:
            out = conv_transpose3d_bwd_weight(t["x"], t["dy"], kernel, s, dil, pf, groups, bias)
    else:
        raise ValueError(f"numpy_ref: no reference for {op}.{d}")
    if drop_group is not None:
        for role in ("y", "dx"):  # activations: each group a block of the last axis
            if role in out:
                a = out[role]
                n = a.shape[-1] // groups
                a[..., drop_group * n:(drop_group + 1) * n] = 0.0
    return out


def fp64_inputs(inp):
    """A kgate.Inputs as fp64 arrays (exact), role -> array."""
    return {r: kgate.to_float64(a, inp.manifest["tensors"][r]["dtype"]) for r, a in inp.items()}


def outputs(inp, round_store=None, **defects):
    """The reference's outputs on `inp` in the descriptor's output dtypes,
    each rounded once (round_store(fp64 array, dtype) replaces the rounding:
    a store that rounds differently)."""
    spec = kgate.describe(inp.descriptor)
    ref = compute(inp.manifest["problem"], fp64_inputs(inp), **defects)
    store = round_store or kgate.round_to
    return {o["role"]: store(ref[o["role"]], o["dtype"]) for o in spec["outputs"]}


def conv3d_fwd_split_partials(problem, t, splits, partial_dtype="bf16"):
    """conv3d forward (groups 1) computed as a split-K kernel does: the
    reduction over K = (taps, Cin), in kgate's weight order, cut into
    `splits` contiguous slices; each slice's partial sum (exact here) is
    stored in `partial_dtype`, and the partials are summed in fp32 in slice
    order, then the bias added in fp32. Returns {"y": float32 array}."""
    assert problem["op"] == "conv3d" and problem["dir"] == "fwd" and problem["groups"] == 1
    x, w, b = t["x"], t["w"], t.get("b")
    s, dil = problem["stride"], problem["dilation"]
    pf, pb, kernel = problem["pad_front"], problem["pad_back"], problem["kernel"]
    O = [conv_out_extent(x.shape[1 + i], kernel[i], s[i], dil[i], pf[i], pb[i]) for i in range(3)]
    xp = np.pad(x, [(0, 0)] + [(pf[i], pb[i]) for i in range(3)] + [(0, 0)])
    cols = np.stack([xp[(slice(None), *(_window(tap[i] * dil[i], s[i], O[i]) for i in range(3)))]
                     for tap in _taps(kernel)], axis=-2)  # [N, O0, O1, O2, taps, Cin]
    cols = cols.reshape(-1, cols.shape[-2] * cols.shape[-1])
    wk = w.reshape(w.shape[0], -1)  # [Cout, taps*Cin]: the same K order
    edges = np.linspace(0, wk.shape[1], splits + 1).round().astype(int)
    acc = np.zeros((cols.shape[0], wk.shape[0]), dtype=np.float32)
    for lo, hi in zip(edges[:-1], edges[1:]):
        partial = cols[:, lo:hi] @ wk[:, lo:hi].T
        acc += kgate.to_float64(kgate.round_to(partial, partial_dtype), partial_dtype).astype(np.float32)
    if b is not None:
        acc += b.astype(np.float32)
    return {"y": acc.reshape(x.shape[0], *O, wk.shape[0])}
