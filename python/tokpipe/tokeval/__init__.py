"""Compare tokenizers on a corpus, and measure what a larger vocabulary buys.

- :func:`evaluate_tokenizers`: several tokenizers on the same documents: characters, bytes and
  words per token, fallback to unknown or byte tokens, vocabulary use, the longest token,
  round-trip exactness; overall and per language, source or script
  (:mod:`tokpipe.tokeval.evaluate`).
- :func:`sweep_vocab_sizes`: train one model at several vocabulary sizes and evaluate each on a
  held-out corpus (:mod:`tokpipe.tokeval.sweep`).
- :func:`evaluation_page`, :func:`sweep_page`: the results as one self-contained HTML page in
  the style of ``tokpipe report`` (:mod:`tokpipe.tokeval.page`).
- :func:`guess_languages`, :func:`dominant_scripts`: the script-based language guess used where
  the input has no language column (:mod:`tokpipe.tokeval.scripts`).

``tokpipe eval-tokenizer`` is the command line of this package.
"""

from tokpipe.tokeval.evaluate import (ALL, GROUPINGS, OTHER, Evaluation, Metrics, Token, TokenizerInfo,
                                      evaluate_tokenizers)
from tokpipe.tokeval.page import evaluation_page, sweep_page
from tokpipe.tokeval.scripts import dominant_scripts, guess_languages
from tokpipe.tokeval.sweep import MODELS, Sweep, SweepPoint, parse_vocab_sizes, sweep_vocab_sizes

__all__ = ["evaluate_tokenizers", "Evaluation", "Metrics", "TokenizerInfo", "Token", "GROUPINGS", "ALL", "OTHER",
           "sweep_vocab_sizes", "Sweep", "SweepPoint", "MODELS", "parse_vocab_sizes", "evaluation_page", "sweep_page",
           "guess_languages", "dominant_scripts"]
