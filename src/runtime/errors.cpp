// Host reader of the device error area: turns timed-out waits into symmoe::PeerTimeout naming the stalled peer.
#include <set>
#include <sstream>

#include "symmoe/runtime.hpp"

namespace symmoe {

PeerTimeout::PeerTimeout(std::string site, std::vector<layout::ErrorRecord> records, size_t blamed,
                         const std::string& message)
    : Error("runtime", std::move(site), message), records_(std::move(records)), blamed_(records_.at(blamed)) {}

static std::string describe(const layout::ErrorRecord& r) {
  std::ostringstream os;
  os << "rank " << r.rank << " waited " << r.elapsed_ns / 1000000.0 << " ms at " << layout::wait_site_name(r.site)
     << " for ";
  if (r.peer < 0)
    os << "its own CTAs";
  else
    os << "peer " << r.peer;
  os << " (counter 0x" << std::hex << r.counter << std::dec << ": expected " << r.expected << ", seen " << r.seen
     << ")";
  return os.str();
}

void throw_if_timed_out(const std::vector<layout::ErrorRecord>& records, const std::string& site) {
  if (records.empty()) return;
  // The root cause is a peer that some rank waited for but that recorded no wait itself: it never arrived.
  std::set<uint32_t> waiting_ranks;
  for (const auto& r : records) waiting_ranks.insert(r.rank);
  size_t blamed = 0;
  for (size_t i = 0; i < records.size(); ++i) {
    const auto& r = records[i];
    if (r.peer >= 0 && uint32_t(r.peer) != r.rank && !waiting_ranks.count(uint32_t(r.peer))) {
      blamed = i;
      break;
    }
  }
  const auto& b = records[blamed];
  std::ostringstream os;
  os << "device wait timed out: " << (b.peer >= 0 ? "peer " : "rank ")
     << (b.peer >= 0 ? int64_t(b.peer) : int64_t(b.rank)) << " stalled; " << describe(b);
  if (records.size() > 1) {
    os << "; all " << records.size() << " records:";
    for (const auto& r : records) os << " [" << describe(r) << "]";
  }
  throw PeerTimeout(site, records, blamed, os.str());
}

}  // namespace symmoe
