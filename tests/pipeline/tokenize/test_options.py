"""``tokenize.options``: what ``TokenizeOptions`` refuses."""

from __future__ import annotations

import pytest

from tests.pipeline.tokenize.helpers import GPT2
from tokpipe.errors import ConfigError
from tokpipe.pipeline.tokenize import TokenizeOptions


def test_options_are_checked() -> None:
    with pytest.raises(ConfigError, match="seq-len"):
        TokenizeOptions(GPT2, pack=True)
    with pytest.raises(ConfigError, match="formats"):
        TokenizeOptions(GPT2, formats=("csv",))
    with pytest.raises(ConfigError, match="val_fraction"):
        TokenizeOptions(GPT2, val_fraction=1.0)
