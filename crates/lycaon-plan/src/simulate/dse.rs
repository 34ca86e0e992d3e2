//! Design-space exploration of the 003 accelerator (filled in by its own change).
