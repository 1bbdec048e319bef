// Runtime on the CPU: sync-area layout and symmetric offset math, rank placement of the in-process backend,
// bootstrap argument errors (bad world size, duplicate rank, missing env), the stalled-peer report, the launcher.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <set>

#include "kernels/comm/sym_buffer.cuh"
#include "runtime/launcher.hpp"
#include "symmoe/layout/sync.hpp"
#include "symmoe/runtime.hpp"

namespace symmoe {
namespace {

// ---------------- layout ----------------
TEST(RuntimeLayout, SyncAreaRegionsAlignedDisjointInside) {
  for (uint32_t R = 1; R <= layout::kMaxRanks; ++R) {
    const size_t bytes = layout::SyncArea::num_bytes(R);
    EXPECT_EQ(bytes % layout::SyncArea::kAlign, 0u) << "R=" << R;
    alignas(128) static uint8_t storage[8192];
    ASSERT_LE(bytes, sizeof storage);
    const layout::SyncArea area(storage, R);
    std::set<const void*> seen;
    for (uint32_t p = 0; p < 2; ++p)
      for (uint32_t src = 0; src < R; ++src) {
        const auto* slot = reinterpret_cast<const uint8_t*>(area.barrier_slot(p, src));
        EXPECT_TRUE(seen.insert(slot).second) << "slot (" << p << "," << src << ") overlaps, R=" << R;
        EXPECT_LT(slot + 4, reinterpret_cast<const uint8_t*>(area.state()) + 1) << "slot inside the state, R=" << R;
      }
    const auto* state = reinterpret_cast<const uint8_t*>(area.state());
    EXPECT_EQ((state - storage) % layout::SyncArea::kAlign, 0) << "state line aligned, R=" << R;
    for (const uint32_t* w : {area.barrier_epoch(), area.grid_sync_counter(), area.num_errors()}) {
      EXPECT_TRUE(seen.insert(w).second) << "state word overlaps, R=" << R;
      EXPECT_LE(reinterpret_cast<const uint8_t*>(w) + 4, storage + bytes) << "state word outside, R=" << R;
    }
  }
  EXPECT_EQ(layout::SyncArea::num_bytes(8), 256u);   // 64 B of slots -> one 128 B line + the state line
  EXPECT_EQ(layout::SyncArea::num_bytes(72), 768u);  // 576 B of slots -> 640 + 128
  EXPECT_EQ(sizeof(layout::ErrorRecord), 48u);
  EXPECT_STREQ(layout::wait_site_name(uint32_t(layout::WaitSite::kBarrier)), "barrier");
  EXPECT_STREQ(layout::wait_site_name(12345), "unknown");
}

TEST(RuntimeLayout, SymBufferMapIsSameOffsetInPeer) {
  comm::SymBuffer sym;
  const int64_t bases[3] = {0x7f0000000000, 0x7f0000100000, 0x7e0000000000};  // the last below the first
  sym.base = bases[1];
  sym.rank = 1;
  sym.num_ranks = 3;
  for (int r = 0; r < 3; ++r) sym.offsets[r] = bases[r] - bases[1];
  auto* p = reinterpret_cast<uint32_t*>(bases[1] + 4096);
  for (uint32_t r = 0; r < 3; ++r) EXPECT_EQ(reinterpret_cast<int64_t>(sym.map(p, r)), bases[r] + 4096) << "peer " << r;
  EXPECT_EQ(sym.map(p, 1), p);
  EXPECT_EQ(reinterpret_cast<int64_t>(sym.local<uint8_t>(100)), bases[1] + 100);
}

// ---------------- placement ----------------
TEST(RuntimePlacement, RoundRobinWithSmShare) {
  const auto ep8 = place_ranks_in_process(8, 2, 132);
  ASSERT_EQ(ep8.size(), 8u);
  for (int r = 0; r < 8; ++r) {
    EXPECT_EQ(ep8[r].rank, r);
    EXPECT_EQ(ep8[r].device, r % 2);
    EXPECT_EQ(ep8[r].index_on_device, r / 2);
    EXPECT_EQ(ep8[r].ranks_on_device, 4);
    EXPECT_EQ(ep8[r].num_sms, 33);
  }
  const auto ep4 = place_ranks_in_process(4, 1, 132);
  for (const auto& p : ep4) {
    EXPECT_EQ(p.device, 0);
    EXPECT_EQ(p.num_sms, 33);
    EXPECT_EQ(p.ranks_on_device, 4);
  }
  const auto ep3 = place_ranks_in_process(3, 2, 132);  // uneven: GPU 0 holds ranks 0, 2
  EXPECT_EQ(ep3[0].ranks_on_device, 2);
  EXPECT_EQ(ep3[0].num_sms, 66);
  EXPECT_EQ(ep3[1].ranks_on_device, 1);
  EXPECT_EQ(ep3[1].num_sms, 132);
  EXPECT_EQ(ep3[2].device, 0);
  EXPECT_EQ(ep3[2].index_on_device, 1);
  // Per device: the SM shares never exceed the device.
  for (int R : {1, 2, 3, 5, 8, 16}) {
    std::map<int, int> used;
    for (const auto& p : place_ranks_in_process(R, 2, 132)) used[p.device] += p.num_sms;
    for (const auto& [d, sms] : used) EXPECT_LE(sms, 132) << "R=" << R << " device " << d;
  }
}

TEST(RuntimePlacement, BadArgumentsAreNamed) {
  auto message = [](auto fn) {
    try {
      fn();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message([] { place_ranks_in_process(0, 2, 132); }).find("num_ranks"), std::string::npos);
  EXPECT_NE(message([] { place_ranks_in_process(73, 8, 132); }).find("num_ranks"), std::string::npos);
  EXPECT_NE(message([] { place_ranks_in_process(4, 0, 132); }).find("at least one GPU"), std::string::npos);
  EXPECT_NE(message([] { place_ranks_in_process(9, 1, 132); }).find("at most 8"), std::string::npos);
  EXPECT_NE(message([] { place_ranks_in_process(4, 1, 3); }).find("SMs"), std::string::npos);
}

// ---------------- bootstrap ----------------
EnvLookup fake_env(std::map<std::string, std::string> vars) {
  auto shared = std::make_shared<std::map<std::string, std::string>>(std::move(vars));
  return [shared](const char* name) -> const char* {
    const auto it = shared->find(name);
    return it == shared->end() ? nullptr : it->second.c_str();
  };
}

std::string bootstrap_error(std::map<std::string, std::string> vars) {
  try {
    bootstrap_config_from_env(fake_env(std::move(vars)));
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

TEST(RuntimeBootstrap, ParsesLauncherEnvironment) {
  const auto cfg = bootstrap_config_from_env(
      fake_env({{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "1"}, {"SYMMOE_BOOTSTRAP_DIR", "/tmp/x"}}));
  EXPECT_EQ(cfg.rank, 1);
  EXPECT_EQ(cfg.world_size, 2);
  EXPECT_EQ(cfg.local_rank, 1);
  EXPECT_EQ(cfg.bootstrap_dir, "/tmp/x");
  EXPECT_TRUE(multi_process_env_present(fake_env({{"WORLD_SIZE", "2"}})));
  EXPECT_FALSE(multi_process_env_present(fake_env({})));
  const std::string id(256, 'a');
  EXPECT_EQ(bootstrap_config_from_env(
                fake_env({{"RANK", "0"}, {"WORLD_SIZE", "1"}, {"LOCAL_RANK", "0"}, {"SYMMOE_UNIQUE_ID", id}}))
                .unique_id_hex,
            id);
}

TEST(RuntimeBootstrap, ArgumentErrorsNameTheVariable) {
  const std::map<std::string, std::string> good = {
      {"RANK", "1"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "1"}, {"SYMMOE_BOOTSTRAP_DIR", "/tmp/x"}};
  auto with = [&](const std::string& k, const std::string& v) {
    auto m = good;
    m[k] = v;
    return m;
  };
  auto without = [&](const std::string& k) {
    auto m = good;
    m.erase(k);
    return m;
  };
  EXPECT_NE(bootstrap_error(without("RANK")).find("RANK is not set"), std::string::npos);
  EXPECT_NE(bootstrap_error(without("WORLD_SIZE")).find("WORLD_SIZE is not set"), std::string::npos);
  EXPECT_NE(bootstrap_error(without("LOCAL_RANK")).find("LOCAL_RANK is not set"), std::string::npos);
  EXPECT_NE(bootstrap_error(with("WORLD_SIZE", "0")).find("WORLD_SIZE must be in [1, 72]"), std::string::npos);
  EXPECT_NE(bootstrap_error(with("WORLD_SIZE", "73")).find("WORLD_SIZE must be in [1, 72]"), std::string::npos);
  EXPECT_NE(bootstrap_error(with("WORLD_SIZE", "two")).find("WORLD_SIZE must be an integer"), std::string::npos);
  EXPECT_NE(bootstrap_error(with("RANK", "2")).find("RANK must be in [0, 2)"), std::string::npos);
  EXPECT_NE(bootstrap_error(with("RANK", "-1")).find("RANK must be in [0, 2)"), std::string::npos);
  EXPECT_NE(bootstrap_error(with("LOCAL_RANK", "5")).find("LOCAL_RANK must be in"), std::string::npos);
  EXPECT_NE(bootstrap_error(without("SYMMOE_BOOTSTRAP_DIR")).find("SYMMOE_UNIQUE_ID nor SYMMOE_BOOTSTRAP_DIR"),
            std::string::npos);
  EXPECT_NE(bootstrap_error(with("SYMMOE_UNIQUE_ID", "abc")).find("256 hex digits"), std::string::npos);
}

TEST(RuntimeBootstrap, DuplicateRankIsRejected) {
  char tmpl[] = "/tmp/symmoe-test-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  EXPECT_NO_THROW(claim_rank(dir, 0, 0, 2));
  EXPECT_NO_THROW(claim_rank(dir, 0, 1, 2));
  try {
    claim_rank(dir, 0, 1, 2);
    ADD_FAILURE() << "a second claim of rank 1 must fail";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("duplicate rank"), std::string::npos) << e.what();
  }
  EXPECT_NO_THROW(claim_rank(dir, 1, 1, 2));  // a new bootstrap round may reuse it
  std::filesystem::remove_all(dir);
}

// ---------------- stalled-peer report ----------------
layout::ErrorRecord record(uint32_t rank, int peer, uint32_t site = uint32_t(layout::WaitSite::kBarrier)) {
  layout::ErrorRecord r{};
  r.valid = 1, r.rank = rank, r.site = site, r.peer = peer, r.expected = 1, r.seen = 0, r.elapsed_ns = 300000000;
  return r;
}

TEST(RuntimeErrors, BlamesThePeerThatNeverWaited) {
  EXPECT_NO_THROW(throw_if_timed_out({}, "here"));
  // Ranks 0 and 2 waited for 3; rank 1 (still in a grid sync) also recorded; 3 recorded nothing -> 3 stalled.
  const std::vector<layout::ErrorRecord> records = {record(1, -1, uint32_t(layout::WaitSite::kGridSync)), record(0, 2),
                                                    record(0, 3), record(2, 3)};
  try {
    throw_if_timed_out(records, "here");
    ADD_FAILURE() << "must throw";
  } catch (const PeerTimeout& e) {
    EXPECT_EQ(e.peer(), 3);
    EXPECT_EQ(e.rank(), 0);
    EXPECT_EQ(e.wait_site(), "barrier");
    EXPECT_EQ(e.records().size(), 4u);
    EXPECT_NE(std::string(e.what()).find("peer 3 stalled"), std::string::npos) << e.what();
  }
}

// ---------------- launcher ----------------
int launch(int n, std::vector<std::string> cmd, double timeout_s = 0) {
  runtime::LaunchOptions o;
  o.num_processes = n;
  o.command = std::move(cmd);
  o.timeout_s = timeout_s;
  o.grace_s = 1;
  return runtime::launch_processes(o);
}

TEST(RuntimeLauncher, SetsRankEnvironment) {
  EXPECT_EQ(launch(3, {"sh", "-c",
                       "test \"$WORLD_SIZE\" = 3 && test \"$RANK\" -ge 0 && test \"$RANK\" -lt 3 && "
                       "test \"$LOCAL_RANK\" = \"$RANK\" && test -d \"$SYMMOE_BOOTSTRAP_DIR\""}),
            0);
}

TEST(RuntimeLauncher, FailureStopsTheOthersAndPropagates) {
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(launch(3, {"sh", "-c", "if [ \"$RANK\" = 1 ]; then exit 3; fi; exec sleep 30"}), 3);
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 10.0);
  EXPECT_EQ(launch(1, {"/nonexistent/symmoe-no-such-binary"}), 127);
}

TEST(RuntimeLauncher, TimeoutStopsEveryone) {
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(launch(2, {"sleep", "30"}, 0.3), 124);
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 10.0);
}

TEST(RuntimeLauncher, BadOptions) {
  EXPECT_THROW(launch(0, {"true"}), Error);
  EXPECT_THROW(launch(2, {}), Error);
}

}  // namespace
}  // namespace symmoe
