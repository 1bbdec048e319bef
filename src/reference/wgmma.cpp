// Bit-accurate model of one Hopper FP8 WGMMA k32 step. See include/symmoe/reference/wgmma.hpp.
#include "symmoe/reference/wgmma.hpp"

#include <climits>
#include <cmath>
#include <cstdlib>

#include "symmoe/formats.hpp"

namespace symmoe::ref {
namespace {

// |m| truncated toward zero to a multiple of 2^-shift (shift > 0 drops bits; shift <= 0 scales up exactly).
int64_t shift_toward_zero(int64_t m, int shift) {
  if (shift <= 0) return m << -shift;
  if (shift >= 63) return 0;
  return m >> shift;
}

// Index of the highest set bit of m > 0.
int top_bit(uint64_t m) { return 63 - __builtin_clzll(m); }

}  // namespace

E4m3Parts e4m3_parts(uint8_t code) {
  E4m3Parts p;
  const int mag = code & 0x7F, exp_field = mag >> 3, mant = mag & 7;
  if (mag == 0x7F) {
    p.nan = true;
    return p;
  }
  const int sig = exp_field == 0 ? mant : 8 + mant;  // value = sig * 2^(exp - 3)
  p.sig = int8_t(code & 0x80 ? -sig : sig);
  p.exp = int8_t(exp_field == 0 ? -6 : exp_field - 7);
  return p;
}

float wgmma_e4m3_k32(float c, const E4m3Parts* a, const E4m3Parts* b) {
  // Step 1-2: the largest nominal exponent among the nonzero terms (zero terms add nothing at any alignment).
  bool special = !std::isfinite(c);
  int emax = INT_MIN;
  for (int i = 0; i < kWgmmaK; ++i) {
    special |= a[i].nan | b[i].nan;
    if (a[i].sig != 0 && b[i].sig != 0) emax = std::max(emax, a[i].exp + b[i].exp);
  }
  if (special) {  // NaN / inf propagate as in any fp32 sum (not modelled bit for bit)
    float s = c;
    for (int i = 0; i < kWgmmaK; ++i)
      s += (a[i].nan || b[i].nan) ? NAN : float(a[i].sig * b[i].sig) * std::ldexp(1.f, a[i].exp + b[i].exp - 6);
    return s;
  }
  // c = mc * 2^(ec - 23) with an integer significand mc (24 bits for normals); nominal exponent ec.
  const uint32_t cbits = fmt::float_as_bits(c);
  const int c_exp_field = int((cbits >> 23) & 0xFF);
  const int64_t mc = c_exp_field == 0 ? int64_t(cbits & 0x7FFFFF) : int64_t((cbits & 0x7FFFFF) | 0x800000);
  const int ec = c_exp_field == 0 ? -126 : c_exp_field - 127;
  if (mc != 0) emax = std::max(emax, ec);
  if (emax == INT_MIN) return 0.f;  // every term is zero: +0
  // Step 3: each term truncated toward zero to a multiple of 2^(emax - 13), summed exactly in units of that.
  // A product sig_a * sig_b * 2^(e_a + e_b - 6) is (sig_a * sig_b) * 2^(e_a + e_b - emax + 7) units.
  int64_t sum = 0;
  for (int i = 0; i < kWgmmaK; ++i) {
    const int p = a[i].sig * b[i].sig;
    if (p == 0) continue;
    const int64_t units = shift_toward_zero(std::abs(p), emax - (a[i].exp + b[i].exp) - 7);
    sum += p < 0 ? -units : units;
  }
  if (mc != 0) {  // c is mc * 2^(ec - emax - 10) units
    const int64_t units = shift_toward_zero(mc, emax + 10 - ec);
    sum += (cbits >> 31) ? -units : units;
  }
  if (sum == 0) return 0.f;
  // Step 4: normalise, keep 1 + 13 significant bits (toward zero); below fp32's normal range keep multiples of
  // 2^-139 (13 fractional bits at exponent -126).
  const bool negative = sum < 0;
  uint64_t m = uint64_t(negative ? -sum : sum);
  const int unit_exp = emax - kWgmmaFractionalBits;  // value = m * 2^unit_exp
  const int value_exp = top_bit(m) + unit_exp;
  int drop = top_bit(m) - kWgmmaFractionalBits;  // bits below the 13th fractional bit
  if (value_exp < -126) drop = (-126 - kWgmmaFractionalBits) - unit_exp;
  if (drop > 0) m = drop >= 64 ? 0 : (m >> drop) << drop;
  const float v = float(std::ldexp(double(m), unit_exp));  // exact: <= 14 significant bits (inf on overflow)
  return negative ? -v : v;
}

double wgmma_e4m3_k32_error_bound(float c, const E4m3Parts* a, const E4m3Parts* b, float d) {
  int emax = INT_MIN;
  for (int i = 0; i < kWgmmaK; ++i)
    if (a[i].sig != 0 && b[i].sig != 0) emax = std::max(emax, a[i].exp + b[i].exp);
  if (c != 0.f && std::isfinite(c)) emax = std::max(emax, std::max(std::ilogb(c), -126));
  if (emax == INT_MIN) return 0.0;
  return 33.0 * std::ldexp(1.0, emax - kWgmmaFractionalBits) + std::ldexp(std::fabs(double(d)), -kWgmmaFractionalBits);
}

float wgmma_e4m3_k32(float c, const uint8_t* a, const uint8_t* b) {
  E4m3Parts pa[kWgmmaK], pb[kWgmmaK];
  for (int i = 0; i < kWgmmaK; ++i) pa[i] = e4m3_parts(a[i]), pb[i] = e4m3_parts(b[i]);
  return wgmma_e4m3_k32(c, pa, pb);
}

}  // namespace symmoe::ref
