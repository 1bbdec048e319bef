// Memory-model wrappers for cross-CTA and cross-rank synchronisation (sm_90). One function per instruction, the
// memory order and scope in the name. Scopes: gpu = all CTAs of this GPU; sys = also peer GPUs (NVLink) and host.
// NOTES: a flag handoff is `writes; red_add_release_sys(flag)` on the producer and `ld_acquire_sys(flag)` on the
// consumer; fences are needed only where the release/acquire must cover other threads' writes.
#pragma once

#include <cstdint>

namespace symmoe::ptx {

// ---- warp ----
// True in exactly one lane of the full warp (elect.sync): a single-lane predicate without reading the lane index.
__device__ __forceinline__ bool elect_one_sync() {
  uint32_t elected;
  asm volatile("{\n .reg .pred p;\n .reg .b32 lane;\n elect.sync lane|p, 0xffffffff;\n selp.u32 %0, 1, 0, p;\n}"
               : "=r"(elected));
  return elected != 0;
}

// ---- loads ----
__device__ __forceinline__ uint32_t ld_acquire_sys(const uint32_t* p) {
  uint32_t v;
  asm volatile("ld.acquire.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ uint32_t ld_acquire_gpu(const uint32_t* p) {
  uint32_t v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ uint64_t ld_acquire_sys(const uint64_t* p) {
  uint64_t v;
  asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ uint64_t ld_acquire_gpu(const uint64_t* p) {
  uint64_t v;
  asm volatile("ld.acquire.gpu.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ uint32_t ld_relaxed_gpu(const uint32_t* p) {
  uint32_t v;
  asm volatile("ld.relaxed.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

// ---- stores ----
__device__ __forceinline__ void st_release_sys(uint32_t* p, uint32_t v) {
  asm volatile("st.release.sys.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
__device__ __forceinline__ void st_relaxed_sys(uint32_t* p, uint32_t v) {
  asm volatile("st.relaxed.sys.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
__device__ __forceinline__ void st_relaxed_sys(uint64_t* p, uint64_t v) {
  asm volatile("st.relaxed.sys.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}

// ---- reductions (no return value: cheaper than atom over NVLink) ----
__device__ __forceinline__ void red_add_release_sys(uint32_t* p, uint32_t v) {
  asm volatile("red.release.sys.global.add.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
// Relaxed: pair with a preceding fence_acq_rel_sys() when one fence must cover several reductions.
__device__ __forceinline__ void red_add_relaxed_sys(uint32_t* p, uint32_t v) {
  asm volatile("red.relaxed.sys.global.add.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
__device__ __forceinline__ void red_add_release_gpu(uint32_t* p, uint32_t v) {
  asm volatile("red.release.gpu.global.add.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
__device__ __forceinline__ void red_add_release_sys(uint64_t* p, uint64_t v) {
  asm volatile("red.release.sys.global.add.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}
__device__ __forceinline__ void red_add_release_gpu(uint64_t* p, uint64_t v) {
  asm volatile("red.release.gpu.global.add.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}

// ---- atomics returning the old value ----
__device__ __forceinline__ uint32_t atom_add_acq_rel_gpu(uint32_t* p, uint32_t v) {
  uint32_t old;
  asm volatile("atom.acq_rel.gpu.global.add.u32 %0, [%1], %2;" : "=r"(old) : "l"(p), "r"(v) : "memory");
  return old;
}
__device__ __forceinline__ uint32_t atom_add_relaxed_gpu(uint32_t* p, uint32_t v) {
  uint32_t old;
  asm volatile("atom.relaxed.gpu.global.add.u32 %0, [%1], %2;" : "=r"(old) : "l"(p), "r"(v) : "memory");
  return old;
}
// 64-bit packed counters: (arrivals << 32 | count), see comm/packed_counter.cuh.
__device__ __forceinline__ uint64_t atom_add_acq_rel_sys(uint64_t* p, uint64_t v) {
  uint64_t old;
  asm volatile("atom.acq_rel.sys.global.add.u64 %0, [%1], %2;" : "=l"(old) : "l"(p), "l"(v) : "memory");
  return old;
}
__device__ __forceinline__ uint64_t atom_add_acq_rel_gpu(uint64_t* p, uint64_t v) {
  uint64_t old;
  asm volatile("atom.acq_rel.gpu.global.add.u64 %0, [%1], %2;" : "=l"(old) : "l"(p), "l"(v) : "memory");
  return old;
}

// ---- fences ----
__device__ __forceinline__ void fence_acq_rel_sys() { asm volatile("fence.acq_rel.sys;" ::: "memory"); }
__device__ __forceinline__ void fence_acq_rel_gpu() { asm volatile("fence.acq_rel.gpu;" ::: "memory"); }
// Generic-proxy writes to global memory become visible to later async-proxy (bulk copy / TMA) reads, and back.
__device__ __forceinline__ void fence_proxy_async_global() { asm volatile("fence.proxy.async.global;" ::: "memory"); }
// Generic-proxy writes to shared memory become visible to the async proxy (bulk store source, WGMMA operands).
__device__ __forceinline__ void fence_proxy_async_shared_cta() {
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}

// ---- compiler ----
// v through an asm volatile move: what is computed from the result is neither hoisted out of a loop nor shared with
// an earlier computation, so it is recomputed where it is used instead of held in a register across the loop.
__device__ __forceinline__ int unhoisted(int v) {
  asm volatile("mov.b32 %0, %0;" : "+r"(v));
  return v;
}

// ---- time ----
// Nanoseconds of the global timer (same clock on every SM of a GPU; resolution ~32 ns on Hopper).
// %ctaid.x read at this point (asm volatile: the compiler neither hoists nor shares it, unlike blockIdx.x), for
// rare-path addresses that must not be kept live in a register across a kernel's role regions.
__device__ __forceinline__ uint32_t ctaid_x_volatile() {
  uint32_t cta;
  asm volatile("mov.u32 %0, %%ctaid.x;" : "=r"(cta));
  return cta;
}

__device__ __forceinline__ uint64_t globaltimer_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

}  // namespace symmoe::ptx
