#include "driver/ClangGate.h"

#include <dlfcn.h>
#include <malloc.h>

#include <algorithm>

namespace shardlint {

namespace {
// A job never counts for less than this (even a parse that fails at once touches LLVM's tables).
constexpr size_t kLeast = size_t{1} << 20;
}  // namespace

size_t ClangGate::estimateLocked(const std::string& signature) const {
  auto it = measured_.find(signature);
  return it == measured_.end() ? budget_ : std::max(it->second, kLeast);
}

size_t ClangGate::estimate(const std::string& signature) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return estimateLocked(signature);
}

size_t ClangGate::mostAtOnce() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return most_;
}

ClangGate::Ticket ClangGate::enter(const std::string& signature) {
  std::unique_lock<std::mutex> lock(mutex_);
  // The estimate is read again on each wake-up: a job that ended may have measured this signature.
  changed_.wait(lock, [&] { return fitsLocked(estimateLocked(signature)); });
  size_t expected = estimateLocked(signature);
  ++running_;
  reserved_ += expected;
  most_ = std::max(most_, running_);
  return Ticket{signature, expected, true};
}

bool ClangGate::tryEnter(const std::string& signature, Ticket& ticket) {
  std::lock_guard<std::mutex> lock(mutex_);
  size_t expected = estimateLocked(signature);
  if (!fitsLocked(expected)) return false;
  ++running_;
  reserved_ += expected;
  most_ = std::max(most_, running_);
  ticket = Ticket{signature, expected, true};
  return true;
}

void ClangGate::leave(Ticket& ticket, size_t measured) {
  if (!ticket.held) return;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    --running_;
    reserved_ -= std::min(reserved_, ticket.reserved);
    if (measured) measured_[ticket.signature] = measured;
  }
  ticket.held = false;
  changed_.notify_all();
}

void releaseFreeMemory() {
  using Release = void (*)();
  static const Release tcmalloc = reinterpret_cast<Release>(::dlsym(RTLD_DEFAULT, "MallocExtension_ReleaseFreeMemory"));
  if (tcmalloc) {
    tcmalloc();
    return;
  }
#ifdef __GLIBC__
  ::malloc_trim(0);
#endif
}

}  // namespace shardlint
