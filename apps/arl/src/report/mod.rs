//! `arl report`: one or more run folders as one self-contained HTML page — curves over steps
//! (runs overlaid, labelled by their config differences), the held-out evaluation before and
//! after with its intervals, per task, the tool-call statistics and the saved transcripts.
//!
//! `load` reads run folders as they are (finished, in progress, resumed), `svg` draws the
//! figures, `transcript` renders episodes, `page` puts them together.

pub mod browser;
pub mod load;
mod page;
pub mod svg;
pub mod transcript;

pub use load::{RunData, load_runs};
pub use page::{Figure, Report, build};
