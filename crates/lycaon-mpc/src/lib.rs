//! Two-party computation on additive secret shares, the hybrid mode's non-linear layers
//! (../shared/DESIGN.md, level 5, sibling of `nn`): a byte-counting channel, oblivious transfer
//! (base OT, IKNP extension, silent OT) and, on top, comparison, ReLU, truncation, max-pooling
//! and conversion of shares between moduli.
//!
//! Every protocol is written for one party at a time: each side calls its half with its own
//! channel end, so the two halves run in two threads (tests, benchmarks) or two processes (TCP).

pub mod channel;
pub mod cot;

pub use channel::{Channel, ChannelStats, LinkModel};
pub use cot::{Block, CotReceiver, CotSender};

/// Errors of the two-party layer. Nothing secret is ever put into a message.
#[derive(Debug, thiserror::Error)]
pub enum MpcError {
    #[error("the peer closed the channel ({0})")]
    PeerClosed(String),
    #[error("no message from the peer within {0:?}")]
    Timeout(std::time::Duration),
    #[error("malformed message from the peer: {0}")]
    Malformed(String),
    #[error("i/o error on the channel: {0}")]
    Io(#[from] std::io::Error),
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    #[error("cryptographic check failed: {0}")]
    Crypto(String),
}

pub type Result<T> = std::result::Result<T, MpcError>;
