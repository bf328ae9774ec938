#!/usr/bin/env python3
"""Writes bert_tables.rs: the character classes HF `tokenizers`' BERT normalizer and
pre-tokenizer use, read off HF itself by probing every code point.

Why probe rather than use our Unicode tables: HF takes these classes from the
`unicode_categories` crate, whose tables are from an old Unicode version (U+1734 is still
Mn there, U+2E43.. are not punctuation yet, unassigned code points are not "other"), and
ids equal to HF's need HF's classes, not today's.

    python3 gen_bert_tables.py > bert_tables.rs
"""
import tokenizers
from tokenizers.normalizers import BertNormalizer
from tokenizers.pre_tokenizers import BertPreTokenizer

CODE_POINTS = [c for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF]


def ranges(cps):
    out = []
    for c in sorted(cps):
        if out and out[-1][1] == c - 1:
            out[-1][1] = c
        else:
            out.append([c, c])
    return out


def main():
    clean = BertNormalizer(clean_text=True, handle_chinese_chars=False, strip_accents=False, lowercase=False)
    removed = [c for c in CODE_POINTS if clean.normalize_str("a" + chr(c)) == "a"]
    pre = BertPreTokenizer()
    punct = [c for c in CODE_POINTS if len(pre.pre_tokenize_str("a" + chr(c) + "a")) == 3]
    strip = BertNormalizer(clean_text=False, handle_chinese_chars=False, strip_accents=True, lowercase=False)
    # A code point that vanishes on its own is a nonspacing mark (its NFD is itself).
    marks = [c for c in CODE_POINTS if strip.normalize_str(chr(c)) == ""]
    print(f"//! Character classes of HF `tokenizers`' BertNormalizer and BertPreTokenizer, probed from\n"
          f"//! tokenizers {tokenizers.__version__} by `gen_bert_tables.py`; do not edit.\n")
    for name, doc, cps in (
        ("REMOVED", "Removed by `clean_text`: NUL, U+FFFD and `unicode_categories`' \"other\" (Cc, Cf, Co, Cs) but tab, LF and CR.", removed),
        ("PUNCTUATION", "Isolated by the pre-tokenizer: ASCII punctuation and `unicode_categories`' P*.", punct),
        ("NONSPACING_MARKS", "Removed after NFD by `strip_accents`: `unicode_categories`' Mn.", marks),
    ):
        print(f"/// {doc}")
        print(f"pub(crate) static {name}: &[(u32, u32)] = &[")
        for a, b in ranges(cps):
            print(f"    (0x{a:04X}, 0x{b:04X}),")
        print("];\n")


if __name__ == "__main__":
    main()
