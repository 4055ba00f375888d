#!/usr/bin/python3
"""Writes the small ONNX files that crashed OpenCV 4.6's importer inside the server (issue #40,
F1): each is refused now, by a probe child that dies in the server's place. They are committed
as fuzz seeds (tests/fuzz/corpus/onnx_import_fuzzer/ and onnx_graph_fuzzer/), and the tests
serve them from there.

  conv-group-0.onnx           a Conv with group 0: SIGFPE (a division by the group count)
  convtranspose-group-0.onnx  the same for a ConvTranspose
  gemm-external-weights.onnx  a Gemm whose weights say data_location EXTERNAL and hold no bytes:
                              SIGFPE (a division by an empty blob's size)
  conv-external-weights.onnx  the same for a Conv's weights
  add-dims-past-data.onnx     an Add's constant whose dims claim 3x512x512 floats over 16 raw
                              bytes: SIGSEGV (a copy of the claimed size)
  gemm-dims-past-data.onnx    the same for a Gemm's weights (1000x1000)

Run with Debian's python3 and its python3-onnx:
  /usr/bin/python3 tools/gen_hostile_onnx.py --out DIR
"""
import argparse
import os

import numpy as np
from onnx import TensorProto, helper, numpy_helper


def graph(nodes, inits, in_shape, out_shape, name):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, in_shape)
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, out_shape)
    g = helper.make_graph(nodes, name, [x], [y], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)],
                             producer_name="mmserve-hostile")


def external(name, dims):
    t = TensorProto()
    t.name = name
    t.data_type = TensorProto.FLOAT
    t.dims.extend(dims)
    t.data_location = TensorProto.EXTERNAL
    for k, v in (("location", "missing.bin"), ("offset", "0"), ("length", "0")):
        e = t.external_data.add()
        e.key, e.value = k, v
    return t


def short(name, dims):
    t = TensorProto()
    t.name = name
    t.data_type = TensorProto.FLOAT
    t.dims.extend(dims)
    t.raw_data = b"\0" * 16
    return t


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    out = ap.parse_args().out
    os.makedirs(out, exist_ok=True)
    w = numpy_helper.from_array(np.ones((4, 3, 3, 3), np.float32), "w")
    models = {
        "conv-group-0.onnx": graph(
            [helper.make_node("Conv", ["x", "w"], ["y"], group=0, kernel_shape=[3, 3])],
            [w], [1, 3, 8, 8], [1, 4, 6, 6], "conv_group_0"),
        "convtranspose-group-0.onnx": graph(
            [helper.make_node("ConvTranspose", ["x", "w"], ["y"], group=0, kernel_shape=[3, 3])],
            [w], [1, 4, 8, 8], [1, 3, 10, 10], "convtranspose_group_0"),
        "gemm-external-weights.onnx": graph(
            [helper.make_node("Gemm", ["x", "b"], ["y"], transB=1)],
            [external("b", [10, 16])], [1, 16], [1, 10], "gemm_external"),
        "conv-external-weights.onnx": graph(
            [helper.make_node("Conv", ["x", "w"], ["y"], kernel_shape=[3, 3])],
            [external("w", [4, 3, 3, 3])], [1, 3, 8, 8], [1, 4, 6, 6], "conv_external"),
        "add-dims-past-data.onnx": graph(
            [helper.make_node("Add", ["x", "c"], ["y"])],
            [short("c", [1, 3, 512, 512])], [1, 3, 512, 512], [1, 3, 512, 512], "add_short"),
        "gemm-dims-past-data.onnx": graph(
            [helper.make_node("Gemm", ["x", "b"], ["y"], transB=1)],
            [short("b", [1000, 1000])], [1, 1000], [1, 1000], "gemm_short"),
    }
    for name, model in models.items():
        with open(os.path.join(out, name), "wb") as f:
            f.write(model.SerializeToString())


if __name__ == "__main__":
    main()
