// Transport boundary: how one hop of an EP call reaches its peers. Internal to the CUDA library's host code.
//
// Contract:
// - A TransportTopology splits the R ranks into load/store domains (NVLink: the GPUs of one node, G = R / N each);
//   rank r = domain * G + local. Hybrid EP (docs/scale-out.md) crosses domains once per token on the network, then
//   fans out inside the destination domain over NVLink.
// - A Transport reaches some peers of a rank over one kind of link and hands the kernels of that hop their device
//   view. NvlinkTransport is the load/store hop: its view is a comm::SymBuffer over the rank's DOMAIN (team), with
//   rank = local index and num_ranks = G, so the NVLink kernels (written for any rank count, peers only through
//   map(ptr, peer)) run unchanged on one node of a multi-node job. With one domain the view equals
//   comm::make_sym_buffer's, bit for bit.
// - The network hop (one-sided puts + signals on the same symmetric window, NCCL GIN) is another Transport with its
//   own device handle; it is not implemented here, and nothing pretends to send.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "kernels/comm/sym_buffer.cuh"
#include "symmoe/runtime.hpp"

namespace symmoe::runtime {

struct TransportTopology {
  int num_ranks = 1, num_domains = 1;

  // Throws symmoe::Error naming the argument unless num_domains >= 1 divides num_ranks and a domain has at most
  // layout::kMaxRanks ranks (the SymBuffer's peer table).
  static TransportTopology make(int num_ranks, int num_domains);
  int ranks_per_domain() const { return num_ranks / num_domains; }
  int domain_of(int rank) const { return rank / ranks_per_domain(); }
  int local_of(int rank) const { return rank % ranks_per_domain(); }
  int rank_of(int domain, int local) const { return domain * ranks_per_domain() + local; }
  bool same_domain(int a, int b) const { return domain_of(a) == domain_of(b); }
};

enum class Link { kLoadStore, kNetwork };
const char* link_name(Link link);

class Transport {
 public:
  virtual ~Transport() = default;
  virtual Link link() const = 0;
  // Whether `rank`'s kernels reach `peer`'s copy of a symmetric buffer through this transport.
  virtual bool reaches(int rank, int peer) const = 0;
};

// The team-local view of `rank`'s allocation at `base`: offsets[l] = offset_to(rank_of(domain, l)) for the G ranks of
// rank's domain. Pure: the host and the CPU tests compute it the same way.
comm::SymBuffer domain_view(int64_t base, const std::function<int64_t(int peer)>& offset_to,
                            const TransportTopology& topology, int rank);

class NvlinkTransport final : public Transport {
 public:
  explicit NvlinkTransport(TransportTopology topology) : topology_(topology) {}
  Link link() const override { return Link::kLoadStore; }
  bool reaches(int rank, int peer) const override;
  const TransportTopology& topology() const { return topology_; }
  // The SymBuffer `rank` (driven by this process) passes to its NVLink kernels: its domain's ranks only.
  comm::SymBuffer device_view(const SymmetricBuffer& buffer, int rank) const;

 private:
  TransportTopology topology_;
};

}  // namespace symmoe::runtime
