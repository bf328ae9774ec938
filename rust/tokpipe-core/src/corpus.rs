//! Streaming readers for training input. PLACEHOLDER: being written.
