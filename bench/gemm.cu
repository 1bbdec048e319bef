// `symmoe bench gemm`: the SM90 FP8 grouped GEMM vs cuBLASLt (FP8 with 128-block scaling: activations
// VEC128_32F, weights BLK128x128_32F) in the same run. cuBLASLt runs one matmul per expert in a loop (grouped
// shapes) or one dense GEMM (one-group shapes); a row count it has no algorithm for (Flash's 386 per expert) is timed
// on the segment's padded rows (JSON baseline_rows). Ours, the --alt variants and cuBLASLt are timed round-robin.
// NOTES: libcublasLt.so.13 is loaded with dlopen at run time (its header is used for types only), so the CLI
// starts on machines without cuBLASLt or a GPU; without it the baseline columns are 0 and say so.
// Metrics (docs/design.md §10.2): tflops = 2 * rows * n * k / t over the experts' valid rows; weight_gbps =
// bytes of the touched experts' weights in the row's format / t (FP8: k per weight row; FP4, --weights fp4: k/2 packed
// + k/32 scale codes). Each format is its own row (JSON field weights), FP8 and FP4 of a case one after the other.
#include <cublasLt.h>
#include <cuda_runtime.h>
#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "bench.hpp"
#include "symmoe/cuda_check.hpp"
#include "symmoe/gemm.hpp"

namespace symmoe::bench {
namespace {

// Deterministic pseudo-random e4m3 codes (NaN codes 0x7f/0xff avoided), so the tensor cores see realistic bits.
__global__ void fill_e4m3(uint8_t* p, size_t n, uint32_t seed) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    uint32_t h = uint32_t(i) * 2654435761u ^ seed;
    h ^= h >> 15, h *= 2246822519u, h ^= h >> 13;
    uint8_t c = uint8_t(h);
    if ((c & 0x7f) == 0x7f) c ^= 1;
    p[i] = c;
  }
}
__global__ void fill_value(float* p, size_t n, float v) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) p[i] = v;
}

template <typename T>
struct Buffer {
  T* ptr = nullptr;
  explicit Buffer(size_t n) { SYMMOE_CUDA_CHECK(cudaMalloc(&ptr, std::max<size_t>(n, 1) * sizeof(T))); }
  ~Buffer() { cudaFree(ptr); }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
};

// ---- cuBLASLt loaded at run time ----
struct CublasLt {
  void* lib = nullptr;
  decltype(&cublasLtCreate) create = nullptr;
  decltype(&cublasLtMatmulDescCreate) desc_create = nullptr;
  decltype(&cublasLtMatmulDescSetAttribute) desc_set = nullptr;
  decltype(&cublasLtMatrixLayoutCreate) layout_create = nullptr;
  decltype(&cublasLtMatmulPreferenceCreate) pref_create = nullptr;
  decltype(&cublasLtMatmulPreferenceSetAttribute) pref_set = nullptr;
  decltype(&cublasLtMatmulAlgoGetHeuristic) heuristic = nullptr;
  decltype(&cublasLtMatmul) matmul = nullptr;
  cublasLtHandle_t handle = nullptr;
  std::string error;

  CublasLt() {
    lib = dlopen("libcublasLt.so.13", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
      error = std::string("dlopen(libcublasLt.so.13) failed: ") + dlerror();
      return;
    }
    bool ok = load(create, "cublasLtCreate") && load(desc_create, "cublasLtMatmulDescCreate") &&
              load(desc_set, "cublasLtMatmulDescSetAttribute") && load(layout_create, "cublasLtMatrixLayoutCreate") &&
              load(pref_create, "cublasLtMatmulPreferenceCreate") &&
              load(pref_set, "cublasLtMatmulPreferenceSetAttribute") &&
              load(heuristic, "cublasLtMatmulAlgoGetHeuristic") && load(matmul, "cublasLtMatmul");
    if (ok && create(&handle) != CUBLAS_STATUS_SUCCESS) error = "cublasLtCreate failed";
  }
  template <typename F>
  bool load(F& f, const char* name) {
    f = reinterpret_cast<F>(dlsym(lib, name));
    if (!f) error = std::string("dlsym(") + name + ") failed";
    return f != nullptr;
  }
  bool ok() const { return error.empty(); }
};

#define LT_CHECK(call)                                                                                \
  do {                                                                                                \
    const cublasStatus_t s_ = (call);                                                                 \
    SYMMOE_CHECK(s_ == CUBLAS_STATUS_SUCCESS, "bench", #call, " failed with cublasStatus ", int(s_)); \
  } while (0)

// One FP8 block-scaled matmul of X[tokens, k] and W[n, k] in cuBLASLt's column-major terms, activations as A
// (VEC128_32F: the scale-mode pair cuBLASLt supports is A 1x128, B 128x128): m = tokens, n = n, "TN".
// D comes out as [n, tokens] row major (transposed vs ours): same FLOPs and bytes, only the timing is used.
struct LtGemm {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t la = nullptr, lb = nullptr, ld = nullptr;
  cublasLtMatmulAlgo_t algo{};
  bool ok = false;
  cublasStatus_t status = CUBLAS_STATUS_SUCCESS;
  // The scale pointers are set before the heuristic query (block-scaled algorithms check them).
  LtGemm(CublasLt& lt, int n, int tokens, int k, size_t workspace, const float* sx, const float* sw) {
    LT_CHECK(lt.desc_create(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    const cublasOperation_t opt = CUBLAS_OP_T, opn = CUBLAS_OP_N;
    LT_CHECK(lt.desc_set(desc, CUBLASLT_MATMUL_DESC_TRANSA, &opt, sizeof opt));
    LT_CHECK(lt.desc_set(desc, CUBLASLT_MATMUL_DESC_TRANSB, &opn, sizeof opn));
    const int32_t mode_x = CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F,
                  mode_w = CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F;
    LT_CHECK(lt.desc_set(desc, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &mode_x, sizeof mode_x));
    LT_CHECK(lt.desc_set(desc, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &mode_w, sizeof mode_w));
    LT_CHECK(lt.desc_set(desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &sx, sizeof sx));
    LT_CHECK(lt.desc_set(desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &sw, sizeof sw));
    LT_CHECK(lt.layout_create(&la, CUDA_R_8F_E4M3, k, tokens, k));
    LT_CHECK(lt.layout_create(&lb, CUDA_R_8F_E4M3, k, n, k));
    LT_CHECK(lt.layout_create(&ld, CUDA_R_16BF, tokens, n, tokens));
    cublasLtMatmulPreference_t pref;
    LT_CHECK(lt.pref_create(&pref));
    LT_CHECK(lt.pref_set(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace, sizeof workspace));
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    status = lt.heuristic(lt.handle, desc, la, lb, ld, ld, pref, 1, &result, &found);
    ok = status == CUBLAS_STATUS_SUCCESS && found > 0;
    algo = result.algo;
  }
  void run(CublasLt& lt, const uint8_t* w, const float* sw, const uint8_t* x, const float* sx, uint16_t* d,
           void* workspace, size_t workspace_bytes, cudaStream_t stream) {
    const float alpha = 1.f, beta = 0.f;
    LT_CHECK(lt.desc_set(desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &sx, sizeof sx));
    LT_CHECK(lt.desc_set(desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &sw, sizeof sw));
    LT_CHECK(lt.matmul(lt.handle, desc, &alpha, x, la, w, lb, &beta, d, ld, d, ld, &algo, workspace, workspace_bytes,
                       stream));
  }
};

// Median time of each function, timed round-robin (each round launches every function once), so all of them see
// the same clock and thermal state. NOTES: why: timed one after the other, an identical kernel measured 16-18%
// slower as the second of two variants on the compute-bound shapes (docs/notes/gemm.md), as the GPU lowers its
// clocks under sustained FP8 load; that biased every variant and baseline ratio.
std::vector<double> interleaved_median_us(cudaStream_t stream, const std::vector<std::function<void()>>& fns,
                                          int warmup, int reps) {
  const size_t n = fns.size();
  for (int i = 0; i < warmup; ++i)
    for (const auto& fn : fns) fn();
  std::vector<cudaEvent_t> events(2 * n * reps);
  for (auto& e : events) SYMMOE_CUDA_CHECK(cudaEventCreate(&e));
  for (int r = 0; r < reps; ++r)
    for (size_t f = 0; f < n; ++f) {
      SYMMOE_CUDA_CHECK(cudaEventRecord(events[2 * (r * n + f)], stream));
      fns[f]();
      SYMMOE_CUDA_CHECK(cudaEventRecord(events[2 * (r * n + f) + 1], stream));
    }
  SYMMOE_CUDA_CHECK(cudaStreamSynchronize(stream));
  std::vector<double> medians(n);
  std::vector<float> ms(reps);
  for (size_t f = 0; f < n; ++f) {
    for (int r = 0; r < reps; ++r)
      SYMMOE_CUDA_CHECK(cudaEventElapsedTime(&ms[r], events[2 * (r * n + f)], events[2 * (r * n + f) + 1]));
    std::nth_element(ms.begin(), ms.begin() + reps / 2, ms.end());
    medians[f] = ms[reps / 2] * 1000.0;
  }
  for (auto& e : events) SYMMOE_CUDA_CHECK(cudaEventDestroy(e));
  return medians;
}

// UTC wall time "HH:MM:SS.mmm" (to line solo phases up with an nvidia-smi log).
std::string utc_now() {
  const auto now = std::chrono::system_clock::now();
  const std::time_t t = std::chrono::system_clock::to_time_t(now);
  const int ms = int(std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::snprintf(buf, sizeof buf, "%02d:%02d:%02d.%03d", tm.tm_hour, tm.tm_min, tm.tm_sec, ms);
  return buf;
}

// Runs fn back to back, alone on the GPU, for about `ms` milliseconds; returns the mean time per call (us).
// NOTES: why: round-robin timing shares one clock between ours and cuBLASLt; run alone, each settles at its own
// clock under the power cap, which an nvidia-smi log over the printed UTC window shows (clock, watts per TFLOPS).
double solo_mean_us(cudaStream_t stream, const std::function<void()>& fn, double ms, std::string& begin_utc,
                    std::string& end_utc) {
  cudaEvent_t start, stop;
  SYMMOE_CUDA_CHECK(cudaEventCreate(&start));
  SYMMOE_CUDA_CHECK(cudaEventCreate(&stop));
  SYMMOE_CUDA_CHECK(cudaStreamSynchronize(stream));
  begin_utc = utc_now();
  SYMMOE_CUDA_CHECK(cudaEventRecord(start, stream));
  int calls = 0;
  float elapsed = 0.f;
  while (elapsed < ms) {
    for (int i = 0; i < 10; ++i) fn();
    calls += 10;
    SYMMOE_CUDA_CHECK(cudaEventRecord(stop, stream));
    SYMMOE_CUDA_CHECK(cudaEventSynchronize(stop));
    SYMMOE_CUDA_CHECK(cudaEventElapsedTime(&elapsed, start, stop));
  }
  end_utc = utc_now();
  SYMMOE_CUDA_CHECK(cudaEventDestroy(start));
  SYMMOE_CUDA_CHECK(cudaEventDestroy(stop));
  return elapsed * 1000.0 / calls;
}

struct Case {
  std::string name, op;  // op: contiguous | masked | l1
  int experts, tokens, n, k;
  // A's scale. NOTES: e4m3 codes drawn uniformly have E[a^2] ~ 1e4, so with B's 1/256 an output element over
  // k = 7168 has std ~50 at 1/64; SwiGLU then sees gates below -87 (expf overflows, the IEEE division takes its
  // slow path in most warps). l1_swiglu uses 1/1024 (gate std ~3, as in a trained model); l1_swiglu_wide keeps
  // 1/64 to show the data dependence.
  float act_scale = 1.f / 64;
};

// One comparison variant of --alt (planner pins of compiled kernels): "block_n=128,no_tile_buffer". A row (case and
// weight format) whose kernels the pins match none of (e.g. one_batch with FP4 weights or the SwiGLU epilogue) runs
// without that variant: its column shows "-", the JSON line its alt<i>_error.
struct AltVariant {
  std::string spec;
  gemm::LaunchOptions opt;
};
AltVariant parse_alt(const std::string& spec, const gemm::LaunchOptions& base) {
  AltVariant v{spec, base};
  size_t pos = 0;
  while (pos <= spec.size()) {
    const size_t end = std::min(spec.find(',', pos), spec.size());
    const std::string item = spec.substr(pos, end - pos);
    const size_t eq = item.find('=');
    const std::string key = item.substr(0, eq);
    const int value = eq == std::string::npos ? 0 : std::stoi(item.substr(eq + 1));
    if (key == "block_n")
      v.opt.block_n = value;
    else if (key == "block_m")
      v.opt.block_m = value;
    else if (key == "tile_buffer")
      v.opt.tile_buffer = 1;
    else if (key == "no_tile_buffer")
      v.opt.tile_buffer = -1;
    else if (key == "cluster")
      v.opt.cluster_size = value;
    else if (key == "one_batch")
      v.opt.core = 2;
    else if (key == "two_halves")
      v.opt.core = 1;
    else if (key == "swap_ab")
      v.opt.core = 3;
    else
      SYMMOE_FAIL("bench", "--alt: unknown item '", item, "' in '", spec,
                  "' (block_n=N, block_m=N, cluster=N, tile_buffer, no_tile_buffer, one_batch, two_halves, swap_ab)");
    pos = end + 1;
  }
  return v;
}

// The --cases names, in run order.
const std::vector<std::string> kCaseNames = {
    "dense_l1",    "dense_l2", "l1",       "l1_swiglu",      "l1_swiglu_wide", "l2",
    "e128",        "flash_l1", "flash_l2", "flash_layer_l1", "flash_layer_l2", "v3_layer_l1",
    "v3_layer_l2", "decode"};

std::string case_name_list() {
  std::string list;
  for (const std::string& name : kCaseNames) list += name + ", ";
  return list + "all";
}

void declare_gemm_args(cli::Args& args) {
  args.option("cases", "all", "comma list of: " + case_name_list())
      .option("decode-tokens", "1,8,16,64", "tokens per expert of the masked decode cases")
      .option("reps", "30", "timed repetitions (median)")
      .int_range(1, 100000)
      .option("k", "0", "override k of every case (0: the case's own)")
      .option("n", "0", "override n of every case (0: the case's own)")
      .option("out", "bench/results", "directory of the JSON-lines result file")
      .option("block-m", "0", "force BLOCK_M 64 or 128 (0: planner)")
      .option("block-n", "0", "force BLOCK_N 128 or 256 (0: planner)")
      .option("tile-buffer", "0", "1: whole-slice epilogue buffer kernel, -1: not, 0: planner")
      .option("solo-ms", "0",
              "then run ours and cuBLASLt each alone for this many ms (UTC window printed, for "
              "an nvidia-smi clock/power log)")
      .option("alt", "",
              "';'-separated variants timed in the same run, e.g. 'block_n=128;no_tile_buffer' (items: "
              "block_n=N, block_m=N, cluster=N, tile_buffer, no_tile_buffer, one_batch, two_halves, swap_ab); "
              "columns alt/ours = variant time / ours, '-' where the pins match no kernel of the row")
      .option("variant", "default", "name of this variant in the JSON lines (field 'variant')")
      .option("weights", "fp8",
              "comma list of weight formats, one row each per case in the same run: fp8, fp4 (E2M1 "
              "packed two per byte + UE8M0 codes per 32, upconverted in the kernel; JSON field "
              "'weights'; w GB/s counts the format's bytes: fp4 = k/2 + k/32 per weight row)")
      .flag("no-baseline", "skip cuBLASLt");
}

// The --cases selection (with the --k / --n overrides applied).
std::vector<Case> selected_cases(const cli::Args& args) {
  const std::vector<std::string> wanted = args.str_list("cases");
  for (const std::string& w : wanted)
    SYMMOE_CHECK(w == "all" || std::find(kCaseNames.begin(), kCaseNames.end(), w) != kCaseNames.end(), "bench",
                 "--cases: unknown case '", w, "' (", case_name_list(), ")");
  auto want = [&](const std::string& c) {
    return std::find(wanted.begin(), wanted.end(), "all") != wanted.end() ||
           std::find(wanted.begin(), wanted.end(), c) != wanted.end();
  };
  std::vector<Case> cases;
  if (want("dense_l1")) cases.push_back({"dense_l1", "contiguous", 1, 8192, 4096, 7168});
  if (want("dense_l2")) cases.push_back({"dense_l2", "contiguous", 1, 8192, 7168, 2048});
  if (want("l1")) cases.push_back({"l1", "contiguous", 32, 1536, 4096, 7168});
  if (want("l1_swiglu")) cases.push_back({"l1_swiglu", "l1", 32, 1536, 4096, 7168, 1.f / 1024});
  if (want("l1_swiglu_wide")) cases.push_back({"l1_swiglu_wide", "l1", 32, 1536, 4096, 7168, 1.f / 64});
  if (want("l2")) cases.push_back({"l2", "contiguous", 32, 1536, 7168, 2048});
  if (want("e128")) cases.push_back({"e128", "contiguous", 128, 384, 4096, 4096});
  // Flash at 8192 tokens per rank on 2 ranks: 128 local experts x ~386 rows (4 m-blocks of 128, the last with 2 rows).
  if (want("flash_l1")) cases.push_back({"flash_l1", "l1", 128, 386, 4096, 4096, 1.f / 1024});
  if (want("flash_l2")) cases.push_back({"flash_l2", "contiguous", 128, 386, 4096, 2048});
  // One H200 running a whole layer at 8192 tokens: 256 experts with 8192 x top-k / 256 rows each (Flash top-6: 192,
  // V3 top-8: 256), each segment padded to a multiple of 128 rows, 256 here (the layout DeepEP + DeepGEMM users
  // get). Plain BF16-output GEMMs, comparable with DeepGEMM's kernel; the largest (v3_layer_l1) holds 7.5 GB of
  // weights and 0.5 GB each of A and D.
  if (want("flash_layer_l1")) cases.push_back({"flash_layer_l1", "contiguous", 256, 192, 4096, 4096});
  if (want("flash_layer_l2")) cases.push_back({"flash_layer_l2", "contiguous", 256, 192, 4096, 2048});
  if (want("v3_layer_l1")) cases.push_back({"v3_layer_l1", "contiguous", 256, 256, 4096, 7168});
  if (want("v3_layer_l2")) cases.push_back({"v3_layer_l2", "contiguous", 256, 256, 7168, 2048});
  if (want("decode"))
    for (int t : args.int_list("decode-tokens")) cases.push_back({"decode", "masked", 128, t, 4096, 7168});
  for (Case& c : cases) {
    if (args.integer("k") > 0) c.k = args.integer("k");
    if (args.integer("n") > 0) c.n = args.integer("n");
  }
  return cases;
}

// The planner pins of --block-m / --block-n / --tile-buffer.
gemm::LaunchOptions pinned_options(const cli::Args& args) {
  gemm::LaunchOptions opt;
  opt.block_m = args.integer("block-m"), opt.block_n = args.integer("block-n");
  opt.tile_buffer = args.integer("tile-buffer");
  return opt;
}

std::vector<AltVariant> alt_variants(const cli::Args& args) {
  std::vector<AltVariant> alts;
  const std::string list = args.str("alt");
  for (size_t pos = 0; pos < list.size();) {
    const size_t end = std::min(list.find(';', pos), list.size());
    if (end > pos) alts.push_back(parse_alt(list.substr(pos, end - pos), pinned_options(args)));
    pos = end + 1;
  }
  return alts;
}

// One case's device data: random e4m3 A and B, constant scales, the segment layout, and (with FP4 timed) random
// packed E2M1 weights whose UE8M0 codes are all 119 = the base code of sfb's 2^-8, so every upconversion shift is 0
// (the kernel's work does not depend on the values).
struct CaseData {
  bool masked, swiglu;
  int rows_per_expert;
  size_t total_rows;
  int sfa_stride;
  Buffer<uint8_t> a, b;
  Buffer<float> sfa, sfb;
  Buffer<uint16_t> d;
  Buffer<uint8_t> out;
  Buffer<float> out_scales, row_weights;
  std::unique_ptr<Buffer<uint8_t>> b_fp4;
  std::unique_ptr<Buffer<uint32_t>> b_codes;
  std::unique_ptr<Buffer<int32_t>> starts, counts;
  gemm::GroupedGemmInput in;
  gemm::SwigluFp8Output o;

  CaseData(const Case& c, bool with_fp4, cudaStream_t stream)
      : masked(c.op == "masked"),
        swiglu(c.op == "l1"),
        rows_per_expert(masked ? c.tokens : align_up(c.tokens, 128)),
        total_rows(size_t(c.experts) * rows_per_expert),
        sfa_stride(gemm::sfa_stride_for(int(total_rows))),
        a(total_rows * c.k),
        b(size_t(c.experts) * c.n * c.k),
        sfa(size_t(c.k / 128) * sfa_stride + 4096),
        sfb(size_t(c.experts) * (c.n / 128) * (c.k / 128) + 4096),
        d(total_rows * c.n),
        out(total_rows * c.n / 2),
        out_scales(size_t(c.n / 256 + 1) * sfa_stride),
        row_weights(total_rows) {
    fill_e4m3<<<1024, 256, 0, stream>>>(a.ptr, total_rows * c.k, 1);
    fill_e4m3<<<1024, 256, 0, stream>>>(b.ptr, size_t(c.experts) * c.n * c.k, 2);
    fill_value<<<256, 256, 0, stream>>>(sfa.ptr, size_t(c.k / 128) * sfa_stride + 4096, c.act_scale);
    fill_value<<<256, 256, 0, stream>>>(sfb.ptr, size_t(c.experts) * (c.n / 128) * (c.k / 128) + 4096, 1.f / 256);
    fill_value<<<256, 256, 0, stream>>>(row_weights.ptr, total_rows, 0.5f);
    SYMMOE_CUDA_CHECK_LAUNCH("fill");
    if (with_fp4) {
      b_fp4 = std::make_unique<Buffer<uint8_t>>(size_t(c.experts) * c.n * c.k / 2);
      b_codes = std::make_unique<Buffer<uint32_t>>(size_t(c.experts) * (c.k / 128) * c.n);
      fill_e4m3<<<1024, 256, 0, stream>>>(b_fp4->ptr, size_t(c.experts) * c.n * c.k / 2, 3);
      SYMMOE_CUDA_CHECK_LAUNCH("fill fp4");
      SYMMOE_CUDA_CHECK(cudaMemsetAsync(b_codes->ptr, 0x77, size_t(c.experts) * (c.k / 128) * c.n * 4, stream));
    }
    std::vector<int32_t> h_starts(c.experts + 1), h_counts(c.experts, c.tokens);
    for (int e = 0; e <= c.experts; ++e) h_starts[e] = e * rows_per_expert;
    starts = std::make_unique<Buffer<int32_t>>(h_starts.size());
    counts = std::make_unique<Buffer<int32_t>>(h_counts.size());
    SYMMOE_CUDA_CHECK(cudaMemcpy(starts->ptr, h_starts.data(), h_starts.size() * 4, cudaMemcpyHostToDevice));
    SYMMOE_CUDA_CHECK(cudaMemcpy(counts->ptr, h_counts.data(), h_counts.size() * 4, cudaMemcpyHostToDevice));
    in.layout = masked ? gemm::GroupLayout::kMasked : gemm::GroupLayout::kContiguous;
    in.num_experts = c.experts, in.n = c.n, in.k = c.k;
    in.num_rows = masked ? c.tokens : int(total_rows);
    in.segment_starts = starts->ptr, in.num_valid_rows = counts->ptr;
    in.a = a.ptr, in.sfa = sfa.ptr, in.sfa_stride = sfa_stride, in.b = b.ptr, in.sfb = sfb.ptr;
    o.out = out.ptr, o.out_scales = out_scales.ptr, o.out_scale_stride = sfa_stride, o.row_weights = row_weights.ptr;
  }
  // The kernel input for one weight format.
  gemm::GroupedGemmInput input(bool fp4) const {
    gemm::GroupedGemmInput win = in;
    if (fp4) win.weights = gemm::WeightFormat::kFp4, win.b = b_fp4->ptr, win.b_scale_codes = b_codes->ptr;
    return win;
  }
};

// The shared state of one run: cuBLASLt (or none), the stream and its workspace.
struct GemmBench {
  std::unique_ptr<CublasLt> lt;
  cudaStream_t stream = nullptr;
  static constexpr size_t kWorkspaceBytes = size_t(64) << 20;
  Buffer<uint8_t> workspace{kWorkspaceBytes};
  explicit GemmBench(bool baseline) {
    if (baseline) {
      lt = std::make_unique<CublasLt>();
      if (!lt->ok()) std::printf("[bench gemm] cuBLASLt unavailable: %s (baseline columns are 0)\n", lt->error.c_str());
    }
    SYMMOE_CUDA_CHECK(cudaStreamCreate(&stream));
  }
  ~GemmBench() { cudaStreamDestroy(stream); }
};

// cuBLASLt's matmuls for a case (one per expert), or none; `rows` is what it computes per expert (FLOPs still
// count c.tokens): a row count it has no algorithm for (e.g. 386) is timed on the contiguous segment's padded rows
// (rows_per_expert, a multiple of 128) instead, so the baseline does at least the real work.
std::unique_ptr<LtGemm> baseline_gemm(GemmBench& bench, const Case& c, const CaseData& data, int& rows) {
  rows = c.tokens;
  if (!bench.lt || !bench.lt->ok()) return nullptr;
  // cuBLASLt's scale tensors: sized generously (values are all equal), one per expert.
  auto g =
      std::make_unique<LtGemm>(*bench.lt, c.n, c.tokens, c.k, GemmBench::kWorkspaceBytes, data.sfa.ptr, data.sfb.ptr);
  if (!g->ok && !data.masked && data.rows_per_expert != c.tokens) {
    std::printf(
        "[bench gemm] cuBLASLt found no algorithm for %d rows per expert (status %d): timing it on the "
        "%d padded rows\n",
        c.tokens, int(g->status), data.rows_per_expert);
    rows = data.rows_per_expert;
    g = std::make_unique<LtGemm>(*bench.lt, c.n, rows, c.k, GemmBench::kWorkspaceBytes, data.sfa.ptr, data.sfb.ptr);
  }
  if (!g->ok) {
    std::printf("[bench gemm] cuBLASLt found no algorithm for n=%d tokens=%d k=%d (status %d)\n", c.n, rows, c.k,
                int(g->status));
    return nullptr;
  }
  return g;
}

// The JSON line of one (case, format) row.
JsonLine result_line(const cli::Args& args, int argc, char** argv, const Case& c, const std::string& format,
                     const std::string& config, double t_ours, double t_lt, int lt_rows) {
  const double flops = 2.0 * double(c.experts) * c.tokens * c.n * c.k;
  const double weight_bytes = double(c.experts) * c.n * (format == "fp4" ? c.k / 2 + c.k / 32 : c.k);
  JsonLine line = common_fields("gemm", argc, argv);
  line.add("op", c.op)
      .add("shape", c.name)
      .add("ranks", 1)
      .add("tokens", c.tokens)
      .add("experts", c.experts)
      .add("m", int(c.tokens))
      .add("n", c.n)
      .add("k", c.k)
      .add("time_us", t_ours)
      .add("tflops", flops / t_ours * 1e-6)
      .add("weight_gbps", weight_bytes / t_ours * 1e-3)
      .add("baseline", "cublaslt")
      .add("baseline_time_us", t_lt)
      .add("baseline_tflops", t_lt > 0 ? flops / t_lt * 1e-6 : 0)
      .add("baseline_rows", lt_rows)
      .add("ratio_vs_baseline", t_lt > 0 ? t_lt / t_ours : 0.0)
      .add("kernel", config)
      .add("variant", args.str("variant"))
      .add("weights", format)
      .add("act_scale", double(c.act_scale));
  return line;
}

// --solo-ms: each timed function alone in turn (ours, the --alt variants that run on this row, cuBLASLt), recorded in
// `line` under its label ("ours", "alt<i>", "baseline").
void time_solo(cudaStream_t stream, const Case& c, const std::vector<std::function<void()>>& timed,
               const std::vector<std::string>& labels, const std::vector<std::string>& specs, double solo_ms,
               JsonLine& line) {
  const double flops = 2.0 * double(c.experts) * c.tokens * c.n * c.k;
  for (size_t f = 0; f < timed.size(); ++f) {
    std::string begin, end;
    const double us = solo_mean_us(stream, timed[f], solo_ms, begin, end);
    std::printf("[solo] %s %s%s: %.1f us (%.1f TFLOPS) UTC %s-%s\n", c.name.c_str(), labels[f].c_str(),
                specs[f].empty() ? "" : (" " + specs[f]).c_str(), us, flops / us * 1e-6, begin.c_str(), end.c_str());
    line.add("solo_" + labels[f] + "_time_us", us).add("solo_" + labels[f] + "_utc", begin + "-" + end);
  }
}

// One (case, weight format) row: ours, the --alt variants and cuBLASLt timed round-robin (interleaved_median_us
// says why), printed, appended to the table and written as a JSON line.
void measure_row(GemmBench& bench, const cli::Args& args, int argc, char** argv, const Case& c, const CaseData& data,
                 const std::string& format, const gemm::LaunchOptions& opt, const std::vector<AltVariant>& alts,
                 std::vector<std::string>& table) {
  const gemm::GroupedGemmInput win = data.input(format == "fp4");
  const std::string config = gemm::describe_launch(win, data.swiglu, opt);
  const cudaStream_t stream = bench.stream;
  auto run_ours = [&](const gemm::LaunchOptions& o_opt) {
    if (data.swiglu)
      gemm::grouped_gemm_swiglu_fp8(win, data.o, stream, o_opt);
    else
      gemm::grouped_gemm_bf16(win, data.d.ptr, stream, o_opt);
  };
  std::vector<std::function<void()>> timed{[&] { run_ours(opt); }};
  std::vector<std::string> labels{"ours"}, specs{""};
  // Each variant's kernel on this row, or why it has none (then it is not timed: slot -1).
  std::vector<std::string> alt_kernel(alts.size()), alt_error(alts.size());
  std::vector<int> alt_slot(alts.size(), -1);
  for (size_t i = 0; i < alts.size(); ++i) {
    try {
      alt_kernel[i] = gemm::describe_launch(win, data.swiglu, alts[i].opt);
    } catch (const Error& e) {
      alt_error[i] = e.what();
      std::printf("[bench gemm] --alt '%s' has no kernel for %s/%s: %s\n", alts[i].spec.c_str(), c.name.c_str(),
                  format.c_str(), e.what());
      continue;
    }
    alt_slot[i] = int(timed.size());
    timed.push_back([&run_ours, &v = alts[i]] { run_ours(v.opt); });
    labels.push_back("alt" + std::to_string(i)), specs.push_back(alts[i].spec);
  }
  int lt_rows = c.tokens;
  const std::unique_ptr<LtGemm> lt_gemm = baseline_gemm(bench, c, data, lt_rows);
  if (lt_gemm) {
    timed.push_back([&] {
      for (int e = 0; e < c.experts; ++e)
        lt_gemm->run(*bench.lt, data.b.ptr + size_t(e) * c.n * c.k, data.sfb.ptr,
                     data.a.ptr + size_t(e) * data.rows_per_expert * c.k, data.sfa.ptr,
                     data.d.ptr + size_t(e) * data.rows_per_expert * c.n, bench.workspace.ptr,
                     GemmBench::kWorkspaceBytes, stream);
    });
    labels.push_back("baseline"), specs.push_back("");
  }
  const std::vector<double> times = interleaved_median_us(stream, timed, 3, args.integer("reps"));
  const double t_ours = times[0];
  const double t_lt = lt_gemm ? times.back() : 0.0;
  SYMMOE_CUDA_CHECK(cudaStreamSynchronize(stream));
  JsonLine line = result_line(args, argc, argv, c, format, config, t_ours, t_lt, lt_rows);
  const double flops = 2.0 * double(c.experts) * c.tokens * c.n * c.k;
  const double weight_bytes = double(c.experts) * c.n * (format == "fp4" ? c.k / 2 + c.k / 32 : c.k);
  char row[512];
  int len = std::snprintf(row, sizeof row, "%-14s %-10s %7d %6d %5d %5d | %9.1f %8.1f %9.1f | %9.1f %8.1f | %6.3f",
                          (format == "fp4" ? c.name + "/fp4" : c.name).c_str(), c.op.c_str(), c.experts, c.tokens, c.n,
                          c.k, t_ours, flops / t_ours * 1e-6, weight_bytes / t_ours * 1e-3, t_lt,
                          t_lt > 0 ? flops / t_lt * 1e-6 : 0, t_lt > 0 ? t_lt / t_ours : 0.0);
  for (size_t i = 0; i < alts.size() && len < int(sizeof row) - 16; ++i)
    len += alt_slot[i] < 0 ? std::snprintf(row + len, sizeof row - len, " | %6s", "-")
                           : std::snprintf(row + len, sizeof row - len, " | %6.3f", times[alt_slot[i]] / t_ours);
  std::printf("%s   %s\n", row, config.c_str());
  table.push_back(row);
  if (args.real("solo-ms") > 0) time_solo(stream, c, timed, labels, specs, args.real("solo-ms"), line);
  for (size_t i = 0; i < alts.size(); ++i) {
    const std::string key = "alt" + std::to_string(i);
    line.add(key, alts[i].spec);
    if (alt_slot[i] < 0)
      line.add(key + "_error", alt_error[i]);
    else
      line.add(key + "_time_us", times[alt_slot[i]]).add(key + "_kernel", alt_kernel[i]);
  }
  append_result(args.str("out"), "gemm", line);
}

int run_gemm_bench(int argc, char** argv) {
  cli::Args args("bench gemm", "grouped FP8 GEMM vs cuBLASLt (same run)");
  declare_gemm_args(args);
  if (!args.parse(argc, argv)) return 0;
  const std::vector<std::string> formats = args.str_list("weights");
  for (const std::string& f : formats)
    SYMMOE_CHECK(f == "fp8" || f == "fp4", "bench", "--weights: unknown format '", f, "' (fp8, fp4)");
  std::vector<AltVariant> alts = alt_variants(args);  // --alt errors before the GPU check too
  const std::vector<Case> cases = selected_cases(args);
  if (!require_hopper_gpu()) return 1;
  const bool with_fp4 = std::find(formats.begin(), formats.end(), "fp4") != formats.end();
  GemmBench bench(!args.has("no-baseline"));
  std::printf("%-14s %-10s %7s %6s %5s %5s | %9s %8s %9s | %9s %8s | %6s", "case", "op", "experts", "tokens", "n", "k",
              "us", "TFLOPS", "w GB/s", "lt us", "lt TFLOP", "ratio");
  for (const AltVariant& v : alts) std::printf(" | alt/ours %s", v.spec.c_str());
  std::printf("\n");
  std::vector<std::string> table;
  for (const Case& c : cases) {
    const CaseData data(c, with_fp4, bench.stream);
    gemm::LaunchOptions opt = pinned_options(args);
    // Masked: the launcher plans from max_m (every expert fits it); contiguous: the tokens per expert.
    opt.expected_rows_per_expert = data.masked ? 0 : c.tokens;
    for (AltVariant& v : alts) v.opt.expected_rows_per_expert = opt.expected_rows_per_expert;
    for (const std::string& format : formats) measure_row(bench, args, argc, argv, c, data, format, opt, alts, table);
  }
  std::printf("\n== gemm summary (ratio = cuBLASLt time / ours; alt/ours = variant time / ours:");
  for (const AltVariant& v : alts) std::printf(" [%s]", v.spec.c_str());
  std::printf(") ==\n");
  for (const auto& r : table) std::printf("%s\n", r.c_str());
  return 0;
}

}  // namespace
}  // namespace symmoe::bench

SYMMOE_BENCH(gemm, "gemm", "grouped FP8 GEMM (contiguous, masked, L1 SwiGLU) vs cuBLASLt",
             symmoe::bench::run_gemm_bench);
