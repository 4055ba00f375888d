#!/usr/bin/python3
"""Writes deterministic ONNX vision models that OpenCV 4.6's DNN importer takes, so that
mmserve's tests, demo and benchmarks need no download.

  classifier-tiny.onnx  images [N,3,32,32] -> logits [N,10]: Conv 3x3 (8) + ReLU, global average
                        pool, Gemm (10). Random weights, seed 7.
  classifier-b4-tiny.onnx  the same network exported with a fixed batch: images [4,3,32,32].
  detector-tiny.onnx    images [N,3,64,64] (RGB, pixel values 0..255, as the template's compact
                        preprocess makes them) -> output0 [N,16,8] (YOLOv5 layout: 16 boxes of
                        cx, cy, w, h, objectness, 3 class scores), computed from the input: a
                        4x4 grid of 16-pixel cells; each cell's box is centred on the cell, its
                        width 8 + 48 x (the cell's mean blue / 255), its height 8 + 48 x (mean
                        green / 255), its objectness the mean red / 255, and class c's score the
                        mean of channel c / 255.
  detector-v8-tiny.onnx the same boxes in YOLOv8's layout, output0 [N,7,16] (cx, cy, w, h and
                        the class scores, no objectness).
  sample.png            a 160x120 picture for the demo's curl (written with zlib, no OpenCV).
  unsupported-tiny.onnx a Clip with min and max as inputs (opset 13), which OpenCV 4.6's importer
                        refuses (as in PaddleOCR v4 exports): validation must name the node.

Run with Debian's python3 and its python3-onnx:
  /usr/bin/python3 tools/gen_vision_models.py --out models/generated
"""
import argparse
import os
import struct
import zlib

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 13


def save(model, path):
    onnx.checker.check_model(model)
    tmp = path + ".tmp"
    onnx.save(model, tmp)
    os.replace(tmp, path)


def classifier(path, batch="N"):
    rng = np.random.default_rng(7)
    inits = [
        numpy_helper.from_array((rng.standard_normal((8, 3, 3, 3)) * 0.5).astype(np.float32),
                                "conv_w"),
        numpy_helper.from_array((rng.standard_normal(8) * 0.1).astype(np.float32), "conv_b"),
        numpy_helper.from_array((rng.standard_normal((10, 8)) * 0.5).astype(np.float32), "fc_w"),
        numpy_helper.from_array((rng.standard_normal(10) * 0.1).astype(np.float32), "fc_b"),
    ]
    nodes = [
        helper.make_node("Conv", ["images", "conv_w", "conv_b"], ["conv"], name="conv",
                         kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["conv"], ["relu"], name="relu"),
        helper.make_node("GlobalAveragePool", ["relu"], ["gap"], name="gap"),
        helper.make_node("Flatten", ["gap"], ["flat"], name="flatten"),
        helper.make_node("Gemm", ["flat", "fc_w", "fc_b"], ["logits"], name="fc", transB=1),
    ]
    graph = helper.make_graph(
        nodes, "classifier",
        [helper.make_tensor_value_info("images", TensorProto.FLOAT, [batch, 3, 32, 32])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [batch, 10])], inits)
    save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                           producer_name="mmserve-gen"), path)


def detector(path, v8):
    # Per cell of a 4x4 grid over 64x64 pixels: a 1x1 convolution of the cell's mean colour
    # (RGB, 0..255) plus a constant per position.
    channels = ["cx", "cy", "w", "h"] + ([] if v8 else ["obj"]) + ["c0", "c1", "c2"]
    k = len(channels)
    weight = np.zeros((k, 3, 1, 1), np.float32)
    bias = np.zeros(k, np.float32)
    position = np.zeros((k, 4, 4), np.float32)
    centres = np.arange(4, dtype=np.float32) * 16 + 8
    for i, name in enumerate(channels):
        if name == "cx":
            position[i] = centres[None, :]
        elif name == "cy":
            position[i] = centres[:, None]
        elif name == "w":
            weight[i, 2] = 48 / 255
            bias[i] = 8
        elif name == "h":
            weight[i, 1] = 48 / 255
            bias[i] = 8
        elif name == "obj":
            weight[i, 0] = 1 / 255
        else:
            weight[i, int(name[1])] = 1 / 255
    # The grid is added last, to the flat [N, ...] rows: OpenCV 4.6 fuses a constant added
    # right after a convolution into its bias (and fails), and broadcasts no batch-1 constant
    # against a larger batch in an elementwise layer.
    grid = position.reshape(k, 16)
    inits = [numpy_helper.from_array(weight, "head_w"), numpy_helper.from_array(bias, "head_b"),
             numpy_helper.from_array(grid if v8 else np.ascontiguousarray(grid.T), "grid"),
             numpy_helper.from_array(np.array([0, k, 16], np.int64), "flat_shape")]
    nodes = [
        helper.make_node("AveragePool", ["images"], ["cells"], name="cells",
                         kernel_shape=[16, 16], strides=[16, 16]),
        helper.make_node("Conv", ["cells", "head_w", "head_b"], ["head"], name="head",
                         kernel_shape=[1, 1]),
        helper.make_node("Reshape", ["head", "flat_shape"], ["flat"], name="flatten"),
    ]
    if not v8:
        nodes.append(helper.make_node("Transpose", ["flat"], ["rows"], name="to_rows",
                                      perm=[0, 2, 1]))
    nodes.append(helper.make_node("Add", ["flat" if v8 else "rows", "grid"], ["output0"],
                                  name="place"))
    out_shape = ["N", k, 16] if v8 else ["N", 16, k]
    graph = helper.make_graph(
        nodes, "detector",
        [helper.make_tensor_value_info("images", TensorProto.FLOAT, ["N", 3, 64, 64])],
        [helper.make_tensor_value_info("output0", TensorProto.FLOAT, out_shape)], inits)
    save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                           producer_name="mmserve-gen"), path)


def unsupported(path):
    inits = [numpy_helper.from_array(np.array(0, np.float32), "lo"),
             numpy_helper.from_array(np.array(6, np.float32), "hi")]
    nodes = [helper.make_node("Clip", ["x", "lo", "hi"], ["y"], name="clip_0")]
    graph = helper.make_graph(
        nodes, "unsupported",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4])], inits)
    save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                           producer_name="mmserve-gen"), path)


def sample_png(path):
    """A 160x120 RGB picture: a sky-to-grass gradient, a red sun, a blue box, as a PNG."""
    h, w = 120, 160
    y, x = np.mgrid[0:h, 0:w]
    img = np.zeros((h, w, 3), np.uint8)
    img[..., 0] = 90 + y // 2
    img[..., 1] = 140 + y // 3
    img[..., 2] = 250 - y
    img[(x - 120) ** 2 + (y - 30) ** 2 < 15 ** 2] = (240, 60, 40)
    img[70:110, 20:70] = (30, 60, 200)

    def chunk(kind, data):
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    rows = b"".join(b"\x00" + img[r].tobytes() for r in range(h))  # filter 0 per row
    png = (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)) +
           chunk(b"IDAT", zlib.compress(rows, 9)) + chunk(b"IEND", b""))
    with open(path, "wb") as f:
        f.write(png)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    for name, make in [("classifier-tiny.onnx", classifier),
                       ("classifier-b4-tiny.onnx", lambda p: classifier(p, 4)),
                       ("detector-tiny.onnx", lambda p: detector(p, False)),
                       ("detector-v8-tiny.onnx", lambda p: detector(p, True)),
                       ("unsupported-tiny.onnx", unsupported),
                       ("sample.png", sample_png)]:
        path = os.path.join(args.out, name)
        if not os.path.exists(path):
            make(path)
            print("wrote", path)


if __name__ == "__main__":
    main()
