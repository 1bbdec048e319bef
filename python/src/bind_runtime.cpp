// GPU-facing runtime from Python: the NCCL unique id (exchanged by the caller's torch.distributed group), the
// Communicator (in-process virtual ranks or one rank per process), EpBuffer and EpHandle. Device memory crosses as
// integer pointers here; python/symmoe/ep.py turns them into DLPack views and checks every tensor before a call.
// NOTES: calls that may block on the GPU (dispatch/combine with cpu_sync, synchronize) release the GIL.
#include <nccl.h>

#include "bindings.hpp"
#include "ep_one.hpp"
#include "symmoe/cuda_check.hpp"
#include "symmoe/ep.hpp"
#include "symmoe/layout/ep.hpp"
#include "symmoe/runtime.hpp"

namespace symmoe::py_bind {
namespace {

uintptr_t as_int(const void* p) { return reinterpret_cast<uintptr_t>(p); }
template <typename T>
T* as_ptr(uintptr_t v) {
  return reinterpret_cast<T*>(v);
}

EpDtype parse_ep_dtype(const std::string& name) {
  if (name == "bf16") return EpDtype::kBf16;
  if (name == "fp8") return EpDtype::kFp8E4m3;
  SYMMOE_FAIL("python", "EP dtype must be 'bf16' or 'fp8', got '", name, "'");
}
EpScales parse_ep_scales(const std::string& name) {
  if (name == "none") return EpScales::kNone;
  if (name == "fp32_per128") return EpScales::kFp32Per128;
  if (name == "ue8m0_per32") return EpScales::kUe8m0Per32;
  if (name == "ue8m0_per128") return EpScales::kUe8m0Per128;
  SYMMOE_FAIL("python", "EP scales must be none, fp32_per128, ue8m0_per32 or ue8m0_per128, got '", name, "'");
}

EpBufferConfig make_config(int num_max_tokens_per_rank, int hidden, int num_topk, int num_experts,
                           const std::string& dtype, const std::string& scales) {
  EpBufferConfig c;
  c.num_max_tokens_per_rank = num_max_tokens_per_rank, c.hidden = hidden, c.num_topk = num_topk;
  c.num_experts = num_experts, c.dtype = parse_ep_dtype(dtype), c.scales = parse_ep_scales(scales);
  return c;
}

void bind_handle(py::module_& m) {
  py::class_<EpHandle> h(m, "EpHandle", "device EPHandle of one local rank (DeepEP field names; pointers as ints)");
  h.def(py::init<>());
  def_handle_scalars(h);
  h.def_readonly("device", &EpHandle::device)
      .def_property_readonly("num_local_experts",
                             [](const EpHandle& h) { return h.num_ranks ? h.num_local_experts() : 0; })
      .def_property_readonly("ptrs", [](const EpHandle& h) {
        py::dict d;  // name -> device address of the metadata array (see ep.hpp for shapes)
        d["num_tokens_per_rank"] = as_int(h.num_tokens_per_rank);
        d["num_tokens_per_expert"] = as_int(h.num_tokens_per_expert);
        d["dst_buffer_slot_idx"] = as_int(h.dst_buffer_slot_idx);
        d["topk_idx"] = as_int(h.topk_idx);
        d["psum_num_recv_tokens_per_rank"] = as_int(h.psum_num_recv_tokens_per_rank);
        d["num_unaligned_recv_tokens_per_expert"] = as_int(h.num_unaligned_recv_tokens_per_expert);
        d["psum_num_recv_tokens_per_expert"] = as_int(h.psum_num_recv_tokens_per_expert);
        d["num_recv_tokens_per_expert"] = as_int(h.num_recv_tokens_per_expert);
        d["recv_src_metadata"] = as_int(h.recv_src_metadata);
        d["device_counts"] = as_int(h.device_counts);
        return d;
      });
}

void bind_communicator(py::module_& m) {
  py::class_<Communicator>(m, "Communicator")
      .def_static("in_process", &Communicator::in_process, py::arg("num_ranks"), py::arg("timeout_ms") = -1,
                  "num_ranks virtual ranks over the visible GPUs of this process")
      .def_static(
          "multi_process",
          [](int rank, int world_size, int local_rank, const std::string& unique_id_hex, int timeout_ms) {
            BootstrapConfig cfg;
            cfg.rank = rank, cfg.world_size = world_size, cfg.local_rank = local_rank;
            cfg.unique_id_hex = unique_id_hex;
            SYMMOE_CHECK(world_size >= 1 && rank >= 0 && rank < world_size, "python", "rank ", rank,
                         " outside [0, world_size = ", world_size, ")");
            SYMMOE_CHECK(unique_id_hex.size() == 2 * sizeof(ncclUniqueId::internal) &&
                             unique_id_hex.find_first_not_of("0123456789abcdefABCDEF") == std::string::npos,
                         "python", "unique_id_hex must be ", 2 * sizeof(ncclUniqueId::internal),
                         " hex digits (symmoe._C.nccl_unique_id_hex() on rank 0), got ", unique_id_hex.size(),
                         " characters");
            py::gil_scoped_release release;  // NCCL init waits for every peer
            return Communicator::multi_process(cfg, timeout_ms);
          },
          py::arg("rank"), py::arg("world_size"), py::arg("local_rank"), py::arg("unique_id_hex"),
          py::arg("timeout_ms") = -1, "this process is `rank`; every process passes the same unique id")
      .def_property_readonly("num_ranks", &Communicator::num_ranks)
      .def_property_readonly(
          "backend",
          [](const Communicator& c) { return c.backend() == Backend::kInProcess ? "in_process" : "multi_process"; })
      .def_property_readonly("local_ranks",
                             [](const Communicator& c) {
                               std::vector<py::dict> out;
                               for (const RankPlacement& p : c.local_ranks()) {
                                 py::dict d;
                                 d["rank"] = p.rank, d["device"] = p.device, d["num_sms"] = p.num_sms;
                                 out.push_back(d);
                               }
                               return out;
                             })
      .def(
          "stream", [](const Communicator& c, int rank) { return as_int(c.stream(rank)); }, py::arg("rank"))
      .def("host_barrier", &Communicator::host_barrier, py::call_guard<py::gil_scoped_release>())
      .def("synchronize", &Communicator::synchronize, py::call_guard<py::gil_scoped_release>())
      .def("reset_sync_state", &Communicator::reset_sync_state, py::call_guard<py::gil_scoped_release>());
}

// One local rank's dispatch arguments from a dict with keys num_tokens, x, x_scales, topk_idx, topk_weights, stream
// (integers: device addresses and the cudaStream_t; 0 = none / the communicator's stream).
EpDispatchArgs dispatch_args(const py::dict& d) {
  EpDispatchArgs a;
  a.num_tokens = d["num_tokens"].cast<int>();
  a.x = as_ptr<const void>(d["x"].cast<uintptr_t>());
  a.x_scales = as_ptr<const void>(d["x_scales"].cast<uintptr_t>());
  a.topk_idx = as_ptr<const int64_t>(d["topk_idx"].cast<uintptr_t>());
  a.topk_weights = as_ptr<const float>(d["topk_weights"].cast<uintptr_t>());
  a.stream = as_ptr<CUstream_st>(d["stream"].cast<uintptr_t>());
  return a;
}
EpCombineArgs combine_args(const py::dict& d) {
  EpCombineArgs a;
  a.x = as_ptr<const uint16_t>(d["x"].cast<uintptr_t>());
  a.topk_weights = as_ptr<const float>(d["topk_weights"].cast<uintptr_t>());
  a.bias_0 = as_ptr<const uint16_t>(d["bias_0"].cast<uintptr_t>());
  a.bias_1 = as_ptr<const uint16_t>(d["bias_1"].cast<uintptr_t>());
  a.stream = as_ptr<CUstream_st>(d["stream"].cast<uintptr_t>());
  return a;
}

// EpBuffer takes the handles as a vector; Python owns them one by one. Moves them in, runs `call` without the
// GIL, and moves them back (also when it throws), so the Python EpHandle objects stay the owners.
template <typename Call>
auto with_handles(const std::vector<EpHandle*>& handles, Call call) {
  std::vector<EpHandle> hs;
  for (EpHandle* h : handles) hs.push_back(std::move(*h));
  auto give_back = [&] {
    for (size_t i = 0; i < handles.size(); ++i) *handles[i] = std::move(hs[i]);
  };
  try {
    py::gil_scoped_release release;
    auto result = call(hs);
    give_back();
    return result;
  } catch (...) {
    give_back();
    throw;
  }
}

void bind_ep_buffer(py::module_& m) {
  py::class_<EpBuffer>(m, "EpBuffer")
      .def(py::init([](Communicator& comm, int num_max_tokens_per_rank, int hidden, int num_topk, int num_experts,
                       const std::string& dtype, const std::string& scales) {
             const EpBufferConfig c =
                 make_config(num_max_tokens_per_rank, hidden, num_topk, num_experts, dtype, scales);
             py::gil_scoped_release release;  // collective symmetric allocation
             return std::make_unique<EpBuffer>(comm, c);
           }),
           py::arg("comm"), py::arg("num_max_tokens_per_rank"), py::arg("hidden"), py::arg("num_topk"),
           py::arg("num_experts"), py::arg("dtype") = "bf16", py::arg("scales") = "none",
           py::keep_alive<1, 2>())  // the Communicator outlives the buffer
      .def_property_readonly("x_row_bytes", &EpBuffer::x_row_bytes)
      .def_property_readonly("scale_row_bytes", &EpBuffer::scale_row_bytes)
      .def(
          "dispatch",
          [](EpBuffer& b, const std::vector<py::dict>& args, const std::vector<EpHandle*>& handles, bool expand,
             int expert_alignment, bool zero_padding, bool cached, int num_sms, bool cpu_sync) {
            std::vector<EpDispatchArgs> a;
            for (const auto& d : args) a.push_back(dispatch_args(d));
            EpDispatchOptions o;
            o.expand = expand, o.expert_alignment = expert_alignment, o.zero_padding = zero_padding;
            o.cached = cached, o.num_sms = num_sms, o.cpu_sync = cpu_sync;
            const auto results = with_handles(handles, [&](std::vector<EpHandle>& hs) { return b.dispatch(a, o, hs); });
            std::vector<py::dict> out;
            for (const auto& r : results) {
              py::dict d;
              d["recv_x"] = as_int(r.recv_x), d["recv_x_scales"] = as_int(r.recv_scales);
              d["recv_topk_idx"] = as_int(r.recv_topk_idx), d["recv_topk_weights"] = as_int(r.recv_topk_weights);
              d["num_rows"] = r.num_rows, d["row_capacity"] = r.row_capacity;
              out.push_back(d);
            }
            return out;
          },
          py::arg("args"), py::arg("handles"), py::arg("expand") = false, py::arg("expert_alignment") = 1,
          py::arg("zero_padding") = true, py::arg("cached") = false, py::arg("num_sms") = 0, py::arg("cpu_sync") = true)
      .def(
          "combine",
          [](EpBuffer& b, const std::vector<py::dict>& args, const std::vector<EpHandle*>& handles,
             bool reduce_local_experts, int num_sms, bool cpu_sync) {
            std::vector<EpCombineArgs> a;
            for (const auto& d : args) a.push_back(combine_args(d));
            EpCombineOptions o;
            o.reduce_local_experts = reduce_local_experts, o.num_sms = num_sms, o.cpu_sync = cpu_sync;
            const auto results = with_handles(handles, [&](std::vector<EpHandle>& hs) { return b.combine(a, o, hs); });
            std::vector<py::dict> out;
            for (const auto& r : results) {
              py::dict d;
              d["combined_x"] = as_int(r.combined_x), d["combined_topk_weights"] = as_int(r.combined_topk_weights);
              out.push_back(d);
            }
            return out;
          },
          py::arg("args"), py::arg("handles"), py::arg("reduce_local_experts") = false, py::arg("num_sms") = 0,
          py::arg("cpu_sync") = true)
      // One local rank (the ElasticBuffer path: one rank per process): plain arguments and a tuple back, no dicts,
      // to keep the host cost of a Python call small.
      .def(
          "dispatch_one",
          [](EpBuffer& b, int num_tokens, uintptr_t x, uintptr_t x_scales, uintptr_t topk_idx, uintptr_t topk_weights,
             uintptr_t stream, EpHandle& handle, bool expand, int expert_alignment, bool zero_padding, bool cached,
             int num_sms, bool cpu_sync, uintptr_t recv_x_out, uintptr_t recv_scales_out, uintptr_t recv_topk_idx_out,
             uintptr_t recv_topk_weights_out, int out_rows) {
            ep_capi::DispatchCall c{};
            c.num_tokens = num_tokens, c.x = x, c.x_scales = x_scales, c.topk_idx = topk_idx;
            c.topk_weights = topk_weights, c.stream = stream, c.expand = expand, c.expert_alignment = expert_alignment;
            c.zero_padding = zero_padding, c.cached = cached, c.num_sms = num_sms, c.cpu_sync = cpu_sync;
            c.recv_x_out = recv_x_out, c.recv_scales_out = recv_scales_out, c.recv_topk_idx_out = recv_topk_idx_out;
            c.recv_topk_weights_out = recv_topk_weights_out, c.out_rows = out_rows;
            const EpDispatchResult r = dispatch_one(b, handle, c);
            return py::make_tuple(as_int(r.recv_x), as_int(r.recv_scales), as_int(r.recv_topk_idx),
                                  as_int(r.recv_topk_weights), r.num_rows, r.row_capacity);
          },
          py::arg("num_tokens"), py::arg("x"), py::arg("x_scales"), py::arg("topk_idx"), py::arg("topk_weights"),
          py::arg("stream"), py::arg("handle"), py::arg("expand"), py::arg("expert_alignment"), py::arg("zero_padding"),
          py::arg("cached"), py::arg("num_sms"), py::arg("cpu_sync"), py::arg("recv_x_out") = 0,
          py::arg("recv_scales_out") = 0, py::arg("recv_topk_idx_out") = 0, py::arg("recv_topk_weights_out") = 0,
          py::arg("out_rows") = 0,
          "-> (recv_x, recv_x_scales, recv_topk_idx, recv_topk_weights addresses, num_rows, row_capacity); outputs "
          "go to the *_out addresses (caller-owned, out_rows >= row_capacity rows) where given")
      .def("row_capacity", &EpBuffer::row_capacity, py::arg("expand"), py::arg("expert_alignment"),
           "rows of every dispatch output of this mode (the worst case)")
      .def(
          "combine_one",
          [](EpBuffer& b, uintptr_t x, uintptr_t topk_weights, uintptr_t bias_0, uintptr_t bias_1, uintptr_t stream,
             EpHandle& handle, bool reduce_local_experts, int num_sms, bool cpu_sync, uintptr_t combined_x_out,
             uintptr_t combined_topk_weights_out) {
            ep_capi::CombineCall c{};
            c.x = x, c.topk_weights = topk_weights, c.bias_0 = bias_0, c.bias_1 = bias_1, c.stream = stream;
            c.reduce_local_experts = reduce_local_experts, c.num_sms = num_sms, c.cpu_sync = cpu_sync;
            c.combined_x_out = combined_x_out, c.combined_topk_weights_out = combined_topk_weights_out;
            const EpCombineResult r = combine_one(b, handle, c);
            return py::make_tuple(as_int(r.combined_x), as_int(r.combined_topk_weights));
          },
          py::arg("x"), py::arg("topk_weights"), py::arg("bias_0"), py::arg("bias_1"), py::arg("stream"),
          py::arg("handle"), py::arg("reduce_local_experts"), py::arg("num_sms"), py::arg("cpu_sync"),
          py::arg("combined_x_out") = 0, py::arg("combined_topk_weights_out") = 0,
          "-> (combined_x, combined_topk_weights addresses; 0 when no topk_weights were given). The outputs go to "
          "combined_x_out / combined_topk_weights_out when given (caller-owned), else to the buffer's memory")
      .def("synchronize", &EpBuffer::synchronize, py::call_guard<py::gil_scoped_release>());
}

// Stream ordering and raw device copies for python/symmoe/ep.py (its communication stream, and outputs copied
// into tensors the caller owns). One event per object, reused: cudaStreamWaitEvent captures the event's state at
// the call, so the event may be recorded again at once.
class StreamOrder {
 public:
  explicit StreamOrder(int device) : device_(device) {
    SYMMOE_CUDA_CHECK(cudaSetDevice(device));
    SYMMOE_CUDA_CHECK(cudaEventCreateWithFlags(&event_, cudaEventDisableTiming));
  }
  ~StreamOrder() {
    cudaSetDevice(device_);
    cudaEventDestroy(event_);
  }
  StreamOrder(const StreamOrder&) = delete;
  StreamOrder& operator=(const StreamOrder&) = delete;
  // Work enqueued on `later` from now on waits for everything enqueued on `earlier` so far.
  void order(uintptr_t later, uintptr_t earlier) {
    if (later == earlier) return;
    SYMMOE_CUDA_CHECK(cudaEventRecord(event_, as_ptr<CUstream_st>(earlier)));
    SYMMOE_CUDA_CHECK(cudaStreamWaitEvent(as_ptr<CUstream_st>(later), event_, 0));
  }

 private:
  int device_ = 0;
  cudaEvent_t event_ = nullptr;
};

void bind_streams(py::module_& m) {
  py::class_<StreamOrder>(m, "StreamOrder", "orders one CUDA stream after another with a reusable event")
      .def(py::init<int>(), py::arg("device"))
      .def("order", &StreamOrder::order, py::arg("later"), py::arg("earlier"),
           "work enqueued on `later` from now on waits for the work enqueued on `earlier` so far (handles as ints)");
  m.def(
      "memcpy_async",
      [](uintptr_t dst, uintptr_t src, size_t num_bytes, uintptr_t stream) {
        if (num_bytes == 0) return;
        SYMMOE_CHECK(dst != 0 && src != 0, "python", "memcpy_async: null address (dst ", dst, ", src ", src, ")");
        SYMMOE_CUDA_CHECK(cudaMemcpyAsync(as_ptr<void>(dst), as_ptr<const void>(src), num_bytes,
                                          cudaMemcpyDeviceToDevice, as_ptr<CUstream_st>(stream)));
      },
      py::arg("dst"), py::arg("src"), py::arg("num_bytes"), py::arg("stream"),
      "device-to-device copy of num_bytes on `stream` (addresses and stream handle as ints)");
}

}  // namespace

EpDispatchResult dispatch_one(EpBuffer& buffer, EpHandle& handle, const ep_capi::DispatchCall& c) {
  EpDispatchArgs a;
  a.num_tokens = c.num_tokens, a.x = as_ptr<const void>(c.x), a.x_scales = as_ptr<const void>(c.x_scales);
  a.topk_idx = as_ptr<const int64_t>(c.topk_idx), a.topk_weights = as_ptr<const float>(c.topk_weights);
  a.stream = as_ptr<CUstream_st>(c.stream);
  a.recv_x_out = as_ptr<void>(c.recv_x_out), a.recv_scales_out = as_ptr<void>(c.recv_scales_out);
  a.recv_topk_idx_out = as_ptr<int64_t>(c.recv_topk_idx_out);
  a.recv_topk_weights_out = as_ptr<float>(c.recv_topk_weights_out), a.out_rows = c.out_rows;
  EpDispatchOptions o;
  o.expand = c.expand != 0, o.expert_alignment = c.expert_alignment, o.zero_padding = c.zero_padding != 0;
  o.cached = c.cached != 0, o.num_sms = c.num_sms, o.cpu_sync = c.cpu_sync != 0;
  return with_handles({&handle}, [&](std::vector<EpHandle>& hs) { return buffer.dispatch({a}, o, hs); })[0];
}

EpCombineResult combine_one(EpBuffer& buffer, EpHandle& handle, const ep_capi::CombineCall& c) {
  EpCombineArgs a;
  a.x = as_ptr<const uint16_t>(c.x), a.topk_weights = as_ptr<const float>(c.topk_weights);
  a.bias_0 = as_ptr<const uint16_t>(c.bias_0), a.bias_1 = as_ptr<const uint16_t>(c.bias_1);
  a.stream = as_ptr<CUstream_st>(c.stream);
  a.combined_x_out = as_ptr<uint16_t>(c.combined_x_out);
  a.combined_topk_weights_out = as_ptr<float>(c.combined_topk_weights_out);
  EpCombineOptions o;
  o.reduce_local_experts = c.reduce_local_experts != 0, o.num_sms = c.num_sms, o.cpu_sync = c.cpu_sync != 0;
  return with_handles({&handle}, [&](std::vector<EpHandle>& hs) { return buffer.combine({a}, o, hs); })[0];
}

void bind_runtime(py::module_& m) {
  m.def("nccl_unique_id_hex", &new_unique_id_hex,
        "a fresh NCCL unique id as hex (rank 0 makes it; the group shares it)");
  m.def(
      "ep_buffer_size_hint",
      [](int num_ranks, int num_max_tokens_per_rank, int hidden, int num_topk, int num_experts,
         const std::string& dtype, const std::string& scales) {
        const EpBufferConfig c = make_config(num_max_tokens_per_rank, hidden, num_topk, num_experts, dtype, scales);
        c.validate(num_ranks);
        layout::EpDims d;
        d.num_ranks = num_ranks, d.num_experts = num_experts, d.num_topk = num_topk, d.hidden = hidden;
        d.num_max_tokens_per_rank = num_max_tokens_per_rank;
        d.dtype = c.dtype == EpDtype::kBf16 ? layout::TokenDtype::kBf16 : layout::TokenDtype::kFp8E4m3;
        d.scale_row_bytes = ep_scale_row_bytes(c.scales, hidden);
        return layout::EpLayout(d).num_bytes();
      },
      py::arg("num_ranks"), py::arg("num_max_tokens_per_rank"), py::arg("hidden"), py::arg("num_topk"),
      py::arg("num_experts"), py::arg("dtype") = "bf16", py::arg("scales") = "none",
      "bytes of one rank's symmetric EP buffer (layout::EpLayout); the EpBuffer also allocates small workspaces");
  m.def(
      "ep_validate_config",
      [](int num_ranks, int num_max_tokens_per_rank, int hidden, int num_topk, int num_experts,
         const std::string& dtype, const std::string& scales) {
        make_config(num_max_tokens_per_rank, hidden, num_topk, num_experts, dtype, scales).validate(num_ranks);
      },
      py::arg("num_ranks"), py::arg("num_max_tokens_per_rank"), py::arg("hidden"), py::arg("num_topk"),
      py::arg("num_experts"), py::arg("dtype") = "bf16", py::arg("scales") = "none",
      "EpBufferConfig::validate: raises symmoe._C.Error naming the bad field (no GPU needed)");
  m.def(
      "ep_scale_row_bytes",
      [](const std::string& scales, int hidden) { return ep_scale_row_bytes(parse_ep_scales(scales), hidden); },
      py::arg("scales"), py::arg("hidden"));
  bind_handle(m);
  bind_communicator(m);
  bind_ep_buffer(m);
  bind_streams(m);
}

}  // namespace symmoe::py_bind
