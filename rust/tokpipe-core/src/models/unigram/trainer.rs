//! The Unigram trainer (sentencepiece's algorithm); see the submodules.
