#include "config/model_dir.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <charconv>
#include <vector>

#include "common/strings.h"

namespace mmserve {

namespace fs = std::filesystem;

namespace {

// A directory with more entries than this is not a model directory (and is not listed whole).
constexpr size_t kMaxEntries = 4096;

bool IsNumber(const std::string& text) {
  int64_t n = 0;
  auto [end, err] = std::from_chars(text.data(), text.data() + text.size(), n);
  return err == std::errc() && end == text.data() + text.size() && n >= 1;
}

// "model-00001-of-00003.gguf": one part of a split GGUF file, which llama.cpp loads from the
// first part with the others beside it; mmserve's header checks read one file.
bool IsSplitGguf(const fs::path& path) {
  const std::string stem = path.stem().string();
  const size_t of = stem.rfind("-of-");
  if (path.extension() != ".gguf" || of == std::string::npos || of < 6) return false;
  const std::string part = stem.substr(of - 5, 5), total = stem.substr(of + 4);
  return stem[of - 6] == '-' && total.size() == 5 && IsNumber(part) && IsNumber(total);
}

// The entries of `dir`, sorted, hidden ones left out.
Result<std::vector<fs::directory_entry>> List(const fs::path& dir) {
  std::error_code ec;
  std::vector<fs::directory_entry> entries;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (it->path().filename().string().starts_with(".")) continue;
    if (entries.size() == kMaxEntries) {
      return InvalidArgument("model directory " + dir.string() + ": more than " +
                             std::to_string(kMaxEntries) + " entries");
    }
    entries.push_back(*it);
  }
  if (ec)
    return InvalidArgument("cannot list model directory " + dir.string() + ": " + ec.message());
  std::sort(entries.begin(), entries.end());
  return entries;
}

// A sub-folder's model: its one model file, or itself when it holds version folders. Several
// model files are passed on as the folder, for the parser to name them in its error.
Result<std::optional<fs::path>> FolderModel(const fs::path& folder) {
  MMS_ASSIGN_OR_RETURN(auto entries, List(folder));
  std::vector<fs::path> files;
  bool versions = false;
  std::error_code ec;
  for (const auto& e : entries) {
    if (e.is_directory(ec) && IsNumber(e.path().filename().string())) versions = true;
    if (e.is_regular_file(ec) && IsModelFile(e.path())) files.push_back(e.path());
  }
  if (versions || files.size() > 1) return std::optional<fs::path>(folder);
  if (files.size() == 1) return std::optional<fs::path>(files.front());
  return std::optional<fs::path>();
}

std::string Emit(const std::vector<ModelArg>& models) {
  YAML::Emitter out;
  out << YAML::BeginMap << YAML::Key << "models" << YAML::Value << YAML::BeginSeq;
  for (const auto& m : models) {
    out << YAML::Flow << YAML::BeginMap << YAML::Key << "name" << YAML::Value << YAML::DoubleQuoted
        << m.name << YAML::Key << "path" << YAML::Value << YAML::DoubleQuoted << m.path.string();
    if (!m.task.empty()) out << YAML::Key << "task" << YAML::Value << YAML::DoubleQuoted << m.task;
    out << YAML::EndMap;
  }
  out << YAML::EndSeq << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

}  // namespace

bool IsModelFile(const fs::path& path) {
  const std::string ext = path.extension().string();
  return ext == ".gguf" || ext == ".onnx" || ext == ".om";
}

Result<std::string> ModelDirYaml(const fs::path& dir, const std::string& single_name) {
  std::error_code ec;
  const fs::path root = fs::absolute(dir, ec).lexically_normal();
  if (!ec && IsModelFile(root) && fs::is_regular_file(root, ec)) {  // a mounted PVC file
    return Emit({{.name = single_name.empty() ? root.stem().string() : single_name, .path = root}});
  }
  if (ec || !fs::is_directory(root, ec)) return NotFound("no model directory " + dir.string());
  MMS_ASSIGN_OR_RETURN(auto entries, List(root));
  std::vector<ModelArg> models;
  std::vector<std::string> skipped, versions;
  for (const auto& e : entries) {
    const fs::path& p = e.path();
    if (e.is_directory(ec) && IsNumber(p.filename().string())) {
      versions.push_back(p.filename().string());  // KServe's layout: versions of one model
      continue;
    }
    if (e.is_regular_file(ec) && IsSplitGguf(p)) {
      return InvalidArgument("model directory " + root.string() + ": " + p.filename().string() +
                             " is one part of a split GGUF file; merge the parts into one file "
                             "(llama-gguf-split --merge)");
    }
    if (e.is_regular_file(ec) && IsModelFile(p)) {
      models.push_back({.name = p.stem().string(), .path = p});
    } else if (e.is_directory(ec)) {
      MMS_ASSIGN_OR_RETURN(auto model, FolderModel(p));
      if (model)
        models.push_back({.name = p.filename().string(), .path = *model});
      else
        skipped.push_back(p.filename().string() + "/");
    } else {
      skipped.push_back(p.filename().string());
    }
  }
  if (!versions.empty()) {
    if (!models.empty()) {
      return InvalidArgument("model directory " + root.string() + " mixes version folders (" +
                             Join(versions, ", ") + ") with models (" + models.front().name +
                             (models.size() > 1 ? ", ..." : "") +
                             "); version folders belong in a folder named after their model");
    }
    // The directory is one model whose numbered folders are its versions.
    return Emit({{.name = single_name.empty() ? root.filename().string() : single_name,
                  .path = root}});
  }
  if (models.empty()) {
    if (skipped.size() > 10) skipped.resize(10);
    return InvalidArgument("model directory " + root.string() +
                           ": expected a model file (.gguf, .onnx or .om) or a folder holding "
                           "one, found " +
                           (skipped.empty() ? std::string("nothing") : Join(skipped, ", ")));
  }
  if (!single_name.empty()) {
    if (models.size() != 1) {
      std::vector<std::string> names;
      for (const auto& m : models) names.push_back(m.name);
      return InvalidArgument("--model-name names the one model of a model directory; " +
                             root.string() + " holds " + std::to_string(models.size()) + " (" +
                             Join(names, ", ") + ")");
    }
    models.front().name = single_name;
  }
  return Emit(models);
}

Result<std::vector<ModelArg>> ParseModelArgs(const std::vector<std::string>& models,
                                             const std::vector<std::string>& tasks) {
  if (tasks.size() > 1 && tasks.size() != models.size()) {
    return InvalidArgument(
        "--task: expected one for every --model, or one per --model in "
        "order; found " +
        std::to_string(tasks.size()) + " for " + std::to_string(models.size()) + " models");
  }
  std::vector<ModelArg> out;
  for (size_t i = 0; i < models.size(); ++i) {
    const std::string& arg = models[i];
    ModelArg m;
    // NAME=PATH when what comes before '=' could be a name (a path may hold '=' after a '/').
    const size_t eq = arg.find('=');
    std::string path = arg;
    if (eq != std::string::npos && arg.substr(0, eq).find('/') == std::string::npos) {
      m.name = arg.substr(0, eq);
      path = arg.substr(eq + 1);
    }
    if (path.empty()) {
      return InvalidArgument("--model \"" + arg + "\": expected [NAME=]PATH, found no path");
    }
    std::error_code ec;
    m.path = fs::absolute(path, ec).lexically_normal();
    if (ec) return InvalidArgument("--model \"" + arg + "\": " + ec.message());
    if (m.name.empty()) m.name = m.path.stem().string();
    if (!tasks.empty()) m.task = tasks.size() == 1 ? tasks.front() : tasks[i];
    out.push_back(std::move(m));
  }
  return out;
}

std::string ModelArgsYaml(const std::vector<ModelArg>& models) { return Emit(models); }

}  // namespace mmserve
