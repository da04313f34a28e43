"""The polynomial P of GELU's forward in cuda/gelu_reduced_precision.cuh: erfc(z) = t exp(-z^2 + P(t)), t = 1 / (1 + z/2),
fitted near-minimax (Lawson-weighted Chebyshev least squares) for z in [0, 14], past which x Phi(x)
leaves float32's range, then P(1) pinned to 0 in float32 so Phi(0) is exactly 1/2. Checks every
finite bf16 and f16 input against the exact x Phi(x), emulating the kernel's float32 steps.
    python3 fit_normal_cdf.py [degree]      (needs numpy and torch)"""
import math, sys
import numpy as np, torch

F = np.float32


def fit(deg, zmax=14.0):
    z = np.linspace(0, zmax, 40001)
    t = 1 / (1 + 0.5 * z)
    f = np.array([math.log(math.erfc(v) / w) + v * v for v, w in zip(z, t)])
    tmin = 1 / (1 + 0.5 * zmax)
    u = (2 * t - (1 + tmin)) / (1 - tmin)
    w = np.ones_like(u)
    for _ in range(30):
        c = np.polynomial.chebyshev.chebfit(u, f, deg, w=np.sqrt(w))
        r = np.abs(np.polynomial.chebyshev.chebval(u, c) - f)
        w = w * (r / r.max() + 1e-3)
        w /= w.sum()
    p = np.polynomial.Polynomial(np.polynomial.chebyshev.cheb2poly(c))
    coef = [F(v) for v in p(np.polynomial.Polynomial([-(1 + tmin) / (1 - tmin), 2 / (1 - tmin)])).coef]
    for _ in range(5):  # Horner at t = 1 in float32 gives exactly 0
        coef[0] = F(coef[0] - horner(coef, F(1)))
    return coef, r.max()


def horner(coef, t):
    p = np.full_like(t, coef[-1])
    for c in reversed(coef[:-1]):
        p = (p.astype(np.float64) * t + c).astype(F)  # one rounding: a fused multiply-add
    return p


def gelu(x, coef):
    z = np.abs(x) * F(0.70710678118654752)
    t = (F(1) / (F(0.5) * z + F(1))).astype(F)
    arg = (-z.astype(np.float64) * z + horner(coef, t)).astype(F)
    erfc = (t * np.exp(arg.astype(np.float64)).astype(F)).astype(F)
    return (x * np.where(x >= 0, F(1) - F(0.5) * erfc, F(0.5) * erfc)).astype(F)


def check(dtype, coef):
    x = torch.arange(65536, dtype=torch.int32).to(torch.int16).view(dtype).float()
    x = x[torch.isfinite(x)].numpy()
    with np.errstate(over="ignore"):
        got = torch.from_numpy(gelu(x, coef)).to(dtype)
    exact = torch.tensor([v * 0.5 * math.erfc(-v / math.sqrt(2)) for v in x.astype(np.float64)]).to(dtype)
    off = got != exact
    ulps = (got.view(torch.int16).int() - exact.view(torch.int16).int()).abs()
    print(f"{dtype}: {int(off.sum())} of {len(x)} not the rounded exact value, at most {int(ulps.max())} ulp")


if __name__ == "__main__":
    coef, err = fit(int(sys.argv[1]) if len(sys.argv) > 1 else 5)
    print(f"max |P - log(erfc(z) / t) - z^2| = {err:.3g}; coefficients, t^0 first:")
    print(", ".join(f"{float(c):.9g}f" for c in coef))
    for dt in (torch.bfloat16, torch.float16):
        check(dt, coef)
