//! Packings and dataflows of 000 Secs. 4-5: per-layer operation and traffic counts.
