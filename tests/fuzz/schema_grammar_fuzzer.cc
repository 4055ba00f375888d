// Fuzzes the JSON schema → grammar path (backend/llama/llama_schema.cc): the bounds walk, then
// llama.cpp's converter, then llama.cpp's grammar parser on what it produced. Whatever a client
// sends as response_format.json_schema.schema (or a tool's parameters) goes this way; it must
// answer an error or a grammar that parses, within the harness's time and memory limits.
#include <llama.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "backend/llama/llama_chat.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string schema(reinterpret_cast<const char*>(data), size);
  auto grammar = mmserve::SchemaToGrammar(schema, "schema");
  if (!grammar.ok()) return 0;
  if (grammar->empty()) std::abort();  // compiled, yet nothing to sample with
  // A grammar the converter wrote must parse (no vocabulary: the rules alone are checked).
  llama_sampler* sampler = llama_sampler_init_grammar(nullptr, grammar->c_str(), "root");
  if (sampler) llama_sampler_free(sampler);
  return 0;
}
