#include "backend/llama/prompt_cache.h"

#include <algorithm>

namespace mmserve {

size_t CommonPrefix(std::span<const llama_token> a, std::span<const llama_token> b) {
  const size_t n = std::min(a.size(), b.size());
  return static_cast<size_t>(std::mismatch(a.begin(), a.begin() + static_cast<ptrdiff_t>(n),
                                           b.begin()).first - a.begin());
}

PromptCache::Hit PromptCache::Find(std::span<const llama_token> prompt, std::string_view salt,
                                   size_t least, size_t most) {
  lookups_.fetch_add(1);
  prompt = prompt.first(std::min(most, prompt.size()));
  MutexLock lock(mu_);
  auto best = entries_.end();
  size_t best_common = 0;
  for (auto it = entries_.begin(); it != entries_.end(); ++it) {
    if ((*it)->salt != salt) continue;
    const size_t common = CommonPrefix((*it)->tokens, prompt);
    if (common > best_common) {
      best = it;
      best_common = common;
    }
  }
  if (best == entries_.end() || best_common < least || best_common == 0) return {};
  entries_.splice(entries_.begin(), entries_, best);
  hits_.fetch_add(1);
  return {.entry = entries_.front(), .common = best_common};
}

bool PromptCache::Covers(std::span<const llama_token> prefix, std::string_view salt) const {
  MutexLock lock(mu_);
  return std::any_of(entries_.begin(), entries_.end(), [&](const auto& e) {
    return e->salt == salt && CommonPrefix(e->tokens, prefix) == prefix.size();
  });
}

bool PromptCache::Put(Entry entry) {
  const int64_t bytes = entry.bytes();
  MutexLock lock(mu_);
  if (bytes > limit_.load() || entry.tokens.empty()) return false;
  for (auto it = entries_.begin(); it != entries_.end();) {
    const Entry& e = **it;
    const bool same_salt = e.salt == entry.salt;
    const size_t common = same_salt ? CommonPrefix(e.tokens, entry.tokens) : 0;
    if (same_salt && common == entry.tokens.size()) return false;  // it holds them all already
    if (same_salt && common == e.tokens.size()) {                   // the new one extends it
      bytes_.fetch_sub(e.bytes());
      it = entries_.erase(it);
      continue;
    }
    ++it;
  }
  DropOldestLocked(limit_.load() - bytes);
  if (entries_.size() >= kMaxEntries) {
    bytes_.fetch_sub(entries_.back()->bytes());
    entries_.pop_back();
    evicted_.fetch_add(1);
  }
  entries_.push_front(std::make_shared<const Entry>(std::move(entry)));
  bytes_.fetch_add(bytes);
  saved_.fetch_add(1);
  return true;
}

int64_t PromptCache::Shed(int64_t bytes) {
  MutexLock lock(mu_);
  const int64_t shed = std::clamp<int64_t>(bytes, 0, limit_.load());
  limit_.fetch_sub(shed);
  DropOldestLocked(limit_.load());
  return shed;
}

void PromptCache::DropOldestLocked(int64_t limit) {
  while (!entries_.empty() && bytes_.load() > limit) {
    bytes_.fetch_sub(entries_.back()->bytes());
    entries_.pop_back();
    evicted_.fetch_add(1);
  }
}

PromptCache::Counts PromptCache::counts() const {
  Counts c{.lookups = lookups_.load(),
           .hits = hits_.load(),
           .restored_tokens = restored_tokens_.load(),
           .saved = saved_.load(),
           .evicted = evicted_.load()};
  MutexLock lock(mu_);
  c.entries = static_cast<int64_t>(entries_.size());
  return c;
}

}  // namespace mmserve
