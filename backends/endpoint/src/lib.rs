//! arl-endpoint — an OpenAI Chat Completions-compatible HTTP endpoint over a [`Policy`] and a
//! [`ChatCodec`], per episode session, that records the token ids it sampled.
//!
//! An agent harness (a script on the `openai` SDK, a CLI agent) talks to
//! `http://127.0.0.1:<port>/s/<session>/v1` (or a unix socket; the session id may instead be the
//! API key): `POST /v1/chat/completions` (streaming as server-sent events or not, `tools` and
//! `tool_calls` in OpenAI's format, `logprobs`) and `GET /v1/models`. The harness re-sends the
//! whole conversation as text every turn; the endpoint never re-tokenizes it. Each session keeps
//! its token stream as [`arl_core::Conversation`] grows one for the gyms ([`record`]): the prompt
//! rendered once, each assistant turn as the sampler's ids with their log-probs, observations as
//! the template's own suffix ids. A request whose messages extend the recorded turns reuses those
//! ids exactly; anything the harness changed (an edited or dropped turn, a re-rendered tool
//! result, other tools) is a *fork*: a new branch whose changed part is rendered through the chat
//! template, counted (`harness_forks`). [`Endpoint::end_session`] hands back the recording
//! ([`SessionRecord`]: per branch ids, policy mask and sampler log-probs, as an
//! [`arl_core::Episode`] holds them).
//!
//! The HTTP/1.1 server is hand-written over `std::net` ([`http`]: Content-Length bodies,
//! keep-alive, chunked only for streamed replies), one thread per connection, with no async
//! runtime: it serves one harness per episode on loopback, and generation is serialized on the
//! policy anyway. It knows no model, tokenizer or environment; the caller passes them in.
//! No cargo features.

pub mod api;
pub mod error;
pub mod http;
pub mod lend;
pub mod record;
mod reply;
mod server;
mod session;

pub use error::ApiError;
pub use lend::lend;
pub use record::{RecordedBranch, SessionRecord, SessionStats};
pub use server::{Address, Endpoint, EndpointConfig, SessionConfig};

#[doc(no_inline)]
pub use arl_core::{ChatCodec, Policy};
