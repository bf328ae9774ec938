"""A labelled PII set built from real text: values of each type (generated here from the
published rules, with this module's own Luhn, MOD 97-10 and MOD 11-2 code, independent of
tokpipe's) inserted into real paragraphs at known offsets, hard negatives (version strings,
dates, ISBNs, DOIs, UUIDs, hex digests, numeric tables, shell prompts, SSH remotes) inserted
unlabelled, and the maintainer lines of the kernel documentation (``Name <address>``, the
address labelled by its angle brackets).

The true spans come from construction (or from the brackets), never from the detector.
Shared by ``test_pii.py`` (a small set) and ``benches/python/bench_pii.py`` (a larger one).
"""

from __future__ import annotations

import base64
import ipaddress
import json
import random
import re
import string

Label = tuple[str, int, int]  # (type, start, end) in code points

FIRST = ["james", "maria", "wei", "li", "fatima", "olga", "pierre", "yuki", "carlos", "anna", "omar", "sven"]
LAST = ["smith", "garcia", "zhang", "wang", "khan", "ivanova", "dubois", "tanaka", "silva", "berg", "novak"]
DOMAINS = ["example.com", "mail.example.org", "uni-heidelberg.de", "company.co.uk", "gmail.com", "qq.com",
           "posteo.net", "cs.stanford.edu", "163.com", "proton.me"]


def luhn_digit(body: str) -> str:
    total = 0
    for i, ch in enumerate(reversed(body)):
        d = int(ch)
        if i % 2 == 0:  # doubled once the check digit is appended
            d *= 2
            if d > 9:
                d -= 9
        total += d
    return str((10 - total % 10) % 10)


def iban_check(country: str, bban: str) -> str:
    rearranged = bban + country + "00"
    number = int("".join(str(int(c, 36)) for c in rearranged))
    return f"{98 - number % 97:02d}"


def china_id_check(first17: str) -> str:
    total = sum(int(c) * pow(2, 17 - i, 11) for i, c in enumerate(first17))
    v = (12 - total % 11) % 11
    return "X" if v == 10 else str(v)


def _digits(rng: random.Random, n: int) -> str:
    return "".join(rng.choice(string.digits) for _ in range(n))


def email(rng: random.Random) -> str:
    f, la, d = rng.choice(FIRST), rng.choice(LAST), rng.choice(DOMAINS)
    local = rng.choice([f"{f}.{la}", f"{f}{rng.randint(1, 99)}", f"{f[0]}{la}", f"{f}_{la}", f"{f}+news"])
    if rng.random() < 0.1:
        return f"{rng.randint(10000, 99999999)}+{f}{la}@users.noreply.github.com"
    return f"{local}@{d}"


def public_ipv4(rng: random.Random) -> str:
    while True:
        ip = ipaddress.IPv4Address(rng.getrandbits(32))
        if ip.is_global and not ip.is_multicast:
            return str(ip)


def public_ipv6(rng: random.Random) -> str:
    while True:
        groups = [rng.getrandbits(16) for _ in range(8)]
        if rng.random() < 0.5:  # a run of zeros, written compressed
            k = rng.randint(2, 5)
            for j in range(k, k + rng.randint(2, 3)):
                groups[j] = 0
        groups[0] = rng.choice([0x2001, 0x2a00, 0x2a03, 0x2606, 0x2400, 0x2804]) | 0
        ip = ipaddress.IPv6Address(":".join(f"{g:x}" for g in groups))
        if ip.is_global:
            return ip.compressed


def phone(rng: random.Random) -> str:
    a, e = rng.randint(2, 9), rng.randint(2, 9)
    area, exch, line = f"{a}{_digits(rng, 2)}", f"{e}{_digits(rng, 2)}", _digits(rng, 4)
    mobile = f"1{rng.randint(3, 9)}{_digits(rng, 1)}"
    return rng.choice([
        f"({area}) {exch}-{line}",
        f"{area}-{exch}-{line}",
        f"{area}.{exch}.{line}",
        f"+1 {area} {exch} {line}",
        f"+1 ({area}) {exch}-{line}",
        f"1-{area}-{exch}-{line}",
        f"+44 20 {_digits(rng, 4)} {_digits(rng, 4)}",
        f"+49 30 {_digits(rng, 8)}",
        f"+33 1 {_digits(rng, 2)} {_digits(rng, 2)} {_digits(rng, 2)} {_digits(rng, 2)}",
        f"+86 {mobile} {_digits(rng, 4)} {_digits(rng, 4)}",
        f"{mobile}{_digits(rng, 8)}",
        f"{mobile} {_digits(rng, 4)} {_digits(rng, 4)}",
        f"{mobile}-{_digits(rng, 4)}-{_digits(rng, 4)}",
        f"0{rng.choice(['10', '21', '755', '571'])}-{rng.randint(2, 8)}{_digits(rng, 7)}",
    ])


CARD_PREFIXES = [("4", 16), ("51", 16), ("55", 16), ("2221", 16), ("34", 15), ("37", 15), ("6011", 16),
                 ("65", 16), ("3530", 16), ("62", 16), ("4", 13)]


def credit_card(rng: random.Random) -> str:
    prefix, n = rng.choice(CARD_PREFIXES)
    body = prefix + _digits(rng, n - 1 - len(prefix))
    number = body + luhn_digit(body)
    sep = rng.choice(["", " ", "-"])
    if n == 15:
        groups = [number[:4], number[4:10], number[10:]]
    elif n == 13:
        return number
    else:
        groups = [number[i:i + 4] for i in range(0, n, 4)]
    return sep.join(groups)


def china_id(rng: random.Random) -> str:
    province = rng.choice(["11", "31", "44", "51", "33", "61"])
    region = province + _digits(rng, 4)
    birth = f"{rng.randint(1940, 2010)}{rng.randint(1, 12):02d}{rng.randint(1, 28):02d}"
    first17 = region + birth + _digits(rng, 3)
    return first17 + china_id_check(first17)


def us_ssn(rng: random.Random) -> str:
    area = rng.choice([a for a in range(1, 900) if a != 666])
    return f"{area:03d}-{rng.randint(1, 99):02d}-{rng.randint(1, 9999):04d}"


IBAN_FORMATS = {"GB": "AAAA" + "9" * 14, "DE": "9" * 18, "FR": "9" * 10 + "X" * 11 + "99", "NL": "AAAA" + "9" * 10,
                "ES": "9" * 20, "IT": "A" + "9" * 10 + "X" * 12, "CH": "9" * 5 + "X" * 12}


def iban(rng: random.Random) -> str:
    country = rng.choice(sorted(IBAN_FORMATS))
    bban = "".join(rng.choice(string.digits) if c == "9" else rng.choice(string.ascii_uppercase) if c == "A"
                   else rng.choice(string.digits + string.ascii_uppercase) for c in IBAN_FORMATS[country])
    value = country + iban_check(country, bban) + bban
    if rng.random() < 0.5:
        return " ".join(value[i:i + 4] for i in range(0, len(value), 4))
    return value


def _alnum(rng: random.Random, n: int, alphabet: str = string.ascii_letters + string.digits) -> str:
    return "".join(rng.choice(alphabet) for _ in range(n))


def _b64(data: dict) -> str:
    return base64.urlsafe_b64encode(json.dumps(data).encode()).rstrip(b"=").decode()


def secret(rng: random.Random) -> tuple[str, str, str]:
    """(text before, the secret, text after): only the secret is labelled."""
    kind = rng.randrange(8)
    if kind == 0:
        return "", rng.choice(["AKIA", "ASIA"]) + _alnum(rng, 16, string.ascii_uppercase + string.digits), ""
    if kind == 1:
        return "", rng.choice(["ghp_", "gho_", "ghs_"]) + _alnum(rng, 36), ""
    if kind == 2:
        return "", "glpat-" + _alnum(rng, 20), ""
    if kind == 3:
        return "", f"xoxb-{_digits(rng, 11)}-{_digits(rng, 12)}-{_alnum(rng, 24)}", ""
    if kind == 4:
        header, payload = _b64({"alg": "HS256", "typ": "JWT"}), _b64({"sub": _digits(rng, 8), "iat": 1516239022})
        return "", f"{header}.{payload}.{_alnum(rng, 43, string.ascii_letters + string.digits + '-_')}", ""
    if kind == 5:
        body = "\n".join(_alnum(rng, 64, string.ascii_letters + string.digits + "+/") for _ in range(4))
        label = rng.choice(["RSA ", "EC ", "OPENSSH ", ""])
        return "", f"-----BEGIN {label}PRIVATE KEY-----\n{body}\n-----END {label}PRIVATE KEY-----", ""
    key = rng.choice(["api_key", "API_KEY", "password", "db_password", "client_secret", "auth_token", "apiKey"])
    value = _alnum(rng, rng.randint(12, 32), string.ascii_letters + string.digits + "_-!")
    if kind == 6:
        return f'{key} = "', value, '"'
    return f"{key}: ", value, ""


def url_credentials(rng: random.Random) -> tuple[str, str, str]:
    user = rng.choice(FIRST) + rng.choice(["", "_admin", "42"])
    password = _alnum(rng, rng.randint(8, 16), string.ascii_letters + string.digits + "!_")
    host = rng.choice(["db.example.com", "ftp.example.org", "registry.internal", "localhost:5432"])
    scheme = rng.choice(["https", "postgres", "ftp", "mongodb"])
    return f"{scheme}://", f"{user}:{password}", f"@{host}/data"


def mac_address(rng: random.Random) -> str:
    octets = [rng.getrandbits(8) for _ in range(6)]
    octets[0] |= 0x02  # locally administered, never all-zero
    sep = rng.choice([":", "-"])
    text = sep.join(f"{o:02x}" for o in octets)
    return text.upper() if rng.random() < 0.3 else text


def plain(fn):
    return lambda rng: ("", fn(rng), "")


GENERATORS = {
    "email": plain(email),
    "ip_address": plain(lambda rng: public_ipv6(rng) if rng.random() < 0.3 else public_ipv4(rng)),
    "phone": plain(phone),
    "credit_card": plain(credit_card),
    "china_id": plain(china_id),
    "us_ssn": plain(us_ssn),
    "iban": plain(iban),
    "secret": secret,
    "url_credentials": url_credentials,
    "mac_address": plain(mac_address),
}

#: Strings that look like PII but are not: inserted unlabelled (any span found in them is a
#: false positive).
NEGATIVES = [
    "version 1.2.3.4", "v10.0.0.1", "release 4.19.0.12", "1.2.3.4.5", "2021-03-04", "04/03/2021",
    "2024-12-31T23:59:59Z", "ISBN 978-3-16-148410-0", "ISBN 0-306-40615-2", "doi:10.1038/nphys1170",
    "https://doi.org/10.1000/182", "550e8400-e29b-41d4-a716-446655440000", "d41d8cd98f00b204e9800998ecf8427e",
    "da39a3ee5e6b4b0d3255bfef95601890afd80709", "3.14159 2.71828 1.41421", "alice@devbox:~$",
    "git@github.com:torvalds/linux.git", "noreply@github.com", "icon@2x.png", "12:30:45", "std::vector",
    "$ 1,234,567.89", "0x7fff5fbff8c8", "page 1234", "pid 45213", "password: required",
]


def paragraphs(texts: list[str], min_chars: int = 200, max_chars: int = 1200) -> list[str]:
    """Blank-line separated paragraphs of the texts, without any character an e-mail, a URL
    or a long number needs (``@``, ``://``, four digits in a row), so that the only PII in the
    set is what is inserted."""
    out = []
    for text in texts:
        for para in re.split(r"\n\s*\n", text):
            para = para.strip()
            if min_chars <= len(para) <= max_chars and "@" not in para and "://" not in para \
                    and not re.search(r"\d{4}|\d[.:-]\d", para):
                out.append(para)
    return out


def insert(rng: random.Random, para: str, items: list[tuple[str | None, tuple[str, str, str]]]) -> tuple[str, list[Label]]:
    """``para`` with each item inserted at a space (in order of position), and the labels."""
    spaces = [i for i, ch in enumerate(para) if ch == " "]
    positions = sorted(rng.sample(spaces, min(len(items), len(spaces))))
    text, labels, last = [], [], 0
    at = 0
    for pos, (kind, (pre, value, post)) in zip(positions, items):
        chunk = para[last:pos] + " "
        text.append(chunk)
        at += len(chunk)
        text.append(pre)
        at += len(pre)
        if kind is not None:
            labels.append((kind, at, at + len(value)))
        text.append(value + post + " ")
        at += len(value) + len(post) + 1
        last = pos + 1
    text.append(para[last:])
    return "".join(text), labels


def build(texts: list[str], n_docs: int, seed: int = 0, negatives: bool = True) -> list[tuple[str, list[Label]]]:
    """``n_docs`` documents: real paragraphs, each with 1 to 3 values of the types in turn and,
    with ``negatives``, one hard negative."""
    rng = random.Random(seed)
    paras = paragraphs(texts)
    assert len(paras) >= 20, "expected real paragraphs"
    kinds = sorted(GENERATORS)
    docs = []
    for i in range(n_docs):
        para = rng.choice(paras)
        items: list[tuple[str | None, tuple[str, str, str]]] = []
        for j in range(rng.randint(1, 3)):
            kind = kinds[(i * 3 + j) % len(kinds)]
            items.append((kind, GENERATORS[kind](rng)))
        if negatives:
            items.append((None, ("", rng.choice(NEGATIVES), "")))
        rng.shuffle(items)
        docs.append(insert(rng, para, items))
    return docs


MAINTAINER = re.compile(r"^[\s:*-]*(?:[A-Z][\w.'-]+ ){1,3}<([^<>\s]+@[^<>\s]+\.[A-Za-z]{2,})>\s*$")


def maintainer_lines(docs: list[str]) -> list[tuple[str, list[Label]]]:
    """The ``Name <address>`` lines of the kernel documentation, grouped into documents of up
    to 20 lines; each address labelled by the angle brackets around it."""
    lines = []
    for text in docs:
        for line in text.splitlines():
            m = MAINTAINER.match(line)
            if m and not m.group(1).startswith(("git@", "noreply@")):
                lines.append((line, m.start(1), m.end(1)))
    out = []
    for i in range(0, len(lines), 20):
        text, labels, at = [], [], 0
        for line, s, e in lines[i:i + 20]:
            labels.append(("email", at + s, at + e))
            text.append(line)
            at += len(line) + 1
        out.append(("\n".join(text), labels))
    return out


def score(truth: list[list[Label]], found: list[list[Label]], types) -> dict[str, tuple[float, float, int, int, int]]:
    """Per type: (precision, recall, true positives, false positives, false negatives) of exact
    (type, start, end) matches."""
    out = {}
    for t in types:
        tp = fp = fn = 0
        for want, got in zip(truth, found):
            w = {s for s in want if s[0] == t}
            g = {s for s in got if s[0] == t}
            tp += len(w & g)
            fp += len(g - w)
            fn += len(w - g)
        p = tp / (tp + fp) if tp + fp else 1.0
        r = tp / (tp + fn) if tp + fn else 1.0
        out[t] = (p, r, tp, fp, fn)
    return out
