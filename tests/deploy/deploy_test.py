#!/usr/bin/python3
"""deploy/ checked without a cluster or a container daemon.

Every kustomization is rendered with `kubectl kustomize`; its objects' fields are checked
against the API references' field lists (schemas.py) and against each other (selectors, named
ports, volumes, the HPA's target, the images build-image.sh tags, the models the init container
fetches). Then the server's real behaviour is checked against what the manifests promise: the
init container's script fetches the models; the binary is started on them with the ConfigMap's
YAML, mounted the way the kubelet mounts it, and the Deployment's arguments; the probe paths,
the health check of the Containerfile, the metrics the autoscaler reads, a ConfigMap update,
and SIGTERM's drain against the grace period. The KServe ServingRuntime's arguments are run on
what the storage initializer leaves for each InferenceService, gRPC on its h2c port. The
runtime stage's files run the binary in a chroot.

  deploy_test.py --source DIR --binary PATH --acl-sim-home DIR [--kubectl PATH]
"""
import argparse
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import schemas  # noqa: E402

FAILURES = []


def check(condition, what):
    if not condition:
        FAILURES.append(what)
        print("  FAIL:", what)
    return condition


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http(port, path, body=None, timeout=10):
    """(status, body) of one request to 127.0.0.1:port."""
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=body,
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()
    except OSError as e:
        return 0, str(e)


def wait_for(predicate, seconds):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.1)
    return predicate()


def duration_s(text):
    """A duration of the server's YAML ("30s", "250ms", "5m", or seconds) in seconds."""
    m = re.fullmatch(r"(\d+)(ms|s|m|h)?", str(text))
    scale = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, None: 1}[m.group(2)]
    return int(m.group(1)) * scale


class Rendered:
    """The objects one kustomization renders."""

    def __init__(self, kubectl, directory):
        out = subprocess.run([kubectl, "kustomize", directory], capture_output=True, text=True)
        self.ok = check(out.returncode == 0, f"kubectl kustomize {directory}: {out.stderr}")
        self.objects = [o for o in yaml.safe_load_all(out.stdout) if o] if self.ok else []

    def of(self, kind):
        return [o for o in self.objects if o["kind"] == kind]

    def one_named(self, kind, name):
        found = [o for o in self.of(kind) if o["metadata"]["name"] == name]
        check(len(found) == 1, f"expected one {kind} {name}, found {len(found)}")
        return found[0] if found else {}

    def one(self, kind):
        found = self.of(kind)
        check(len(found) == 1, f"expected one {kind}, found {len(found)}")
        return found[0] if found else {}


API_VERSIONS = {
    "Deployment": "apps/v1", "Service": "v1", "ConfigMap": "v1", "PersistentVolumeClaim": "v1",
    "PodDisruptionBudget": "policy/v1", "HorizontalPodAutoscaler": "autoscaling/v2",
    "ServiceMonitor": "monitoring.coreos.com/v1",
    "ServingRuntime": "serving.kserve.io/v1alpha1",
    "InferenceService": "serving.kserve.io/v1beta1",
}


def check_fields(name, r):
    """Every field of every object is one its kind has (tests/deploy/schemas.py)."""
    for o in r.objects:
        what = f"{name}: {o.get('kind')}/{o.get('metadata', {}).get('name')}"
        check(API_VERSIONS.get(o.get("kind")) == o.get("apiVersion"),
              f"{what}: apiVersion {o.get('apiVersion')}")
        unknown = schemas.unknown_fields(o)
        check(not unknown, f"{what}: fields its kind does not have: {unknown}")


def check_overlay(name, r):
    """The objects of one overlay agree with each other."""
    check_fields(name, r)
    for o in r.objects:
        what = f"{name}: {o.get('kind')}/{o.get('metadata', {}).get('name')}"
        check(o["metadata"].get("labels", {}).get("app.kubernetes.io/name") == "mmserve",
              f"{what}: label app.kubernetes.io/name")
    deployment = r.one("Deployment")
    pod = deployment["spec"]["template"]
    labels = pod["metadata"]["labels"]
    check(deployment["spec"]["selector"]["matchLabels"].items() <= labels.items(),
          f"{name}: the Deployment's selector matches its pods")
    container = pod["spec"]["containers"][0]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    for service in r.of("Service"):
        check(service["spec"]["selector"].items() <= labels.items(),
              f"{name}: Service {service['metadata']['name']} selects the pods")
        for p in service["spec"]["ports"]:
            check(p["targetPort"] in ports, f"{name}: Service port {p['name']} targets a "
                                            f"container port ({p['targetPort']})")
    for pdb in r.of("PodDisruptionBudget"):
        check(pdb["spec"]["selector"]["matchLabels"].items() <= labels.items(),
              f"{name}: the PodDisruptionBudget selects the pods")
    for hpa in r.of("HorizontalPodAutoscaler"):
        target = hpa["spec"]["scaleTargetRef"]
        check(target["kind"] == "Deployment" and
              target["name"] == deployment["metadata"]["name"],
              f"{name}: the HPA scales the Deployment")
    for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
        check(container.get(probe, {}).get("httpGet", {}).get("port") in ports,
              f"{name}: {probe} on a named container port")
    names = {o["metadata"]["name"] for o in r.objects}
    for volume in pod["spec"]["volumes"]:
        if "configMap" in volume:
            check(volume["configMap"]["name"] in names, f"{name}: ConfigMap {volume['name']}")
        if "persistentVolumeClaim" in volume:
            check(volume["persistentVolumeClaim"]["claimName"] in names,
                  f"{name}: PersistentVolumeClaim {volume['name']}")
    volumes = {v["name"] for v in pod["spec"]["volumes"]}
    for c in pod["spec"]["containers"] + pod["spec"].get("initContainers", []):
        check({m["name"] for m in c["volumeMounts"]} <= volumes,
              f"{name}: {c['name']}'s mounts have volumes")
    check_fetch_container(name, r, pod["spec"], container)
    # The drain ends before the kubelet's SIGKILL: preStop, then SIGTERM and drain_timeout.
    config = yaml.safe_load(r.one_named("ConfigMap", "mmserve-config")["data"]["models.yaml"])
    drain = duration_s(config["global"]["drain_timeout"])
    pre_stop = int(container["lifecycle"]["preStop"]["exec"]["command"][1])
    grace = pod["spec"]["terminationGracePeriodSeconds"]
    check(grace > pre_stop + drain, f"{name}: grace {grace} s > preStop {pre_stop} s + drain "
                                    f"{drain} s")
    check(pod["spec"]["securityContext"]["runAsNonRoot"], f"{name}: runs as non-root")
    return deployment, config


def check_fetch_container(name, r, pod, server):
    """The init container fills the volume the server reads its models from, with the script
    and sources of the ConfigMap it mounts, and every model models.yaml names is among them."""
    fetch = next((c for c in pod.get("initContainers", []) if c["name"] == "fetch-models"), None)
    if not check(fetch is not None, f"{name}: an init container fetch-models"):
        return
    mounts = {m["name"]: m for m in fetch["volumeMounts"]}
    served = next(m for m in server["volumeMounts"] if m["name"] == "models")
    check("models" in mounts and not mounts["models"].get("readOnly") and
          mounts["models"]["mountPath"] == served["mountPath"] and served.get("readOnly"),
          f"{name}: fetch-models writes the volume the server reads at {served['mountPath']}")
    sources = next(v for v in pod["volumes"] if v["name"] == "sources")["configMap"]["name"]
    data = next(o for o in r.of("ConfigMap") if o["metadata"]["name"] == sources)["data"]
    at = mounts["sources"]["mountPath"]
    check(fetch["command"] == ["sh", f"{at}/fetch-models.sh", f"{at}/models.txt",
                               served["mountPath"]],
          f"{name}: fetch-models runs the ConfigMap's script on its models.txt: "
          f"{fetch['command']}")
    listed = [line.split()[0] for line in data["models.txt"].splitlines()
              if line.strip() and not line.startswith("#")]
    config = yaml.safe_load(r.one_named("ConfigMap", "mmserve-config")["data"]["models.yaml"])
    for m in config["models"]:
        path = m["path"].removeprefix(served["mountPath"] + "/")
        check(any(f == path or f.startswith(path.rstrip("/") + "/") for f in listed),
              f"{name}: model {m['name']} ({m['path']}) is fetched by models.txt ({listed})")


def fetch_models(script, sources_text, files, dest, tmp):
    """Runs the ConfigMap's fetch-models.sh as the init container does, with each PATH's URL
    replaced by a file:// URL of `files[PATH]` and its checksum. Returns (code, output)."""
    lines = []
    for line in sources_text.splitlines():
        if line.strip() and not line.startswith("#"):
            path = line.split()[0]
            digest = subprocess.run(["sha256sum", files[path]], capture_output=True,
                                    text=True).stdout.split()[0]
            line = f"{path} file://{files[path]} {digest}"
        lines.append(line)
    sources = os.path.join(tmp, "sources.txt")
    with open(sources, "w") as f:
        f.write("\n".join(lines) + "\n")
    script_path = os.path.join(tmp, "fetch-models.sh")
    with open(script_path, "w") as f:
        f.write(script)
    out = subprocess.run(["sh", script_path, sources, dest], capture_output=True, text=True)
    return out.returncode, out.stdout + out.stderr


def check_fetch_script(r, source, tmp):
    """The init container's script: it fetches and checks every file, keeps what is there,
    and keeps nothing that fails its checksum or would land outside the volume."""
    data = r.one_named("ConfigMap", "mmserve-model-sources")["data"]
    generated = os.path.join(source, "models/generated")
    files = {"embedder.gguf": os.path.join(generated, "bert-tiny.gguf"),
             "reranker.gguf": os.path.join(generated, "rerank-tiny.gguf"),
             "llm.gguf": os.path.join(generated, "llama-tiny.gguf")}
    dest = os.path.join(tmp, "models")
    code, out = fetch_models(data["fetch-models.sh"], data["models.txt"], files, dest, tmp)
    check(code == 0, f"fetch-models.sh fetches the cpu overlay's models: {out}")
    for path, origin in files.items():
        check(open(os.path.join(dest, path), "rb").read() == open(origin, "rb").read(),
              f"fetch-models.sh: {path} is the file its URL names")
    code, out = fetch_models(data["fetch-models.sh"], data["models.txt"], files, dest, tmp)
    check(code == 0 and out.count(": present") == len(files) and "from file" not in out,
          f"fetch-models.sh: a restarted pod keeps the files it has: {out}")
    bad = os.path.join(tmp, "bad-sources.txt")
    script = os.path.join(tmp, "fetch-models.sh")
    for line, why in ((f"x.gguf file://{files['llm.gguf']} {'0' * 64}", "checksum"),
                      (f"../x.gguf file://{files['llm.gguf']} -", "without .."),
                      ("x.gguf file:///nonexistent -", "from file")):
        with open(bad, "w") as f:
            f.write(line + "\n")
        out = subprocess.run(["sh", script, bad, dest], capture_output=True, text=True)
        check(out.returncode != 0 and why in out.stdout + out.stderr and
              not os.path.exists(os.path.join(dest, "x.gguf")) and
              not os.path.exists(os.path.join(dest, "x.gguf.part")),
              f"fetch-models.sh refuses {line!r} and keeps nothing: {out.stderr}")
    return dest


def check_images(kubectl, source, tmp, overlays):
    """Each image an overlay or KServe deploys is one deploy/build-image.sh builds: the script
    is run with a builder that prints its arguments."""
    builder = os.path.join(tmp, "builder")
    with open(builder, "w") as f:
        f.write('#!/bin/sh\necho "$@"\n')
    os.chmod(builder, 0o755)
    built = {}
    for variant in ("cpu", "cuda", "cann"):
        env = dict(os.environ, MMSERVE_BUILDER=builder, BASE="cann-base:1")
        out = subprocess.run(["bash", os.path.join(source, "deploy/build-image.sh"), variant],
                             capture_output=True, text=True, env=env)
        args = out.stdout.split()
        if check(out.returncode == 0 and "-t" in args, f"build-image.sh {variant}: {out}"):
            built[args[args.index("-t") + 1]] = args
    check("MMSERVE_CUDA=ON" in built.get("registry.example.com/mmserve:latest-cuda", []),
          "build-image.sh cuda builds the CUDA variant")
    check("MMSERVE_CANN=ON" in built.get("registry.example.com/mmserve:latest-cann", []),
          "build-image.sh cann builds the CANN variant")
    images = set()
    for r in overlays + [Rendered(kubectl, os.path.join(source, "deploy/kserve"))]:
        for o in r.objects:
            spec = o.get("spec", {})
            pod = spec.get("template", {}).get("spec", spec)
            images.update(c["image"] for c in pod.get("containers", []))
            if "predictor" in spec:
                images.add(spec["predictor"]["model"].get("image"))
    images.discard(None)
    for image in sorted(images):
        check(image in built, f"{image} is an image deploy/build-image.sh builds ({sorted(built)})")


def containerfile(source):
    """The Containerfile's stages, each a list of (instruction, arguments)."""
    text = open(os.path.join(source, "deploy/Containerfile")).read().replace("\\\n", " ")
    stages = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        instruction, _, rest = line.partition(" ")
        if instruction == "FROM":
            stages.append([])
        if stages:
            stages[-1].append((instruction, rest.strip()))
    return stages


def check_containerfile(source, deployment):
    stages = containerfile(source)
    check(len(stages) == 2, "Containerfile: two stages, build and runtime")
    build, runtime = stages[0], stages[-1]
    runs = " ".join(rest for i, rest in build if i == "RUN")
    check("bash scripts/setup.sh" in runs, "Containerfile: the build stage runs scripts/setup.sh")
    check("deploy/collect-runtime.sh" in runs, "Containerfile: the runtime files are collected")
    settings = {i: rest for i, rest in runtime}
    check(settings.get("STOPSIGNAL") == "SIGTERM", "Containerfile: STOPSIGNAL SIGTERM")
    user = settings.get("USER", "0").split(":")[0]
    check(user.isdigit() and int(user) != 0, "Containerfile: a numeric non-root USER")
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    check(str(container["securityContext"].get("readOnlyRootFilesystem")) == "True",
          "Deployment: read-only root file system")
    exposed = sorted(int(p) for p in settings.get("EXPOSE", "").split())
    check(exposed == sorted(p["containerPort"] for p in container["ports"]),
          f"Containerfile: EXPOSE {exposed} are the Deployment's ports")
    check(json.loads(settings["CMD"]) == container["args"],
          "Containerfile: CMD is the Deployment's args")
    check(json.loads(settings["ENTRYPOINT"]) == ["/usr/local/bin/mmserve"],
          "Containerfile: ENTRYPOINT is the binary collect-runtime.sh installs")
    healthcheck = settings["HEALTHCHECK"]
    check("/v2/health/live" in healthcheck, "Containerfile: HEALTHCHECK on /v2/health/live")
    return json.loads(healthcheck[healthcheck.index("CMD") + 3:])


class Server:
    def __init__(self, binary, args, log, env=None):
        self.log_path = log
        self.log = open(log, "w")
        self.process = subprocess.Popen([binary] + args, stdout=self.log,
                                        stderr=subprocess.STDOUT, env=env)

    def stop(self, sig=signal.SIGTERM, timeout=60):
        if self.process.poll() is None:
            self.process.send_signal(sig)
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            return -1

    def text(self):
        return open(self.log_path).read()


def mount_configmap(volume, version, files):
    """Lays `files` out as the kubelet does a ConfigMap volume: name → ..data/name, ..data → a
    timestamped folder; a new version is a new folder and one rename of ..data."""
    folder = os.path.join(volume, f"..2026_12_04_{version}")
    os.makedirs(folder)
    for name, text in files.items():
        with open(os.path.join(folder, name), "w") as f:
            f.write(text)
    os.symlink(os.path.basename(folder), os.path.join(volume, "..data_tmp"))
    os.rename(os.path.join(volume, "..data_tmp"), os.path.join(volume, "..data"))
    for name in files:
        link = os.path.join(volume, name)
        if not os.path.islink(link):
            os.symlink(os.path.join("..data", name), link)


def args_with(args, replacements):
    """The container's args with some option values replaced."""
    out = list(args)
    for i, a in enumerate(out[:-1]):
        if a in replacements:
            out[i + 1] = replacements[a]
    return out


def check_server(binary, source, tmp, deployment, config_text, healthcheck, models):
    """The cpu overlay's pod, run as a process: the ConfigMap's YAML at its mount path (the
    volume the init container filled at `models`), the Deployment's args and environment."""
    pod = deployment["spec"]["template"]["spec"]
    container = pod["containers"][0]
    mount = next(m["mountPath"] for m in container["volumeMounts"] if m["name"] == "models")
    config_mount = next(m["mountPath"] for m in container["volumeMounts"]
                        if m["name"] == "config")
    config_text = config_text.replace(mount, models)
    volume = os.path.join(tmp, "etc-mmserve")
    os.makedirs(volume)
    mount_configmap(volume, "a", {"models.yaml": config_text})
    args = container["args"]
    check(args[0] == "serve" and args[1] == config_mount + "/models.yaml",
          "Deployment: serves the ConfigMap's models.yaml at its mount path")
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    check(args[args.index("--port") + 1] == str(ports["http"]) and
          args[args.index("--grpc-port") + 1] == str(ports["grpc"]),
          "Deployment: --port and --grpc-port are the container ports")
    http_port, grpc_port = free_port(), free_port()
    run_args = args_with(args, {"--port": str(http_port), "--grpc-port": str(grpc_port),
                                "--host": "127.0.0.1"})
    run_args[1] = os.path.join(volume, "models.yaml")
    env = dict(os.environ)
    for e in container["env"]:
        if "value" in e:
            env[e["name"]] = e["value"].replace("/tmp", tmp)
    server = Server(binary, run_args, os.path.join(tmp, "server.log"), env)
    try:
        startup = container["startupProbe"]
        budget = startup["periodSeconds"] * startup["failureThreshold"]
        path = startup["httpGet"]["path"]
        wait_for(lambda: server.process.poll() is not None or http(http_port, path)[0] == 200,
                 min(budget, 120))
        ready = http(http_port, path)[0] == 200
        if not check(ready, f"the startup probe's {startup['httpGet']['path']} answers 200:\n"
                            f"{server.text()[-2000:]}"):
            return
        for probe in ("livenessProbe", "readinessProbe"):
            path = container[probe]["httpGet"]["path"]
            check(http(http_port, path)[0] == 200, f"{probe} {path} answers 200")
        check(http(http_port, "/v2/health/nothing")[0] == 404, "an unknown probe path is 404")
        # The Containerfile's HEALTHCHECK, run as Docker runs it.
        hc = subprocess.run(healthcheck, env=dict(env, MMSERVE_HEALTH_PORT=str(http_port)),
                            timeout=10)
        check(hc.returncode == 0, "the Containerfile's HEALTHCHECK passes on a live server")
        with socket.create_connection(("127.0.0.1", grpc_port), timeout=5):
            pass
        # What Prometheus scrapes and the autoscaler reads.
        annotations = deployment["spec"]["template"]["metadata"]["annotations"]
        check(annotations["prometheus.io/port"] == str(ports["http"]),
              "the scrape annotation names the HTTP port")
        status, metrics = http(http_port, annotations["prometheus.io/path"])
        check(status == 200, "the scrape path answers 200")
        for metric in metric_names(source):
            check(re.search(rf"^{metric}\{{", metrics, re.M) is not None,
                  f"/metrics has {metric}, which the autoscaler reads")
        check_configmap_update(http_port, volume, config_text)
        check_drain(server, http_port, pod, container, config_text)
    finally:
        server.stop(signal.SIGKILL)


def metric_names(source):
    """The metrics the monitoring overlay's autoscaler and adapter rules name."""
    names = set()
    overlay = os.path.join(source, "deploy/k8s/overlays/monitoring")
    for file in os.listdir(overlay):
        for doc in yaml.safe_load_all(open(os.path.join(overlay, file))):
            text = json.dumps(doc)
            names.update(re.findall(r"\b(nv_inference_[a-z_]+|mmserve_[a-z_]+)", text))
    check(names, "the monitoring overlay names the metrics it scales on")
    return sorted(names)


def check_configmap_update(port, volume, config_text):
    """An edit of the ConfigMap reaches the server through global.watch, with no restart."""
    watch = duration_s(yaml.safe_load(config_text)["global"]["watch"])
    added = config_text + (
        "  - name: echo\n    backend: identity\n    params:\n      latency_ms: 1500\n"
        "      tensors:\n"
        "        - {input: INPUT0, output: OUTPUT0, datatype: INT32, shape: [-1]}\n")
    mount_configmap(volume, "b", {"models.yaml": added})
    seen = wait_for(lambda: http(port, "/v2/models/echo/ready")[0] == 200, 3 * watch + 10)
    check(seen, "a ConfigMap update (..data switched) is served without a restart")


def check_drain(server, port, pod, container, config_text):
    """SIGTERM: a request in flight finishes; the process exits 0 within drain_timeout, well
    inside the grace period left after preStop."""
    results = []  # a request to the echo model (1.5 s a request) in flight at SIGTERM
    body = json.dumps({"inputs": [{"name": "INPUT0", "datatype": "INT32", "shape": [2],
                                   "data": [1, 2]}]}).encode()
    worker = threading.Thread(target=lambda: results.append(
        http(port, "/v2/models/echo/infer", body, timeout=60)))
    worker.start()
    time.sleep(0.3)
    start = time.monotonic()
    code = server.stop(signal.SIGTERM, timeout=120)
    took = time.monotonic() - start
    worker.join(60)
    drain = duration_s(yaml.safe_load(config_text)["global"]["drain_timeout"])
    grace = pod["terminationGracePeriodSeconds"]
    pre_stop = int(container["lifecycle"]["preStop"]["exec"]["command"][1])
    check(code == 0, f"SIGTERM: exit code 0 (got {code})")
    check(took <= drain + 2 and pre_stop + took < grace,
          f"SIGTERM: stopped in {took:.1f} s (drain {drain} s; grace {grace} s - preStop "
          f"{pre_stop} s)")
    check(results and results[0][0] == 200 and '"data":[1,2]' in results[0][1],
          f"SIGTERM: the request in flight is answered ({results[:1]})")
    check(took >= 1.0, f"SIGTERM: the drain waited for the request in flight ({took:.1f} s)")


def grpc_call(port, method, request=b""):
    """One unary KServe v2 gRPC call with serialized messages (no stubs): the answer's bytes,
    or None. It goes over HTTP/2 without TLS, which is what KServe's h2c port carries."""
    import grpc
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        call = channel.unary_unary(f"/inference.GRPCInferenceService/{method}",
                                   request_serializer=lambda b: b,
                                   response_deserializer=lambda b: b)
        try:
            return call(request, timeout=10)
        except grpc.RpcError as e:
            print("  gRPC", method, e)
            return None


def run_runtime(binary, container, name, mnt, tmp, env=None):
    """The ServingRuntime's container as a process, for the InferenceService `name`, on what
    the storage initializer left in `mnt`: (server, http port, gRPC port), once ready."""
    http_port = container["ports"][0]["containerPort"]
    grpc_at = next(a for a in container["args"] if a.startswith("--grpc-port="))
    port, grpc = free_port(), free_port()
    args = [a.replace("{{.Name}}", name).replace("/mnt/models", mnt)
            .replace(f"--port={http_port}", f"--port={port}")
            .replace(grpc_at, f"--grpc-port={grpc}")
            .replace("--host=0.0.0.0", "--host=127.0.0.1") for a in container["args"]]
    env = dict(env or os.environ, MMSERVE_LOCK_DIR=os.path.join(tmp, "kserve-locks"))
    server = Server(binary, args, os.path.join(tmp, f"kserve-{name}.log"), env)
    path = container["readinessProbe"]["httpGet"]["path"]
    wait_for(lambda: server.process.poll() is not None or http(port, path)[0] == 200, 60)
    check(http(port, path)[0] == 200, f"KServe {name}: ready\n{server.text()[-2000:]}")
    return server, port, grpc


def check_kserve(kubectl, binary, source, tmp, acl_sim_home):
    """The KServe objects' fields and ports, and the ServingRuntime's arguments run on what the
    storage initializer leaves for each InferenceService."""
    r = Rendered(kubectl, os.path.join(source, "deploy/kserve"))
    check_fields("kserve", r)
    runtime = r.one("ServingRuntime")
    spec = runtime.get("spec", {})
    formats = {f["name"] for f in spec.get("supportedModelFormats", [])}
    check({"gguf", "onnx", "om"} <= formats, f"ServingRuntime formats {formats}")
    check({"v2", "grpc-v2"} <= set(spec.get("protocolVersions", [])), "ServingRuntime protocols")
    services = {s["metadata"]["name"]: s["spec"]["predictor"]["model"]
                for s in r.of("InferenceService")}
    check({m["modelFormat"]["name"] for m in services.values()} == formats,
          "an InferenceService per format")
    container = spec["containers"][0]
    http_port = container["ports"][0]["containerPort"]
    check(f"--port={http_port}" in container["args"], "the runtime's --port is its HTTP port")
    grpc_port = int(next(a for a in container["args"] if a.startswith("--grpc-port="))
                    .split("=")[1])
    for name, model in services.items():
        check(model.get("runtime") == runtime["metadata"]["name"],
              f"InferenceService {name} names the runtime")
        check(re.match(r"(https?|s3|gs|pvc|hf)://", model.get("storageUri", "")),
              f"InferenceService {name}: a storageUri the storage initializer fetches")
        # KServe routes one port: gRPC's must be named h2c, and be the server's gRPC port.
        if model.get("protocolVersion") == "grpc-v2":
            ports = model.get("ports", [])
            check(len(ports) == 1 and ports[0].get("name") == "h2c" and
                  ports[0].get("containerPort") == grpc_port,
                  f"InferenceService {name}: grpc-v2 names the gRPC port {grpc_port} h2c "
                  f"({ports})")
    generated = os.path.join(source, "models/generated")

    # The GGUF embedder: the storage initializer leaves the URL's file in /mnt/models.
    mnt = os.path.join(tmp, "mnt-embedder")
    os.makedirs(mnt)
    shutil.copy(os.path.join(generated, "bert-tiny.gguf"),
                os.path.join(mnt, services["embedder"]["storageUri"].rsplit("/", 1)[1]))
    server, port, _ = run_runtime(binary, container, "embedder", mnt, tmp)
    try:
        body = json.dumps({"inputs": [{"name": "TEXT", "datatype": "BYTES", "shape": [1],
                                       "data": ["hello"]}]}).encode()
        status, answer = http(port, "/v2/models/embedder/infer", body)
        check(status == 200, f"KServe embedder: /v2/models/embedder/infer ({status} {answer})")
        check(server.stop() == 0, "KServe embedder: SIGTERM exits 0")
    finally:
        server.stop(signal.SIGKILL)

    # The ONNX classifier: its archive unpacked into numbered version folders.
    mnt = os.path.join(tmp, "mnt-classifier")
    for v in ("1", "2"):
        os.makedirs(os.path.join(mnt, v))
        shutil.copy(os.path.join(generated, "classifier-tiny.onnx"),
                    os.path.join(mnt, v, "model.onnx"))
    server, port, _ = run_runtime(binary, container, "classifier", mnt, tmp)
    try:
        status, answer = http(port, "/v2/models/classifier")
        versions = json.loads(answer).get("versions") if status == 200 else answer
        check(versions == ["2"], f"KServe classifier: the latest version folder is served "
                                 f"({status} {versions})")
        status, _ = http(port, "/v2/models/classifier/versions/2/ready")
        check(status == 200, f"KServe classifier: version 2 is ready ({status})")
    finally:
        server.stop(signal.SIGKILL)

    # The OM detector on the simulated card, over gRPC on the port named h2c.
    mnt = os.path.join(tmp, "mnt-detector")
    os.makedirs(mnt)
    with open(os.path.join(mnt, services["detector"]["storageUri"].rsplit("/", 1)[1]), "w") as f:
        f.write("ACLSIM-OM 1\n" + json.dumps({
            "soc_version": "Ascend910B", "work_size": 1 << 20, "weight_size": 1 << 20,
            "inputs": [{"name": "x", "datatype": "FLOAT", "dims": [1, 8]}],
            "outputs": [{"name": "y", "datatype": "FLOAT", "dims": [1, 8]}]}) + "\n")
    server, _, grpc = run_runtime(binary, container, "detector", mnt, tmp,
                                  dict(os.environ, ASCEND_HOME_PATH=acl_sim_home,
                                       ACLSIM_SOC="Ascend910B"))  # the image's card
    try:
        name = b"detector"
        ready = grpc_call(grpc, "ModelReady", b"\x0a" + bytes([len(name)]) + name)
        check(ready == b"\x08\x01", f"KServe detector: ModelReady over gRPC says ready "
                                     f"({ready!r})")
    finally:
        server.stop(signal.SIGKILL)


def check_ascend_config(binary, source, tmp, acl_sim_home, config_text, mount):
    """The ascend overlay's YAML is valid for `mmserve validate` on the simulated card."""
    models = os.path.join(tmp, "ascend-models")
    os.makedirs(os.path.join(models, "classifier/1"))
    om = {"soc_version": "Ascend910B", "work_size": 1 << 20, "weight_size": 1 << 20,
          "dynamic_batch": [1, 2, 4, 8]}
    detector = dict(om, inputs=[{"name": "images", "datatype": "FLOAT",
                                 "dims": [-1, 3, 640, 640]}],
                    outputs=[{"name": "output0", "datatype": "FLOAT", "dims": [-1, 16, 85]}])
    classifier = dict(om, inputs=[{"name": "x", "datatype": "FLOAT", "dims": [-1, 8]}],
                      outputs=[{"name": "y", "datatype": "FLOAT", "dims": [-1, 8]}])
    for path, spec in (("detector.om", detector), ("classifier/1/model.om", classifier)):
        with open(os.path.join(models, path), "w") as f:
            f.write("ACLSIM-OM 1\n" + json.dumps(spec) + "\n")
    file = os.path.join(tmp, "ascend.yaml")
    with open(file, "w") as f:
        f.write(config_text.replace(mount, models))
    env = dict(os.environ, ASCEND_HOME_PATH=acl_sim_home)
    out = subprocess.run([binary, "validate", file], capture_output=True, text=True, env=env)
    check(out.returncode == 0, f"ascend overlay: mmserve validate: {out.stdout}{out.stderr}")


def check_runtime_rootfs(binary, source, tmp):
    """The runtime stage's files: the binary and its collected libraries run on a root that
    has only the C runtime a slim base image brings (and /proc, as every container has)."""
    if os.geteuid() != 0:
        print("  skip: the chroot check needs root")
        return
    root = os.path.join(tmp, "rootfs")
    out = subprocess.run(["bash", os.path.join(source, "deploy/collect-runtime.sh"), binary,
                          root], capture_output=True, text=True)
    if not check(out.returncode == 0, f"collect-runtime.sh: {out.stderr}"):
        return
    ldd = subprocess.run(["ldd", binary], capture_output=True, text=True).stdout
    base = re.compile(r"/(ld-linux[^/]*|libc|libm|libdl|librt|libpthread|libresolv|"
                      r"libstdc\+\+|libgcc_s)\.so")
    for lib in re.findall(r"(/\S+)", ldd):
        if base.search(lib):
            dest = root + "/usr" + lib.removeprefix("/usr")
            os.makedirs(os.path.dirname(dest), exist_ok=True)
            shutil.copy(lib, dest)
    for link in ("lib", "lib64"):
        os.symlink("usr/" + link, os.path.join(root, link))
    os.makedirs(os.path.join(root, "models"))
    shutil.copy(os.path.join(source, "models/generated/classifier-tiny.onnx"),
                os.path.join(root, "models"))
    # A container runtime mounts /proc, where the server finds itself to start its file probes
    # and workers (/proc/self/exe): here too, in a mount namespace of its own.
    os.makedirs(os.path.join(root, "proc"))
    out = subprocess.run(["unshare", "--mount", "--fork", "sh", "-c",
                          'mount -t proc proc "$1/proc" && exec chroot "$1" '
                          '/usr/local/bin/mmserve validate /models', "sh", root],
                         capture_output=True, text=True)
    check(out.returncode == 0 and "valid, 1 model" in out.stdout,
          f"the runtime stage's files run mmserve: {out.stdout}{out.stderr}")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--source", required=True)
    parser.add_argument("--binary", required=True)
    parser.add_argument("--acl-sim-home", required=True)
    parser.add_argument("--kubectl", default=shutil.which("kubectl") or "kubectl")
    a = parser.parse_args()
    a.source, a.binary = os.path.abspath(a.source), os.path.abspath(a.binary)
    overlays = os.path.join(a.source, "deploy/k8s/overlays")
    with tempfile.TemporaryDirectory() as tmp:
        rendered = {}
        for name in sorted(os.listdir(overlays)):
            print(f"overlay {name}")
            r = Rendered(a.kubectl, os.path.join(overlays, name))
            if r.ok:
                rendered[name] = (r, *check_overlay(name, r))
        # The field check itself: a misspelt field of a rendered object is found.
        spoilt = json.loads(json.dumps(rendered["cpu"][1]))
        spoilt["spec"]["template"]["spec"]["containers"][0]["readinessprobe"] = {}
        check(schemas.unknown_fields(spoilt) ==
              ["Deployment.spec.template.spec.containers[0].readinessprobe"],
              f"the field check finds a misspelt field: {schemas.unknown_fields(spoilt)}")
        print("Containerfile")
        cpu, cpu_deployment, _ = rendered["cpu"]
        healthcheck = check_containerfile(a.source, cpu_deployment)
        print("the images the overlays deploy")
        check_images(a.kubectl, a.source, tmp, [r for r, *_ in rendered.values()])
        print("the cpu overlay's pod, as a process")
        config_text = cpu.one_named("ConfigMap", "mmserve-config")["data"]["models.yaml"]
        models = check_fetch_script(cpu, a.source, tmp)
        check_server(a.binary, a.source, tmp, cpu_deployment, config_text, healthcheck, models)
        print("the ascend overlay's YAML on the simulated card")
        ascend = rendered["ascend"][0]
        check_ascend_config(a.binary, a.source, tmp, a.acl_sim_home,
                            ascend.one_named("ConfigMap", "mmserve-config")["data"]["models.yaml"], "/models")
        print("KServe")
        check_kserve(a.kubectl, a.binary, a.source, tmp, a.acl_sim_home)
        print("the runtime stage's files")
        check_runtime_rootfs(a.binary, a.source, tmp)
    print(f"deploy_test: {len(FAILURES)} failed")
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
