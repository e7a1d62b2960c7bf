"""Quantiles and exact tests we need, written out so scipy stays a test-only dependency.

Pure Python (math only): each function works on scalars. Tests compare every one against scipy.
"""

from __future__ import annotations

import functools
import math

_EPS = 1e-16
_TINY = 1e-300


def norm_cdf(x: float) -> float:
    return 0.5 * math.erfc(-x / math.sqrt(2.0))


def norm_ppf(p: float) -> float:
    """Standard normal quantile: Acklam's rational approximation, polished by two Newton steps."""
    if not 0.0 < p < 1.0:
        if p == 0.0:
            return -math.inf
        if p == 1.0:
            return math.inf
        return math.nan
    x = _acklam(p)
    for _ in range(2):
        err = norm_cdf(x) - p
        x -= err / (math.exp(-0.5 * x * x) / math.sqrt(2.0 * math.pi))
    return x


def _acklam(p: float) -> float:
    a = (-3.969683028665376e01, 2.209460984245205e02, -2.759285104469687e02, 1.383577518672690e02,
         -3.066479806614716e01, 2.506628277459239e00)  # fmt: skip
    b = (-5.447609879822406e01, 1.615858368580409e02, -1.556989798598866e02, 6.680131188771972e01,
         -1.328068155288572e01)  # fmt: skip
    c = (-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e00, -2.549732539343734e00,
         4.374664141464968e00, 2.938163982698783e00)  # fmt: skip
    d = (7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e00, 3.754408661907416e00)
    low = 0.02425
    if p < low:
        q = math.sqrt(-2 * math.log(p))
        num = ((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]
        return num / ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1)
    if p > 1 - low:
        return -_acklam(1 - p)
    q = p - 0.5
    r = q * q
    num = (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q
    return num / (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1)


def _beta_cf(a: float, b: float, x: float) -> float:
    """Continued fraction for the incomplete beta (modified Lentz; Numerical Recipes `betacf`)."""
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > _TINY else _TINY)
    h = d
    for m in range(1, 100_000):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > _TINY else _TINY)
        c = 1.0 + aa / c
        c = c if abs(c) > _TINY else _TINY
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > _TINY else _TINY)
        c = 1.0 + aa / c
        c = c if abs(c) > _TINY else _TINY
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < _EPS:
            return h
    raise ArithmeticError(f"incomplete beta did not converge (a={a}, b={b}, x={x})")


def _stirling_tail(z: float) -> float:
    return 1.0 / (12 * z) - 1.0 / (360 * z**3) + 1.0 / (1260 * z**5)


def lgamma_ratio(a: float, b: float) -> float:
    """lgamma(a + b) - lgamma(a), without the cancellation of two huge lgammas when a is large."""
    if a < 100.0:
        return math.lgamma(a + b) - math.lgamma(a)
    return b * math.log(a) + (a + b - 0.5) * math.log1p(b / a) - b + _stirling_tail(a + b) - _stirling_tail(a)


def log_beta(a: float, b: float) -> float:
    big, small = max(a, b), min(a, b)
    return math.lgamma(small) - lgamma_ratio(big, small)


def betainc(a: float, b: float, x: float) -> float:
    """Regularized incomplete beta I_x(a, b) for a, b > 0 and 0 <= x <= 1."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    return _betainc(a, b, x, 1.0 - x, math.log(x), math.log1p(-x))


def _betainc(a: float, b: float, x: float, y: float, log_x: float, log_y: float) -> float:
    """I_x(a, b) given y = 1 - x and both logs, each computed precisely by the caller."""
    front = math.exp(-log_beta(a, b) + a * log_x + b * log_y)
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _beta_cf(a, b, x) / a
    return 1.0 - front * _beta_cf(b, a, y) / b


def t_sf(t: float, df: float) -> float:
    """Upper tail P(T > t) of Student's t with `df` degrees of freedom, for t >= 0."""
    if t <= 0.0:
        return 0.5
    u = t * t / df
    x, y = 1.0 / (1.0 + u), u / (1.0 + u)
    return 0.5 * _betainc(df / 2.0, 0.5, x, y, -math.log1p(u), math.log(u) - math.log1p(u))


def t_cdf(t: float, df: float) -> float:
    """P(T <= t) of Student's t with `df` degrees of freedom."""
    if math.isnan(t) or df <= 0:
        return math.nan
    if math.isinf(t):
        return 1.0 if t > 0 else 0.0
    return 1.0 - t_sf(t, df) if t > 0 else t_sf(-t, df)


def t_pdf(t: float, df: float) -> float:
    log_norm = lgamma_ratio(df / 2, 0.5) - 0.5 * math.log(df * math.pi)
    return math.exp(log_norm - (df + 1) / 2 * math.log1p(t * t / df))


@functools.lru_cache(maxsize=4096)
def t_ppf(q: float, df: float) -> float:
    """Quantile (inverse CDF) of Student's t: the t with P(T <= t) = q."""
    if not 0.0 < q < 1.0 or df <= 0 or math.isnan(df):
        if q in (0.0, 1.0) and df > 0:
            return math.copysign(math.inf, q - 0.5)
        return math.nan
    if q == 0.5:
        return 0.0
    # Work on the smaller tail as given: q itself below 1/2, 1 - q (exact there) above.
    tail, sign = (q, -1.0) if q < 0.5 else (1.0 - q, 1.0)
    if df == 1:
        return sign / math.tan(math.pi * tail)
    if df == 2:
        return sign * (1.0 - 2.0 * tail) * math.sqrt(2.0 / (4.0 * tail * (1.0 - tail)))
    return sign * _newton_upper(tail, df)


def t_central(t: float, df: float) -> float:
    """P(|T| < t) for t >= 0: precise near the centre, where 1 - 2 * sf would cancel."""
    if t <= 0.0:
        return 0.0
    u = t * t / df
    x, y = u / (1.0 + u), 1.0 / (1.0 + u)
    return _betainc(0.5, df / 2.0, x, y, math.log(u) - math.log1p(u), -math.log1p(u))


def _newton_upper(tail: float, df: float) -> float:
    """Solve P(T > t) = tail for t > 0: bracket, then Newton with bisection as the safeguard."""
    if tail >= 0.25:
        target = 1.0 - 2.0 * tail  # exact in floating point for tail in [0.25, 0.5]
        excess = lambda t: target - t_central(t, df)  # noqa: E731 - decreasing in t
        slope = 2.0
    else:
        excess = lambda t: t_sf(t, df) - tail  # noqa: E731
        slope = 1.0
    lo, hi = 0.0, 1.0
    while excess(hi) > 0:
        lo, hi = hi, hi * 2.0
    t = (lo + hi) / 2.0
    for _ in range(200):
        f = excess(t)
        if f > 0:
            lo = t
        else:
            hi = t
        pdf = t_pdf(t, df)
        candidate = t + f / (slope * pdf) if pdf > 0 else math.nan  # nan: bisect instead
        if not lo < candidate < hi:
            candidate = (lo + hi) / 2.0
        if abs(candidate - t) <= 1e-15 * max(1.0, abs(t)):
            return candidate
        t = candidate
    return t


def t_two_sided_p(t: float, df: float) -> float:
    if math.isnan(t) or df <= 0:
        return math.nan
    return min(1.0, 2.0 * t_sf(abs(t), df))


def log_comb(n: int, k: int) -> float:
    if k < 0 or k > n:
        return -math.inf
    return math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1)


def binom_pmf(k: int, n: int, p: float) -> float:
    if k < 0 or k > n:
        return 0.0
    if p in (0.0, 1.0):
        return float(k == (n if p == 1.0 else 0))
    return math.exp(log_comb(n, k) + k * math.log(p) + (n - k) * math.log1p(-p))


def binom_test_two_sided(k: int, n: int, p: float = 0.5) -> float:
    """Exact two-sided binomial test: sum of the probabilities no larger than the observed one."""
    if n == 0:
        return 1.0
    observed = binom_pmf(k, n, p)
    total = sum(q for q in (binom_pmf(i, n, p) for i in range(n + 1)) if q <= observed * (1 + 1e-7))
    return min(1.0, total)


def mcnemar_exact(b: int, c: int) -> float:
    """Exact McNemar p-value: a two-sided binomial test on the discordant pairs b (A only) and c (B only)."""
    return binom_test_two_sided(min(b, c), b + c, 0.5)


def fisher_exact_two_sided(a: int, b: int, c: int, d: int) -> float:
    """Fisher's exact test on [[a, b], [c, d]]: sum of the tables no more likely than the observed."""
    row1, col1, n = a + b, a + c, a + b + c + d
    lo, hi = max(0, col1 - (n - row1)), min(row1, col1)
    denom = log_comb(n, col1)

    def pmf(x: int) -> float:
        return math.exp(log_comb(row1, x) + log_comb(n - row1, col1 - x) - denom)

    observed = pmf(a)
    total = sum(q for q in (pmf(x) for x in range(lo, hi + 1)) if q <= observed * (1 + 1e-7))
    return min(1.0, total)


def benjamini_hochberg(p_values: list[float]) -> list[float]:
    """BH adjusted p-values (q-values), NaN entries passed through and not counted in m."""
    order = sorted((p, i) for i, p in enumerate(p_values) if not math.isnan(p))
    m = len(order)
    adjusted = [math.nan] * len(p_values)
    running = 1.0
    for rank in range(m, 0, -1):
        p, i = order[rank - 1]
        running = min(running, p * m / rank)
        adjusted[i] = running
    return adjusted


def t_interval_from_sem(mean: float, sem: float, n: int, level: float = 0.95) -> tuple[float, float] | None:
    """Student-t interval mean + t_{(1-+level)/2, n-1} * sem, as Gym's `_confidence_interval` computes it:
    None for n <= 1, a point when sem is 0."""
    if n <= 1:
        return None
    if sem == 0:
        return mean, mean
    low = t_ppf((1.0 - level) / 2.0, n - 1)
    high = t_ppf((1.0 + level) / 2.0, n - 1)
    return mean + low * sem, mean + high * sem


def beta_ppf(q: float, a: float, b: float) -> float:
    """Quantile of Beta(a, b): the x with I_x(a, b) = q (Newton on the density, bisection as safeguard)."""
    if not 0.0 < q < 1.0:
        return 0.0 if q <= 0.0 else 1.0
    log_norm = -log_beta(a, b)
    lo, hi = 0.0, 1.0
    x = a / (a + b)  # the mean: a start inside (0, 1), unless a or b is tiny beside the other
    if not 0.0 < x < 1.0:
        x = 0.5
    for _ in range(200):
        f = betainc(a, b, x) - q
        if f > 0:
            hi = x
        else:
            lo = x
        if not 0.0 < x < 1.0:  # a bisection step reached an end: no density there, bisect on
            density = 0.0
        else:
            density = math.exp(log_norm + (a - 1.0) * math.log(x) + (b - 1.0) * math.log1p(-x))
        candidate = x - f / density if density > 0 else math.nan
        if not lo < candidate < hi:
            candidate = (lo + hi) / 2.0
        if abs(candidate - x) <= 1e-15 * max(x, 1e-300) or hi - lo <= 1e-300:
            return candidate
        x = candidate
    return x
