"""The work between the kernels of a ``clean`` run stays lean (issue 25, "A leaner clean").

pyarrow's conversions from Python and numpy objects (``pa.array(...)``, ``Array.to_numpy()`` of
a string or boolean column, ``pq.read_table``) import pandas on their first use, when it is
installed: 0.8 s of CPU in every process that runs a stage, about an eighth of what the four
heuristic filters' kernels spend on 40 MB. The engine, the filter base class and the stages
of the web pipeline's filters and MinHash dedup build their arrays from buffers instead.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

# Run in a fresh interpreter: records every attempt to import pandas (installed or not, so
# the test means the same wherever it runs), then runs a pipeline in that process.
_CHILD = r"""
import json, random, sys
attempts = []

class Watch:
    def find_spec(self, name, path=None, target=None):
        if name == "pandas" or name.startswith("pandas."):
            attempts.append(name)
        return None

sys.meta_path.insert(0, Watch())
import tokpipe.pipeline as pipeline

root, out, by_stage = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
rng = random.Random(7)
words = ["the", "of", "and", "river", "stone", "light", "walked", "quietly", "into", "morning", "with", "a",
         "garden", "that", "was", "green", "old", "house", "near", "sea"]

def sentence(n):
    return " ".join(rng.choice(words) for _ in range(n)).capitalize() + "."

docs = []
for i in range(300):
    kind = i % 5
    if kind == 0:      # prose the filters keep
        text = "\n".join(" ".join(sentence(12) for _ in range(3)) for _ in range(6))
    elif kind == 1:    # too short for gopher_quality
        text = " ".join(rng.sample(words, len(words))).capitalize() + "."
    elif kind == 2:    # one line repeated: gopher_repetition
        text = "\n".join(["the same line again and again."] * 40)
    elif kind == 3:    # lines without terminal punctuation: c4_quality drops or rewrites
        text = "\n".join(" ".join(rng.choice(words) for _ in range(9)) for _ in range(20))
    else:              # a near copy of an earlier kept document: minhash_dedup
        text = docs[i - 4]["text"] + " extra"
    docs.append({"id": f"d{i}", "text": text})
with open(root, "w", encoding="utf-8") as f:
    f.writelines(json.dumps(d) + "\n" for d in docs)
config = {"stages": [{"type": "gopher_repetition"}, {"type": "gopher_quality"}, {"type": "c4_quality"},
                     {"type": "fineweb_quality"}, {"type": "minhash_dedup"}]}
result = pipeline.run([root], out, config=config, workers=1, rejected_by_stage=by_stage)
print(json.dumps({"attempts": attempts, "kept": result.kept, "rejected": result.rejected_rows,
                  "stats": {k: v.as_dict() for k, v in result.stats.items()}}))
"""


def _run(tmp_path: Path, by_stage: bool) -> dict:
    out = tmp_path / f"out{int(by_stage)}"
    done = subprocess.run([sys.executable, "-c", _CHILD, str(tmp_path / "docs.jsonl"), str(out), str(int(by_stage))],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_filters_and_minhash_dedup_run_without_importing_pandas(tmp_path: Path) -> None:
    for by_stage in (False, True):
        report = _run(tmp_path, by_stage)
        assert report["attempts"] == [], f"rejected_by_stage={by_stage}: pandas was imported"
        # Every filter dropped something and MinHash found the near copies: each path ran.
        stats = report["stats"]
        for stage in ("gopher_repetition", "gopher_quality", "c4_quality", "minhash_dedup"):
            assert sum(n for key, n in stats[stage].items() if key.startswith("dropped_")) > 0, stage
        assert report["kept"] > 0 and report["kept"] + report["rejected"] == 300
