// The load/store (NVLink) transport and the domain topology. See src/runtime/transport.hpp.
#include "runtime/transport.hpp"

#include "symmoe/common.hpp"

namespace symmoe::runtime {

TransportTopology TransportTopology::make(int num_ranks, int num_domains) {
  SYMMOE_CHECK(num_ranks >= 1, "runtime", "transport: num_ranks must be >= 1, got ", num_ranks);
  SYMMOE_CHECK(num_domains >= 1 && num_ranks % num_domains == 0, "runtime", "transport: num_domains (", num_domains,
               ") must be >= 1 and divide num_ranks (", num_ranks, ")");
  SYMMOE_CHECK(num_ranks / num_domains <= int(layout::kMaxRanks), "runtime", "transport: ", num_ranks / num_domains,
               " ranks per domain, expected <= ", layout::kMaxRanks, " (the symmetric buffer's peer table)");
  return TransportTopology{num_ranks, num_domains};
}

const char* link_name(Link link) { return link == Link::kLoadStore ? "load/store (NVLink)" : "network"; }

comm::SymBuffer domain_view(int64_t base, const std::function<int64_t(int peer)>& offset_to,
                            const TransportTopology& topology, int rank) {
  SYMMOE_CHECK(rank >= 0 && rank < topology.num_ranks, "runtime", "transport: rank ", rank, " outside [0, ",
               topology.num_ranks, ")");
  comm::SymBuffer view;
  view.base = base;
  view.rank = uint32_t(topology.local_of(rank));
  view.num_ranks = uint32_t(topology.ranks_per_domain());
  const int domain = topology.domain_of(rank);
  for (int local = 0; local < topology.ranks_per_domain(); ++local)
    view.offsets[local] = offset_to(topology.rank_of(domain, local));
  return view;
}

bool NvlinkTransport::reaches(int rank, int peer) const {
  return rank >= 0 && peer >= 0 && rank < topology_.num_ranks && peer < topology_.num_ranks &&
         topology_.same_domain(rank, peer);
}

comm::SymBuffer NvlinkTransport::device_view(const SymmetricBuffer& buffer, int rank) const {
  SYMMOE_CHECK(buffer.num_ranks() == topology_.num_ranks, "runtime", "NvlinkTransport: buffer spans ",
               buffer.num_ranks(), " ranks, the topology ", topology_.num_ranks);
  SYMMOE_CHECK(buffer.is_local(rank), "runtime", "NvlinkTransport: rank ", rank, " is not driven by this process");
  return domain_view(
      reinterpret_cast<int64_t>(buffer.ptr(rank)), [&](int peer) { return buffer.offset(rank, peer); }, topology_,
      rank);
}

}  // namespace symmoe::runtime
