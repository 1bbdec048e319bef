// The planner from Python: MoeShape, named shapes and the EP / grouped-GEMM / MegaMoE / hybrid (scale-out) plans,
// each an object with read-only attributes, str() = the plan's own to_string() (what `symmoe plan` prints) and
// validate().
#include "bindings.hpp"
#include "symmoe/layout/ep.hpp"
#include "symmoe/layout/mega.hpp"
#include "symmoe/plan.hpp"
#include "symmoe/plan_hybrid.hpp"

namespace symmoe::py_bind {
namespace {

layout::TokenDtype parse_token_dtype(const std::string& name) {
  if (name == "fp8") return layout::TokenDtype::kFp8E4m3;
  if (name == "bf16") return layout::TokenDtype::kBf16;
  SYMMOE_FAIL("python", "dispatch dtype must be 'fp8' or 'bf16', got '", name, "'");
}

template <typename Plan>
void def_printable(py::class_<Plan>& c) {
  c.def("__str__", &Plan::to_string).def("validate", &Plan::validate).def("__repr__", [](const Plan& p) {
    return "<" + std::string(py::str(py::type::of(py::cast(p)).attr("__name__"))) + " " + p.to_string() + ">";
  });
}

}  // namespace

void bind_plan(py::module_& m) {
  py::class_<MoeShape>(m, "MoeShape")
      .def(py::init([](int hidden, int intermediate, int num_experts, int num_topk, int num_ranks,
                       int num_max_tokens_per_rank) {
             MoeShape s{hidden, intermediate, num_experts, num_topk, num_ranks, num_max_tokens_per_rank};
             s.validate();
             return s;
           }),
           py::arg("hidden"), py::arg("intermediate"), py::arg("num_experts"), py::arg("num_topk"),
           py::arg("num_ranks") = 1, py::arg("num_max_tokens_per_rank") = 1)
      .def_readonly("hidden", &MoeShape::hidden)
      .def_readonly("intermediate", &MoeShape::intermediate)
      .def_readonly("num_experts", &MoeShape::num_experts)
      .def_readonly("num_topk", &MoeShape::num_topk)
      .def_readonly("num_ranks", &MoeShape::num_ranks)
      .def_readonly("num_max_tokens_per_rank", &MoeShape::num_max_tokens_per_rank)
      .def_property_readonly("num_local_experts", &MoeShape::num_local_experts)
      .def("validate", &MoeShape::validate)
      .def("__str__", &MoeShape::to_string)
      .def("__repr__", [](const MoeShape& s) { return "<MoeShape " + s.to_string() + ">"; });
  m.def(
      "named_shape",
      [](const std::string& name, int num_ranks, int num_max_tokens_per_rank) {
        MoeShape s = named_shape(name, num_ranks, num_max_tokens_per_rank);
        s.validate();
        return s;
      },
      py::arg("name"), py::arg("num_ranks"), py::arg("num_max_tokens_per_rank"),
      "a preset of include/symmoe/shape.hpp (flash, pro, v3, tiny, qwen3-30b-a3b, qwen3-235b-a22b, mixtral-8x7b) "
      "with the given ranks and max tokens per rank (validated)");

  py::class_<plan::EpPlan> ep(m, "EpPlan");
  ep.def_readonly("shape", &plan::EpPlan::shape)
      .def_property_readonly("dtype", [](const plan::EpPlan& p) { return layout::token_dtype_name(p.dtype); })
      .def_readonly("num_sms", &plan::EpPlan::num_sms)
      .def_readonly("dispatch_sms", &plan::EpPlan::dispatch_sms)
      .def_readonly("combine_sms", &plan::EpPlan::combine_sms)
      .def_readonly("dispatch_warps_per_cta", &plan::EpPlan::dispatch_warps_per_cta)
      .def_readonly("combine_warps_per_cta", &plan::EpPlan::combine_warps_per_cta)
      .def_readonly("buffer_bytes", &plan::EpPlan::buffer_bytes);
  def_printable(ep);

  py::class_<plan::GemmPlan> gemm(m, "GemmPlan");
  gemm.def_readonly("n", &plan::GemmPlan::n)
      .def_readonly("k", &plan::GemmPlan::k)
      .def_readonly("num_experts", &plan::GemmPlan::num_experts)
      .def_property_readonly("epilogue", [](const plan::GemmPlan& p) { return plan::gemm_epilogue_name(p.epilogue); })
      .def_readonly("block_m", &plan::GemmPlan::block_m)
      .def_readonly("block_n", &plan::GemmPlan::block_n)
      .def_readonly("block_k", &plan::GemmPlan::block_k)
      .def_readonly("cluster_size", &plan::GemmPlan::cluster_size)
      .def_readonly("num_stages", &plan::GemmPlan::num_stages)
      .def_readonly("smem_bytes", &plan::GemmPlan::smem_bytes)
      .def_readonly("num_sms", &plan::GemmPlan::num_sms)
      .def_readonly("num_threads", &plan::GemmPlan::num_threads);
  def_printable(gemm);

  py::class_<plan::MegaPlan> mega(m, "MegaPlan");
  mega.def_readonly("shape", &plan::MegaPlan::shape)
      .def_readonly("num_sms", &plan::MegaPlan::num_sms)
      .def_readonly("expected_tokens_per_expert", &plan::MegaPlan::expected_tokens_per_expert)
      .def_readonly("block_m", &plan::MegaPlan::block_m)
      .def_readonly("l1_block_n", &plan::MegaPlan::l1_block_n)
      .def_readonly("l2_block_n", &plan::MegaPlan::l2_block_n)
      .def_readonly("block_k", &plan::MegaPlan::block_k)
      .def_readonly("num_experts_per_wave", &plan::MegaPlan::num_experts_per_wave)
      .def_readonly("num_waves", &plan::MegaPlan::num_waves)
      .def_readonly("num_threads", &plan::MegaPlan::num_threads)
      .def_readonly("num_stages", &plan::MegaPlan::num_stages)
      .def_readonly("smem_bytes", &plan::MegaPlan::smem_bytes)
      .def_readonly("workspace_bytes", &plan::MegaPlan::workspace_bytes);
  def_printable(mega);

  // SYMMOE_* overrides apply, as in `symmoe plan`.
  m.def(
      "plan_ep",
      [](const MoeShape& shape, const std::string& dtype, int num_sms) {
        return plan::plan_ep(shape, parse_token_dtype(dtype), num_sms, plan::PlanOverrides::from_env());
      },
      py::arg("shape"), py::arg("dtype") = "fp8", py::arg("num_sms") = plan::hopper::kDefaultNumSms);
  m.def(
      "plan_grouped_gemm",
      [](double m_per_expert, int n, int k, int num_experts, int num_sms, const std::string& epilogue) {
        SYMMOE_CHECK(epilogue == "bf16" || epilogue == "swiglu_fp8", "python",
                     "epilogue must be 'bf16' or 'swiglu_fp8', got '", epilogue, "'");
        return plan::plan_grouped_gemm(m_per_expert, n, k, num_experts, num_sms,
                                       epilogue == "bf16" ? plan::GemmEpilogue::kBf16 : plan::GemmEpilogue::kSwigluFp8,
                                       plan::PlanOverrides::from_env());
      },
      py::arg("m_per_expert"), py::arg("n"), py::arg("k"), py::arg("num_experts"),
      py::arg("num_sms") = plan::hopper::kDefaultNumSms, py::arg("epilogue") = "bf16");
  m.def(
      "plan_mega_moe",
      [](const MoeShape& shape, int num_sms) {
        return plan::plan_mega_moe(shape, num_sms, plan::PlanOverrides::from_env());
      },
      py::arg("shape"), py::arg("num_sms") = plan::hopper::kDefaultNumSms);
  // Hybrid (scale-out) plan: N nodes of ranks / N GPUs. Shapes by name are not limited to 72 ranks here (EP2048).
  py::class_<plan::HybridPlan> hybrid(m, "HybridPlan");
  hybrid.def_property_readonly("num_ranks", [](const plan::HybridPlan& p) { return p.dims.num_ranks; })
      .def_property_readonly("num_nodes", [](const plan::HybridPlan& p) { return p.dims.num_nodes; })
      .def_property_readonly("ranks_per_node", [](const plan::HybridPlan& p) { return p.dims.ranks_per_node(); })
      .def_property_readonly("hidden", [](const plan::HybridPlan& p) { return p.dims.hidden; })
      .def_property_readonly("num_experts", [](const plan::HybridPlan& p) { return p.dims.num_experts; })
      .def_property_readonly("num_topk", [](const plan::HybridPlan& p) { return p.dims.num_topk; })
      .def_property_readonly("num_max_tokens_per_rank",
                             [](const plan::HybridPlan& p) { return p.dims.num_max_tokens_per_rank; })
      .def_property_readonly("node_limit", [](const plan::HybridPlan& p) { return p.dims.node_limit; })
      .def_property_readonly("dtype", [](const plan::HybridPlan& p) { return layout::token_dtype_name(p.dims.dtype); })
      .def_property_readonly("p_rank", [](const plan::HybridPlan& p) { return p.routing.p_rank; })
      .def_property_readonly("p_node", [](const plan::HybridPlan& p) { return p.routing.p_node; })
      .def_property_readonly("ranks_per_token", [](const plan::HybridPlan& p) { return p.routing.ranks_per_token; })
      .def_property_readonly("nodes_per_token", [](const plan::HybridPlan& p) { return p.routing.nodes_per_token; })
      .def_property_readonly("nic_gbps", [](const plan::HybridPlan& p) { return p.model.nic_gbps; })
      .def_property_readonly("nvlink_gbps", [](const plan::HybridPlan& p) { return p.model.nvlink_gbps; })
      .def_readonly("record_bytes", &plan::HybridPlan::record_bytes)
      .def_readonly("combine_row_bytes", &plan::HybridPlan::combine_row_bytes)
      .def_readonly("scaleout_send_bytes", &plan::HybridPlan::scaleout_send_bytes)
      .def_readonly("scaleout_recv_bytes", &plan::HybridPlan::scaleout_recv_bytes)
      .def_readonly("scaleup_recv_bytes", &plan::HybridPlan::scaleup_recv_bytes)
      .def_readonly("forward_combine_recv_bytes", &plan::HybridPlan::forward_combine_recv_bytes)
      .def_readonly("forward_reduce_bytes", &plan::HybridPlan::forward_reduce_bytes)
      .def_readonly("source_combine_recv_bytes", &plan::HybridPlan::source_combine_recv_bytes)
      .def_readonly("signal_bytes", &plan::HybridPlan::signal_bytes)
      .def_property_readonly("total_bytes", &plan::HybridPlan::total_bytes)
      .def_readonly("dispatch_rdma_bytes", &plan::HybridPlan::dispatch_rdma_bytes)
      .def_readonly("dispatch_nvlink_bytes", &plan::HybridPlan::dispatch_nvlink_bytes)
      .def_readonly("dispatch_direct_rdma_bytes", &plan::HybridPlan::dispatch_direct_rdma_bytes)
      .def_readonly("combine_nvlink_bytes", &plan::HybridPlan::combine_nvlink_bytes)
      .def_readonly("combine_rdma_bytes", &plan::HybridPlan::combine_rdma_bytes)
      .def_readonly("combine_reduced_rdma_bytes", &plan::HybridPlan::combine_reduced_rdma_bytes)
      .def_readonly("dispatch_us", &plan::HybridPlan::dispatch_us)
      .def_readonly("combine_us", &plan::HybridPlan::combine_us)
      .def_readonly("combine_reduced_us", &plan::HybridPlan::combine_reduced_us)
      .def_readonly("dispatch_logical_rdma_gbps", &plan::HybridPlan::dispatch_logical_rdma_gbps)
      .def_readonly("combine_logical_rdma_gbps", &plan::HybridPlan::combine_logical_rdma_gbps)
      .def_readonly("combine_reduced_logical_rdma_gbps", &plan::HybridPlan::combine_reduced_logical_rdma_gbps)
      .def(
          "sweep",
          [](const plan::HybridPlan& p, const std::vector<int>& tokens) {
            MoeShape s;
            s.hidden = p.dims.hidden, s.num_experts = p.dims.num_experts, s.num_topk = p.dims.num_topk;
            return plan::format_hybrid_sweep(s, tokens, p.dims.dtype, p.dims.node_limit, p.model);
          },
          py::arg("tokens") = std::vector<int>{128, 4096, 8192},
          "the EP16-EP256 table (8 GPUs per node) of this shape next to DeepEP's published numbers");
  def_printable(hybrid);
  m.def(
      "plan_hybrid",
      [](const std::string& name, int num_ranks, int tokens, int num_nodes, const std::string& dtype, int node_limit) {
        return plan::plan_hybrid(plan::HybridDims::from_shape(named_shape(name, num_ranks, tokens), num_nodes,
                                                              parse_token_dtype(dtype), node_limit));
      },
      py::arg("shape"), py::arg("num_ranks"), py::arg("tokens"), py::arg("num_nodes"), py::arg("dtype") = "fp8",
      py::arg("node_limit") = 0);
  m.def(
      "plan_hybrid",
      [](const MoeShape& shape, int num_nodes, const std::string& dtype, int node_limit) {
        return plan::plan_hybrid(plan::HybridDims::from_shape(shape, num_nodes, parse_token_dtype(dtype), node_limit));
      },
      py::arg("shape"), py::arg("num_nodes"), py::arg("dtype") = "fp8", py::arg("node_limit") = 0);

  m.def("expected_tokens_per_expert", &plan::expected_tokens_per_expert, py::arg("shape"), py::arg("tokens_per_rank"));
  m.attr("DEFAULT_NUM_SMS") = plan::hopper::kDefaultNumSms;
}

}  // namespace symmoe::py_bind
