// What a GGUF file's header says, read without loading any tensor data, and checked before the
// file reaches llama.cpp: llama.cpp asserts (aborting the process) on some malformed files that
// its own parser accepts, e.g. a vocabulary with the same token twice. Every check here turns
// such a file into an error that names the file and the field.
#pragma once

#include <cstdint>
#include <string>

#include "common/result.h"

namespace mmserve {

struct GgufSummary {
  int64_t weights_bytes = 0;
  bool has_classifier = false;
  std::string architecture;
  int64_t n_layer = 0, n_embd = 0, n_head = 0, n_head_kv = 0, n_ctx_train = 0, n_vocab = 0;
};

// Whether the architecture is an encoder without a decoder (BERT and its kin): it embeds or
// ranks, it cannot generate.
bool IsEncoderArchitecture(const std::string& architecture);
// The task a file is made for: a classification head → rerank, an encoder → embed, else
// generate.
std::string TaskFor(const GgufSummary& gguf);

// Reads and checks the header of the GGUF file at `path`. Hyperparameters are bounded (so that
// estimates built from them cannot overflow) and the vocabulary is checked for what llama.cpp
// asserts on. Never aborts, whatever the file holds.
//
// A file's summary is kept (up to 4096 files) while the file stays the same — device, inode,
// size, modification and change times — so that validation, the memory plan and the load read
// each header once (a 30k-token vocabulary takes milliseconds; a hundred on-demand models at
// start-up took seconds). Errors are not kept: a fixed file is read again. Thread-safe.
Result<GgufSummary> ReadGguf(const std::string& path);

}  // namespace mmserve
