// Shared fixtures of the GPU tests with FP4 weights (tests/gpu/test_moe_fp4.cu: composed layer; tests/gpu/
// test_mega_fp4.cu: fused layer): the FP4 experts (random host or synthetic), their FP4 store and composed layer,
// next to moe_fixture.hpp's Setup holding the FP8 store of the same experts folded (the kernel-faithful expectation:
// the FP8 layers on the E4M3 weights the FP4 kernels build in shared memory) and its composed layer.
// Included by exactly one test file per binary (anonymous namespace), after gpu/moe_fixture.hpp.
#pragma once

#include <algorithm>
#include <cstdio>
#include <future>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "gpu/moe_fixture.hpp"
#include "symmoe/moe.hpp"
#include "symmoe/moe_weights.hpp"
#include "symmoe/reference/fp4.hpp"
#include "symmoe/weight_transform_fp4.hpp"

namespace symmoe {
namespace {

// The FP8 side lives in Setup (its store holds the folded experts, its layer is the reference, host_weights feeds
// the golden model); the FP4 store and layer sit next to it on the same communicator.
struct Fp4Setup {
  std::unique_ptr<::symmoe::Setup> s;  // qualified: gtest has a private Test::Setup
  ref::ExpertWeightMapFp4 fp4_host;
  MoeWeightStore fp4_store;
  std::unique_ptr<ComposedMoe> fp4_layer;
};

template <typename T>
std::vector<T> download(int device, const T* src, size_t count) {
  std::vector<T> out(count);
  SYMMOE_CUDA_CHECK(cudaSetDevice(device));
  SYMMOE_CUDA_CHECK(cudaMemcpy(out.data(), src, count * sizeof(T), cudaMemcpyDeviceToHost));
  return out;
}

// synthetic: MoeWeightStore::synthetic_fp4 (the host regenerates every expert); else random FP4 experts
// (ref::make_random_expert_fp4) through from_host_fp4. The FP8 store: from_host of the folded experts.
// fp8_reference false (synthetic only; the model shapes): no host experts, no FP8 store and layer (Setup::layer
// stays null); the golden model gets the folded experts it needs from add_folded_fp4_experts.
// timeout_ms: the communicator's wait bound (-1: SYMMOE_TIMEOUT_MS, default 10 s).
std::unique_ptr<Fp4Setup> make_fp4_setup(const MoeShape& shape, bool synthetic, int alignment, float clamp,
                                         bool fp8_reference = true, int timeout_ms = 20000) {
  if (!fp8_reference && !synthetic) throw std::invalid_argument("make_fp4_setup: no FP8 reference needs synthetic");
  auto f = std::make_unique<Fp4Setup>();
  f->s = std::make_unique<::symmoe::Setup>();
  ::symmoe::Setup& s = *f->s;
  s.comm = Communicator::in_process(shape.num_ranks, timeout_ms);
  s.shape = shape;
  s.weight_seed = fresh_seed();
  s.synthetic = false;  // host_weights holds the folded FP4 experts (all, or add_folded_fp4_experts')
  s.clamp = clamp;
  for (const auto& p : s.comm->local_ranks()) s.devices.push_back(p.device);
  ComposedMoeOptions o;
  o.expert_alignment = alignment, o.clamp = clamp;
  if (!fp8_reference) {
    f->fp4_store = MoeWeightStore::synthetic_fp4(*s.comm, shape, s.weight_seed);
    f->fp4_layer = std::make_unique<ComposedMoe>(*s.comm, shape, f->fp4_store.views(), o);
    std::printf("  setup: %s, synthetic FP4 weights (seed %llu), alignment %d, clamp %g, no FP8 reference\n",
                shape.to_string().c_str(), (unsigned long long)s.weight_seed, alignment, clamp);
    return f;
  }
  for (int e = 0; e < shape.num_experts; ++e)
    f->fp4_host[e] = synthetic ? synthetic::host_expert_fp4(shape.hidden, shape.intermediate, e, s.weight_seed)
                               : ref::make_random_expert_fp4(shape.hidden, shape.intermediate, e, s.weight_seed);
  f->fp4_store = synthetic ? MoeWeightStore::synthetic_fp4(*s.comm, shape, s.weight_seed)
                           : MoeWeightStore::from_host_fp4(*s.comm, shape, f->fp4_host);
  s.host_weights = ref::fold_experts_fp4(f->fp4_host);
  s.store = MoeWeightStore::from_host(*s.comm, shape, s.host_weights);
  s.layer = std::make_unique<ComposedMoe>(*s.comm, shape, s.store.views(), o);
  f->fp4_layer = std::make_unique<ComposedMoe>(*s.comm, shape, f->fp4_store.views(), o);
  std::printf("  setup: %s, %s FP4 weights (seed %llu), alignment %d, clamp %g\n", shape.to_string().c_str(),
              synthetic ? "synthetic" : "random host", (unsigned long long)s.weight_seed, alignment, clamp);
  return f;
}

// Setup::host_weights gets the folded synthetic FP4 experts (synthetic::host_expert_fp4, ref::fold_expert_fp4)
// that the golden model's tokens of `in` (checked_tokens) route to, one host thread per missing expert.
void add_folded_fp4_experts(Fp4Setup& f, const Inputs& in) {
  ::symmoe::Setup& s = *f.s;
  const int K = s.shape.num_topk;
  std::vector<int> missing;
  for (const auto& h : in.host)
    for (const int t : checked_tokens(h.x.num_rows))
      for (int k = 0; k < K; ++k) {
        const int e = int(h.routing.topk_idx[size_t(t) * K + k]);
        if (e >= 0 && !s.host_weights.count(e) && std::find(missing.begin(), missing.end(), e) == missing.end())
          missing.push_back(e);
      }
  std::vector<std::future<ref::ExpertWeights>> made;
  for (const int e : missing)
    made.push_back(std::async(std::launch::async, [&s, e] {
      return ref::fold_expert_fp4(synthetic::host_expert_fp4(s.shape.hidden, s.shape.intermediate, e, s.weight_seed));
    }));
  for (size_t i = 0; i < missing.size(); ++i) s.host_weights[missing[i]] = made[i].get();
}

}  // namespace

// Expects `expr` to throw symmoe::Error whose message contains `word`.
#define EXPECT_ERROR_NAMES(expr, word)                                          \
  do {                                                                          \
    const std::string msg_ = test::error_of([&] { expr; });                     \
    EXPECT_NE(msg_.find(word), std::string::npos)                               \
        << "expected an error naming '" << (word) << "', got '" << msg_ << "'"; \
  } while (0)

}  // namespace symmoe
