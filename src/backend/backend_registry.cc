#include "backend/backend_registry.h"

namespace mmserve {

BackendRegistry::BackendRegistry()
    : known_tasks_({{"identity", {"identity"}},
                    {"llama", {"generate", "embed", "rerank"}},
                    {"acl", {"infer"}},
                    {"opencv", {"infer"}}}) {}

void BackendRegistry::Register(std::unique_ptr<Backend> backend) {
  known_tasks_[backend->name()] = backend->tasks();
  backends_[backend->name()] = std::move(backend);
}

Result<Backend*> BackendRegistry::Find(const std::string& name) const {
  if (auto it = backends_.find(name); it != backends_.end()) return it->second.get();
  if (known_tasks_.count(name)) {
    return Unimplemented("backend '" + name + "' is not built into this mmserve");
  }
  return NotFound("unknown backend '" + name + "'");
}

std::vector<std::string> BackendRegistry::BuiltIn() const {
  std::vector<std::string> out;
  for (const auto& [name, backend] : backends_) out.push_back(name);
  return out;
}

std::vector<std::string> BackendRegistry::BackendNames() const {
  std::vector<std::string> out;
  for (const auto& [name, tasks] : known_tasks_) out.push_back(name);
  return out;
}

std::vector<std::string> BackendRegistry::Tasks(const std::string& backend) const {
  auto it = known_tasks_.find(backend);
  return it == known_tasks_.end() ? std::vector<std::string>{} : it->second;
}

bool BackendRegistry::NeedsPath(const std::string& backend) const {
  auto it = backends_.find(backend);
  return it == backends_.end() || it->second->needs_path();
}

std::optional<int> BackendRegistry::DeviceCount(const std::string& backend) const {
  auto it = backends_.find(backend);
  if (it == backends_.end()) return std::nullopt;
  const int count = it->second->runtime().DeviceCount();
  if (count < 0) return std::nullopt;  // the runtime cannot say (AscendCL absent)
  return count;
}

void BackendRegistry::ValidateModel(ModelConfig& model, ConfigErrors& errors) const {
  if (auto it = backends_.find(model.backend); it != backends_.end()) {
    it->second->Validate(model, errors);
    ValidateImageStages(*it->second, model, errors);
    return;
  }
  if (!complete_) return;  // a partial registry (a test's): loading reports what is missing
  std::string built;
  for (const auto& [name, backend] : backends_) built += (built.empty() ? "" : ", ") + name;
  errors.Add({.where = model.where, .field = model.Field("backend"),
              .expected = "a backend built into this mmserve (" + built + ")",
              .found = "\"" + model.backend + "\", which this build does not have"});
}

void BackendRegistry::ValidateImageStages(const Backend& backend, const ModelConfig& model,
                                          ConfigErrors& errors) const {
  for (const char* stage : {"preprocess", "postprocess"}) {
    if (std::string(stage) == "preprocess" ? !model.preprocess : !model.postprocess) continue;
#ifndef MMSERVE_HAVE_OPENCV
    errors.Add({.where = model.where, .field = model.Field(stage),
                .expected = "none: this mmserve is built without OpenCV (MMSERVE_OPENCV=OFF), "
                            "which the image stages run on",
                .found = "a " + std::string(stage) + " stage"});
#endif
    if (!backend.takes_tensors()) {
      errors.Add({.where = model.where, .field = model.Field(stage),
                  .expected = "none for backend " + backend.name() +
                              ": image stages wrap tensor models (acl, opencv, identity)",
                  .found = "a " + std::string(stage) + " stage"});
    }
  }
}

bool BackendRegistry::ExecutesInline(const ModelConfig& model) const {
  auto it = backends_.find(model.backend);
  return it != backends_.end() && it->second->ExecutesInline(model);
}

bool BackendRegistry::RunsIsolated(const ModelConfig& model) const {
  auto it = backends_.find(model.backend);
  return it != backends_.end() && it->second->RunsIsolated(model);
}

bool BackendRegistry::RunsOpenMp(const ModelConfig& model) const {
  auto it = backends_.find(model.backend);
  return it != backends_.end() && it->second->RunsOpenMp(model);
}

}  // namespace mmserve
