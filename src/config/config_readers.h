// The config field readers the parser shares: durations, priorities, model names,
// and the `global:` section. Each reads one field through a ParamReader, which records errors
// with the field's location; none throws or recurses on what it reads.
#pragma once

#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "config/config_error.h"
#include "config/model_config.h"
#include "config/params.h"

namespace mmserve {

// The longest a timeout-like setting may be (an hour), and what "forever" (-1) means for the
// durations that must end (drain_timeout, priority_linger, jobs.ttl).
inline constexpr int64_t kMaxTimeoutMs = 3'600'000;

std::string JoinInts(const std::vector<int>& values);  // "1, 2, 4"

// A duration field (ParseDuration's forms); `fallback` when absent, or after an error.
std::optional<std::chrono::milliseconds> ReadDuration(
    ParamReader& r, const std::string& key, std::optional<std::chrono::milliseconds> fallback);
// `isolation`: none, process or sandbox; `fallback` when absent. CheckIsolation: a worker only
// where the build can run the model in one (`supported`), not inline; a sandbox only in a build
// with libseccomp.
Isolation ReadIsolation(ParamReader& r, Isolation fallback);
void CheckIsolation(ParamReader& r, const ModelConfig& m, bool supported);
// `compute_wait`: spin or sleep; nullopt when absent. CheckComputeWait: only for a model in a
// worker whose engine runs OpenMP compute threads (`has_threads`): elsewhere it would do nothing.
std::optional<ComputeWait> ReadComputeWait(ParamReader& r);
void CheckComputeWait(ParamReader& r, const ModelConfig& m, bool has_threads);
// `priority`: high, normal, low or a level in 1..kMaxPriorityLevel.
int ReadPriority(ParamReader& r);
// batch_size, max_batch, dynamic_batch, batch_tiers, preserve_ordering, max_queue_delay_ms.
void ReadBatching(ParamReader& r, ModelConfig& m);
// Model and label names: letters, digits, '_', '-' or '.', and not "." or ".." (a name becomes a
// URL segment and may become a file name).
bool IsValidName(std::string_view name);
// `text` as a path: absolute as is, else relative to `base_dir` (the YAML file's folder).
std::filesystem::path AbsoluteIn(const std::filesystem::path& base_dir, const std::string& text);

// A model version's load-relevant description: the entry `entry` without its routing keys,
// what was resolved for version `v`, and its file's size and time. Equal: nothing to reload.
std::string ModelFingerprint(const Params& entry, const ModelConfig& v);

// The `global:` section; relative model_roots are taken in `base_dir`.
GlobalConfig ReadGlobal(const Params& p, const std::filesystem::path& base_dir,
                        ConfigErrors& errors);

// Whether `path` (resolved through symlinks as far as it exists) lies inside one of `roots`.
bool InsideRoots(const std::vector<std::filesystem::path>& roots,
                 const std::filesystem::path& path);

// Whether a version's file may be read, reporting why not under `field`: inside `roots` (when
// given: a client's entry, whose files outside them are not even looked at), existing,
// readable, regular.
bool CheckModelFile(ParamReader& r, const std::string& field, const std::string& backend,
                    const std::filesystem::path& path, const std::string& path_text,
                    const std::vector<std::filesystem::path>* roots);

}  // namespace mmserve
