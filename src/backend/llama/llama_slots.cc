#include "backend/llama/llama_slots.h"

#include <algorithm>
#include <span>

#include "common/logging.h"

namespace mmserve {

SlotReuse::SlotReuse(const llama_model* model, int sequences, LlamaContext& context,
                     LlamaStats& stats, PromptCache* cache)
    : context_(context),
      stats_(stats),
      cache_(cache),
      enabled_(!llama_model_is_recurrent(model) && !llama_model_is_hybrid(model) &&
               llama_model_n_swa(model) == 0),
      cached_(static_cast<size_t>(sequences)) {
  if (!enabled_) spdlog::info("generator: this model's cache cannot be cut partway; every prompt "
                              "is decoded in full (no reuse across requests)");
}

SlotReuse::Choice SlotReuse::Choose(const std::vector<llama_token>& prompt,
                                    const std::string& salt, bool allowed,
                                    const std::function<bool(int)>& is_free) {
  const bool reuse = enabled_ && allowed;
  const size_t most = prompt.size() - 1;  // the last prompt token is always decoded
  int best = -1, oldest = -1;
  size_t best_common = 0;
  for (int seq = 0; seq < static_cast<int>(cached_.size()); ++seq) {
    if (!is_free(seq)) continue;
    const Cached& c = cached_[static_cast<size_t>(seq)];
    if (oldest < 0 || c.used < cached_[static_cast<size_t>(oldest)].used) oldest = seq;
    const size_t common =
        reuse && c.salt == salt ? CommonPrefix(c.tokens, std::span(prompt).first(most)) : 0;
    if (common > best_common) {
      best = seq;
      best_common = common;
    }
  }
  // A short share (a BOS, a template's first marker) is not worth another cache: reuse starts
  // at 16 tokens, or half the prompt; below that the least recently used slot is taken.
  const size_t least = std::min<size_t>(16, (prompt.size() + 1) / 2);
  if (best < 0 || best_common < least) {
    best = oldest;
    best_common = 0;
  }
  // Host memory only for a longer share than the slot's by a worthwhile margin: a restore
  // copies the whole state, and over the best slot it would first cost that slot a save.
  PromptCache::Hit hit;
  const size_t margin = best_common > 0 ? kMinSaved : 1;
  if (reuse && cache_) hit = cache_->Find(prompt, salt, std::max(least, best_common + margin), most);
  if (hit.entry) best = oldest;  // the slot whose cells are least likely to be asked for again
  if (!Cut(best, hit.entry ? 0 : best_common)) best_common = 0;
  if (!context_.get()) best_common = 0;  // released: the cells are gone (ForgetAll cleared them)
  if (hit.entry) best_common = RestoreState(best, hit) ? hit.common : 0;
  cached_[static_cast<size_t>(best)] = Cached{.salt = salt, .used = ++uses_};
  if (best_common > 0) stats_.reused_prompt_tokens.fetch_add(best_common, std::memory_order_relaxed);
  return {.seq = best, .reused = best_common};
}

bool SlotReuse::Cut(int seq, size_t keep) {
  const Cached& c = cached_[static_cast<size_t>(seq)];
  llama_context* context = context_.get();
  if (!context || c.tokens.size() <= keep) return true;
  // Saved when the cut loses much of what the cells hold, or when host memory holds no state
  // of the prefix the slot keeps (the one copy from which other slots can restore a shared
  // system prompt). Not for every new question after a long prefix already saved: each copy
  // costs the state's whole size.
  const size_t lost = c.tokens.size() - keep;
  if (cache_ && lost >= kMinSaved &&
      (lost >= c.tokens.size() / 4 || !cache_->Covers(std::span(c.tokens).first(keep), c.salt))) {
    SaveState(seq);
  }
  if (llama_memory_seq_rm(llama_get_memory(context), seq, static_cast<llama_pos>(keep), -1)) {
    return true;
  }
  llama_memory_seq_rm(llama_get_memory(context), seq, -1, -1);
  return false;
}

void SlotReuse::Keep(int seq, std::vector<llama_token> tokens) {
  cached_[static_cast<size_t>(seq)].tokens = std::move(tokens);
}

void SlotReuse::Forget(int seq) {
  cached_[static_cast<size_t>(seq)].tokens.clear();
  if (llama_context* context = context_.get()) {  // null: released, and never made again
    llama_memory_seq_rm(llama_get_memory(context), seq, -1, -1);
  }
}

void SlotReuse::SaveAll() {
  for (int seq = 0; seq < static_cast<int>(cached_.size()); ++seq) SaveState(seq);
}

void SlotReuse::ForgetAll() {
  for (auto& c : cached_) c = Cached{};
}

void SlotReuse::SaveState(int seq) {
  const Cached& c = cached_[static_cast<size_t>(seq)];
  llama_context* context = context_.get();
  if (!cache_ || !context || c.tokens.size() < kMinSaved) return;
  const size_t size = llama_state_seq_get_size_ext(context, seq, LLAMA_STATE_SEQ_FLAGS_NONE);
  if (size == 0 || static_cast<int64_t>(size) > cache_->limit()) return;
  PromptCache::Entry entry{.tokens = c.tokens, .salt = c.salt};
  entry.state.resize(size);
  const size_t written = llama_state_seq_get_data_ext(context, entry.state.data(), size, seq,
                                                      LLAMA_STATE_SEQ_FLAGS_NONE);
  if (written == 0) return;
  entry.state.resize(written);
  cache_->Put(std::move(entry));
}

bool SlotReuse::RestoreState(int seq, const PromptCache::Hit& hit) {
  auto made = context_.Acquire();  // a released context is made again for it
  if (!made.ok()) return false;
  llama_memory_t memory = llama_get_memory(*made);
  llama_memory_seq_rm(memory, seq, -1, -1);
  const std::vector<uint8_t>& state = hit.entry->state;
  if (llama_state_seq_set_data_ext(*made, state.data(), state.size(), seq,
                                   LLAMA_STATE_SEQ_FLAGS_NONE) == 0 ||
      !llama_memory_seq_rm(memory, seq, static_cast<llama_pos>(hit.common), -1)) {
    llama_memory_seq_rm(memory, seq, -1, -1);
    return false;
  }
  cache_->CountRestored(hit.common);
  return true;
}

}  // namespace mmserve
