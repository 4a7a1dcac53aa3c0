pub mod double_buffering;
pub mod ordered;
pub mod specialized;

mod double_buffer_execution;
mod event_listener;

pub use event_listener::*;
