#!/usr/bin/env python3
"""Reference answers for examples/models/bert_model.h, computed in float64 with numpy alone
(transformers' BertModel, BertForSequenceClassification and BertForMaskedLM in eval mode, and
sentence-transformers' mean pooling), written as safetensors fixtures for tests/models.

    pip install --target /tmp/npsite safetensors numpy
    PYTHONPATH=/tmp/npsite python3 tools/golden/numpy_bert_reference.py            # bert_tiny
    PYTHONPATH=/tmp/npsite python3 tools/golden/numpy_bert_reference.py --minilm DIR  # + minilm

bert_tiny.safetensors: random weights of a tiny config (transformers' names: bert.*,
classifier.*, cls.predictions.* without the tied decoder), input.* (two sequences, the second
padded, with token types) and expected.* (float64). minilm_reference.safetensors: input ids for
all-MiniLM-L6-v2 (DIR/model.safetensors, DIR/vocab.txt) and its float64 answers.
"""
import argparse
import json
import math
import os

import numpy as np
from safetensors.numpy import load_file, save_file

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "..", "tests", "models", "fixtures")

TINY = dict(vocab_size=40, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=48,
            hidden_act="gelu", max_position_embeddings=16, type_vocab_size=2, layer_norm_eps=1e-12,
            pad_token_id=0, hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1, initializer_range=0.02)
NUM_LABELS = 3
MASKED_POSITIONS = [1, 4, 9, 12]  # into the flattened [B * L] tokens

_erf = np.frompyfunc(math.erf, 1, 1)


def act(name, x):
    if name == "gelu":
        return 0.5 * x * (1 + _erf(x / math.sqrt(2)).astype(np.float64))
    if name in ("gelu_new", "gelu_pytorch_tanh"):
        return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))
    if name == "relu":
        return np.maximum(x, 0)
    raise ValueError(name)


def linear(w, p, x):
    return x @ w[p + ".weight"].T + w[p + ".bias"]


def layer_norm(w, p, x, eps):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * w[p + ".weight"] + w[p + ".bias"]


def softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def bert(w, cfg, ids, mask=None, types=None, prefix="bert."):
    """transformers' BertModel in eval mode: (last_hidden_state, pooler_output)."""
    w = {k[len(prefix):]: v.astype(np.float64) for k, v in w.items() if k.startswith(prefix)}
    B, L = ids.shape
    H, nh, eps = cfg["hidden_size"], cfg["num_attention_heads"], cfg["layer_norm_eps"]
    types = np.zeros_like(ids) if types is None else types
    x = (w["embeddings.word_embeddings.weight"][ids] + w["embeddings.token_type_embeddings.weight"][types]
         + w["embeddings.position_embeddings.weight"][np.arange(L)])
    x = layer_norm(w, "embeddings.LayerNorm", x, eps)
    # transformers' extended attention mask: (1 - mask) * finfo.min added to the scores.
    add = 0 if mask is None else ((1.0 - mask) * np.finfo(np.float64).min)[:, None, None, :]
    for i in range(cfg["num_hidden_layers"]):
        p = f"encoder.layer.{i}."
        heads = lambda t: t.reshape(B, L, nh, H // nh).transpose(0, 2, 1, 3)
        q, k, v = (heads(linear(w, p + "attention.self." + n, x)) for n in ("query", "key", "value"))
        scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(H // nh) + add
        ctx = (softmax(scores) @ v).transpose(0, 2, 1, 3).reshape(B, L, H)
        a = layer_norm(w, p + "attention.output.LayerNorm", linear(w, p + "attention.output.dense", ctx) + x, eps)
        inter = act(cfg["hidden_act"], linear(w, p + "intermediate.dense", a))
        x = layer_norm(w, p + "output.LayerNorm", linear(w, p + "output.dense", inter) + a, eps)
    pooled = np.tanh(linear(w, "pooler.dense", x[:, 0])) if "pooler.dense.weight" in w else None
    return x, pooled


def sentence_embedding(h, mask):
    """sentence-transformers' Pooling(mean) + Normalize."""
    m = mask[:, :, None].astype(np.float64)
    mean = (h * m).sum(1) / np.maximum(m.sum(1), 1e-9)
    return mean / np.maximum(np.linalg.norm(mean, axis=1, keepdims=True), 1e-12)


def tiny_weights(cfg, rng):
    """Random weights under transformers' names, away from the identity so every term counts."""
    H, I, V = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"]
    shapes = {"bert.embeddings.word_embeddings.weight": (V, H),
              "bert.embeddings.position_embeddings.weight": (cfg["max_position_embeddings"], H),
              "bert.embeddings.token_type_embeddings.weight": (cfg["type_vocab_size"], H)}
    linears = {}
    for i in range(cfg["num_hidden_layers"]):
        p = f"bert.encoder.layer.{i}."
        for n in ("query", "key", "value"):
            linears[p + "attention.self." + n] = (H, H)
        linears[p + "attention.output.dense"] = (H, H)
        linears[p + "intermediate.dense"] = (I, H)
        linears[p + "output.dense"] = (H, I)
    linears["bert.pooler.dense"] = (H, H)
    linears["classifier"] = (NUM_LABELS, H)
    linears["cls.predictions.transform.dense"] = (H, H)
    norms = ["bert.embeddings.LayerNorm"] + [f"bert.encoder.layer.{i}.{n}.LayerNorm"
                                            for i in range(cfg["num_hidden_layers"])
                                            for n in ("attention.output", "output")]
    norms.append("cls.predictions.transform.LayerNorm")
    w = {k: rng.normal(0, 0.5, s) for k, s in shapes.items()}
    for p, (o, i) in linears.items():
        w[p + ".weight"] = rng.normal(0, 1 / math.sqrt(i), (o, i))
        w[p + ".bias"] = rng.normal(0, 0.1, o)
    for p in norms:
        w[p + ".weight"] = 1 + rng.normal(0, 0.2, H)
        w[p + ".bias"] = rng.normal(0, 0.1, H)
    w["cls.predictions.bias"] = rng.normal(0, 0.1, V)
    return {k: v.astype(np.float32) for k, v in w.items()}


def write_tiny():
    cfg = dict(TINY)
    rng = np.random.default_rng(21)
    w = tiny_weights(cfg, rng)
    B, L = 2, 7
    ids = rng.integers(1, cfg["vocab_size"], (B, L)).astype(np.int64)
    mask = np.ones((B, L), np.int64)
    mask[1, 4:] = 0
    ids[1, 4:] = cfg["pad_token_id"]
    types = np.array([[0, 0, 0, 1, 1, 1, 1], [0, 0, 1, 1, 0, 0, 0]], np.int64)
    h, pooled = bert(w, cfg, ids, mask, types)
    f64 = {k: v.astype(np.float64) for k, v in w.items()}
    logits = linear(f64, "classifier", pooled)
    t = layer_norm(f64, "cls.predictions.transform.LayerNorm",
                   act(cfg["hidden_act"], linear(f64, "cls.predictions.transform.dense",
                                                 h.reshape(B * L, -1)[MASKED_POSITIONS])), cfg["layer_norm_eps"])
    mlm = t @ f64["bert.embeddings.word_embeddings.weight"].T + f64["cls.predictions.bias"]
    h_plain, _ = bert(w, cfg, ids)  # no attention mask, no token types
    h_tanh, _ = bert(w, dict(cfg, hidden_act="gelu_new"), ids, mask, types)
    tensors = dict(w)
    tensors.update({"input.input_ids": ids, "input.attention_mask": mask, "input.token_type_ids": types,
                    "input.masked_positions": np.array(MASKED_POSITIONS, np.int64),
                    "expected.last_hidden_state": h, "expected.pooler_output": pooled,
                    "expected.sequence_classification_logits": logits, "expected.masked_lm_logits": mlm,
                    "expected.sentence_embedding": sentence_embedding(h, mask),
                    "expected.last_hidden_state_unmasked": h_plain,
                    "expected.last_hidden_state_gelu_new": h_tanh})
    path = os.path.join(FIXTURES, "bert_tiny.safetensors")
    save_file({k: np.ascontiguousarray(v) for k, v in tensors.items()}, path,
              metadata={"config": json.dumps(cfg), "num_labels": str(NUM_LABELS)})
    print(path, os.path.getsize(path), "bytes")


def write_minilm(directory):
    cfg = json.load(open(os.path.join(directory, "config.json")))
    w = load_file(os.path.join(directory, "model.safetensors"))
    vocab = {tok: i for i, tok in enumerate(open(os.path.join(directory, "vocab.txt"), encoding="utf-8").read().split("\n"))}
    # Whole words of the vocabulary, so no tokenizer is needed: [CLS] words [SEP] [PAD]...
    sentences = ["a man is playing a guitar on the stage", "the cat sits on the mat", "it is raining"]
    L = 2 + max(len(s.split()) for s in sentences)
    ids = np.zeros((len(sentences), L), np.int64)
    mask = np.zeros_like(ids)
    for b, s in enumerate(sentences):
        toks = [vocab["[CLS]"]] + [vocab[t] for t in s.split()] + [vocab["[SEP]"]]
        ids[b, :len(toks)] = toks
        mask[b, :len(toks)] = 1
    h, pooled = bert(w, cfg, ids, mask, prefix="")
    tensors = {"input.input_ids": ids, "input.attention_mask": mask, "expected.pooler_output": pooled,
               "expected.sentence_embedding": sentence_embedding(h, mask),
               "expected.last_hidden_state": h.astype(np.float32)}
    path = os.path.join(FIXTURES, "minilm_reference.safetensors")
    save_file(tensors, path, metadata={"sentences": json.dumps(sentences)})
    print(path, os.path.getsize(path), "bytes")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--minilm", help="all-MiniLM-L6-v2's directory (model.safetensors, config.json, vocab.txt)")
    args = parser.parse_args()
    write_tiny()
    if args.minilm:
        write_minilm(args.minilm)
