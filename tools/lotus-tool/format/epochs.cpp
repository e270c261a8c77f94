// lotus — lotus-tool format: the definition of an epoch (format/epochs.hpp)
// SPDX-License-Identifier: MIT
#include "format/epochs.hpp"

#include <algorithm>
#include <cstddef>
#include <numeric>

namespace lotus_tool {

namespace {

// One main file's cut, its records taken in time order.
class epoch_cut {
 public:
  epoch_cut(std::vector<epoch_digest>& epochs, std::vector<double>* steps)
      : epochs_(epochs), steps_(steps) {}

  /// Takes the next record; the number of the epoch it falls in, counting every epoch opened
  /// (kept or dropped: kept()).
  std::size_t add(const main_rec& r) {
    if ((r.kind == k_main_queued || r.kind == k_main_startup) && r.first && open_ &&
        cur_.batches > 0) {
      close();
    }
    if (!open_) {
      open_ = true;
      first_ = r.ts;
    }
    switch (r.kind) {
      case k_main_queued:
        if (!waited_) ++queued_before_wait_;
        break;
      case k_main_startup:  // iter(loader) while the workers start: the loop waits for data
        cur_.wait_ms += static_cast<double>(r.dur_ms);
        break;
      case k_main_marker:
        waited_ = true;
        ++cur_.out_of_order;
        break;
      case k_main_wait:
        waited_ = true;
        cur_.wait_ms += static_cast<double>(r.dur_ms);
        ++cur_.waits;
        if (have_consumed_ && r.ts >= consumed_at_) {
          step(r.ts);
          have_consumed_ = false;
        }
        break;
      case k_main_consumed:
        waited_ = true;
        if (have_consumed_ && r.ts >= consumed_at_) step(r.ts);  // from the cache: no wait record
        ++cur_.batches;
        have_consumed_ = true;
        consumed_at_ = r.ts;
        last_ = r.ts;
        break;
      default:
        break;
    }
    return kept_.size();
  }

  /// After the last record: per epoch appended, the batches queued before its first wait.
  std::vector<unsigned> finish() {
    close();
    return std::move(queued_first_);
  }

  /// Whether each epoch opened was appended (has batches and a positive length).
  const std::vector<bool>& kept() const { return kept_; }

 private:
  void step(std::uint64_t ts) {
    ++cur_.steps;
    if (steps_ != nullptr) steps_->push_back(static_cast<double>(ts - consumed_at_) / 1e6);
  }

  void close() {
    if (open_) {
      const bool keep = cur_.batches > 0 && last_ > first_;
      if (keep) {
        cur_.elapsed_ns = last_ - first_;
        cur_.start_ns = first_;
        cur_.seconds = static_cast<double>(cur_.elapsed_ns) / 1e9;
        epochs_.push_back(cur_);
        queued_first_.push_back(static_cast<unsigned>(queued_before_wait_));
      }
      kept_.push_back(keep);
    }
    cur_ = epoch_digest{};
    open_ = false;
    waited_ = false;
    have_consumed_ = false;
    queued_before_wait_ = 0;
  }

  std::vector<epoch_digest>& epochs_;
  std::vector<double>* steps_;
  epoch_digest cur_;
  std::uint64_t first_ = 0, last_ = 0, queued_before_wait_ = 0, consumed_at_ = 0;
  bool open_ = false, waited_ = false, have_consumed_ = false;
  std::vector<unsigned> queued_first_;
  std::vector<bool> kept_;
};

}  // namespace

bool main_rec_of(const record& r, const batch_ref& b, main_rec& out) {
  std::uint16_t kind = 0;
  if (b.kind == batch_kind::queued) {
    kind = k_main_queued;
  } else if (b.kind == batch_kind::wait) {
    kind = r.dur_ns == k_marker_ns ? k_main_marker : k_main_wait;
  } else if (b.kind == batch_kind::consumed) {
    kind = k_main_consumed;
  } else {
    return false;
  }
  out = main_rec{r.start_ns, static_cast<float>(static_cast<double>(r.dur_ns) / 1e6), kind,
                 static_cast<std::uint16_t>(b.idx == 0 ? 1 : 0)};
  return true;
}

std::vector<unsigned> cut_main_epochs(std::vector<main_rec>& recs,
                                      std::vector<epoch_digest>& epochs,
                                      std::vector<double>* steps) {
  std::stable_sort(recs.begin(), recs.end(),
                   [](const main_rec& a, const main_rec& b) { return a.ts < b.ts; });
  epoch_cut cut(epochs, steps);
  for (const main_rec& r : recs) cut.add(r);
  return cut.finish();
}

std::vector<std::int64_t> main_epoch_of(const std::vector<main_rec>& recs,
                                        std::vector<epoch_digest>* epochs) {
  std::vector<std::size_t> order(recs.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&recs](std::size_t a, std::size_t b) { return recs[a].ts < recs[b].ts; });
  std::vector<epoch_digest> own;
  epoch_cut cut(epochs != nullptr ? *epochs : own, nullptr);
  std::vector<std::int64_t> out(recs.size(), -1);
  for (const std::size_t i : order) out[i] = static_cast<std::int64_t>(cut.add(recs[i]));
  cut.finish();
  // Opened epoch k -> its index among the kept ones (-1: dropped).
  std::vector<std::int64_t> index(cut.kept().size(), -1);
  std::int64_t next = 0;
  for (std::size_t k = 0; k < index.size(); ++k) {
    if (cut.kept()[k]) index[k] = next++;
  }
  for (std::int64_t& e : out) e = index[static_cast<std::size_t>(e)];
  return out;
}

main_rec startup_rec(std::uint64_t begin_ns, double init_ms) {
  return main_rec{begin_ns, static_cast<float>(init_ms), k_main_startup, 1};
}

}  // namespace lotus_tool
