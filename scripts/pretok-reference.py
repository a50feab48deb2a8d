#!/usr/bin/env python3
"""Pre-tokenizer splits from the HF `tokenizers` library, a second reference for ingot's pre-tokenizers
where llama.cpp ships no vocabulary test file (deepseek-v3, glm4, kimi-k2).

Each pre-tokenizer is llama.cpp's regex sequence (src/llama-vocab.cpp of llama-cpp-python 0.3.36's vendored
llama.cpp), run by HF's engine (Oniguruma, with look-ahead) as a Sequence of Split(..., "isolated"): every
match is a piece and so is every stretch between two matches, each regex applied to every piece of the previous
one, as llama.cpp's `unicode_regex_split` does. kimi-k2 has no regex in llama.cpp (a hand-written splitter,
`unicode_regex_split_custom_kimi_k2`); its line is that splitter written as one regex, with llama.cpp's Han
ranges. Texts: llama.cpp's own tokenizer test texts (testdata/golden/vocab/*.inp), the golden tokenize.tsv texts
and the lines below.

Run by hand, never by CI (CI reads the committed output):
    python3 -m venv /tmp/pretok-venv && /tmp/pretok-venv/bin/pip install tokenizers==0.23.3
    /tmp/pretok-venv/bin/python scripts/pretok-reference.py
writes testdata/golden/pretok/<name>.jsonl: one {"text": ..., "pieces": [...]} per line.
"""
import json
import os
import sys

from tokenizers import Regex, pre_tokenizers

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
GOLDEN = os.path.join(ROOT, "testdata", "golden")

HAN = (
    "\u4E00-\u9FFF\u3400-\u4DBF\U00020000-\U0002A6DF\U0002A700-\U0002B73F\U0002B740-\U0002B81F"
    "\U0002B820-\U0002CEAF\U0002CEB0-\U0002EBEF\uF900-\uFAFF\U0002F800-\U0002FA1F"
)

LLAMA3 = (
    r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)

PRE = {
    "deepseek-v3": [
        r"\p{N}{1,3}",
        "[一-龥぀-ゟ゠-ヿ]+",
        r"""[!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+"""
        r"| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
    ],
    "glm4": [LLAMA3],
    "kimi-k2": [
        "[" + HAN + "]+"
        + r"|[^\r\n\p{L}\p{N}]?[\p{L}&&[^" + HAN + r"]]+(?:'[sStTmMdD]|'[rR][eE]|'[vV][eE]|'[lL][lL])?"
        + r"|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
    ],
}

EXTRA = [
    "fn main() {\n    let v: Vec<u32> = (0..10).collect();\n    println!(\"{v:?}\");\n}\n",
    "I'm sure they'll say it's 12345678 o'clock, DON'T they? We'VE seen it.",
    "getUserName parseHTTPResponse XMLHttpRequest",
    "深度求索（DeepSeek）发布了V3模型。日本語のテキスト、カタカナとひらがな。한국어 문장입니다.",
    "Ünïcödé façade naïve coöperate résumé — “quotes” ‘single’ «guillemets»",
    "tabs\tand\u00a0no-break\u2003em\u3000ideographic spaces  \t\n\n  end   ",
    "emoji 🦀🚀 👩‍💻 and flags 🇫🇷; math ∑x² ≤ ∞, arrows → ←",
    "e\u0301 combining a\u0308 marks \u0915\u094d\u0937 Devanagari, Ελληνικά, русский текст",
    "3.14159 1,000,000 0x1F 1e-9 v2.0.1 2026-12-03T17:00:00Z",
    "$$$ ### @@@ !!! ??? ... --- ___ *** +++ === <<< >>> ||| ~~~",
]


def texts():
    out = []
    for name in ("ggml-vocab-deepseek-llm.gguf.inp", "ggml-vocab-deepseek-coder.gguf.inp"):
        with open(os.path.join(GOLDEN, "vocab", name), encoding="utf-8") as f:
            inp = f.read()
        sep = "\n__ggml_vocab_test__\n"
        cases = inp.split(sep)
        if inp.endswith(sep):
            cases.pop()
        out += cases
    with open(os.path.join(GOLDEN, "tokenize.tsv"), encoding="utf-8") as f:
        for line in f:
            text = line.rstrip("\n").split("\t")[0]
            out.append(text.replace("\\n", "\n").replace("\\t", "\t"))
    out += EXTRA
    seen, unique = set(), []
    for t in out:
        if t and t not in seen:
            seen.add(t)
            unique.append(t)
    return unique


def main():
    dest = os.path.join(GOLDEN, "pretok")
    os.makedirs(dest, exist_ok=True)
    cases = texts()
    for name, regexes in PRE.items():
        pre = pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(r), "isolated") for r in regexes])
        path = os.path.join(dest, name + ".jsonl")
        with open(path + ".tmp", "w", encoding="utf-8") as f:
            for t in cases:
                pieces = [p for p, _ in pre.pre_tokenize_str(t)]
                assert "".join(pieces) == t, (name, t)
                f.write(json.dumps({"text": t, "pieces": pieces}, ensure_ascii=False) + "\n")
        os.replace(path + ".tmp", path)
        print(f"{path}: {len(cases)} texts")


if __name__ == "__main__":
    sys.exit(main())
