mod config;
mod iterator;
mod layout;
mod window;

pub use config::*;
pub use iterator::{GlobalIterator, ViewDirection};
pub use layout::*;
pub use window::*;
