#!/usr/bin/python3
"""Writes deterministic random-weight GGUF models with real tokenizers, so that mmserve's tests,
demo and benchmarks need no download.

  llama-<size>.gguf   a llama decoder (tokenizer: the bundle's ggml-vocab-llama-spm.gguf)
  bert-<size>.gguf    a BERT embedder, mean pooling (tokenizer: ggml-vocab-bert-bge.gguf)
  rerank-<size>.gguf  a BERT cross-encoder with a classification head, rank pooling
  chat-<vocab>.gguf   a small llama decoder with the tokenizer and chat template of one of the
                      bundle's vocabularies that ship one (qwen2, qwen35, phi-3, gemma-4,
                      command-r): tool calls, structured output and template tests

Sizes: tiny (tests, demo) and base (benchmarks: BERT-base dimensions, ~110M parameters; a
~0.5B-parameter decoder with F16 2-D weights). Embedding tables and 1-D tensors stay F32: BERT on
CPU aborts on an F16 position/token-type table. Weights ~ N(0, 0.02), norms 1, biases 0; the same
seed always gives the same bytes.

Run with Debian's python3 (numpy) and the bundle's gguf-py on PYTHONPATH:
  PYTHONPATH=.deps/llama.cpp/gguf-py /usr/bin/python3 tools/gen_models.py --out models/generated
"""
import argparse
import os
import sys

import numpy as np
import gguf

SIZES = {
    # name: (E, layers, heads, F, ctx)
    ("llama", "tiny"): (128, 2, 2, 512, 2048),
    ("llama", "base"): (1024, 32, 16, 2816, 2048),
    ("bert", "tiny"): (64, 2, 1, 256, 512),
    ("bert", "base"): (768, 12, 12, 3072, 512),
    ("llama", "chat"): (64, 1, 2, 128, 4096),
}

# The bundle's vocabularies that carry tokenizer.chat_template. Two of them are given a newer
# template of the same family from the bundle's models/templates (their own is plain ChatML):
# Qwen2.5's (tool calls in <tool_call> tags) and Qwen3.5's (reasoning, XML tool calls).
CHAT_VOCABS = ["qwen2", "qwen35", "phi-3", "gemma-4", "command-r"]
CHAT_TEMPLATES = {"qwen2": "Qwen-Qwen2.5-7B-Instruct.jinja", "qwen35": "Qwen3.5-4B.jinja"}


class Weights:
    def __init__(self, seed, f16):
        self.rng = np.random.default_rng(seed)
        self.f16 = f16

    def matrix(self, rows, cols):
        """A 2-D weight of ggml shape {cols, rows} (numpy shape is reversed)."""
        w = self.rng.standard_normal((rows, cols), dtype=np.float32) * np.float32(0.02)
        return w.astype(np.float16) if self.f16 else w

    def table(self, rows, cols):
        return self.rng.standard_normal((rows, cols), dtype=np.float32) * np.float32(0.02)

    @staticmethod
    def ones(n):
        return np.ones(n, dtype=np.float32)

    @staticmethod
    def zeros(n):
        return np.zeros(n, dtype=np.float32)


def copy_tokenizer(writer, vocab_path, chat_template=None):
    reader = gguf.GGUFReader(vocab_path)
    n_tokens = 0
    if chat_template is not None:
        writer.add_chat_template(chat_template)
    for key, field in reader.fields.items():
        if not key.startswith("tokenizer.") or (chat_template is not None and key == "tokenizer.chat_template"):
            continue
        value = field.contents()
        if field.types[0] == gguf.GGUFValueType.ARRAY:
            writer.add_key_value(key, value, gguf.GGUFValueType.ARRAY, field.types[1])
            if key == "tokenizer.ggml.tokens":
                n_tokens = len(value)
        else:
            writer.add_key_value(key, value, field.types[0])
    return n_tokens


def write_llama(path, size, vocab, seed, f16, tied=False, chat_template=None):
    E, L, H, F, ctx = SIZES[("llama", size)]
    w = Weights(seed, f16)
    writer = gguf.GGUFWriter(path, "llama")
    writer.add_name(f"mmserve-llama-{size}")
    V = copy_tokenizer(writer, vocab, chat_template)
    writer.add_context_length(ctx)
    writer.add_embedding_length(E)
    writer.add_block_count(L)
    writer.add_feed_forward_length(F)
    writer.add_head_count(H)
    writer.add_head_count_kv(H)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_rope_dimension_count(E // H)
    writer.add_rope_freq_base(10000.0)
    writer.add_vocab_size(V)
    writer.add_file_type(gguf.LlamaFileType.MOSTLY_F16 if f16 else gguf.LlamaFileType.ALL_F32)
    # A chat model's vocabulary is large (up to 262k): its table doubles as the output (tied) and
    # is F16, so that five of them stay small.
    writer.add_tensor("token_embd.weight", w.table(V, E).astype(np.float16) if tied else w.table(V, E))
    writer.add_tensor("output_norm.weight", w.ones(E))
    if not tied:
        writer.add_tensor("output.weight", w.matrix(V, E))
    for i in range(L):
        p = f"blk.{i}."
        writer.add_tensor(p + "attn_norm.weight", w.ones(E))
        writer.add_tensor(p + "attn_q.weight", w.matrix(E, E))
        writer.add_tensor(p + "attn_k.weight", w.matrix(E, E))
        writer.add_tensor(p + "attn_v.weight", w.matrix(E, E))
        writer.add_tensor(p + "attn_output.weight", w.matrix(E, E))
        writer.add_tensor(p + "ffn_norm.weight", w.ones(E))
        writer.add_tensor(p + "ffn_gate.weight", w.matrix(F, E))
        writer.add_tensor(p + "ffn_up.weight", w.matrix(F, E))
        writer.add_tensor(p + "ffn_down.weight", w.matrix(E, F))
    finish(writer)


def write_bert(path, size, vocab, seed, f16, rerank):
    E, L, H, F, ctx = SIZES[("bert", size)]
    w = Weights(seed, f16)
    writer = gguf.GGUFWriter(path, "bert")
    writer.add_name(f"mmserve-{'rerank' if rerank else 'bert'}-{size}")
    V = copy_tokenizer(writer, vocab)
    writer.add_context_length(ctx)
    writer.add_embedding_length(E)
    writer.add_block_count(L)
    writer.add_feed_forward_length(F)
    writer.add_head_count(H)
    writer.add_layer_norm_eps(1e-12)
    writer.add_causal_attention(False)
    writer.add_pooling_type(gguf.PoolingType.RANK if rerank else gguf.PoolingType.MEAN)
    writer.add_file_type(gguf.LlamaFileType.MOSTLY_F16 if f16 else gguf.LlamaFileType.ALL_F32)
    if rerank:
        writer.add_classifier_output_labels(["relevant"])
    writer.add_tensor("token_embd.weight", w.table(V, E))
    writer.add_tensor("token_types.weight", w.table(2, E))
    writer.add_tensor("position_embd.weight", w.table(ctx, E))
    writer.add_tensor("token_embd_norm.weight", w.ones(E))
    writer.add_tensor("token_embd_norm.bias", w.zeros(E))
    for i in range(L):
        p = f"blk.{i}."
        for name in ("attn_q", "attn_k", "attn_v"):
            writer.add_tensor(p + name + ".weight", w.matrix(E, E))
            writer.add_tensor(p + name + ".bias", w.zeros(E))
        writer.add_tensor(p + "attn_output.weight", w.matrix(E, E))
        writer.add_tensor(p + "attn_output.bias", w.zeros(E))
        writer.add_tensor(p + "attn_output_norm.weight", w.ones(E))
        writer.add_tensor(p + "attn_output_norm.bias", w.zeros(E))
        writer.add_tensor(p + "ffn_up.weight", w.matrix(F, E))
        writer.add_tensor(p + "ffn_up.bias", w.zeros(F))
        writer.add_tensor(p + "ffn_down.weight", w.matrix(E, F))
        writer.add_tensor(p + "ffn_down.bias", w.zeros(E))
        writer.add_tensor(p + "layer_output_norm.weight", w.ones(E))
        writer.add_tensor(p + "layer_output_norm.bias", w.zeros(E))
    if rerank:
        writer.add_tensor("cls.weight", w.matrix(E, E).astype(np.float32))
        writer.add_tensor("cls.bias", w.zeros(E))
        # A larger head than the body's, so that scores spread enough to rank documents.
        writer.add_tensor("cls.output.weight", w.table(1, E) * np.float32(50))
        writer.add_tensor("cls.output.bias", w.zeros(1))
    finish(writer)


def finish(writer):
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="output directory")
    ap.add_argument("--sizes", default="tiny", help="comma-separated: tiny, base")
    ap.add_argument("--vocab-dir", default=os.path.join(os.path.dirname(gguf.__file__), "..", "..", "models"))
    ap.add_argument("--seed", type=int, default=1234)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    spm = os.path.join(args.vocab_dir, "ggml-vocab-llama-spm.gguf")
    bge = os.path.join(args.vocab_dir, "ggml-vocab-bert-bge.gguf")
    for size in args.sizes.split(","):
        f16 = size == "base"
        jobs = [
            (f"llama-{size}.gguf", lambda p: write_llama(p, size, spm, args.seed, f16)),
            (f"bert-{size}.gguf", lambda p: write_bert(p, size, bge, args.seed + 1, f16, False)),
            (f"rerank-{size}.gguf", lambda p: write_bert(p, size, bge, args.seed + 2, f16, True)),
        ]
        if size == "tiny":
            for v in CHAT_VOCABS:
                vocab = os.path.join(args.vocab_dir, f"ggml-vocab-{v}.gguf")
                template = None
                if v in CHAT_TEMPLATES:
                    with open(os.path.join(args.vocab_dir, "templates", CHAT_TEMPLATES[v])) as f:
                        template = f.read()
                jobs.append((f"chat-{v}.gguf",
                             lambda p, vocab=vocab, t=template: write_llama(p, "chat", vocab, args.seed + 3, False, tied=True, chat_template=t)))
        for name, write in jobs:
            path = os.path.join(args.out, name)
            if os.path.exists(path):
                continue
            tmp = path + ".partial"
            write(tmp)
            os.replace(tmp, path)  # never leave a half-written model under the real name
            print(f"    wrote {path} ({os.path.getsize(path) / 1e6:.1f} MB)", flush=True)


if __name__ == "__main__":
    sys.exit(main())
