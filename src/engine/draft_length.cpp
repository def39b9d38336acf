#include "engine/draft_length.h"

#include <algorithm>

#include "core/error.h"

namespace qwenrt {

DraftLength::DraftLength(int max_drafts, bool adaptive)
    : max_(max_drafts),
      adaptive_(adaptive),
      accept_(static_cast<std::size_t>(max_drafts) + 1, kPrior),
      hits_(static_cast<std::size_t>(max_drafts) + 1, 0.0),
      tries_(static_cast<std::size_t>(max_drafts) + 1, 0.0),
      seconds_(static_cast<std::size_t>(max_drafts) + 1) {
  if (max_drafts < 1 || max_drafts > 16) fail("draft tokens must be in [1, 16], got ", max_drafts);
}

double DraftLength::expected_tokens(int k) const {
  double e = 1, p = 1;
  for (int j = 1; j <= k; ++j) e += p *= accept_[static_cast<std::size_t>(j)];
  return e;
}

double DraftLength::round_seconds(int k) const {
  const auto at = [&](int j) { return median_seconds(j); };
  if (at(k) > 0) return at(k);
  // Linear in k through the nearest measured counts below and above; with one side only, the
  // slope of the two nearest measured ones, else a draft row costing 30% of a plain round.
  int lo = k - 1, hi = k + 1;
  while (lo >= 0 && at(lo) <= 0) --lo;
  while (hi <= max_ && at(hi) <= 0) ++hi;
  if (lo >= 0 && hi <= max_) return at(lo) + (at(hi) - at(lo)) * (k - lo) / (hi - lo);
  const int known = lo >= 0 ? lo : hi;
  if (known < 0 || known > max_) return 1.0 + 0.3 * k;  // nothing measured: relative units
  int other = known == lo ? lo - 1 : hi + 1;
  while (other >= 0 && other <= max_ && at(other) <= 0) other += known == lo ? -1 : 1;
  double slope = 0.3 * at(known) / (1.0 + 0.3 * known);
  if (other >= 0 && other <= max_) slope = (at(known) - at(other)) / (known - other);
  return at(known) + slope * (k - known);
}

int DraftLength::choose() {
  if (!adaptive_) return max_;
  ++rounds_;
  // The second round is plain decode once: its time is what every draft count is measured against.
  if (rounds_ == 2 && seconds_[0].empty()) return 0;
  int best = 0;
  double best_rate = expected_tokens(0) / round_seconds(0);
  for (int k = 1; k <= max_; ++k) {
    const double rate = expected_tokens(k) / round_seconds(k);
    if (rate > best_rate) best = k, best_rate = rate;
  }
  if (best == 0 && ++plain_rounds_ % kProbeEvery == 0) return 1;  // keep measuring the first draft
  if (best > 0 && rounds_ % kProbeEvery == 0) return 0;           // and the plain round it is weighed against
  return best;
}

void DraftLength::record(int drafted, int accepted, double seconds) {
  for (int i = 1; i <= drafted && i <= accepted + 1; ++i) {  // position i was tried when i − 1 were accepted
    const auto at = static_cast<std::size_t>(i);
    const double hit = i <= accepted ? 1.0 : 0.0;
    // The first tries are averaged with the prior as two pseudo-tries (a head that never hits is
    // found out in a few rounds), later ones move a moving average (acceptance drifts with the text).
    hits_[at] += hit;
    ++tries_[at];
    accept_[at] = tries_[at] <= kWarmTries ? (2 * kPrior + hits_[at]) / (2 + tries_[at]) : kDecay * accept_[at] + (1 - kDecay) * hit;
  }
  auto& samples = seconds_[static_cast<std::size_t>(drafted)];
  if (samples.size() == kTimeSamples) samples.erase(samples.begin());
  samples.push_back(seconds);
}

// The median of the last kTimeSamples rounds: a round slowed by other work on the machine does not
// move it (a moving average would carry one slow sample for many rounds).
double DraftLength::median_seconds(int k) const {
  std::vector<double> s = seconds_[static_cast<std::size_t>(k)];
  if (s.empty()) return -1.0;
  std::nth_element(s.begin(), s.begin() + static_cast<long>(s.size() / 2), s.end());
  return s[s.size() / 2];
}

}  // namespace qwenrt
