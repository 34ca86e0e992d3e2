//! Two-party computation on additive secret shares, the hybrid mode's non-linear layers
//! (../shared/DESIGN.md, level 5, sibling of `nn`): a byte-counting channel, oblivious transfer
//! (base OT, IKNP extension, silent OT) and, on top, comparison, ReLU, truncation, max-pooling
//! and conversion of shares between moduli.
//!
//! Every protocol is written for one party at a time: each side calls its half with its own
//! channel end, so the two halves run in two threads (tests, benchmarks) or two processes (TCP).

pub mod base_ot;
pub mod bits;
pub mod channel;
pub mod compare;
pub mod cot;
pub mod crh;
pub mod ferret;
pub mod iknp;
mod kernels;
pub mod nonlinear;
pub mod ot;
pub mod party;
pub mod ring;
pub mod tcp;

pub use channel::{Channel, ChannelStats, LinkModel};
pub use cot::{BatchCost, Block, CotReceiver, CotSender};
pub use party::{OtKind, Party, Role};
pub use ring::ShareRing;

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

/// The two random-COT generators of one party: it is the sender towards its peer in one, the
/// receiver in the other. Party 0 sets up its sender first and party 1 its receiver first, so
/// each setup message meets its counterpart.
pub(crate) fn setup_cot_pair(role: Role, channel: &mut dyn Channel, kind: OtKind) -> Result<(Box<dyn CotSender>, Box<dyn CotReceiver>)> {
    let mut rng = base_ot::os_seeded_rng()?;
    let (mut sender, mut receiver) = match role {
        Role::P0 => {
            let s = iknp::IknpSender::new(channel, &mut rng)?;
            (s, iknp::IknpReceiver::new(channel, &mut rng)?)
        }
        Role::P1 => {
            let r = iknp::IknpReceiver::new(channel, &mut rng)?;
            (iknp::IknpSender::new(channel, &mut rng)?, r)
        }
    };
    match kind {
        OtKind::Iknp => Ok((Box::new(sender), Box::new(receiver))),
        OtKind::Silent | OtKind::SilentCompact => {
            let params = if kind == OtKind::Silent { ferret::FerretParameters::default() } else { ferret::FerretParameters::regular_128_compact() };
            match role {
                Role::P0 => {
                    let s = ferret::FerretSender::setup(channel, &mut sender, &params)?;
                    Ok((Box::new(s), Box::new(ferret::FerretReceiver::setup(channel, &mut receiver, &params)?)))
                }
                Role::P1 => {
                    let r = ferret::FerretReceiver::setup(channel, &mut receiver, &params)?;
                    Ok((Box::new(ferret::FerretSender::setup(channel, &mut sender, &params)?), Box::new(r)))
                }
            }
        }
    }
}
