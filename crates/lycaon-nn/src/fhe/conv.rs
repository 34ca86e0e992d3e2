//! The multiplexed convolution a layer runs: Lee et al.'s MPConv or the block-diagonal
//! [`BsgsConv`], same packing in and out, same depth; [`MultiplexedConv::cheapest`] takes the one
//! with the lower estimated time ([`super::bsgs_conv::OP_COSTS`]).

use lycaon_ckks::ops::LayerOps;

use super::bsgs_conv::OP_COSTS;
use super::{BsgsConv, FheError, FheOpCounts, FheOps, MpConv, MultiplexedLayout};

/// Which algorithm runs a multiplexed convolution (in programs: "mpconv", "bsgs").
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ConvMethod {
    /// Lee et al.'s MPConv: channel sums per group of p_i outputs, one placement per channel.
    #[default]
    MpConv,
    /// Block diagonals by baby and giant steps ([`BsgsConv`]).
    Bsgs,
}

impl ConvMethod {
    pub fn is_mpconv(&self) -> bool {
        *self == ConvMethod::MpConv
    }

    pub fn name(self) -> &'static str {
        match self {
            ConvMethod::MpConv => "mpconv",
            ConvMethod::Bsgs => "bsgs",
        }
    }

    /// "mpconv" or "bsgs".
    pub fn parse(name: &str) -> Result<Self, FheError> {
        match name {
            "mpconv" => Ok(ConvMethod::MpConv),
            "bsgs" => Ok(ConvMethod::Bsgs),
            other => Err(FheError::Invalid(format!("convolution method '{other}': expected mpconv or bsgs"))),
        }
    }
}

impl MpConv {
    /// Estimated time of one evaluation in full rotations ([`OP_COSTS`]): every counted rotation
    /// a full one, every plaintext product an encoding over Q_l.
    pub fn estimated_cost(&self) -> f64 {
        let c = self.counts();
        c.rotations as f64 * OP_COSTS.rotation + c.plain_mults as f64 * OP_COSTS.encode_q
    }
}

/// A multiplexed convolution by either method.
#[derive(Clone, Debug)]
pub enum MultiplexedConv {
    MpConv(MpConv),
    Bsgs(BsgsConv),
}

impl MultiplexedConv {
    /// The layer by `method`; `output`: only the top-left (rows, cols) pixels kept (None: all).
    pub fn with_method(method: ConvMethod, input: MultiplexedLayout, c_out: usize, kernel: usize, stride: usize, weights: &[f64], output: Option<(usize, usize)>) -> Result<Self, FheError> {
        let full = ((input.rows - 1) / stride + 1, (input.cols - 1) / stride + 1);
        let output = output.unwrap_or(full);
        Ok(match method {
            ConvMethod::MpConv => MultiplexedConv::MpConv(MpConv::with_output(input, c_out, kernel, stride, weights, output)?),
            ConvMethod::Bsgs => MultiplexedConv::Bsgs(BsgsConv::with_output(input, c_out, kernel, stride, weights, output)?),
        })
    }

    /// The method with the lower [`Self::estimated_cost`] (ties: MPConv).
    pub fn cheapest(input: MultiplexedLayout, c_out: usize, kernel: usize, stride: usize, weights: &[f64], output: Option<(usize, usize)>) -> Result<Self, FheError> {
        let mp = Self::with_method(ConvMethod::MpConv, input, c_out, kernel, stride, weights, output)?;
        let bsgs = Self::with_method(ConvMethod::Bsgs, input, c_out, kernel, stride, weights, output)?;
        Ok(if bsgs.estimated_cost() < mp.estimated_cost() { bsgs } else { mp })
    }

    pub fn method(&self) -> ConvMethod {
        match self {
            MultiplexedConv::MpConv(_) => ConvMethod::MpConv,
            MultiplexedConv::Bsgs(_) => ConvMethod::Bsgs,
        }
    }

    pub fn input_layout(&self) -> &MultiplexedLayout {
        match self {
            MultiplexedConv::MpConv(c) => c.input_layout(),
            MultiplexedConv::Bsgs(c) => c.input_layout(),
        }
    }

    pub fn output_layout(&self) -> &MultiplexedLayout {
        match self {
            MultiplexedConv::MpConv(c) => c.output_layout(),
            MultiplexedConv::Bsgs(c) => c.output_layout(),
        }
    }

    pub fn rotation_steps(&self) -> Vec<i64> {
        match self {
            MultiplexedConv::MpConv(c) => c.rotation_steps(),
            MultiplexedConv::Bsgs(c) => c.rotation_steps(),
        }
    }

    pub fn counts(&self) -> FheOpCounts {
        match self {
            MultiplexedConv::MpConv(c) => c.counts(),
            MultiplexedConv::Bsgs(c) => c.counts(),
        }
    }

    /// Estimated time of one evaluation in full rotations.
    pub fn estimated_cost(&self) -> f64 {
        match self {
            MultiplexedConv::MpConv(c) => c.estimated_cost(),
            MultiplexedConv::Bsgs(c) => c.estimated_cost(),
        }
    }

    /// Two levels; the result in [`Self::output_layout`].
    pub fn evaluate<E: LayerOps>(&self, ops: &FheOps<E>, ct: &E::Ct) -> Result<E::Ct, FheError> {
        match self {
            MultiplexedConv::MpConv(c) => c.evaluate(ops, ct),
            MultiplexedConv::Bsgs(c) => c.evaluate(ops, ct),
        }
    }
}
