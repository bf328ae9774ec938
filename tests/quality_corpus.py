"""Reference and degraded documents for the quality classifier's tests and bench.

Reference ("good") documents are the prose of ``../shared/corpora/text`` (two English books,
one Japanese novel, Chinese notes) cut into pieces of about ``size`` characters at line ends.
Degraded ("bad") ones are made from the same pieces in four ways, in turn: words shuffled
(characters, for Chinese and Japanese), the text broken up by navigation and legal
boilerplate lines, a list of links, and a few of its lines repeated over and over.
"""

from __future__ import annotations

import random
import re

from tests.conftest import CORPORA, _require

_CJK_CHAR = re.compile(r"[\u3040-\u30ff\u3400-\u9fff]")
BOILERPLATE = {
    "en": ["Home | About us | Contact | Privacy policy", "Copyright © 2024 All rights reserved.",
           "Click here to subscribe to our newsletter!", "We use cookies to improve your experience. Accept",
           "Share on Facebook Share on Twitter", "Log in | Sign up | Forgot password?", "Read more >>",
           "Terms of service | Sitemap | Advertise with us"],
    "cjk": ["首页 | 关于我们 | 联系我们 | 隐私政策", "版权所有 © 2024 保留所有权利", "点击这里订阅我们的新闻",
            "ホーム | お問い合わせ | プライバシーポリシー", "Copyright © 2024 All rights reserved.",
            "ログイン | 新規登録 | パスワードを忘れた方", "分享到微信 分享到微博", "続きを読む >>"],
}


def sources() -> dict[str, tuple[str, str]]:
    """name -> (text, script) of the reference prose."""
    text = _require(CORPORA / "text")
    out = {name: ((text / name).read_text(encoding="utf-8"), "en") for name in ("botchan.txt", "tinyshakespeare.txt")}
    out["wagahaiwa_nekodearu.txt"] = ((text / "wagahaiwa_nekodearu.txt").read_text(encoding="utf-8"), "cjk")
    out["zh_notes"] = ("\n".join(p.read_text(encoding="utf-8") for p in sorted((text / "zh_notes").glob("*.txt"))), "cjk")
    return out


def pieces(text: str, size: int) -> list[str]:
    """``text`` cut into pieces of about ``size`` characters at line ends (blank-only pieces dropped)."""
    out, current, length = [], [], 0
    for line in text.splitlines():
        current.append(line)
        length += len(line) + 1
        if length >= size:
            out.append("\n".join(current))
            current, length = [], 0
    if current:
        out.append("\n".join(current))
    return [p for p in out if p.strip()]


def degrade(piece: str, script: str, kind: int, rng: random.Random) -> str:
    lines = [ln for ln in piece.splitlines() if ln.strip()] or [piece]
    if kind == 0:  # shuffled words (characters for CJK)
        units = _CJK_CHAR.findall(piece) if script == "cjk" else piece.split()
        rng.shuffle(units)
        joined = "" if script == "cjk" else " "
        width = 30 if script == "cjk" else 12
        return "\n".join(joined.join(units[i:i + width]) for i in range(0, len(units), width))
    if kind == 1:  # boilerplate lines around a few real ones
        out = []
        for line in lines[: max(1, len(lines) // 4)]:
            out += rng.sample(BOILERPLATE[script], 3) + [line]
        return "\n".join(out + rng.sample(BOILERPLATE[script], 4))
    if kind == 2:  # a list of links titled with words of the text
        units = _CJK_CHAR.findall(piece) if script == "cjk" else re.findall(r"\w+", piece)
        units = units or ["page"]
        out = []
        for i in range(0, min(len(units), 240), 4):
            words = units[i:i + 4]
            slug = "-".join(words) if script != "cjk" else f"p{rng.randrange(10**6)}"
            out.append(f"[{''.join(words) if script == 'cjk' else ' '.join(words)}](https://www.example.com/{slug}.html)")
        return "\n".join(out)
    # repeated lines: two of its lines, over and over
    chosen = rng.sample(lines, min(2, len(lines)))
    return "\n".join(chosen[i % len(chosen)] for i in range(24))


def corpus(size: int = 1500, per_source: int = 80, seed: int = 0) -> dict[str, tuple[list[str], list[str]]]:
    """source name -> (good documents, bad documents): up to ``per_source`` pieces of each
    source, taken evenly across it, and one degraded document per piece."""
    rng = random.Random(seed)
    out = {}
    for name, (text, script) in sources().items():
        all_pieces = pieces(text, size)
        step = max(1, len(all_pieces) // per_source)
        good = all_pieces[::step][:per_source]
        bad = [degrade(p, script, i % 4, rng) for i, p in enumerate(good)]
        out[name] = (good, bad)
    return out
