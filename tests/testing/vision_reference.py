#!/usr/bin/python3
"""Reference outputs for mmserve's image stages, computed with OpenCV's Python bindings and
numpy only (no mmserve code): the tests compare mmserve's tensors with these.

  vision_reference.py CASES.json

CASES.json is a list of objects; each writes float32 (or int64) raw little-endian arrays:
  {"kind": "preprocess", "image": path, "out": path, "resize": "exact"|"short_side"|
   "letterbox"|"none", "width", "height", "short_side", "crop": [w, h] or null,
   "color": "rgb"|"bgr"|"gray", "scale", "mean": [..], "std": [..], "layout": "nchw"|"nhwc",
   "pad", "interpolation": "linear"|..., "blob": true (use cv2.dnn.blobFromImage instead)}
  {"kind": "detect", "image": path, "model": onnx, "out": path prefix, the same preprocess
   fields, "format": "yolov5"|"yolov8", "score_threshold", "iou_threshold", "class_aware",
   "max_detections", "box_scale": "per_axis"|"single_gain", "om": {"scale", "bias", "shape": [boxes, attributes]} (instead of "model":
   the simulated AscendCL's OM, output = input x scale + bias over the first values)}
   -> prefix.boxes (float32 [n,4]), .scores, .classes (int64)
  {"kind": "classify", "image", "model", "out": prefix, the preprocess fields, "top_k"}
   -> softmax over the network's output, the top_k: prefix.scores (float32), .classes (int64)
"""
import json
import math
import sys

import cv2
import numpy as np

INTERPOLATION = {"nearest": cv2.INTER_NEAREST, "linear": cv2.INTER_LINEAR,
                 "cubic": cv2.INTER_CUBIC, "area": cv2.INTER_AREA}


def rounded(x):
    return max(1, int(math.floor(x + 0.5)))


def preprocess(case):
    """The network input of one image, and (scale_x, scale_y, offset_x, offset_y, w, h)."""
    flags = cv2.IMREAD_GRAYSCALE if case.get("color") == "gray" else cv2.IMREAD_COLOR
    img = cv2.imdecode(np.fromfile(case["image"], np.uint8), flags)
    h0, w0 = img.shape[:2]
    if case.get("blob"):
        size = (case["width"], case["height"])
        mean = case.get("mean", [0, 0, 0])
        blob = cv2.dnn.blobFromImage(img, case.get("scale", 1.0), size, mean,
                                     swapRB=case.get("color", "rgb") == "rgb",
                                     crop=case.get("crop") is not None)
        return blob[0], None
    interp = INTERPOLATION[case.get("interpolation", "linear")]
    mode = case.get("resize", "none")
    sx = sy = 1.0
    ox = oy = 0.0
    if mode == "exact":
        img = cv2.resize(img, (case["width"], case["height"]), interpolation=interp)
        sx, sy = case["width"] / w0, case["height"] / h0
    elif mode == "short_side":
        f = case["short_side"] / min(w0, h0)
        img = cv2.resize(img, None, fx=f, fy=f, interpolation=interp)
        sx = sy = f
    elif mode == "letterbox":
        W, H = case["width"], case["height"]
        r = min(W / w0, H / h0)
        w, h = min(W, rounded(w0 * r)), min(H, rounded(h0 * r))
        img = cv2.resize(img, (w, h), interpolation=interp)
        left, top = (W - w) // 2, (H - h) // 2
        pad = case.get("pad", 114)
        img = cv2.copyMakeBorder(img, top, H - h - top, left, W - w - left, cv2.BORDER_CONSTANT,
                                 value=(pad, pad, pad))
        sx, sy, ox, oy = w / w0, h / h0, left, top
        if case.get("box_scale") == "single_gain":  # Ultralytics' scale_boxes
            sx = sy = r
            ox, oy = round((W - w0 * r) / 2 - 0.1), round((H - h0 * r) / 2 - 0.1)
    if case.get("crop"):
        cw, ch = case["crop"]
        x, y = (img.shape[1] - cw) // 2, (img.shape[0] - ch) // 2
        img = img[y:y + ch, x:x + cw]
        ox -= x
        oy -= y
    if img.ndim == 2:
        img = img[:, :, None]
    elif case.get("color", "rgb") == "rgb":
        img = cv2.cvtColor(img, cv2.COLOR_BGR2RGB)
    x = img.astype(np.float32)
    channels = x.shape[2]
    mean = np.array(case.get("mean", [0.0]) * (channels if len(case.get("mean", [0])) == 1 else 1),
                    np.float32)
    std = np.array(case.get("std", [1.0]) * (channels if len(case.get("std", [1])) == 1 else 1),
                   np.float32)
    x = (x - mean) / std * np.float32(case.get("scale", 1.0))
    if case.get("layout", "nchw") == "nchw":
        x = x.transpose(2, 0, 1)
    return np.ascontiguousarray(x), (sx, sy, ox, oy, w0, h0)


def detect(case):
    x, (sx, sy, ox, oy, w0, h0) = preprocess(case)
    if "om" in case:
        om = case["om"]
        rows, attributes = om["shape"]
        out = (x.reshape(-1)[:rows * attributes].astype(np.float64) * om["scale"] + om["bias"])
        out = out.astype(np.float32).reshape(rows, attributes)
    else:
        net = cv2.dnn.readNetFromONNX(case["model"])
        net.setInput(x[None])
        out = net.forward()[0]
    v8 = case["format"] == "yolov8"
    rows = out.T if v8 else out
    boxes, scores, classes = [], [], []
    for row in rows:
        cls = row[4:] if v8 else row[5:]
        best = int(np.argmax(cls))
        score = float(cls[best]) * (1.0 if v8 else float(row[4]))
        if score < case["score_threshold"]:
            continue
        cx, cy, w, h = (float(v) for v in row[:4])
        boxes.append([cx - w / 2, cy - h / 2, w, h])
        scores.append(score)
        classes.append(best)
    keep = []
    groups = sorted(set(classes)) if case["class_aware"] else [None]
    for g in groups:
        idx = [i for i in range(len(boxes)) if g is None or classes[i] == g]
        kept = cv2.dnn.NMSBoxes([boxes[i] for i in idx], [scores[i] for i in idx],
                                case["score_threshold"], case["iou_threshold"])
        keep += [idx[int(k)] for k in np.array(kept).reshape(-1)]
    keep.sort(key=lambda i: (-scores[i], i))
    keep = keep[:case["max_detections"]]
    mapped = []
    for i in keep:
        x1, y1, w, h = boxes[i]
        mapped.append([min(max((x1 - ox) / sx, 0), w0), min(max((y1 - oy) / sy, 0), h0),
                       min(max((x1 + w - ox) / sx, 0), w0), min(max((y1 + h - oy) / sy, 0), h0)])
    prefix = case["out"]
    np.array(mapped, np.float32).reshape(-1, 4).tofile(prefix + ".boxes")
    np.array([scores[i] for i in keep], np.float32).tofile(prefix + ".scores")
    np.array([classes[i] for i in keep], np.int64).tofile(prefix + ".classes")


def classify(case):
    x, _ = preprocess(case)
    net = cv2.dnn.readNetFromONNX(case["model"])
    net.setInput(x[None])
    logits = net.forward()[0].astype(np.float64)
    p = np.exp(logits - logits.max())
    p /= p.sum()
    top = sorted(range(len(p)), key=lambda i: (-p[i], i))[:case["top_k"]]
    np.array([p[i] for i in top], np.float32).tofile(case["out"] + ".scores")
    np.array(top, np.int64).tofile(case["out"] + ".classes")


def main():
    with open(sys.argv[1]) as f:
        cases = json.load(f)
    for case in cases:
        if case["kind"] == "preprocess":
            x, _ = preprocess(case)
            x.astype(np.float32).tofile(case["out"])
        elif case["kind"] == "classify":
            classify(case)
        else:
            detect(case)


if __name__ == "__main__":
    main()
