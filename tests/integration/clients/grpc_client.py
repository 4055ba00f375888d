"""Drives mmserve's KServe v2 gRPC service with Debian's python3-grpcio and stubs generated
from the project's .proto (by the calling test). Prints what it saw as one JSON line.

Usage: grpc_client.py PORT STUBS_DIR          (the RAG trio and an identity model "echo")
       grpc_client.py PORT STUBS_DIR API_KEY  (only the key checks, against "echo")
       grpc_client.py PORT STUBS_DIR hostile BAD_GGUF
                      (issue #18's gRPC reproductions against "slow" (max_in_flight 2), "llm")
       grpc_client.py PORT STUBS_DIR vision MODEL IMAGE...
                      (each image file as the model's IMAGE input; its outputs by file)
"""
import json
import struct
import sys

import grpc
import numpy as np

sys.path.insert(0, sys.argv[2])
import grpc_service_pb2 as pb  # noqa: E402
import grpc_service_pb2_grpc as pb_grpc  # noqa: E402


def bytes_elements(raw):
    out, at = [], 0
    while at < len(raw):
        (n,) = struct.unpack_from("<I", raw, at)
        out.append(raw[at + 4:at + 4 + n].decode("utf-8", "replace"))
        at += 4 + n
    return out


def auth_checks(stub, key):
    req = pb.ModelInferRequest(model_name="echo")
    req.inputs.add(name="X", datatype="INT32", shape=[1]).contents.int_contents.append(1)
    seen = {}
    for label, metadata in [("none", None), ("wrong", [("authorization", "Bearer wrong")]),
                            ("right", [("authorization", "Bearer " + key)])]:
        try:
            stub.ModelInfer(req, metadata=metadata)
            seen[label] = "OK"
        except grpc.RpcError as e:
            seen[label] = e.code().name
    try:
        stub.RepositoryModelUnload(pb.RepositoryModelUnloadRequest(model_name="echo"),
                                   metadata=[("authorization", "Bearer " + key)])
        seen["unload_with_inference_key"] = "OK"
    except grpc.RpcError as e:
        seen["unload_with_inference_key"] = e.code().name
    seen["live_without_key"] = stub.ServerLive(pb.ServerLiveRequest()).live
    print(json.dumps(seen))


def code_of(call):
    try:
        call()
        return "OK"
    except grpc.RpcError as e:
        return e.code().name


def hostile_checks(stub, bad_gguf):
    seen = {}
    # D5: max_in_flight (2) holds over gRPC: 8 calls at once to a model that takes 300 ms.
    req = pb.ModelInferRequest(model_name="slow")
    req.inputs.add(name="X", datatype="INT32", shape=[1]).contents.int_contents.append(1)
    futures = [stub.ModelInfer.future(req) for _ in range(8)]
    codes = []
    for f in futures:
        try:
            f.result()
            codes.append("OK")
        except grpc.RpcError as e:
            codes.append(e.code().name)
    seen["in_flight"] = codes
    # D6: a uint64 max_tokens past int32 is refused, not wrapped to 3.
    gen = pb.ModelInferRequest(model_name="llm")
    gen.inputs.add(name="PROMPT", datatype="BYTES", shape=[1]).contents.bytes_contents.append(b"hi")
    gen.parameters["max_tokens"].uint64_param = 2**32 + 3
    seen["max_tokens"] = code_of(lambda: stub.ModelInfer(gen))
    # C2: a deeply nested config.
    deep = "[" * 70000 + "]" * 70000
    load = pb.RepositoryModelLoadRequest(model_name="deep")
    load.parameters["config"].string_param = '{"name":' + deep + "}"
    seen["deep_config"] = code_of(lambda: stub.RepositoryModelLoad(load))
    # C4: a model whose failure reason held non-UTF-8 bytes, then the index.
    bad = pb.RepositoryModelLoadRequest(model_name="badarch")
    bad.parameters["config"].string_param = json.dumps({"path": bad_gguf, "task": "embed"})
    seen["bad_load"] = code_of(lambda: stub.RepositoryModelLoad(bad))
    index = stub.RepositoryIndex(pb.RepositoryIndexRequest())
    seen["index"] = {m.name: m.reason for m in index.models}
    print(json.dumps(seen))


def vision(stub, model, paths):
    seen = {}
    for path in paths:
        req = pb.ModelInferRequest(model_name=model)
        t = req.inputs.add(name="IMAGE", datatype="BYTES", shape=[1])
        with open(path, "rb") as f:
            t.contents.bytes_contents.append(f.read())
        res = stub.ModelInfer(req)
        outputs = {}
        for out, raw in zip(res.outputs, res.raw_output_contents):
            dtype = {"FP32": "<f4", "INT64": "<i8"}.get(out.datatype)
            outputs[out.name] = (np.frombuffer(raw, dtype=dtype).tolist() if dtype
                                 else bytes_elements(raw))
        seen[path] = outputs
    print(json.dumps(seen))


def main():
    channel = grpc.insecure_channel(f"127.0.0.1:{sys.argv[1]}")
    stub = pb_grpc.GRPCInferenceServiceStub(channel)
    if len(sys.argv) > 5 and sys.argv[3] == "vision":
        return vision(stub, sys.argv[4], sys.argv[5:])
    if len(sys.argv) > 4 and sys.argv[3] == "hostile":
        return hostile_checks(stub, sys.argv[4])
    if len(sys.argv) > 3:
        return auth_checks(stub, sys.argv[3])
    seen = {}
    seen["live"] = stub.ServerLive(pb.ServerLiveRequest()).live
    seen["ready"] = stub.ServerReady(pb.ServerReadyRequest()).ready
    meta = stub.ServerMetadata(pb.ServerMetadataRequest())
    seen["server"] = {"name": meta.name, "extensions": list(meta.extensions)}
    model = stub.ModelMetadata(pb.ModelMetadataRequest(name="embedder"))
    seen["embedder_metadata"] = {
        "platform": model.platform,
        "inputs": [(t.name, t.datatype) for t in model.inputs],
        "outputs": [(t.name, t.datatype, list(t.shape)) for t in model.outputs],
    }
    seen["model_ready"] = stub.ModelReady(pb.ModelReadyRequest(name="embedder")).ready

    # The embedder, with typed contents and with raw contents.
    req = pb.ModelInferRequest(model_name="embedder", id="typed")
    t = req.inputs.add(name="TEXT", datatype="BYTES", shape=[2])
    t.contents.bytes_contents.extend([b"hello world", b"bye"])
    res = stub.ModelInfer(req)
    out = res.outputs[0]
    vectors = np.frombuffer(res.raw_output_contents[0], dtype="<f4").reshape(list(out.shape))
    seen["embed_typed"] = {
        "id": res.id, "version": res.model_version, "name": out.name, "shape": list(out.shape),
        "first": vectors[0][:8].tolist(), "norm": float(np.linalg.norm(vectors[0])),
    }
    req = pb.ModelInferRequest(model_name="embedder")
    req.inputs.add(name="TEXT", datatype="BYTES", shape=[1])
    req.raw_input_contents.append(struct.pack("<I", 11) + b"hello world")
    res = stub.ModelInfer(req)
    seen["embed_raw_first"] = np.frombuffer(res.raw_output_contents[0], dtype="<f4")[:8].tolist()

    # An identity model with INT32 contents.
    req = pb.ModelInferRequest(model_name="echo")
    req.inputs.add(name="X", datatype="INT32", shape=[3]).contents.int_contents.extend([4, 5, 6])
    res = stub.ModelInfer(req)
    seen["echo"] = np.frombuffer(res.raw_output_contents[0], dtype="<i4").tolist()

    # Token streaming from the generator.
    req = pb.ModelInferRequest(model_name="llm", id="gen")
    req.inputs.add(name="PROMPT", datatype="BYTES", shape=[1]).contents.bytes_contents.append(
        b"Once upon a time")
    req.parameters["max_tokens"].int64_param = 10
    req.parameters["temperature"].double_param = 0.0
    pieces, final, errors = [], None, []
    for msg in stub.ModelStreamInfer(iter([req])):
        if msg.error_message:
            errors.append(msg.error_message)
            continue
        r = msg.infer_response
        text = bytes_elements(r.raw_output_contents[0])[0]
        if r.parameters["triton_final_response"].bool_param:
            final = {"text": text, "id": r.id,
                     "completion_tokens": r.parameters["completion_tokens"].int64_param}
        else:
            pieces.append(text)
    seen["stream"] = {"pieces": pieces, "final": final, "errors": errors}

    config = stub.ModelConfig(pb.ModelConfigRequest(name="embedder")).config
    seen["config"] = {"name": config.name, "input_type": pb.DataType.Name(config.input[0].data_type),
                      "backend": config.backend}
    stats = stub.ModelStatistics(pb.ModelStatisticsRequest(name="echo")).model_stats[0]
    seen["echo_inference_count"] = stats.inference_count

    errors = {}
    for label, request in [
        ("unknown_model", pb.ModelInferRequest(model_name="nope")),
        ("bad_datatype", pb.ModelInferRequest(model_name="echo", inputs=[
            pb.ModelInferRequest.InferInputTensor(name="X", datatype="INT33", shape=[1])])),
    ]:
        try:
            stub.ModelInfer(request)
            errors[label] = None
        except grpc.RpcError as e:
            errors[label] = {"code": e.code().name, "details": e.details()}
    seen["errors"] = errors
    print(json.dumps(seen))


if __name__ == "__main__":
    main()
