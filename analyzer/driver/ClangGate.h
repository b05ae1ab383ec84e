// How many Clang jobs (parses of C++ translation units, precompiled-header builds) run at once.
// A LibTorch unit holds a few hundred MB while Clang parses it, so `--jobs` alone would multiply
// that. The gate admits a job when nothing else runs, or when the memory the running jobs and this
// one are expected to take fits the budget. A job is expected to take what the last job with the
// same signature took in this run (the caller's choice: the same headers, flags and kind of job),
// as Clang counts it (cxx::ParseResult::clangBytes); a signature not measured yet runs alone. Units
// measured small (a few MB) then run in parallel; LibTorch units (hundreds of MB) one at a time.
#pragma once
#include <condition_variable>
#include <cstddef>
#include <map>
#include <mutex>
#include <string>

namespace shardlint {

class ClangGate {
 public:
  // 256 MiB of what Clang counts: a plain LibTorch unit (`<torch/torch.h>`, about 220 MiB counted,
  // about 310 MB of RSS) runs alone; two units that load its precompiled header (about 110 MiB
  // counted each) run together.
  static constexpr size_t kDefaultBudget = size_t{256} << 20;

  explicit ClangGate(size_t budget = kDefaultBudget) : budget_(budget) {}
  ClangGate(const ClangGate&) = delete;
  ClangGate& operator=(const ClangGate&) = delete;

  struct Ticket {
    std::string signature;
    size_t reserved = 0;
    bool held = false;
  };
  // Waits until a job with `signature` may start, and reserves its expected memory.
  Ticket enter(const std::string& signature);
  // The same without waiting: false (and nothing reserved) when it may not start now.
  bool tryEnter(const std::string& signature, Ticket& ticket);
  // The job has ended; `measured` is what Clang counted for it (0: unknown, it failed). Does
  // nothing for a ticket not held.
  void leave(Ticket& ticket, size_t measured);

  // What a job with `signature` is expected to take: the last measure of one; the whole budget
  // (it runs alone) when there is none.
  size_t estimate(const std::string& signature) const;
  size_t budget() const { return budget_; }
  // The most jobs that ran at once so far.
  size_t mostAtOnce() const;

 private:
  size_t estimateLocked(const std::string& signature) const;
  bool fitsLocked(size_t expected) const { return running_ == 0 || reserved_ + expected <= budget_; }

  const size_t budget_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  size_t running_ = 0;
  size_t reserved_ = 0;
  size_t most_ = 0;
  std::map<std::string, size_t> measured_;
};

// Gives the memory the allocator keeps for reuse back to the system (tcmalloc's
// ReleaseFreeMemory when it is linked in, else glibc's malloc_trim). After a LibTorch unit that
// is a few hundred MB, which the next job (a precompiled header is mapped from its file, not taken
// from the heap) would otherwise come on top of.
void releaseFreeMemory();

}  // namespace shardlint
