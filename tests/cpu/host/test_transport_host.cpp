// Transport boundary on the CPU: the domain topology's index maps and argument errors, the NVLink transport's reach
// (own domain only), and the team-local SymBuffer view (with one domain it is exactly the global view that
// comm::make_sym_buffer builds; with several, local peer indices map to the domain's global ranks).
#include <gtest/gtest.h>

#include <cstring>

#include "runtime/transport.hpp"
#include "common/compare.hpp"
#include "symmoe/common.hpp"

namespace symmoe::runtime {
namespace {

using test::error_of;

// A fake address space: rank r's allocation at 0x10000000 + r * 0x1000000.
int64_t fake_base(int rank) { return 0x10000000 + int64_t(rank) * 0x1000000; }

TEST(Transport, TopologyMapsAndErrors) {
  const TransportTopology t = TransportTopology::make(64, 8);
  EXPECT_EQ(t.ranks_per_domain(), 8);
  for (int r = 0; r < 64; ++r) {
    EXPECT_EQ(t.rank_of(t.domain_of(r), t.local_of(r)), r);
    EXPECT_EQ(t.domain_of(r), r / 8);
  }
  EXPECT_TRUE(t.same_domain(8, 15));
  EXPECT_FALSE(t.same_domain(7, 8));
  EXPECT_NE(
      error_of([] { TransportTopology::make(64, 3); }).find("num_domains (3) must be >= 1 and divide num_ranks (64)"),
      std::string::npos);
  EXPECT_NE(error_of([] { TransportTopology::make(8, 0); }).find("num_domains (0)"), std::string::npos);
  EXPECT_NE(error_of([] { TransportTopology::make(0, 1); }).find("num_ranks must be >= 1, got 0"), std::string::npos);
  EXPECT_NE(error_of([] { TransportTopology::make(144, 1); }).find("144 ranks per domain, expected <= 72"),
            std::string::npos);
}

TEST(Transport, NvlinkReachesItsDomainOnly) {
  const NvlinkTransport nvlink(TransportTopology::make(16, 2));
  EXPECT_EQ(nvlink.link(), Link::kLoadStore);
  for (int a = 0; a < 16; ++a)
    for (int b = 0; b < 16; ++b) EXPECT_EQ(nvlink.reaches(a, b), a / 8 == b / 8) << a << " -> " << b;
  EXPECT_FALSE(nvlink.reaches(0, 16));
  EXPECT_FALSE(nvlink.reaches(-1, 0));
}

TEST(Transport, DomainViewIsTheTeamOfTheRank) {
  const TransportTopology t = TransportTopology::make(16, 2);
  const int rank = 10;
  const comm::SymBuffer v = domain_view(
      fake_base(rank), [&](int peer) { return fake_base(peer) - fake_base(rank); }, t, rank);
  EXPECT_EQ(v.rank, 2u);
  EXPECT_EQ(v.num_ranks, 8u);
  EXPECT_EQ(v.base, fake_base(rank));
  for (int local = 0; local < 8; ++local) {
    // map(ptr, local) lands on the same offset of global rank 8 + local.
    const int64_t local_ptr = fake_base(rank) + 0x40;
    EXPECT_EQ(reinterpret_cast<int64_t>(v.map(reinterpret_cast<int*>(local_ptr), local)), fake_base(8 + local) + 0x40)
        << "local " << local;
  }
  for (size_t i = 8; i < layout::kMaxRanks; ++i) EXPECT_EQ(v.offsets[i], 0) << "entry " << i << " outside the team";
  EXPECT_NE(error_of([&] {
              domain_view(
                  0, [](int) { return int64_t(0); }, t, 16);
            }).find("rank 16 outside [0, 16)"),
            std::string::npos);
}

TEST(Transport, OneDomainViewEqualsTheGlobalView) {
  const int R = 8;
  const TransportTopology t = TransportTopology::make(R, 1);
  for (int rank = 0; rank < R; ++rank) {
    const comm::SymBuffer v = domain_view(
        fake_base(rank), [&](int peer) { return fake_base(peer) - fake_base(rank); }, t, rank);
    // What comm::make_sym_buffer fills from a SymmetricBuffer with these bases.
    comm::SymBuffer global;
    global.base = fake_base(rank), global.rank = uint32_t(rank), global.num_ranks = uint32_t(R);
    for (int peer = 0; peer < R; ++peer) global.offsets[peer] = fake_base(peer) - fake_base(rank);
    EXPECT_EQ(0, std::memcmp(&v, &global, sizeof v)) << "rank " << rank;
  }
}

}  // namespace
}  // namespace symmoe::runtime
