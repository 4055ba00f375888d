#!/usr/bin/python3
"""Writes one small chat model (gen_models.py's chat size, the phi-3 vocabulary: 5 MB) whose
tokenizer.chat_template is the text of a file: hostile-template tests (one that does not parse,
throws, loops or is huge).

  PYTHONPATH=.deps/llama.cpp/gguf-py /usr/bin/python3 tools/gen_chat_model.py OUT.gguf TEMPLATE_FILE
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen_models  # noqa: E402


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    out, template_file = sys.argv[1], sys.argv[2]
    with open(template_file, encoding="utf-8") as f:
        template = f.read()
    vocab_dir = os.path.join(os.path.dirname(gen_models.gguf.__file__), "..", "..", "models")
    vocab = os.path.join(vocab_dir, "ggml-vocab-phi-3.gguf")
    gen_models.write_llama(out, "chat", vocab, 7, False, tied=True, chat_template=template)


if __name__ == "__main__":
    main()
