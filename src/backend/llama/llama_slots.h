// SlotReuse: what each of a generator's KV sequences holds between requests, and which free
// sequence a new prompt takes (llama_generator.h). A prompt goes to the free sequence whose
// cells share the longest prefix with it (ties: the least recently used); its cells past that
// prefix are removed and decoding starts there. A state saved in the host prompt cache
// (prompt_cache.h) that extends the prompt further than any sequence is restored into the least
// recently used one. Cells a choice cuts are saved there first, when the cut loses a quarter of
// them or host memory holds no state of what the sequence keeps. Reuse is per `cache_salt`:
// cells of one salt never serve another. Runs on the generator's thread.
#pragma once

#include <llama.h>

#include <functional>
#include <string>
#include <vector>

#include "backend/llama/llama_encoder.h"
#include "backend/llama/prompt_cache.h"

namespace mmserve {

class SlotReuse {
 public:
  // `context`, `stats` and `cache` (null: no host prompt cache) are the generator's and outlive
  // this. Logs once when the model's cache cannot be cut partway.
  SlotReuse(const llama_model* model, int sequences, LlamaContext& context, LlamaStats& stats,
            PromptCache* cache);

  // Whether the model's cache can be cut partway by position: not a recurrent or hybrid
  // model's state, not a sliding window's. Those decode every prompt in full.
  bool enabled() const { return enabled_; }

  struct Choice {
    int seq = -1;
    size_t reused = 0;  // prompt tokens whose cells the sequence holds now; decode from there
  };
  // The sequence for `prompt` among those `is_free`, its cells made ready: cut, or restored.
  // `allowed`: the request lets its prompt share cells (cache_prompt).
  Choice Choose(const std::vector<llama_token>& prompt, const std::string& salt, bool allowed,
                const std::function<bool(int)>& is_free);
  // Sequence `seq`'s request ended and its cells hold `tokens`, for a later prompt to share.
  void Keep(int seq, std::vector<llama_token> tokens);
  // ... or ended with nothing to share: its cells are emptied.
  void Forget(int seq);
  // Before the context is released (the generator idle): every sequence's cells go to the host
  // cache, then the records go with the cells.
  void SaveAll();
  void ForgetAll();

 private:
  struct Cached {
    std::vector<llama_token> tokens;
    std::string salt;
    uint64_t used = 0;
  };
  static constexpr size_t kMinSaved = 16;  // fewer cached tokens are not worth a saved state

  // Cuts sequence `seq` after `keep` tokens, saving what it held first when worth it; false when
  // llama.cpp could not cut it (the sequence is then empty).
  bool Cut(int seq, size_t keep);
  // Saves what sequence `seq`'s cells hold to the host cache, if they hold enough.
  void SaveState(int seq);
  // Restores `hit` into sequence `seq` and cuts it after `hit.common` tokens; false (the
  // sequence empty) when llama.cpp refuses the state.
  bool RestoreState(int seq, const PromptCache::Hit& hit);

  LlamaContext& context_;
  LlamaStats& stats_;
  PromptCache* const cache_;
  const bool enabled_;
  std::vector<Cached> cached_;  // per sequence, while its slot is free
  uint64_t uses_ = 0;
};

}  // namespace mmserve
