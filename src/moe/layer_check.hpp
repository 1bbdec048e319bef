// The fused-vs-composed bitwise check, the one harness of `symmoe run`, `symmoe bench moe` and the GPU tests: each
// layer is called into poisoned y and the two outputs are compared bit for bit, with the first difference named.
// Why bitwise: both layers run the same GEMM core, epilogues and combine order (include/symmoe/mega_moe.hpp), so
// any differing bit is a wrong row, scale, weight or source.
// NOTES: a layer's y pointers are known after a call only (y = null: its own buffer), so forward_into_poisoned_y
// makes one call to learn them, poisons them (0xFF bytes: bf16 NaN) and makes a second call: a value the second
// call did not write cannot pass as written.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "symmoe/moe.hpp"
#include "symmoe/runtime.hpp"

namespace symmoe::moe {

// Each local rank's y (bf16 [args[i].num_tokens, hidden] at y[i]; Communicator::local_ranks() order), on the host.
std::vector<std::vector<uint16_t>> download_y(const Communicator& comm, const std::vector<const uint16_t*>& y,
                                              const std::vector<MoeForwardArgs>& args, int hidden);

// Fills each local rank's y with 0xFF bytes (bf16 NaN).
void poison_y(const Communicator& comm, const std::vector<const uint16_t*>& y, const std::vector<MoeForwardArgs>& args,
              int hidden);

// Where two layers' y first differ and how many values do.
struct BitwiseDiff {
  size_t num_values = 0, num_different = 0;
  int rank = -1;  // first difference: global rank, token, column, the two bf16 codes
  size_t token = 0, col = 0;
  uint16_t want = 0, got = 0;
  size_t num_rows_different = 0;  // (rank, token) rows with at least one difference
  int max_ulps = 0;               // largest |want - got| in bf16 steps (sign-magnitude codes; 65535 across signs/NaN)
  bool equal() const { return num_different == 0; }
  // "bitwise equal (N values)" or "first difference: rank r token t col c: <want_name> 0x.. (v) <got_name> 0x.. (v)
  // (n of N values differ in m rows, at most u bf16 steps)".
  std::string to_string(const std::string& want_name = "composed", const std::string& got_name = "fused") const;
};
BitwiseDiff compare_bitwise(const Communicator& comm, const std::vector<std::vector<uint16_t>>& want,
                            const std::vector<std::vector<uint16_t>>& got, int hidden);

// A layer's y of one collective call written into poisoned memory (see NOTES above).
struct LayerOutput {
  std::vector<const uint16_t*> ptrs;          // where the layer wrote (the caller's y, or its own buffer)
  std::vector<std::vector<uint16_t>> values;  // per local rank, bf16 [num_tokens, hidden]
};
template <typename Layer>  // ComposedMoe or MegaMoe: forward(args) -> y pointers; synchronize() raises its errors
LayerOutput forward_into_poisoned_y(const Communicator& comm, Layer& layer, const std::vector<MoeForwardArgs>& args,
                                    int hidden) {
  LayerOutput out;
  out.ptrs = layer.forward(args);
  layer.synchronize();
  poison_y(comm, out.ptrs, args, hidden);
  out.ptrs = layer.forward(args);
  layer.synchronize();
  out.values = download_y(comm, out.ptrs, args, hidden);
  return out;
}

// The harness: the reference layer (composed) and the layer under test (fused) on the same inputs, each into
// poisoned y (their own arguments: the fused layer may read inputs staged in its workspace), compared bitwise.
struct LayerComparison {
  LayerOutput reference, tested;
  BitwiseDiff diff;
};
template <typename Reference, typename Tested>
LayerComparison compare_layers_bitwise(const Communicator& comm, Reference& reference,
                                       const std::vector<MoeForwardArgs>& reference_args, Tested& tested,
                                       const std::vector<MoeForwardArgs>& tested_args, int hidden) {
  LayerComparison c;
  c.reference = forward_into_poisoned_y(comm, reference, reference_args, hidden);
  c.tested = forward_into_poisoned_y(comm, tested, tested_args, hidden);
  c.diff = compare_bitwise(comm, c.reference.values, c.tested.values, hidden);
  return c;
}

}  // namespace symmoe::moe
