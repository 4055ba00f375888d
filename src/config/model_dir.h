// A model directory served without a YAML file: `mmserve serve DIR` (or `--model-dir DIR`), the
// shape KServe's storage initializer hands a serving runtime in /mnt/models. The directory stands
// for a YAML file with one model per model file found in it; the parser then checks that file as
// it checks any other, so a directory is served exactly as the equivalent YAML would be.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "common/result.h"

namespace mmserve {

// Whether `path` names a model file by its extension: .gguf (llama), .onnx (opencv), .om (acl).
bool IsModelFile(const std::filesystem::path& path);

// The YAML text that `dir` stands for. One model per model file directly in `dir`, named by the
// file's stem, and one per sub-folder named by the folder: its one model file, or its numeric
// version folders (Triton's layout). A directory that itself holds numeric version folders
// (KServe's layout of one model: /mnt/models/1/model.onnx, 2/...) is one model of those
// versions, named `single_name` or after the directory. Hidden entries (`.git`, a ConfigMap's
// `..data`) and other files are skipped; split GGUF files are refused. With `single_name` the
// directory must hold exactly one model, which takes that name (KServe passes the
// InferenceService's name). Paths are absolute; every other setting is the default. `dir` may
// also be one model file (KServe mounts a PVC's file there): that model. Error: no model found, or the listing failed.
Result<std::string> ModelDirYaml(const std::filesystem::path& dir, const std::string& single_name);

// A model named on the command line: `mmserve serve --model [NAME=]PATH [--task TASK]`.
struct ModelArg {
  std::string name;  // NAME, else the file's stem
  std::filesystem::path path;
  std::string task;  // empty: the backend's inference (a GGUF file's task from its header)
};

// Reads the `--model` arguments and the `--task` ones: none, one for every model, or one per
// model in order. Errors name the argument.
Result<std::vector<ModelArg>> ParseModelArgs(const std::vector<std::string>& models,
                                             const std::vector<std::string>& tasks);

// The YAML text those models stand for (paths made absolute, every other setting the default).
std::string ModelArgsYaml(const std::vector<ModelArg>& models);

}  // namespace mmserve
