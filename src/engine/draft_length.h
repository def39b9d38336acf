#pragma once
// How many tokens to draft next: the number that maximises the expected tokens per second, from
// the acceptance measured so far (per draft position) and the measured time of a round with that
// many drafts. Speculation never changes the tokens, only the speed, so the choice may follow
// the clock. With every draft rejected it settles on 0 (plain decode) and probes 1 draft every
// kProbeEvery rounds, so the cost of a useless draft head stays a few percent; while drafting it
// runs one plain round every kProbeEvery rounds, so the time drafts are weighed against stays current.
#include <cstddef>
#include <vector>

namespace qwenrt {

class DraftLength {
 public:
  // adaptive = false: always max_drafts.
  DraftLength(int max_drafts, bool adaptive);

  int choose();  // the next round's draft count, in [0, max_drafts]
  // A round drafted `drafted` tokens and `accepted` of them were accepted; it took `seconds`.
  void record(int drafted, int accepted, double seconds);

  int max_drafts() const { return max_; }
  // Acceptance estimate of draft position i (1-based), given drafts before it were accepted.
  double acceptance(int i) const { return accept_[static_cast<std::size_t>(i)]; }

  static constexpr int kProbeEvery = 16;
  static constexpr double kDecay = 0.85;          // weight of the old estimate in each later update
  static constexpr double kPrior = 0.6;           // acceptance assumed before any try: the first rounds draft
  static constexpr double kWarmTries = 8.0;       // tries averaged with the prior before the moving average
  static constexpr std::size_t kTimeSamples = 9;  // round times kept per draft count (their median counts)

 private:
  double expected_tokens(int k) const;  // 1 + Σ_{j≤k} Π_{i≤j} acceptance(i)
  double round_seconds(int k) const;    // measured, else extrapolated from what was measured
  double median_seconds(int k) const;   // of the rounds with k drafts measured so far; < 0: none

  int max_;
  bool adaptive_;
  std::vector<double> accept_;                // [max_ + 1], index 0 unused
  std::vector<double> hits_, tries_;          // per position, for the first kWarmTries
  std::vector<std::vector<double>> seconds_;  // [max_ + 1]: the last kTimeSamples round times
  int rounds_ = 0, plain_rounds_ = 0;
};

}  // namespace qwenrt
