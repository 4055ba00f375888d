// `mmserve ps | load | unload`: the running server, over its own HTTP API (Ollama's `ps`, with
// Triton's repository calls). The keys come from the environment, as the server's do:
// MMSERVE_API_KEY for ps, MMSERVE_ADMIN_KEY (else MMSERVE_API_KEY) for load and unload.
#pragma once

#include <string>

namespace mmserve {

struct RemoteOptions {
  std::string url = "http://127.0.0.1:8000";  // --url, else MMSERVE_URL
};

// The models the server knows: name, version, state, task, device, memory (MiB), requests in
// flight and when an idle one unloads. 0, or 1 when the server cannot be asked.
int Ps(const RemoteOptions& options);
// POST /v2/repository/models/{name}/load or /unload; prints the outcome. 0, or 1 on an error.
int LoadOrUnload(const RemoteOptions& options, const std::string& name, bool load);

}  // namespace mmserve
