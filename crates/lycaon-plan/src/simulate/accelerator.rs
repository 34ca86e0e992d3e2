//! Pipeline and energy model of the Hyena accelerator and an F1-like baseline (000 Secs. 6-7).
