// The golden model from Python (symmoe.reference wraps these): routing generators, dispatch / cached dispatch with
// the full EPHandle (DeepEP's field names), the dispatch invariant checker, combine, and the fused layer (exact,
// faithful, composed). Payload rows cross as uint8 [rows, row_bytes]; the Python layer restores dtypes.
#include "bindings.hpp"
#include "symmoe/reference/combine.hpp"
#include "symmoe/reference/dispatch.hpp"
#include "symmoe/reference/mlp.hpp"
#include "symmoe/reference/routing.hpp"

namespace symmoe::py_bind {
namespace {

using ref::DispatchInput;
using ref::DispatchOutput;
using ref::EpHandle;

template <typename T>
py::array_t<T> rows_of(const std::vector<T>& v, int rows, int cols) {
  return to_numpy(v, {rows, cols});
}

// One source rank's dispatch input from numpy arrays; `rank` names it in errors. x and x_sf are payload bytes
// (python/symmoe/reference.py views any dtype as uint8 rows); topk_idx must hold integer expert ids (-1 = masked),
// topk_weights real values.
DispatchInput make_input(int rank, int num_topk, const CArray<uint8_t>& x, const std::optional<CArray<uint8_t>>& x_sf,
                         const py::object& topk_idx_in, const py::object& topk_weights_in) {
  const std::string r = "rank " + std::to_string(rank) + " ";
  const CArray<int64_t> topk_idx =
      integer_array<int64_t>(topk_idx_in, r + "topk_idx", "expert ids (int64, -1 = masked)");
  const CArray<float> topk_weights = real_array(topk_weights_in, r + "topk_weights");
  DispatchInput in;
  const auto [t, row_bytes] = shape_2d(x, "x (uint8 rows)");
  in.num_tokens = t, in.x_row_bytes = row_bytes, in.x = to_vector(x);
  if (x_sf) {
    const auto [ts, sf_bytes] = shape_2d(*x_sf, "x_sf (uint8 rows)");
    SYMMOE_CHECK(ts == t, "python", "rank ", rank, ": x_sf has ", ts, " rows but x has ", t,
                 " (one row of scales per token)");
    in.sf_row_bytes = sf_bytes, in.x_sf = to_vector(*x_sf);
  }
  const auto [ti, k] = shape_2d(topk_idx, (r + "topk_idx").c_str());
  const auto [tw, kw] = shape_2d(topk_weights, (r + "topk_weights").c_str());
  // Rows first, naming both sides: a row-count mismatch may be x's fault as well as topk_idx's.
  SYMMOE_CHECK(ti == t, "python", "rank ", rank, ": x has ", t, " rows (tokens) but topk_idx has ", ti,
               "; x, topk_idx and topk_weights need one row per token");
  SYMMOE_CHECK(tw == t, "python", "rank ", rank, ": x has ", t, " rows (tokens) but topk_weights has ", tw,
               "; x, topk_idx and topk_weights need one row per token");
  SYMMOE_CHECK(k == num_topk, "python", "rank ", rank, ": topk_idx must have num_topk = ", num_topk, " columns, got ",
               k);
  SYMMOE_CHECK(kw == num_topk, "python", "rank ", rank, ": topk_weights must have num_topk = ", num_topk,
               " columns (as topk_idx), got ", kw);
  in.topk_idx = to_vector(topk_idx), in.topk_weights = to_vector(topk_weights);
  return in;
}

std::vector<DispatchInput> make_inputs(int num_topk, const std::vector<CArray<uint8_t>>& x,
                                       const std::vector<std::optional<CArray<uint8_t>>>& x_sf,
                                       const std::vector<py::object>& topk_idx,
                                       const std::vector<py::object>& topk_weights) {
  const size_t r = x.size();
  SYMMOE_CHECK(x_sf.size() == r && topk_idx.size() == r && topk_weights.size() == r, "python",
               "one x, x_sf, topk_idx and topk_weights per rank: got ", r, ", ", x_sf.size(), ", ", topk_idx.size(),
               ", ", topk_weights.size());
  std::vector<DispatchInput> inputs;
  for (size_t i = 0; i < r; ++i)
    inputs.push_back(make_input(int(i), num_topk, x[i], x_sf[i], topk_idx[i], topk_weights[i]));
  return inputs;
}

// Rows held by a dispatch output (non-expand: received tokens; expand: expanded rows).
int output_rows(const DispatchOutput& o) {
  return o.handle.do_expand ? o.handle.num_expanded_tokens : o.handle.num_recv_tokens;
}

using Dims = std::vector<py::ssize_t>;

// A read-only numpy copy of one of the handle's vectors, shaped by `shape(handle)`.
template <typename T, typename Shape>
auto array_field(std::vector<T> EpHandle::*field, Shape shape) {
  return [field, shape](const EpHandle& e) { return to_numpy(e.*field, shape(e)); };
}

void bind_handle(py::module_& m) {
  const auto ranks = [](const EpHandle& e) { return Dims{e.num_ranks}; };
  const auto experts = [](const EpHandle& e) { return Dims{e.num_experts}; };
  const auto local_experts = [](const EpHandle& e) { return Dims{e.num_local_experts()}; };
  const auto tokens_by_lanes = [](const EpHandle& e) { return Dims{e.num_tokens, e.num_topk}; };
  const auto recv_by_metadata = [](const EpHandle& e) { return Dims{e.num_recv_tokens, e.metadata_stride()}; };
  py::class_<EpHandle> h(m, "RefEPHandle", "golden-model EPHandle of one rank (DeepEP field names; arrays are copies)");
  def_handle_scalars(h);
  h.def_property_readonly("num_local_experts", &EpHandle::num_local_experts)
      .def_property_readonly("num_tokens_per_rank", array_field(&EpHandle::num_tokens_per_rank, ranks))
      .def_property_readonly("num_tokens_per_expert", array_field(&EpHandle::num_tokens_per_expert, experts))
      .def_property_readonly("dst_buffer_slot_idx", array_field(&EpHandle::dst_buffer_slot_idx, tokens_by_lanes))
      .def_property_readonly("topk_idx", array_field(&EpHandle::topk_idx, tokens_by_lanes))
      .def_property_readonly("psum_num_recv_tokens_per_rank",
                             array_field(&EpHandle::psum_num_recv_tokens_per_rank, ranks))
      .def_property_readonly("num_unaligned_recv_tokens_per_expert",
                             array_field(&EpHandle::num_unaligned_recv_tokens_per_expert, local_experts))
      .def_property_readonly("psum_num_recv_tokens_per_expert",
                             array_field(&EpHandle::psum_num_recv_tokens_per_expert, local_experts))
      .def_property_readonly("recv_src_metadata", array_field(&EpHandle::recv_src_metadata, recv_by_metadata))
      .def("expert_start", &EpHandle::expert_start, py::arg("local_expert"))
      .def("__repr__", [](const EpHandle& e) {
        return detail::concat("<RefEPHandle rank=", e.rank, "/", e.num_ranks, " expand=", e.do_expand,
                              " num_recv_tokens=", e.num_recv_tokens, " num_expanded_tokens=", e.num_expanded_tokens,
                              ">");
      });

  py::class_<DispatchOutput>(m, "RefDispatchOutput", "one destination rank's golden-model dispatch result")
      .def_property_readonly("recv_x",
                             [](const DispatchOutput& o) {
                               const int rows = output_rows(o);
                               return rows_of(o.recv_x, rows, rows ? int(o.recv_x.size() / rows) : 0);
                             })
      .def_property_readonly("recv_x_sf",
                             [](const DispatchOutput& o) -> py::object {
                               if (o.recv_sf.empty()) return py::none();
                               const int rows = output_rows(o);
                               return rows_of(o.recv_sf, rows, int(o.recv_sf.size() / rows));
                             })
      .def_property_readonly("recv_topk_idx",
                             [](const DispatchOutput& o) -> py::array {
                               if (o.handle.do_expand) return to_numpy(o.recv_topk_idx, {output_rows(o)});
                               return rows_of(o.recv_topk_idx, output_rows(o), o.handle.num_topk);
                             })
      .def_property_readonly("recv_topk_weights",
                             [](const DispatchOutput& o) -> py::array {
                               if (o.handle.do_expand) return to_numpy(o.recv_topk_weights, {output_rows(o)});
                               return rows_of(o.recv_topk_weights, output_rows(o), o.handle.num_topk);
                             })
      .def_readonly("handle", &DispatchOutput::handle);
}

void bind_layer(py::module_& m) {
  using In = ref::MoeLayerInput;
  py::class_<In>(m, "RefLayerInput", "one rank's fused-layer input: FP8 x (per-128 scales) + routing")
      .def(py::init([](const py::object& x_in, const py::object& x_scales_in, const py::object& topk_idx_in,
                       const py::object& topk_weights_in) {
             const CArray<uint8_t> x = integer_array<uint8_t>(x_in, "x", "E4M3 codes (uint8)");
             const CArray<float> x_scales = real_array(x_scales_in, "x_scales");
             const CArray<int64_t> topk_idx =
                 integer_array<int64_t>(topk_idx_in, "topk_idx", "expert ids (int64, -1 = masked)");
             const CArray<float> topk_weights = real_array(topk_weights_in, "topk_weights");
             ref::MoeLayerInput in;
             const auto [t, h] = shape_2d(x, "x (E4M3 codes)");
             const auto [ts, hs] = shape_2d(x_scales, "x_scales");
             SYMMOE_CHECK(h % 128 == 0 && ts == t && hs == h / 128, "python", "x_scales must be [", t, ", ", h / 128,
                          "] for x [", t, ", ", h, "] (hidden a multiple of 128), got [", ts, ", ", hs, "]");
             const auto [ti, k] = shape_2d(topk_idx, "topk_idx");
             const auto [tw, kw] = shape_2d(topk_weights, "topk_weights");
             SYMMOE_CHECK(ti == t, "python", "x has ", t, " rows (tokens) but topk_idx has ", ti,
                          "; x, x_scales, topk_idx and topk_weights need one row per token");
             SYMMOE_CHECK(tw == t, "python", "x has ", t, " rows (tokens) but topk_weights has ", tw,
                          "; x, x_scales, topk_idx and topk_weights need one row per token");
             SYMMOE_CHECK(kw == k, "python", "topk_weights must be [", t, ", ", k, "] like topk_idx, got [", tw, ", ",
                          kw, "]");
             in.x.num_rows = t, in.x.num_cols = h, in.x.block = 128;
             in.x.data = to_vector(x), in.x.scales = to_vector(x_scales);
             in.routing.num_tokens = t, in.routing.num_topk = k;
             in.routing.topk_idx = to_vector(topk_idx), in.routing.topk_weights = to_vector(topk_weights);
             return in;
           }),
           py::arg("x"), py::arg("x_scales"), py::arg("topk_idx"), py::arg("topk_weights"))
      .def_property_readonly("x", [](const In& i) { return rows_of(i.x.data, i.x.num_rows, i.x.num_cols); })
      .def_property_readonly("x_scales",
                             [](const In& i) { return rows_of(i.x.scales, i.x.num_rows, i.x.num_cols / 128); })
      .def_property_readonly(
          "topk_idx", [](const In& i) { return rows_of(i.routing.topk_idx, i.routing.num_tokens, i.routing.num_topk); })
      .def_property_readonly("topk_weights", [](const In& i) {
        return rows_of(i.routing.topk_weights, i.routing.num_tokens, i.routing.num_topk);
      });

  m.def(
      "ref_make_layer_input",
      [](const MoeShape& shape, int num_tokens, const std::string& kind, uint64_t seed, double mask_prob, int rank) {
        ref::RoutingOptions o;
        o.kind = ref::parse_routing_kind(kind), o.seed = seed, o.mask_prob = mask_prob;
        return ref::make_random_layer_input(shape, num_tokens, o, rank);
      },
      py::arg("shape"), py::arg("num_tokens"), py::arg("kind") = "uniform", py::arg("seed") = 1,
      py::arg("mask_prob") = 0.0, py::arg("rank") = 0);

  // Weights are the golden model's random experts (deterministic in (weight_seed, expert)).
  auto weights_for = [](const MoeShape& shape, const std::vector<ref::MoeLayerInput>& inputs, uint64_t seed) {
    shape.validate();
    SYMMOE_CHECK(int(inputs.size()) == shape.num_ranks, "python", "one input per rank: shape has ", shape.num_ranks,
                 " ranks, got ", inputs.size(), " inputs");
    std::vector<ref::Routing> routings;
    for (const auto& in : inputs) routings.push_back(in.routing);
    return ref::make_random_experts(shape.hidden, shape.intermediate, routings, seed);
  };
  auto as_rows = [](const auto& outs, const std::vector<ref::MoeLayerInput>& inputs, int hidden) {
    using T = typename std::decay_t<decltype(outs)>::value_type::value_type;
    std::vector<py::array_t<T>> r;
    for (size_t i = 0; i < outs.size(); ++i) r.push_back(to_numpy(outs[i], {inputs[i].x.num_rows, hidden}));
    return r;
  };
  m.def(
      "ref_moe_forward",
      [=](const MoeShape& shape, const std::vector<ref::MoeLayerInput>& inputs, const std::string& mode,
          uint64_t weight_seed, double clamp, int expert_alignment) -> py::object {
        const auto w = weights_for(shape, inputs, weight_seed);
        if (mode == "exact")
          return py::cast(as_rows(ref::moe_forward_exact(shape, w, inputs, clamp), inputs, shape.hidden));
        if (mode == "faithful")
          return py::cast(as_rows(ref::moe_forward_faithful(shape, w, inputs, float(clamp)), inputs, shape.hidden));
        if (mode == "composed")
          return py::cast(as_rows(ref::moe_forward_composed(shape, w, inputs, float(clamp), expert_alignment), inputs,
                                  shape.hidden));
        SYMMOE_FAIL("python", "mode must be 'exact', 'faithful' or 'composed', got '", mode, "'");
      },
      py::arg("shape"), py::arg("inputs"), py::arg("mode") = "faithful", py::arg("weight_seed") = 7,
      py::arg("clamp") = 0.0, py::arg("expert_alignment") = 1,
      "fused MoE layer on all ranks: exact -> fp64 [T, H]; faithful / composed -> bf16 bits uint16 [T, H]");
}

}  // namespace

void bind_reference(py::module_& m) {
  m.def(
      "ref_make_routing",
      [](int num_tokens, int num_experts, int num_topk, const std::string& kind, double zipf_s, int hot_expert,
         double hot_fraction, double mask_prob, uint64_t seed, int rank) {
        ref::RoutingOptions o;
        o.kind = ref::parse_routing_kind(kind), o.zipf_s = zipf_s, o.hot_expert = hot_expert;
        o.hot_fraction = hot_fraction, o.mask_prob = mask_prob, o.seed = seed;
        const ref::Routing r = ref::make_routing(num_tokens, num_experts, num_topk, o, rank);
        return py::make_tuple(rows_of(r.topk_idx, num_tokens, num_topk), rows_of(r.topk_weights, num_tokens, num_topk));
      },
      py::arg("num_tokens"), py::arg("num_experts"), py::arg("num_topk"), py::arg("kind") = "uniform",
      py::arg("zipf_s") = 1.2, py::arg("hot_expert") = 0, py::arg("hot_fraction") = 0.5, py::arg("mask_prob") = 0.0,
      py::arg("seed") = 1, py::arg("rank") = 0);

  bind_handle(m);
  m.def(
      "ref_dispatch",
      [](const std::vector<CArray<uint8_t>>& x, const std::vector<std::optional<CArray<uint8_t>>>& x_sf,
         const std::vector<py::object>& topk_idx, const std::vector<py::object>& topk_weights, int num_experts,
         int num_topk, int num_max_tokens_per_rank, int expert_alignment, bool do_expand, bool zero_padding) {
        ref::DispatchConfig c;
        c.num_ranks = int(x.size()), c.num_experts = num_experts, c.num_topk = num_topk;
        c.num_max_tokens_per_rank = num_max_tokens_per_rank, c.expert_alignment = expert_alignment;
        c.do_expand = do_expand, c.zero_padding = zero_padding;
        const auto inputs = make_inputs(num_topk, x, x_sf, topk_idx, topk_weights);
        return ref::dispatch(c, inputs);
      },
      py::arg("x"), py::arg("x_sf"), py::arg("topk_idx"), py::arg("topk_weights"), py::arg("num_experts"),
      py::arg("num_topk"), py::arg("num_max_tokens_per_rank"), py::arg("expert_alignment") = 1,
      py::arg("do_expand") = false, py::arg("zero_padding") = true);
  m.def(
      "ref_dispatch_cached",
      [](const std::vector<EpHandle>& handles, const std::vector<CArray<uint8_t>>& x,
         const std::vector<std::optional<CArray<uint8_t>>>& x_sf, const std::vector<py::object>& topk_idx,
         const std::vector<py::object>& topk_weights, bool zero_padding) {
        SYMMOE_CHECK(!handles.empty(), "python", "cached dispatch needs one handle per rank, got none");
        const auto inputs = make_inputs(handles[0].num_topk, x, x_sf, topk_idx, topk_weights);
        return ref::dispatch_cached(handles, inputs, zero_padding);
      },
      py::arg("handles"), py::arg("x"), py::arg("x_sf"), py::arg("topk_idx"), py::arg("topk_weights"),
      py::arg("zero_padding") = true);
  m.def(
      "ref_check_dispatch",
      [](const std::vector<CArray<uint8_t>>& x, const std::vector<std::optional<CArray<uint8_t>>>& x_sf,
         const std::vector<py::object>& topk_idx, const std::vector<py::object>& topk_weights,
         const std::vector<DispatchOutput>& outputs) {
        SYMMOE_CHECK(!outputs.empty() && outputs.size() == x.size(), "python", "one output per rank: ", x.size(),
                     " inputs, ", outputs.size(), " outputs");
        const EpHandle& h = outputs[0].handle;
        ref::DispatchConfig c;
        c.num_ranks = h.num_ranks, c.num_experts = h.num_experts, c.num_topk = h.num_topk;
        c.num_max_tokens_per_rank = h.num_max_tokens_per_rank, c.expert_alignment = h.expert_alignment;
        c.do_expand = h.do_expand;
        return ref::check_dispatch(c, make_inputs(h.num_topk, x, x_sf, topk_idx, topk_weights), outputs);
      },
      py::arg("x"), py::arg("x_sf"), py::arg("topk_idx"), py::arg("topk_weights"), py::arg("outputs"),
      "every dispatch invariant checked without re-running the model: '' when all hold, else a report");
  m.def(
      "ref_combine",
      [](const std::vector<EpHandle>& handles, int hidden, const std::vector<py::object>& x,
         const std::optional<std::vector<py::object>>& topk_weights,
         const std::optional<std::vector<py::object>>& bias_0, const std::optional<std::vector<py::object>>& bias_1,
         bool reduce_local_experts) {
        const size_t r = handles.size();
        auto check_len = [r](size_t n, const char* what) {
          SYMMOE_CHECK(n == r, "python", "combine: one ", what, " per rank (", r, "), got ", n);
        };
        check_len(x.size(), "x");
        if (topk_weights) check_len(topk_weights->size(), "topk_weights");
        if (bias_0) check_len(bias_0->size(), "bias_0");
        if (bias_1) check_len(bias_1->size(), "bias_1");
        constexpr const char* kBf16 = "bf16 bit patterns (uint16, as float_to_bf16 gives)";
        std::vector<ref::CombineInput> inputs(r);
        for (size_t i = 0; i < r; ++i) {
          const std::string rank = "rank " + std::to_string(i) + " ";
          inputs[i].x = to_vector(integer_array<uint16_t>(x[i], rank + "x", kBf16));
          if (topk_weights) inputs[i].topk_weights = to_vector(real_array((*topk_weights)[i], rank + "topk_weights"));
          if (bias_0) inputs[i].bias_0 = to_vector(integer_array<uint16_t>((*bias_0)[i], rank + "bias_0", kBf16));
          if (bias_1) inputs[i].bias_1 = to_vector(integer_array<uint16_t>((*bias_1)[i], rank + "bias_1", kBf16));
        }
        ref::CombineOptions o;
        o.reduce_local_experts = reduce_local_experts;
        const auto outs = ref::combine(handles, hidden, inputs, o);
        py::list result;
        for (size_t s = 0; s < r; ++s) {
          const int t = handles[s].num_tokens;
          py::object w = outs[s].combined_topk_weights.empty()
                             ? py::object(py::none())
                             : py::object(rows_of(outs[s].combined_topk_weights, t, handles[s].num_topk));
          result.append(py::make_tuple(rows_of(outs[s].combined_x, t, hidden), w));
        }
        return result;
      },
      py::arg("handles"), py::arg("hidden"), py::arg("x"), py::arg("topk_weights") = py::none(),
      py::arg("bias_0") = py::none(), py::arg("bias_1") = py::none(), py::arg("reduce_local_experts") = false,
      "golden combine: per source rank (combined_x bf16 bits uint16 [T, H], combined_topk_weights or None)");
  bind_layer(m);
}

}  // namespace symmoe::py_bind
