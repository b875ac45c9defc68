"""kgate's dtypes in NumPy, and the bf16 conversions.

kgate's .npy files (README, "bf16 in .npy files"): fp64 '<f8', fp32 '<f4',
fp16 '<f2', C order; bf16 has no NumPy dtype and is stored as its raw bits,
'<u2'. Every conversion here is IEEE round-to-nearest-even and rounds once
(docs/NUMERICS.md, "Rounding facts"), so an fp64 reference rounded with
`round_to` is the value kgate's tier 1 expects bit for bit.
"""

import numpy as np

# kgate dtype name -> the NumPy dtype its .npy files use.
NUMPY_DTYPES = {
    "fp64": np.dtype("<f8"),
    "fp32": np.dtype("<f4"),
    "fp16": np.dtype("<f2"),
    "bf16": np.dtype("<u2"),
}


def numpy_dtype(name):
    """The NumPy dtype of kgate dtype `name` (KeyError names it otherwise)."""
    try:
        return NUMPY_DTYPES[name]
    except KeyError:
        raise KeyError(f"unknown kgate dtype {name!r} (one of {', '.join(NUMPY_DTYPES)})") from None


def bf16_to_float32(a):
    """bf16 raw bits (uint16, or int16 as torch's .view(torch.int16) gives)
    -> float32, exactly (every bf16 value is an fp32 value)."""
    a = np.asarray(a)
    if a.dtype.itemsize != 2 or a.dtype.kind not in "ui":
        raise TypeError(f"bf16_to_float32: expected bf16 raw bits as uint16, got {a.dtype}")
    bits = a.astype("<u2", copy=False).view(np.uint16).astype(np.uint32) << np.uint32(16)
    return bits.view(np.float32)


def _float64_to_float32_round_to_odd(a):
    """fp64 -> fp32 with round-to-odd: truncate toward zero, and set the last
    significand bit when inexact. Rounding that result to any format with at
    least two fewer significand bits (bf16 has 8 of fp32's 24, also among
    subnormals, where fp32's quantum is 2^16 times finer) gives the single
    round-to-nearest-even rounding of the fp64 value: no double rounding."""
    # Overflow to Inf is the contract; casting a signalling NaN raises
    # "invalid" and gives a NaN, which is what is wanted.
    with np.errstate(over="ignore", invalid="ignore"):
        t = a.astype(np.float32)
        t64 = t.astype(np.float64)
        inexact = (t64 != a) & ~np.isnan(a)
        # Round-to-nearest may have gone away from zero: step back toward zero.
        away = inexact & (np.abs(t64) > np.abs(a))
        t = np.where(away, np.nextafter(t, np.float32(0)), t)
    bits = t.view(np.uint32).copy()
    bits[inexact] |= np.uint32(1)
    return bits.view(np.float32)


def float32_to_bf16(a):
    """float32 (or float64, or anything NumPy converts to float64) -> bf16 raw
    bits (uint16): round to nearest even, once; overflow to +-Inf (FLT_MAX
    rounds to Inf), subnormals kept, NaN stays a (quiet) NaN of the same sign.
    float64 input is rounded directly (through fp32 with round-to-odd), not
    rounded twice."""
    a = np.asarray(a)
    if a.dtype != np.float32:
        a = _float64_to_float32_round_to_odd(a.astype(np.float64, copy=False))
    bits = a.view(np.uint32).astype(np.uint64)
    u = np.uint64  # unsigned constants: NumPy would promote uint64 op int to float
    nan = (bits & u(0x7FFFFFFF)) > u(0x7F800000)
    rounded = (bits + u(0x7FFF) + ((bits >> u(16)) & u(1))) >> u(16)
    quiet_nan = (bits >> u(16)) | u(0x0040)
    return np.where(nan, quiet_nan, rounded).astype(np.uint16)


def round_to(a, dtype):
    """An fp64 (or any real) array rounded once, to nearest even, to kgate
    dtype `dtype` ("fp64", "fp32", "fp16", "bf16"), in the NumPy dtype kgate's
    files use for it (bf16: uint16 raw bits)."""
    a = np.asarray(a, dtype=np.float64)
    if dtype == "bf16":
        return float32_to_bf16(a)
    # NumPy converts float64 to float32 and to float16 with one rounding;
    # overflow to Inf is the contract, not an error.
    with np.errstate(over="ignore", invalid="ignore"):
        return a.astype(numpy_dtype(dtype))


def to_float64(a, dtype):
    """An array in kgate dtype `dtype` (as stored in .npy: bf16 as uint16)
    -> float64, exactly."""
    a = np.asarray(a)
    if dtype == "bf16":
        return bf16_to_float32(a).astype(np.float64)
    return a.astype(np.float64)
