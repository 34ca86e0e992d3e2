//! backend placeholder
