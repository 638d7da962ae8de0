//! corelog engine (filled by issue 4).
