// The fused MoE layer from Python (symmoe.mega, DeepGEMM-shaped): MegaMoe (include/symmoe/mega_moe.hpp) for one
// local rank per call (one rank per process), ComposedMoe (include/symmoe/moe.hpp) with the same calls so tests can
// compare the two bitwise, and the host L1 weight transform (include/symmoe/weight_transform.hpp) over numpy, the
// one definition the torch transform in symmoe/mega.py is tested against.
// Device memory crosses as integer addresses; python/symmoe/mega.py checks every tensor before a call.
// NOTES: forward_one is the hot path: plain arguments in, one integer out (no dicts, no lists).
#include "bindings.hpp"
#include "symmoe/activation_clamp.hpp"
#include "symmoe/mega_moe.hpp"
#include "symmoe/moe.hpp"
#include "symmoe/plan.hpp"
#include "symmoe/weight_transform.hpp"
#include "symmoe/weight_transform_fp4.hpp"

namespace symmoe::py_bind {
namespace {

template <typename T>
T* as_ptr(uintptr_t v) {
  return reinterpret_cast<T*>(v);
}
uintptr_t as_int(const void* p) { return reinterpret_cast<uintptr_t>(p); }

MoeRankWeights rank_weights(uintptr_t w1, uintptr_t w1_scales, uintptr_t w2, uintptr_t w2_scales) {
  MoeRankWeights w;
  w.w1 = as_ptr<const uint8_t>(w1), w.w1_scales = as_ptr<const float>(w1_scales);
  w.w2 = as_ptr<const uint8_t>(w2), w.w2_scales = as_ptr<const float>(w2_scales);
  return w;
}

MoeForwardArgs forward_args(int num_tokens, uintptr_t x, uintptr_t x_scales, uintptr_t topk_idx, uintptr_t topk_weights,
                            uintptr_t y, uintptr_t stream) {
  MoeForwardArgs a;
  a.num_tokens = num_tokens;
  a.x = as_ptr<const uint8_t>(x), a.x_scales = as_ptr<const float>(x_scales);
  a.topk_idx = as_ptr<const int64_t>(topk_idx), a.topk_weights = as_ptr<const float>(topk_weights);
  a.y = as_ptr<uint16_t>(y), a.stream = as_ptr<CUstream_st>(stream);
  return a;
}

void check_one_local_rank(const Communicator& comm, const char* what) {
  SYMMOE_CHECK(comm.local_ranks().size() == 1, "python", what,
               " from Python drives one rank per process; this "
               "communicator drives ",
               comm.local_ranks().size());
}

void bind_mega_moe(py::module_& m) {
  py::class_<MegaMoe>(m, "MegaMoe", "the fused MoE layer of one rank per process (include/symmoe/mega_moe.hpp)")
      .def(py::init([](Communicator& comm, const MoeShape& shape, float clamp, int num_sms, bool count_received) {
             check_one_local_rank(comm, "MegaMoe");
             MegaMoeOptions o;
             o.clamp = clamp, o.num_sms = num_sms, o.count_received = count_received;
             py::gil_scoped_release release;  // collective symmetric allocation
             return std::make_unique<MegaMoe>(comm, shape, o);
           }),
           py::arg("comm"), py::arg("shape"), py::arg("clamp") = 0.f, py::arg("num_sms") = 0,
           py::arg("count_received") = false, py::keep_alive<1, 2>())  // the Communicator outlives the layer
      .def_property_readonly("shape", &MegaMoe::shape)
      .def_property_readonly("clamp", [](const MegaMoe& l) { return l.options().clamp; })
      .def("plan", [](const MegaMoe& l) { return l.plan(0); })
      .def(
          "input_one",
          [](const MegaMoe& l) {
            const MegaInputView v = l.input(0);
            return py::make_tuple(as_int(v.x), as_int(v.x_scales), v.x_scales_stride, as_int(v.topk_idx),
                                  as_int(v.topk_weights));
          },
          "-> (x, x_scales, x_scales_stride in floats, topk_idx, topk_weights): device addresses of the inputs")
      .def(
          "bind_fp8_weights_one",
          [](MegaMoe& l, uintptr_t w1, uintptr_t w1_scales, uintptr_t w2, uintptr_t w2_scales) {
            l.bind_weights({rank_weights(w1, w1_scales, w2, w2_scales)});
          },
          py::arg("w1"), py::arg("w1_scales"), py::arg("w2"), py::arg("w2_scales"),
          "FP8 weights: E4M3 w1 / w2 with their fp32 block scales (w1's transformed)")
      .def(
          "bind_fp4_weights_one",
          [](MegaMoe& l, uintptr_t w1, uintptr_t w1_base_scales, uintptr_t w2, uintptr_t w2_base_scales,
             uintptr_t w1_scale_codes, uintptr_t w2_scale_codes) {
            MoeRankWeights w = rank_weights(w1, w1_base_scales, w2, w2_base_scales);
            w.format = gemm::WeightFormat::kFp4;  // MegaMoe checks that both code arrays are there
            w.w1_scale_codes = as_ptr<const uint32_t>(w1_scale_codes);
            w.w2_scale_codes = as_ptr<const uint32_t>(w2_scale_codes);
            l.bind_weights({w});
          },
          py::arg("w1"), py::arg("w1_base_scales"), py::arg("w2"), py::arg("w2_base_scales"), py::arg("w1_scale_codes"),
          py::arg("w2_scale_codes"),
          "FP4 weights: packed E2M1 w1 / w2, their fp32 base scales and UE8M0 scale codes (transform_*_weights_fp4)")
      .def("set_clamp", &MegaMoe::set_clamp, py::arg("clamp"))
      .def(
          "forward_one",
          [](MegaMoe& l, int num_tokens, uintptr_t x, uintptr_t x_scales, uintptr_t topk_idx, uintptr_t topk_weights,
             uintptr_t y, uintptr_t stream) {
            const MoeForwardArgs a = forward_args(num_tokens, x, x_scales, topk_idx, topk_weights, y, stream);
            return as_int(l.forward({a})[0]);
          },
          py::arg("num_tokens"), py::arg("x"), py::arg("x_scales"), py::arg("topk_idx"), py::arg("topk_weights"),
          py::arg("y"), py::arg("stream"), "-> address of y (the layer's own buffer when y is 0)")
      .def("received_counts", [](const MegaMoe& l) { return as_int(l.received_counts(0)); })
      .def("synchronize", &MegaMoe::synchronize, py::call_guard<py::gil_scoped_release>());
}

void bind_composed_moe(py::module_& m) {
  py::class_<ComposedMoe>(m, "ComposedMoe",
                          "the composed MoE layer (EP -> GEMMs -> combine) of one rank per process, for comparisons")
      .def(py::init([](Communicator& comm, const MoeShape& shape, uintptr_t w1, uintptr_t w1_scales, uintptr_t w2,
                       uintptr_t w2_scales, float clamp, int expert_alignment) {
             check_one_local_rank(comm, "ComposedMoe");
             ComposedMoeOptions o;
             o.clamp = clamp, o.expert_alignment = expert_alignment;
             check_options(o);
             const std::vector<MoeRankWeights> w{rank_weights(w1, w1_scales, w2, w2_scales)};
             py::gil_scoped_release release;
             return std::make_unique<ComposedMoe>(comm, shape, w, o);
           }),
           py::arg("comm"), py::arg("shape"), py::arg("w1"), py::arg("w1_scales"), py::arg("w2"), py::arg("w2_scales"),
           py::arg("clamp") = 0.f, py::arg("expert_alignment") = 128, py::keep_alive<1, 2>())
      .def(
          "forward_one",
          [](ComposedMoe& l, int num_tokens, uintptr_t x, uintptr_t x_scales, uintptr_t topk_idx,
             uintptr_t topk_weights, uintptr_t y, uintptr_t stream) {
            const MoeForwardArgs a = forward_args(num_tokens, x, x_scales, topk_idx, topk_weights, y, stream);
            return as_int(l.forward({a})[0]);
          },
          py::arg("num_tokens"), py::arg("x"), py::arg("x_scales"), py::arg("topk_idx"), py::arg("topk_weights"),
          py::arg("y"), py::arg("stream"))
      .def("synchronize", &ComposedMoe::synchronize, py::call_guard<py::gil_scoped_release>());
}

}  // namespace

void bind_mega(py::module_& m) {
  m.def(
      "transform_l1_weights",
      [](const py::object& data_in, const py::object& scales_in) {
        const CArray<uint8_t> data = integer_array<uint8_t>(data_in, "data", "E4M3 codes (uint8)");
        const CArray<float> scales = real_array(scales_in, "scales");
        SYMMOE_CHECK(data.ndim() == 3, "python", "transform_l1_weights: data must be uint8 [E, 2I, H], got ",
                     data.ndim(), " dimensions");
        const int E = int(data.shape(0)), two_i = int(data.shape(1)), H = int(data.shape(2));
        SYMMOE_CHECK(two_i % 256 == 0 && H % 128 == 0, "python",
                     "transform_l1_weights: data [E, 2I, H] needs I % 128 "
                     "== 0 and H % 128 == 0, got [",
                     E, ", ", two_i, ", ", H, "]");
        SYMMOE_CHECK(
            scales.ndim() == 3 && scales.shape(0) == E && scales.shape(1) == two_i / 128 && scales.shape(2) == H / 128,
            "python", "transform_l1_weights: scales must be float32 [", E, ", ", two_i / 128, ", ", H / 128, "]");
        py::array_t<uint8_t> out_data({E, two_i, H});
        py::array_t<float> out_scales({E, two_i / 256, H / 128, 2});
        gemm::transform_l1_weights(data.data(), scales.data(), E, two_i / 2, H, out_data.mutable_data(),
                                   out_scales.mutable_data());
        return py::make_tuple(out_data, out_scales);
      },
      py::arg("data"), py::arg("scales"),
      "host L1 transform: (e4m3 [E, 2I, H], fp32 [E, 2I/128, H/128]) -> (interleaved data, [E, I/128, H/128, 2])");
  m.def(
      "transform_l1_weights_fp4",
      [](const py::object& data_in, const py::object& scales_in) {
        const CArray<uint8_t> data = integer_array<uint8_t>(data_in, "data", "packed E2M1 bytes (uint8)");
        const CArray<uint32_t> scales = integer_array<uint32_t>(scales_in, "scales", "packed UE8M0 (uint32)");
        SYMMOE_CHECK(data.ndim() == 3, "python", "transform_l1_weights_fp4: data must be uint8 [E, 2I, H/2], got ",
                     data.ndim(), " dimensions");
        const int E = int(data.shape(0)), two_i = int(data.shape(1)), H = 2 * int(data.shape(2));
        SYMMOE_CHECK(two_i % 256 == 0 && H % 128 == 0, "python",
                     "transform_l1_weights_fp4: data [E, 2I, H/2] needs "
                     "I % 128 == 0 and H % 128 == 0, got [",
                     E, ", ", two_i, ", ", H / 2, "]");
        SYMMOE_CHECK(
            scales.ndim() == 3 && scales.shape(0) == E && scales.shape(1) == two_i && scales.shape(2) == H / 128,
            "python", "transform_l1_weights_fp4: scales must be uint32 [", E, ", ", two_i, ", ", H / 128, "]");
        py::array_t<uint8_t> out_data({E, two_i, H / 2});
        py::array_t<uint32_t> out_scales({E, H / 128, two_i});
        py::array_t<float> out_bases({E, two_i / 256, H / 128, 2});
        gemm::transform_l1_weights_fp4(data.data(), scales.data(), E, two_i / 2, H, out_data.mutable_data(),
                                       out_scales.mutable_data(), out_bases.mutable_data());
        return py::make_tuple(out_data, out_scales, out_bases);
      },
      py::arg("data"), py::arg("scales"),
      "host FP4 L1 transform (include/symmoe/weight_transform_fp4.hpp): (E2M1 [E, 2I, H/2], packed UE8M0 uint32 "
      "[E, 2I, H/128]) -> (interleaved data, MN-major interleaved scales [E, H/128, 2I], fp32 base scales "
      "[E, I/128, H/128, 2])");
  m.def(
      "transform_l2_weights_fp4",
      [](const py::object& data_in, const py::object& scales_in) {
        const CArray<uint8_t> data = integer_array<uint8_t>(data_in, "data", "packed E2M1 bytes (uint8)");
        const CArray<uint32_t> scales = integer_array<uint32_t>(scales_in, "scales", "packed UE8M0 (uint32)");
        SYMMOE_CHECK(data.ndim() == 3, "python", "transform_l2_weights_fp4: data must be uint8 [E, H, I/2], got ",
                     data.ndim(), " dimensions");
        const int E = int(data.shape(0)), H = int(data.shape(1)), I = 2 * int(data.shape(2));
        SYMMOE_CHECK(H % 128 == 0 && I % 128 == 0, "python",
                     "transform_l2_weights_fp4: data [E, H, I/2] needs H % 128 == 0 and I % 128 == 0, got [", E, ", ",
                     H, ", ", I / 2, "]");
        SYMMOE_CHECK(scales.ndim() == 3 && scales.shape(0) == E && scales.shape(1) == H && scales.shape(2) == I / 128,
                     "python", "transform_l2_weights_fp4: scales must be uint32 [", E, ", ", H, ", ", I / 128, "]");
        py::array_t<uint8_t> out_data({E, H, I / 2});
        py::array_t<uint32_t> out_scales({E, I / 128, H});
        py::array_t<float> out_bases({E, H / 128, I / 128});
        gemm::transform_l2_weights_fp4(data.data(), scales.data(), E, H, I, out_data.mutable_data(),
                                       out_scales.mutable_data(), out_bases.mutable_data());
        return py::make_tuple(out_data, out_scales, out_bases);
      },
      py::arg("data"), py::arg("scales"),
      "host FP4 L2 transform (include/symmoe/weight_transform_fp4.hpp): (E2M1 [E, H, I/2], packed UE8M0 uint32 "
      "[E, H, I/128]) -> (bit-layout-packed data, MN-major scales [E, I/128, H], fp32 base scales "
      "[E, H/128, I/128])");
  m.def(
      "mega_check_shape",
      [](const MoeShape& shape, int num_sms) {
        shape.validate();
        plan::plan_mega_moe(shape, num_sms, plan::PlanOverrides::from_env()).validate();
      },
      py::arg("shape"), py::arg("num_sms") = 132,
      "MoeShape::validate and the fused kernel's plan (raises symmoe.Error naming the field; no GPU needed)");
  m.def(
      "swiglu_clamp_for_activation_clamp",
      [](float activation_clamp) {
        try {
          return swiglu_clamp_for_activation_clamp(activation_clamp);
        } catch (const Error& e) {
          throw py::value_error(e.what());  // a bad argument, as every other check of fp8_mega_moe
        }
      },
      py::arg("activation_clamp"),
      "DeepGEMM's activation_clamp (+inf for None) as the SwiGLU clamp of MegaMoe.set_clamp "
      "(include/symmoe/activation_clamp.hpp); raises ValueError for a negative or NaN value");
  bind_mega_moe(m);
  bind_composed_moe(m);
}

}  // namespace symmoe::py_bind
