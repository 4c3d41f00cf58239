//! Templates (being written).
