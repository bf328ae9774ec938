//! HF `tokenizer.json`. PLACEHOLDER: being written.
