//! Output: text for people, JSON for programs, blktrace files for the tools
//! people already use.

pub mod blktrace;
pub mod dump;
pub mod json;
pub mod text;
