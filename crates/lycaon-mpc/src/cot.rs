//! Random correlated oblivious transfer, the one correlation every protocol above is built from.
//!
//! After `count` random COTs the sender holds a global `delta` and blocks `q_i`; the receiver
//! holds random choice bits `b_i` and blocks `t_i = q_i ^ (b_i * delta)`. Both IKNP and silent OT
//! produce exactly this, so comparison, ReLU and the rest are generic over the source.

use crate::{channel::Channel, Result};

/// A 128-bit OT block.
pub type Block = u128;

/// What a generator that makes COTs in large batches (silent OT's iterations) has spent so far,
/// so that a short run can be priced as its share of a long one.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct BatchCost {
    /// Bytes (both directions) of the batches run so far, setup excluded.
    pub bytes: u64,
    /// Those bytes per COT served, in the long run.
    pub bytes_per_cot: f64,
}

/// The sender's side of a random-COT generator.
pub trait CotSender: Send {
    /// The global correlation, fixed for the generator's life.
    fn delta(&self) -> Block;
    /// `count` new correlations `q_i` (the receiver learns `q_i ^ b_i * delta`).
    fn extend(&mut self, channel: &mut dyn Channel, count: usize) -> Result<Vec<Block>>;
    /// [`Self::extend`] into `out` (its length becomes `count`), reusing its allocation: a
    /// generator that makes COTs in place (silent OT) then writes into pages already mapped,
    /// where a fresh multi-megabyte vector costs the kernel a clearing pass per page.
    fn extend_into(&mut self, channel: &mut dyn Channel, count: usize, out: &mut Vec<Block>) -> Result<()> {
        *out = self.extend(channel, count)?;
        Ok(())
    }
    /// Batch traffic so far; zero for a generator whose every COT costs the same (IKNP, whose
    /// bytes show in the run that asks for them).
    fn batch_cost(&self) -> BatchCost {
        BatchCost::default()
    }
}

/// The receiver's side of a random-COT generator.
pub trait CotReceiver: Send {
    /// `count` new correlations: random choice bits `b_i` and `t_i = q_i ^ (b_i * delta)`.
    fn extend(&mut self, channel: &mut dyn Channel, count: usize) -> Result<(Vec<bool>, Vec<Block>)>;
    /// [`Self::extend`] into `bits` and `out` (their lengths become `count`), reusing their
    /// allocations (see [`CotSender::extend_into`]).
    fn extend_into(&mut self, channel: &mut dyn Channel, count: usize, bits: &mut Vec<bool>, out: &mut Vec<Block>) -> Result<()> {
        (*bits, *out) = self.extend(channel, count)?;
        Ok(())
    }
}

impl<T: CotSender + ?Sized> CotSender for Box<T> {
    fn delta(&self) -> Block {
        (**self).delta()
    }
    fn extend(&mut self, channel: &mut dyn Channel, count: usize) -> Result<Vec<Block>> {
        (**self).extend(channel, count)
    }
    fn extend_into(&mut self, channel: &mut dyn Channel, count: usize, out: &mut Vec<Block>) -> Result<()> {
        (**self).extend_into(channel, count, out)
    }
    fn batch_cost(&self) -> BatchCost {
        (**self).batch_cost()
    }
}

impl<T: CotReceiver + ?Sized> CotReceiver for Box<T> {
    fn extend(&mut self, channel: &mut dyn Channel, count: usize) -> Result<(Vec<bool>, Vec<Block>)> {
        (**self).extend(channel, count)
    }
    fn extend_into(&mut self, channel: &mut dyn Channel, count: usize, bits: &mut Vec<bool>, out: &mut Vec<Block>) -> Result<()> {
        (**self).extend_into(channel, count, bits, out)
    }
}
