// PromptCache: a generator's sequence states kept in host memory between requests
// (params.prompt_cache_mb). When a slot is taken for a prompt that shares little with what its
// KV cells hold, the cells are saved here first (llama_state_seq_get_data_ext); a later prompt
// that extends a saved one has it restored into its slot (llama_state_seq_set_data_ext) and
// decodes only the rest. The session owns one cache for all its instances: one model version's
// states only, so a reload or a canary never restores another version's.
//
// Who may share: an entry restores only for requests of its `salt` (a request's cache_salt):
// clients with different salts never share a state, so one cannot learn another's prompts by
// timing.
//
// Memory: the limit is reserved in the model's budget (it counts in the session's footprint
// from the load on), so the cache never takes room the budget gave another model. Entries go
// least recently used first once the limit is reached. Shed() gives reserved room back to the
// budget — entries first, before any model is evicted — and the cache stays that much smaller
// until the model loads again.
//
// Thread-safety: every method may be called from any thread.
#pragma once

#include <llama.h>

#include <atomic>
#include <cstdint>
#include <list>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/mutex.h"

namespace mmserve {

// How many tokens `a` and `b` share from their start.
size_t CommonPrefix(std::span<const llama_token> a, std::span<const llama_token> b);

class PromptCache {
 public:
  // At most this many entries (a lookup compares the prompt with each).
  static constexpr size_t kMaxEntries = 256;

  struct Entry {
    std::vector<llama_token> tokens;  // what the state holds, in order
    std::string salt;
    std::vector<uint8_t> state;  // one sequence's state, as llama.cpp wrote it
    int64_t bytes() const {
      return static_cast<int64_t>(state.size() + tokens.size() * sizeof(llama_token) + salt.size());
    }
  };
  struct Hit {
    std::shared_ptr<const Entry> entry;  // null: none shares enough
    size_t common = 0;                   // tokens of the prompt the entry holds
  };

  explicit PromptCache(int64_t limit_bytes) : limit_(limit_bytes) {}

  // The entry of `salt` sharing the longest prefix with `prompt` (at most `most` tokens of it),
  // if that is at least `least`; it becomes the most recently used. Counts a lookup, and a hit.
  Hit Find(std::span<const llama_token> prompt, std::string_view salt, size_t least, size_t most);
  // Whether an entry of `salt` holds all of `prefix` (a state of it is in host memory already).
  bool Covers(std::span<const llama_token> prefix, std::string_view salt) const;
  // Counts `tokens` restored from a hit (after its state went back into a slot).
  void CountRestored(size_t tokens) { restored_tokens_.fetch_add(tokens); }
  // Keeps `entry` as the most recently used, dropping entries of its salt that it extends and
  // then the least recently used until it fits. Not kept (false) when it alone is over the
  // limit, or an entry of its salt already holds all its tokens.
  bool Put(Entry entry);
  // Lowers the limit by up to `bytes`, dropping entries to fit under it; returns by how much.
  int64_t Shed(int64_t bytes);

  int64_t limit() const { return limit_.load(); }
  int64_t bytes() const { return bytes_.load(); }
  struct Counts {
    int64_t lookups = 0, hits = 0, restored_tokens = 0, saved = 0, evicted = 0, entries = 0;
  };
  Counts counts() const;

 private:
  void DropOldestLocked(int64_t limit) REQUIRES(mu_);

  mutable Mutex mu_;
  std::list<std::shared_ptr<const Entry>> entries_ GUARDED_BY(mu_);  // most recent first
  std::atomic<int64_t> limit_;
  std::atomic<int64_t> bytes_{0};  // written under mu_
  std::atomic<int64_t> lookups_{0}, hits_{0}, restored_tokens_{0}, saved_{0}, evicted_{0};
};

}  // namespace mmserve
