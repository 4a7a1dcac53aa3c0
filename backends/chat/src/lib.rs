//! arl-chat — the token layer: an HF `tokenizer.json` and the model's Jinja chat template,
//! rendered exactly as `transformers`' `apply_chat_template` renders them, behind core's
//! [`arl_core::ChatCodec`]; the start-up self-check. It loads from a model directory; resolving
//! `--model` (directory, GGUF, preset, Hugging Face cache) is arl-qwen3's `hub`.
//!
//! [`HfChatCodec`] renders prompts and appends observations by rendering only the suffix
//! the template writes after an assistant turn (never re-tokenizing history), so a
//! [`arl_core::Conversation`] stays token-exact with what the sampler produced.
//! [`self_check`] proves it on a reference conversation at start-up.
//!
//! It knows no model weights, no tensors and no sampling. No cargo features; the tokenizer
//! runs its regexes with Oniguruma (`tokenizers/onig`, built with the system C compiler).

mod codec;
mod files;
mod self_check;
mod strftime;
mod template;
mod tojson;

pub use codec::{CHATML_TOOLS_TEMPLATE, HfChatCodec, messages_json, tools_json};
pub use self_check::self_check;
pub use template::{ChatTemplate, RenderOptions};
pub use tojson::dumps as python_json_dumps;

#[cfg(test)]
mod qwen3_tests;
