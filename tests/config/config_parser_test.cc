#include "config/config_parser.h"

#include <sys/stat.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "backend/backend_registry.h"
#include "backend/identity/identity_backend.h"
#include "common/strings.h"
#include "runtime/host_runtime.h"
#include "testing/seed_config.h"
#include "testing/test_util.h"

namespace mmserve {
namespace {

using testing::kSeed;

using ::testing::HasSubstr;
using ::testing::Not;


class ConfigParserTest : public ::testing::Test {
 protected:
  ConfigParserTest() {
    backends_.Register(std::make_unique<IdentityBackend>(host_));
    dir_.Write("person_det.om", "not really an OM file");
  }

  Result<ServerConfig> Parse(const std::string& yaml) {
    return LoadConfigFile(dir_.Write("models.yaml", yaml), backends_);
  }
  // The seed with the first occurrence of `from` replaced by `to`.
  static std::string Seed(const std::string& from, const std::string& to) {
    std::string yaml = kSeed;
    const auto at = yaml.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    return yaml.replace(at, from.size(), to);
  }
  std::string File() const { return (dir_.path() / "models.yaml").string(); }

  HostRuntime host_;
  BackendRegistry backends_;
  testing::TempDir dir_;
};

TEST_F(ConfigParserTest, SeedConfigurationValidatesAsIs) {
  auto config = Parse(kSeed);
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  ASSERT_EQ(config->models.size(), 1u);
  const ModelConfig& m = config->models[0];
  EXPECT_EQ(m.name, "person_det");
  EXPECT_EQ(m.backend, "acl");  // inferred from .om
  EXPECT_EQ(m.task, "infer");
  EXPECT_EQ(m.path, dir_.path() / "person_det.om");
  EXPECT_EQ(m.max_batch, 8);
  EXPECT_EQ(m.dynamic_batch, true);
  EXPECT_EQ(m.timeout, std::chrono::milliseconds(200));
  EXPECT_EQ(m.priority, 1);
  EXPECT_EQ(m.thread_num, 2);
  ASSERT_TRUE(m.preprocess);
  EXPECT_EQ(m.preprocess->resize, PreprocessConfig::Resize::kShortSide);
  EXPECT_EQ(m.preprocess->short_side, 256);
  EXPECT_TRUE(m.preprocess->crop);
  ASSERT_TRUE(m.postprocess);
  EXPECT_EQ(m.postprocess->kind, PostprocessConfig::Kind::kDetect);
  EXPECT_DOUBLE_EQ(m.postprocess->iou_threshold, 0.45);
  EXPECT_EQ(config->global.memory_pool_mb, 1024);
  EXPECT_EQ(config->global.thread_num, 8);
}

TEST_F(ConfigParserTest, InfersBackendFromExtension) {
  dir_.Write("m.gguf", "x");
  dir_.Write("m.onnx", "x");
  auto config = Parse("models:\n  - {name: a, path: m.gguf}\n  - {name: b, path: m.onnx, "
                      "task: infer}\n  - {name: c, backend: identity}\n");
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(config->models[0].backend, "llama");
  EXPECT_EQ(config->models[0].task, "generate");
  EXPECT_EQ(config->models[1].backend, "opencv");
  EXPECT_EQ(config->models[2].backend, "identity");
}

struct BrokenCase {
  std::string name;
  std::string from;  // a piece of the seed ...
  std::string to;    // ... replaced by this
  std::string error;  // the exact error line, after "<file>:"
  friend void PrintTo(const BrokenCase& c, std::ostream* os) { *os << c.name; }
};

class BrokenConfigTest : public ConfigParserTest,
                         public ::testing::WithParamInterface<BrokenCase> {};

TEST_P(BrokenConfigTest, ReportsThePreciseError) {
  const BrokenCase& c = GetParam();
  auto config = Parse(Seed(c.from, c.to));
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(config.status().message()), HasSubstr("\n  " + File() + ":" + c.error))
      << config.status().message();
}

INSTANTIATE_TEST_SUITE_P(
    Variants, BrokenConfigTest,
    ::testing::Values(
        BrokenCase{"UnknownKeyWithSuggestion", "timeout_ms: 200", "timeout: 200",
                   "14:5: models[0].timeout: expected one of backend, batch_size, batch_tiers, "
                   "breaker, canary, cpu_affinity, device_id, dynamic_batch, execution, keep_alive, labels, "
                   "load, max_batch, max_queue_delay_ms, model_file, name, nice, params, path, "
                   "pinned, postprocess, preprocess, "
                   "preserve_ordering, priority, queue, task, thread_num, timeout_ms, version, version_policy, "
                   "versions, watchdog_margin_ms, found unknown key \"timeout\" (did you mean "
                   "'timeout_ms'?)"},
        BrokenCase{"WrongType", "batch_size: 1", "batch_size: one",
                   "9:17: models[0].batch_size: expected an integer in 1..4096, found \"one\""},
        BrokenCase{"OutOfRange", "timeout_ms: 200", "timeout_ms: 0",
                   "14:17: models[0].timeout_ms: expected an integer in 1..3600000, found 0"},
        BrokenCase{"BoolExpected", "dynamic_batch: true", "dynamic_batch: maybe",
                   "11:20: models[0].dynamic_batch: expected true or false, found \"maybe\""},
        BrokenCase{"MissingFile", "path: person_det.om", "path: missing.om",
                   "7:11: models[0].path: expected an existing file, found \""},
        BrokenCase{"UnknownBackend", "    device_id: 0", "    backend: idenity\n    device_id: 0",
                   "8:14: models[0].backend: expected one of acl, identity, llama, opencv, "
                   "found \"idenity\" (did you mean 'identity'?)"},
        BrokenCase{"DeviceOutOfRange", "    path: person_det.om\n    device_id: 0",
                   "    backend: identity\n    device_id: 3",
                   "8:16: models[0].device_id: expected a device id in 0..0 (backend identity "
                   "sees 1 device), found 3"},
        BrokenCase{"UnknownPriority", "priority: high", "priority: urgent",
                   "15:15: models[0].priority: expected high, normal, low or a level in 1..9 "
                   "(1 is highest), found \"urgent\""},
        BrokenCase{"MaxBatchBelowBatchSize", "max_batch: 8", "max_batch: 0",
                   "10:16: models[0].max_batch: expected an integer in 1..4096, found 0"},
        BrokenCase{"MaxBatchSmallerThanBatch", "batch_size: 1", "batch_size: 16",
                   "10:16: models[0].max_batch: expected at least batch_size (16), found 8"},
        BrokenCase{"UnknownPreprocess", "resize_256_center_crop", "resize_center",
                   "12:17: models[0].preprocess: expected none, resize_<N>"},
        BrokenCase{"UnknownPostprocess", "nms_threshold_0.45", "nms_threshold_4.5",
                   "13:18: models[0].postprocess: expected none, softmax"},
        BrokenCase{"GlobalTypo", "memory_pool: 1024", "memory_pol: 1024",
                   "3:3: global.memory_pol: expected one of "},
        BrokenCase{"NegativeMemoryPool", "memory_pool: 1024", "memory_pool: -1",
                   "3:16: global.memory_pool: expected an integer in 0..1073741824, found -1"},
        BrokenCase{"MissingName", "  - name: person_det\n", "  - \n",
                   "7:5: models[0].name: expected a model name, found nothing"},
        BrokenCase{"CpuAffinityOutOfRange", "thread_num: 2", "thread_num: 2\n    cpu_affinity: [0, 4096]",
                   "17:23: models[0].cpu_affinity[1]: expected a list of integers in 0.."},
        BrokenCase{"WrongTaskForBackend", "thread_num: 2", "thread_num: 2\n    task: generate",
                   "17:11: models[0].task: expected one of infer for backend acl, found "
                   "\"generate\""},
        BrokenCase{"NoBackendInferable", "path: person_det.om", "path: weights.bin",
                   "6:5: models[0].backend: expected a backend (one of acl, identity, llama, "
                   "opencv), or a path ending in .om, .gguf or .onnx to infer it from, found "
                   "path \"weights.bin\""},
        BrokenCase{"YamlSyntax", "max_batch: 8", "max_batch: [8",
                   "11:18: (document): expected valid YAML, found end of sequence flow not found"}),
    [](const auto& info) { return info.param.name; });

TEST_F(ConfigParserTest, ReportsEveryErrorAtOnce) {
  std::string yaml = Seed("timeout_ms: 200", "timeout_ms: -1");
  yaml += "  - name: person_det\n    backend: identity\n    thread_num: 0\n";
  auto config = Parse(yaml);
  ASSERT_FALSE(config.ok());
  const std::string msg(config.status().message());
  EXPECT_THAT(msg, HasSubstr("3 configuration errors:"));
  EXPECT_THAT(msg, HasSubstr(":14:17: models[0].timeout_ms"));
  EXPECT_THAT(msg, HasSubstr(":17:11: models[1].name: expected a unique model name (first "
                             "defined at "));
  EXPECT_THAT(msg, HasSubstr(":19:17: models[1].thread_num: expected an integer in 1..256, "
                             "found 0"));
}

// The API surface's settings: read, and wrong values named with their position.
TEST_F(ConfigParserTest, ReadsAndChecksTheApiSettings) {
  const std::string model = "models:\n  - {name: m, backend: identity}\n";
  auto ok = Parse("global: {grpc_port: 0, api_key: a, admin_key: b, max_connections: 8, "
                  "max_in_flight: 4, cors_origins: [\"https://x.example\", \"*\"]}\n" + model);
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  EXPECT_EQ(ok->global.grpc_port, 0);
  EXPECT_EQ(ok->global.api_key, "a");
  EXPECT_EQ(ok->global.admin_key, "b");
  EXPECT_EQ(ok->global.max_connections, 8);
  EXPECT_EQ(ok->global.max_in_flight, 4);
  EXPECT_EQ(ok->global.cors_origins, (std::vector<std::string>{"https://x.example", "*"}));
  auto none = Parse(model);
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->global.grpc_port.has_value());  // no gRPC unless asked for

  auto bad = Parse("global: {grpc_port: 70000, max_connections: 0, cors_origins: x}\n" + model);
  ASSERT_FALSE(bad.ok());
  const std::string msg(bad.status().message());
  EXPECT_THAT(msg, HasSubstr("global.grpc_port: expected an integer in 0..65535, found 70000"));
  EXPECT_THAT(msg, HasSubstr("global.max_connections: expected an integer in 1..1048576"));
  EXPECT_THAT(msg, HasSubstr("global.cors_origins: expected a list of origins"));
  auto linger = Parse("global: {priority_linger: 20ms}\n" + model);
  ASSERT_TRUE(linger.ok()) << linger.status().ToString();
  EXPECT_EQ(linger->global.priority_linger, std::chrono::milliseconds(20));
  EXPECT_EQ(none->global.priority_linger, std::chrono::milliseconds(5));
  bad = Parse("global: {priority_linger: soon}\n" + model);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()),
              HasSubstr("global.priority_linger: expected a duration"));
  bad = Parse("global: {cors_origins: [\"\"]}\n" + model);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("global.cors_origins[0]: expected an origin"));
}

TEST_F(ConfigParserTest, BackendParamsAreValidatedWithPositions) {
  auto config = Parse(
      "models:\n"
      "  - name: echo\n"
      "    backend: identity\n"
      "    params:\n"
      "      latency_ms: -5\n"
      "      tensors:\n"
      "        - {input: A, datatype: FLOAT}\n"
      "      fail_evry_n: 3\n");
  ASSERT_FALSE(config.ok());
  const std::string msg(config.status().message());
  EXPECT_THAT(msg, HasSubstr(":5:19: models[0].params.latency_ms: expected an integer in "
                             "0..600000, found -5"));
  EXPECT_THAT(msg, HasSubstr(":7:32: models[0].params.tensors[0].datatype: expected one of "
                             "BOOL, UINT8"));
  EXPECT_THAT(msg, HasSubstr(":8:7: models[0].params.fail_evry_n: expected one of"));
  EXPECT_THAT(msg, HasSubstr("did you mean 'fail_every_n'?"));
}

TEST_F(ConfigParserTest, InlineExecutionIsForModelsThatNeverBlock) {
  auto config = Parse(R"(
models:
  - name: echo
    backend: identity
    execution: inline
)");
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_TRUE(config->models[0].execute_inline);

  config = Parse(R"(
models:
  - name: echo
    backend: identity
    execution: inline
    max_batch: 4
    thread_num: 2
    cpu_affinity: [0]
    params: {latency_ms: 5}
  - name: other
    backend: identity
    execution: fast
)");
  ASSERT_FALSE(config.ok());
  const std::string msg(config.status().message());
  EXPECT_THAT(msg, HasSubstr("models[0].max_batch: expected 1 with execution: inline"));
  EXPECT_THAT(msg, HasSubstr("models[0].thread_num: expected no thread_num with execution: "
                             "inline"));
  EXPECT_THAT(msg, HasSubstr("models[0].cpu_affinity: expected no pinning"));
  EXPECT_THAT(msg, HasSubstr("models[0].execution: expected worker for backend identity (inline "
                             "needs executions that never block"));
  EXPECT_THAT(msg, HasSubstr("models[1].execution: expected one of worker, inline"));
}

TEST_F(ConfigParserTest, IsolationIsPerModelWithAGlobalDefaultAndRefusedWhereItCannotRun) {
  auto config = Parse(R"(
global: {isolation: process}
models:
  - {name: a, backend: identity}
  - {name: b, backend: identity, isolation: none}
)");
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(config->models[0].isolation, Isolation::kProcess);
  EXPECT_EQ(config->models[1].isolation, Isolation::kNone);

  config = Parse(R"(
models:
  - {name: a, backend: identity, isolation: process, execution: inline}
  - {name: b, backend: identity, isolation: thread}
)");
  ASSERT_FALSE(config.ok());
  const std::string msg(config.status().message());
  EXPECT_THAT(msg, HasSubstr("models[0].isolation: expected none with execution: inline"));
  EXPECT_THAT(msg, HasSubstr("models[1].isolation: expected one of none, process, sandbox"));
}

// compute_wait sets a worker's OpenMP threads: refused where there is no worker, or where the
// engine runs no OpenMP threads (identity), instead of accepted and doing nothing. Accepted for
// an isolated llama model: tests/integration/isolation_test.cc, which reads the worker's
// environment.
TEST_F(ConfigParserTest, ComputeWaitIsRefusedWhereNoWorkerOrNoOpenMpThreadsWouldHonourIt) {
  auto config = Parse(R"(
models:
  - {name: a, backend: identity, compute_wait: spin}
  - {name: b, backend: identity, isolation: process, compute_wait: sleep}
  - {name: c, backend: identity, isolation: process, compute_wait: yield}
  - {name: d, backend: identity, isolation: process}
)");
  ASSERT_FALSE(config.ok());
  const std::string msg(config.status().message());
  EXPECT_THAT(msg, HasSubstr("models[0].compute_wait: expected no compute_wait without isolation: "
                             "process or sandbox (in-process models share the server's OpenMP "
                             "runtime: set OMP_WAIT_POLICY in the server's environment), found "
                             "\"spin\""));
  EXPECT_THAT(msg, HasSubstr("models[1].compute_wait: expected no compute_wait for backend "
                             "identity (its engine runs no OpenMP compute threads in this build), "
                             "found \"sleep\""));
  EXPECT_THAT(msg, HasSubstr("models[2].compute_wait: expected one of spin, sleep"));
  EXPECT_THAT(msg, Not(HasSubstr("models[3]")));
}

TEST_F(ConfigParserTest, ASandboxIsAWorkerAndItsEscapeHooksNeedOne) {
  auto config = Parse(R"(
models:
  - {name: a, backend: identity, isolation: sandbox, params: {escape: open, escape_on: X}}
)");
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(config->models[0].isolation, Isolation::kSandbox);
  EXPECT_TRUE(InWorker(config->models[0].isolation));
  // The hooks that prove the sandbox would run unconfined anywhere else.
  config = Parse(R"(
models:
  - {name: a, backend: identity, isolation: process, params: {escape: exec, escape_on: X}}
  - {name: b, backend: identity, isolation: sandbox, execution: inline}
)");
  ASSERT_FALSE(config.ok());
  const std::string msg(config.status().message());
  EXPECT_THAT(msg, HasSubstr("models[0].params.escape: expected no escape hook without "
                             "isolation: sandbox"));
  EXPECT_THAT(msg, HasSubstr("models[1].isolation: expected none with execution: inline (requests "
                             "run on the server's threads), found \"sandbox\""));
}

TEST_F(ConfigParserTest, RejectsAPathThatIsNotAFile) {
  const auto fifo = dir_.path() / "pipe.om";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  auto config = Parse(Seed("path: person_det.om", "path: pipe.om"));
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(std::string(config.status().message()),
              HasSubstr(":7:11: models[0].path: expected a model file, found"));
}

TEST_F(ConfigParserTest, RejectsAnUnreadableFile) {
  if (::geteuid() == 0) GTEST_SKIP() << "root reads every file";
  const auto file = dir_.Write("secret.om", "x");
  ::chmod(file.c_str(), 0);
  auto config = Parse(Seed("path: person_det.om", "path: secret.om"));
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(std::string(config.status().message()), HasSubstr("expected a readable file"));
}

constexpr const char* kSchedulingModel = R"(
global:
  jobs: {max: 10, ttl: 30s}
models:
  - name: m
    backend: identity
    priority: high
    timeout_ms: 2000
    batch_tiers: [1, 2, 4, 8]
    max_queue_delay_ms: 5
    preserve_ordering: true
    queue:
      max_size: 100
      levels:
        1: {max_size: 10, timeout_ms: 500}
        3: {max_size: 1000}
    breaker: {failures: 3, cooldown_ms: 2500}
    watchdog_margin_ms: 250
)";

TEST_F(ConfigParserTest, ReadsTheSchedulingPolicy) {
  auto config = Parse(kSchedulingModel);
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(config->global.jobs.max, 10);
  EXPECT_EQ(config->global.jobs.ttl, std::chrono::seconds(30));
  const ModelConfig& m = config->models[0];
  EXPECT_EQ(m.priority, 1);
  EXPECT_EQ(m.batch_tiers, (std::vector<int>{1, 2, 4, 8}));
  EXPECT_EQ(m.max_batch, 8) << "max_batch follows the largest tier";
  EXPECT_TRUE(m.preserve_ordering);
  EXPECT_EQ(m.queue.max_size, 100);
  ASSERT_EQ(m.queue.levels.size(), 2u);
  EXPECT_EQ(m.queue.levels.at(1).max_size, 10);
  EXPECT_EQ(m.queue.levels.at(1).timeout, std::chrono::milliseconds(500));
  EXPECT_EQ(m.queue.levels.at(3).max_size, 1000);
  EXPECT_EQ(m.queue.levels.at(3).timeout, std::chrono::milliseconds(2000)) << "the model's";
  EXPECT_EQ(m.breaker.failures, 3);
  EXPECT_EQ(m.breaker.cooldown, std::chrono::milliseconds(2500));
  EXPECT_EQ(m.watchdog_margin, std::chrono::milliseconds(250));
}

TEST_F(ConfigParserTest, RejectsBadSchedulingPolicy) {
  std::string yaml = kSchedulingModel;
  yaml.replace(yaml.find("[1, 2, 4, 8]"), 12, "[4, 2]");
  yaml.replace(yaml.find("3: {max_size"), 1, "12");
  auto config = Parse(yaml);
  ASSERT_FALSE(config.ok());
  const std::string message(config.status().message());
  EXPECT_THAT(message, HasSubstr("models[0].batch_tiers: expected batch sizes in ascending "
                                 "order, each once, found [4, 2]"));
  EXPECT_THAT(message, HasSubstr("models[0].queue.levels.12: expected a priority level in 1..9, "
                                 "found \"12\""));
  yaml = kSchedulingModel;
  yaml.replace(yaml.find("max_queue_delay_ms"), 0, "max_batch: 16\n    ");
  config = Parse(yaml);
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(std::string(config.status().message()),
              HasSubstr("batch_tiers: expected a largest tier equal to max_batch (16), found 8"));
}

TEST_F(ConfigParserTest, DurationsAcceptUnitsAndForever) {
  EXPECT_EQ(*ParseDuration("250ms"), std::chrono::milliseconds(250));
  EXPECT_EQ(*ParseDuration("5m"), std::chrono::minutes(5));
  EXPECT_EQ(*ParseDuration("30"), std::chrono::seconds(30));
  EXPECT_EQ(*ParseDuration("-1"), std::nullopt);
  EXPECT_FALSE(ParseDuration("-5s").has_value());
  EXPECT_FALSE(ParseDuration("soon").has_value());
  // Overflow: too many digits for 64 bits, or a product past the 100-year cap.
  EXPECT_FALSE(ParseDuration("99999999999999999999").has_value());
  EXPECT_FALSE(ParseDuration("9223372036854775807h").has_value());
  EXPECT_FALSE(ParseDuration("9223372036854775807").has_value());
  EXPECT_FALSE(ParseDuration(std::string(30'000, '1') + "ms").has_value());
  EXPECT_EQ(*ParseDuration("876000h"), std::chrono::hours(876000));  // exactly 100 years
  EXPECT_FALSE(ParseDuration("876001h").has_value());
  for (const char* bad : {"", "ms", "+5s", "5 s", "5sec", "--1", "1.5s", "-1s", "h"}) {
    EXPECT_FALSE(ParseDuration(bad).has_value()) << bad;
  }
}


// ---- versions -------------------------------------------------------------------------------

class VersionsTest : public ConfigParserTest {
 protected:
  // detector/1/det.om, detector/2/det.om, detector/3/det.om (and a folder that is no version).
  VersionsTest() {
    for (const char* v : {"1", "2", "3"}) {
      std::filesystem::create_directories(dir_.path() / "detector" / v);
      dir_.Write(std::string("detector/") + v + "/det.om", "om");
    }
    std::filesystem::create_directories(dir_.path() / "detector" / "notes");
  }
  static std::string Detector(const std::string& extra) {
    return "models:\n  - name: det\n    path: detector\n" + extra;
  }
  static std::vector<int64_t> Versions(const ServerConfig& config) {
    std::vector<int64_t> out;
    for (const auto& m : config.models) out.push_back(m.version);
    return out;
  }
};

TEST_F(VersionsTest, AFolderOfVersionFoldersServesItsLatestByDefault) {
  auto config = Parse(Detector(""));
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(Versions(*config), std::vector<int64_t>{3});
  EXPECT_EQ(config->models[0].backend, "acl");
  EXPECT_EQ(config->models[0].path, dir_.path() / "detector" / "3" / "det.om");
  EXPECT_EQ(config->models[0].versions_dir, dir_.path() / "detector");
}

TEST_F(VersionsTest, VersionPolicyPicksAllLatestOrSpecificVersions) {
  EXPECT_EQ(Versions(*Parse(Detector("    version_policy: all\n"))),
            (std::vector<int64_t>{1, 2, 3}));
  EXPECT_EQ(Versions(*Parse(Detector("    version_policy: {latest: 2}\n"))),
            (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(Versions(*Parse(Detector("    version_policy: {specific: [1, 3]}\n"))),
            (std::vector<int64_t>{1, 3}));
  auto missing = Parse(Detector("    version_policy: {specific: [4]}\n"));
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(std::string(missing.status().message()),
              HasSubstr("models[0].version_policy.specific: expected versions the model has "
                        "(1, 2, 3), found 4"));
}

TEST_F(VersionsTest, LabelsAndCanaryMustNameServedVersions) {
  auto config = Parse(Detector("    version_policy: all\n    labels: {stable: 2, canary: 3}\n"
                               "    canary: {version: 3, weight: 0.25}\n"));
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  for (const auto& m : config->models) {
    EXPECT_EQ(m.labels, (std::map<std::string, int64_t>{{"stable", 2}, {"canary", 3}}));
    ASSERT_TRUE(m.canary);
    EXPECT_EQ(m.canary->version, 3);
    EXPECT_DOUBLE_EQ(m.canary->weight, 0.25);
  }
  auto bad = Parse(Detector("    labels: {stable: 1}\n    canary: {version: 2, weight: 1.5}\n"));
  ASSERT_FALSE(bad.ok());
  const std::string message(bad.status().message());
  EXPECT_THAT(message, HasSubstr("4:22: models[0].labels.stable: expected a served version (3), "
                                 "found 1"));
  EXPECT_THAT(message, HasSubstr("models[0].canary.weight: expected a number in 0.0..1.0, found 1.5"));
}

TEST_F(VersionsTest, AVersionListGivesEachVersionItsOwnFileAndParams) {
  dir_.Write("old.om", "om");
  auto config = Parse(R"(models:
  - name: det
    path: person_det.om
    params: {x: 0, y: 2}
    versions: [1, {version: 7, path: old.om, params: {x: 1}}]
)");
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(config->models[0].params.value(), nlohmann::json({{"x", 0}, {"y", 2}}));
  EXPECT_EQ(config->models[1].params.value(), nlohmann::json({{"x", 1}, {"y", 2}}));
  ASSERT_EQ(Versions(*config), (std::vector<int64_t>{1, 7}));
  EXPECT_EQ(config->models[0].path, dir_.path() / "person_det.om");
  EXPECT_EQ(config->models[1].path, dir_.path() / "old.om");
  EXPECT_NE(config->models[0].fingerprint, config->models[1].fingerprint);

  auto duplicate = Parse(R"(models:
  - name: det
    path: person_det.om
    version: 2
    versions: [1, 1]
)");
  ASSERT_FALSE(duplicate.ok());
  EXPECT_THAT(std::string(duplicate.status().message()),
              HasSubstr("models[0].version: expected either version or versions, not both"));
  EXPECT_THAT(std::string(duplicate.status().message()),
              HasSubstr("models[0].versions[1]: expected each version once, found 1 again"));
}

TEST_F(VersionsTest, AVersionFolderWithoutOneModelFileIsAnError) {
  dir_.Write("detector/3/second.om", "om");
  auto config = Parse(Detector(""));
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(std::string(config.status().message()),
              HasSubstr("models[0].path: expected a version folder holding one model file"));
  EXPECT_THAT(std::string(config.status().message()), HasSubstr("(det.om, second.om)"));
  EXPECT_TRUE(Parse(Detector("    model_file: det.om\n")).ok());
}

TEST_F(VersionsTest, TheFingerprintChangesWithWhatShapesALoadButNotWithRouting) {
  auto base = Parse(Detector("    version_policy: all\n"));
  auto relabelled = Parse(Detector("    version_policy: all\n    labels: {stable: 1}\n"));
  auto retuned = Parse(Detector("    version_policy: all\n    thread_num: 2\n"));
  ASSERT_TRUE(base.ok() && relabelled.ok() && retuned.ok());
  EXPECT_EQ(base->models[0].fingerprint, relabelled->models[0].fingerprint);
  EXPECT_NE(base->models[0].fingerprint, retuned->models[0].fingerprint);
}

TEST_F(ConfigParserTest, AModelEntryAsJsonReadsLikeOneInTheFile) {
  auto config = Parse(kSeed);
  ASSERT_TRUE(config.ok());
  auto entry = ParseModelEntry(nlohmann::json{{"name", "x"}, {"backend", "identity"}}, *config,
                               backends_);
  ASSERT_TRUE(entry.ok()) << entry.status().ToString();
  EXPECT_EQ(entry->at(0).name, "x");
  auto bad = ParseModelEntry(nlohmann::json{{"name", "x"}, {"backend", "identity"},
                                            {"priority", "urgent"}},
                             *config, backends_);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("config.priority: expected high"));
}

}  // namespace
}  // namespace mmserve
