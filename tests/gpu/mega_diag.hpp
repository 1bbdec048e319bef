// Diagnostics of one fused-layer call that a sanitizer may slow down or stall (tests/gpu/test_mega.cu,
// MegaSanitize): timestamps flushed at once, a wait for the call that polls instead of blocking, the timeout records
// while the kernel still runs, and the per-CTA trace stamps (MegaMoe::set_trace).
// NOTES: stdout into a pipe or file is block-buffered: without the flush a run killed at its time cap loses the
// lines that say how far it got.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "kernels/mega/trace_format.hpp"
#include "symmoe/cuda_check.hpp"
#include "symmoe/mega_moe.hpp"
#include "symmoe/runtime.hpp"

namespace symmoe::test {

// Seconds since this header's first static initialisation (about process start): module loading and the
// sanitizer's instrumentation before main show as the first stamp's offset.
inline const std::chrono::steady_clock::time_point kDiagStart = std::chrono::steady_clock::now();

inline double diag_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - kDiagStart).count();
}

inline void diag_stamp(const std::string& what) {
  std::printf("  [+%9.3f s] %s\n", diag_seconds(), what.c_str());
  std::fflush(stdout);
}

// The timeout records of the local ranks (host-mapped: readable while the kernel still runs).
inline size_t print_timeout_records(const Communicator& comm) {
  const std::vector<layout::ErrorRecord> records = comm.error_records();
  for (const layout::ErrorRecord& r : records)
    std::printf("    timeout record: rank %u site %s peer %d counter 0x%llx expected %llu seen %llu after %.3f s\n",
                r.rank, layout::wait_site_name(r.site), r.peer, (unsigned long long)r.counter,
                (unsigned long long)r.expected, (unsigned long long)r.seen, double(r.elapsed_ns) * 1e-9);
  std::fflush(stdout);
  return records.size();
}

// Per CTA: the stage stamps in us after the earliest CTA start ('-': not reached), the producer's wait sum, its tile
// count, then its first tiles' stamps.
inline void print_trace(const std::vector<unsigned long long>& words) {
  using namespace mega;
  const size_t num_ctas = words.size() / kTraceWordsPerCta;
  unsigned long long t0 = ~0ull;
  for (size_t cta = 0; cta < num_ctas; ++cta)
    if (words[cta * kTraceWordsPerCta + kTraceStart]) t0 = std::min(t0, words[cta * kTraceWordsPerCta + kTraceStart]);
  const auto at = [t0](unsigned long long v) {
    char buf[32];
    if (v == 0 || v < t0)
      std::snprintf(buf, sizeof buf, "-");
    else
      std::snprintf(buf, sizeof buf, "%.1f", double(v - t0) * 1e-3);
    return std::string(buf);
  };
  std::printf("    trace (us after the first CTA start; '-': not reached):\n");
  for (size_t cta = 0; cta < num_ctas; ++cta) {
    const unsigned long long* w = words.data() + cta * kTraceWordsPerCta;
    std::printf("    CTA %zu:", cta);
    for (int i = kTraceStart; i <= kTraceEnd; ++i) std::printf(" %s %s", kTracePointNames[i], at(w[i]).c_str());
    std::printf(" | producer_wait %.1f us, %llu tiles\n", double(w[kTraceProducerWaitNs]) * 1e-3, w[kTraceNumTiles]);
    const unsigned long long n = std::min<unsigned long long>(w[kTraceNumTiles], kTraceTileSlots);
    for (unsigned long long slot = 0; slot < n; ++slot) {
      const unsigned long long* t = w + kNumTracePoints + slot * kTraceTileWords;
      const unsigned long long id = t[kTileId];
      std::printf(
          "      tile %llu (%s expert %llu n-block %llu pool block %llu): wait %s ready %s issued %s mainloop %s "
          "math %s\n",
          slot, (id & 1) ? "L2" : "L1", (id >> 1) & 0x7fff, (id >> 16) & 0xffff, id >> 32,
          at(t[kTileWaitStart]).c_str(), at(t[kTileInputsReady]).c_str(), at(t[kTileLoadsIssued]).c_str(),
          at(t[kTileMainloopDone]).c_str(), at(t[kTileMathDone]).c_str());
    }
  }
  std::fflush(stdout);
}

// Waits for the fused call queued on every local rank's stream by polling (cudaStreamQuery), where synchronize()
// would block without a word: a progress line every 10 s and the timeout records as they appear. Returns once every
// stream is done (the caller then calls synchronize(), which raises the recorded errors). A bounded wait that times
// out makes every other bounded wait of its rank give up at its next check (kernels/comm/timeout.cuh), so a kernel
// still running the wait timeout + 10 s after the first record, or 3 x the wait timeout + 30 s after the launch, is
// held in a wait without a timeout (an mbarrier or named-barrier wait, or a __syncthreads behind one) or is slower
// than the bound: the records and, when traced, the stamps the CTAs reached are printed and the process exits with
// status 3 (returning would block for ever in the implicit synchronisation of the buffers' destructors).
inline void wait_for_call_or_exit(Communicator& comm, MegaMoe& mega, bool traced) {
  const double start = diag_seconds(), timeout_s = double(comm.timeout_ns()) * 1e-9;
  const double limit = 3 * timeout_s + 30;
  double next_report = start + 10, first_record = -1;
  for (;;) {
    bool done = true;
    for (const RankPlacement& p : comm.local_ranks()) {
      SYMMOE_CUDA_CHECK(cudaSetDevice(p.device));
      const cudaError_t err = cudaStreamQuery(comm.stream(p.rank));
      if (err == cudaErrorNotReady) {
        done = false;
      } else if (err != cudaSuccess) {
        diag_stamp(std::string("fused call: stream failed: ") + cudaGetErrorName(err));
        return;  // synchronize() raises it with its context
      }
    }
    if (done) return;
    const double now = diag_seconds();
    if (first_record < 0 && !comm.error_records().empty()) {
      first_record = now;
      diag_stamp("fused call: a wait timed out while the kernel still runs:");
      print_timeout_records(comm);
    }
    const bool stalled = (first_record >= 0 && now - first_record > timeout_s + 10) || now - start > limit;
    if (stalled) {
      char msg[256];
      std::snprintf(msg, sizeof msg,
                    "STALL: the fused kernel still runs %.0f s after its launch (wait timeout %.1f s): held in a wait "
                    "without a timeout, or slower than the bound (then raise SYMMOE_TIMEOUT_MS). Records:",
                    now - start, timeout_s);
      diag_stamp(msg);
      if (print_timeout_records(comm) == 0) std::printf("    (none: no bounded wait has timed out)\n");
      if (traced) {
        diag_stamp("reading the trace of the running kernel (a plain copy on the legacy stream)");
        for (size_t i = 0; i < comm.local_ranks().size(); ++i) print_trace(mega.trace(i));
      }
      diag_stamp("exiting (status 3) with the kernel still running");
      std::_Exit(3);
    }
    if (now >= next_report) {
      diag_stamp("fused call still running");
      next_report += 10;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

}  // namespace symmoe::test
