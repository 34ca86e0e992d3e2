//! The linear algorithms by name with their options: what a plan records per layer and what
//! builds the [`LinearPlan`] that executes it.

use std::fmt;
use std::sync::Arc;

use lycaon_bfv::rlwe::Parameters;

use crate::packed::{PackedConv, PackedOptions, Schedule};
use crate::{ConvShape, LinearPlan, NnError};

/// One linear algorithm with its options.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Algorithm {
    /// Conventional packed convolution (Gazelle) with a schedule and optional plaintext
    /// decomposition (bits per digit).
    Gazelle { schedule: Schedule, decomposition_bits: Option<u32> },
    /// Walsh-Hadamard convolution with output-channel packing.
    Walsh,
    /// Padded convolution with scalar weights.
    Padded,
    /// Coefficient-encoded convolution (Cheetah).
    Cheetah,
    /// Coefficient-encoded matrix-vector product (Cheetah), for fully connected layers.
    CheetahMatVec,
    /// Halevi-Shoup diagonal fully connected layer with BSGS and hoisting.
    Diagonal,
    /// Hyena packing (batch 1).
    Hyena,
    /// BatchWise packing (batch 1).
    BatchWise,
}

impl Algorithm {
    /// Every algorithm and variant the planner considers for a layer (those that cannot run the
    /// shape are filtered when [`Algorithm::build`] refuses them).
    pub const ALL: [Algorithm; 11] = [
        Algorithm::Gazelle { schedule: Schedule::InputAligned, decomposition_bits: None },
        Algorithm::Gazelle { schedule: Schedule::PartialAligned, decomposition_bits: None },
        Algorithm::Gazelle { schedule: Schedule::InputAligned, decomposition_bits: Some(10) },
        Algorithm::Gazelle { schedule: Schedule::PartialAligned, decomposition_bits: Some(10) },
        Algorithm::Walsh,
        Algorithm::Padded,
        Algorithm::Cheetah,
        Algorithm::CheetahMatVec,
        Algorithm::Diagonal,
        Algorithm::Hyena,
        Algorithm::BatchWise,
    ];

    /// The plan of this algorithm for a layer under a parameter set.
    pub fn build(&self, shape: &ConvShape, params: &Arc<Parameters>) -> Result<Box<dyn LinearPlan>, NnError> {
        Ok(match *self {
            Algorithm::Gazelle { schedule, decomposition_bits } => {
                Box::new(PackedConv::new(shape, params, PackedOptions { schedule, block: None, plain_decomposition_bits: decomposition_bits })?)
            }
            Algorithm::Walsh => Box::new(crate::walsh::WalshConv::new(shape, params, None)?),
            Algorithm::Padded => Box::new(crate::padded::PaddedConv::new(shape, params, None)?),
            Algorithm::Cheetah => Box::new(crate::coeff::CoeffConv::new(shape, params)?),
            Algorithm::CheetahMatVec => Box::new(crate::coeff::CoeffMatVec::new(shape, params)?),
            Algorithm::Diagonal => Box::new(crate::diagonal::DiagonalFc::new(shape, params)?),
            Algorithm::Hyena => Box::new(crate::hyena::HyenaConv::new(shape, params, 1)?),
            Algorithm::BatchWise => Box::new(crate::batchwise::BatchWiseConv::new(shape, params, 1, None)?),
        })
    }

    /// The (input, output) ciphertexts of [`Algorithm::build`]'s plan with batch-encoded, whole
    /// output ciphertexts, when they can be found without building it (so far the
    /// Walsh-Hadamard convolution, whose plans are the costliest to build); None otherwise.
    pub fn ciphertexts_without_building(&self, shape: &ConvShape, n: usize) -> Option<(usize, usize)> {
        match self {
            Algorithm::Walsh => crate::walsh::WalshConv::ciphertexts(shape, n).ok(),
            _ => None,
        }
    }

    /// Whether the algorithm needs batch encoding (t = 1 mod 2n); the coefficient encodings do not.
    pub fn needs_batching(&self) -> bool {
        !matches!(self, Algorithm::Cheetah | Algorithm::CheetahMatVec)
    }

    /// Parses the names [`fmt::Display`] writes: `gazelle-IA`, `gazelle-PA-pd10`, `walsh`, ...
    pub fn parse(name: &str) -> Result<Self, NnError> {
        let lower = name.to_ascii_lowercase();
        let mut parts = lower.split('-');
        let head = parts.next().unwrap_or("");
        let rest: Vec<&str> = parts.collect();
        let simple = |a: Algorithm| if rest.is_empty() || (a == Algorithm::CheetahMatVec && rest == ["matvec"]) { Ok(a) } else { Err(()) };
        let parsed = match head {
            "gazelle" => {
                let schedule = match rest.first().copied() {
                    None | Some("ia") => Ok(Schedule::InputAligned),
                    Some("pa") => Ok(Schedule::PartialAligned),
                    Some(_) => Err(()),
                };
                let decomposition_bits = match rest.get(1) {
                    None => Ok(None),
                    Some(pd) => pd.strip_prefix("pd").and_then(|b| b.parse::<u32>().ok()).map(Some).ok_or(()),
                };
                match (schedule, decomposition_bits, rest.len() <= 2) {
                    (Ok(schedule), Ok(decomposition_bits), true) => Ok(Algorithm::Gazelle { schedule, decomposition_bits }),
                    _ => Err(()),
                }
            }
            "walsh" => simple(Algorithm::Walsh),
            "padded" => simple(Algorithm::Padded),
            "cheetah" if rest == ["matvec"] => Ok(Algorithm::CheetahMatVec),
            "cheetah" => simple(Algorithm::Cheetah),
            "diagonal" => simple(Algorithm::Diagonal),
            "hyena" => simple(Algorithm::Hyena),
            "batchwise" => simple(Algorithm::BatchWise),
            _ => Err(()),
        };
        parsed.map_err(|()| {
            NnError::Shape(format!(
                "unknown linear algorithm '{name}': use gazelle-IA, gazelle-PA (optionally -pd<bits>), walsh, padded, cheetah, cheetah-matvec, diagonal, hyena or batchwise"
            ))
        })
    }
}

impl fmt::Display for Algorithm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Algorithm::Gazelle { schedule, decomposition_bits } => {
                let s = match schedule {
                    Schedule::InputAligned => "IA",
                    Schedule::PartialAligned => "PA",
                };
                match decomposition_bits {
                    Some(b) => write!(f, "gazelle-{s}-pd{b}"),
                    None => write!(f, "gazelle-{s}"),
                }
            }
            Algorithm::Walsh => write!(f, "walsh"),
            Algorithm::Padded => write!(f, "padded"),
            Algorithm::Cheetah => write!(f, "cheetah"),
            Algorithm::CheetahMatVec => write!(f, "cheetah-matvec"),
            Algorithm::Diagonal => write!(f, "diagonal"),
            Algorithm::Hyena => write!(f, "hyena"),
            Algorithm::BatchWise => write!(f, "batchwise"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for a in Algorithm::ALL {
            assert_eq!(Algorithm::parse(&a.to_string()).unwrap(), a, "{a}");
        }
        assert!(Algorithm::parse("gazelle-XX").is_err());
        assert!(Algorithm::parse("walsh-2").is_err());
        assert!(Algorithm::parse("nope").unwrap_err().to_string().contains("unknown linear algorithm 'nope'"));
    }
}
