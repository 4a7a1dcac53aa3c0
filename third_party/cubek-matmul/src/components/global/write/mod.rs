mod base;
mod event;
mod plane;
mod stage;
mod unit;

pub use base::*;
pub use event::*;
pub use plane::*;
pub use stage::*;
pub use unit::*;
