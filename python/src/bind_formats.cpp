// Numeric formats over numpy arrays: the element casts of symmoe/formats.hpp (the one definition shared with the
// kernels) and the host block quantisers of symmoe/quant.hpp. Any shape for casts; 2-D for quantisation.
#include "bindings.hpp"
#include "symmoe/quant.hpp"

namespace symmoe::py_bind {
namespace {

std::vector<py::ssize_t> shape_of(const py::array& a) {
  return std::vector<py::ssize_t>(a.shape(), a.shape() + a.ndim());
}

// out[i] = f(in[i]) over an array of any shape.
template <typename Out, typename In, typename F>
py::array_t<Out> map_elements(const CArray<In>& in, F f) {
  py::array_t<Out> out(shape_of(in));
  const In* src = in.data();
  Out* dst = out.mutable_data();
  for (py::ssize_t i = 0; i < in.size(); ++i) dst[i] = f(src[i]);
  return out;
}

// Codes -> fp32: the input must hold integer codes in [0, max_code] (a float array raises, never reinterpreted).
template <typename In, typename F>
void def_decode(py::module_& m, const char* name, F f, const char* expected, unsigned long long max_code,
                const char* doc) {
  m.def(
      name,
      [f, expected, max_code](const py::object& x) {
        return map_elements<float, In>(integer_array<In>(x, "x", expected, 0, max_code), f);
      },
      py::arg("x"), doc);
}

// fp32 -> codes: the input must be real (float or integer values; NaN and Inf follow the cast's rules).
template <typename Out, typename F>
void def_encode(py::module_& m, const char* name, F f, const char* doc) {
  m.def(
      name, [f](const py::object& x) { return map_elements<Out, float>(real_array(x, "x"), f); }, py::arg("x"), doc);
}

}  // namespace

void bind_formats(py::module_& m) {
  def_encode<uint8_t>(m, "float_to_e4m3", fmt::float_to_e4m3, "fp32 -> E4M3 codes (RNE, saturating)");
  def_decode<uint8_t>(m, "e4m3_to_float", fmt::e4m3_to_float, "E4M3 codes (uint8, 0..255)", 255,
                      "E4M3 codes -> fp32 (exact)");
  def_encode<uint8_t>(m, "float_to_e5m2", fmt::float_to_e5m2, "fp32 -> E5M2 codes (RNE, saturating)");
  def_decode<uint8_t>(m, "e5m2_to_float", fmt::e5m2_to_float, "E5M2 codes (uint8, 0..255)", 255,
                      "E5M2 codes -> fp32 (exact)");
  def_encode<uint8_t>(m, "float_to_e2m1", fmt::float_to_e2m1, "fp32 -> E2M1 nibbles, one per byte");
  def_decode<uint8_t>(m, "e2m1_to_float", fmt::e2m1_to_float, "E2M1 nibbles (one per byte, 0..15)", 15,
                      "E2M1 nibbles (one per byte) -> fp32");
  def_encode<uint16_t>(m, "float_to_bf16", fmt::float_to_bf16, "fp32 -> bf16 bits as uint16 (RNE)");
  def_decode<uint16_t>(m, "bf16_to_float", fmt::bf16_to_float, "bf16 bit patterns (uint16, 0..65535)", 65535,
                       "bf16 bits (uint16) -> fp32 (exact)");
  def_decode<uint8_t>(m, "ue8m0_to_float", fmt::ue8m0_to_float, "UE8M0 exponent bytes (uint8, 0..255)", 255,
                      "UE8M0 exponent bytes -> fp32 powers of two");
  def_encode<uint8_t>(m, "ue8m0_from_scale", fmt::ue8m0_from_scale,
                      "power-of-two fp32 scales (as scale_for_amax kUe8m0 gives) -> UE8M0 bytes");
  m.def(
      "scale_for_amax",
      [](const py::object& amax, float fmt_max, const std::string& scale_format) {
        const fmt::ScaleFormat f = parse_scale_format(scale_format);
        return map_elements<float, float>(real_array(amax, "amax"),
                                          [=](float a) { return fmt::scale_for_amax(a, fmt_max, f); });
      },
      py::arg("amax"), py::arg("fmt_max") = fmt::kE4M3Max, py::arg("scale_format") = "fp32",
      "block scale from amax (floored at kAmaxFloor): fp32 amax/fmt_max or its UE8M0 power of two");
  m.attr("E4M3_MAX") = fmt::kE4M3Max;
  m.attr("E5M2_MAX") = fmt::kE5M2Max;
  m.attr("E2M1_MAX") = fmt::kE2M1Max;
  m.attr("AMAX_FLOOR") = fmt::kAmaxFloor;

  m.def(
      "quantize_activations",
      [](const py::object& x_in, int block, const std::string& scale_format) {
        const CArray<float> x = real_array(x_in, "x");
        const auto [rows, cols] = shape_2d(x, "x");
        check_finite_rows(x, "x", block);
        const Fp8Activations q = quantize_activations(x.data(), rows, cols, block, parse_scale_format(scale_format));
        return py::make_tuple(to_numpy(q.data, {rows, cols}), to_numpy(q.scales, {rows, cols / block}));
      },
      py::arg("x"), py::arg("block") = 128, py::arg("scale_format") = "fp32",
      "x fp32 [M, K] -> (E4M3 codes uint8 [M, K], fp32 scales [M, K/block]) per token per `block` channels");
  m.def(
      "quantize_weights_128x128",
      [](const py::object& w_in, const std::string& scale_format) {
        const CArray<float> w = real_array(w_in, "w");
        const auto [rows, cols] = shape_2d(w, "w");
        check_finite_rows(w, "w", 128);
        const Fp8BlockWeights q = quantize_weights_128x128(w.data(), rows, cols, parse_scale_format(scale_format));
        return py::make_tuple(to_numpy(q.data, {rows, cols}),
                              to_numpy(q.scales, {(rows + 127) / 128, q.num_scale_cols()}));
      },
      py::arg("w"), py::arg("scale_format") = "fp32",
      "w fp32 [N, K] -> (E4M3 codes uint8 [N, K], fp32 scales [ceil(N/128), ceil(K/128)])");
  m.def(
      "quantize_weights_fp4",
      [](const py::object& w_in) {
        const CArray<float> w = real_array(w_in, "w");
        const auto [rows, cols] = shape_2d(w, "w");
        check_finite_rows(w, "w", 32);
        const Fp4Weights q = quantize_weights_fp4(w.data(), rows, cols);
        return py::make_tuple(to_numpy(q.data, {rows, cols / 2}), to_numpy(q.scales_ue8m0, {rows, cols / 32}));
      },
      py::arg("w"),
      "w fp32 [N, K] -> (packed E2M1 uint8 [N, K/2] (column 2j in the low nibble), UE8M0 scales uint8 [N, K/32])");
}

}  // namespace symmoe::py_bind
