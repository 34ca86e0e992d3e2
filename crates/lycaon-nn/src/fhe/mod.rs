//! FHE-mode network layers on CKKS (the whole network stays encrypted, no client round trip).
//!
//! - [`multiplexed`]: the multiplexed parallel packing of Lee et al. 2022 ("Low-complexity deep
//!   convolutional neural networks on FHE using multiplexed parallel convolutions", ICML 2022):
//!   after a stride-2 layer the gap k doubles and k x k channels share the spatial grid, so the
//!   slots stay full without re-packing;
//! - [`mpconv`]: the multiplexed parallel convolution (MPConv) on that packing;
//! - [`hyphen`]: HyPHEN's CAConv and RAConv (002 Sec. 4), which change the packing between the
//!   two convolutions of a block (CA: one ciphertext, channels in blocks; RA: one ciphertext per
//!   channel, replicated) so that no output placement is needed;
//! - [`pool_fc`]: global average pooling followed by a fully connected layer (diagonal method with
//!   baby-step giant-step), and [`residual_add`].
//!
//! Every layer reaches the CKKS evaluator only through [`FheOps`], which counts the calls, so
//! tests can check each layer's stated [`FheOpCounts`] against what it really did.
//!
//! Not here (on purpose): bootstrapping placement and the activations (the Python compiler,
//! `lycaon.fhe_resnet`, places them).

pub mod bsgs_conv;
pub mod conv;
pub mod hyphen;
pub mod mpconv;
pub mod multiplexed;
pub mod pool_fc;
pub mod resident_conformance;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use lycaon_ckks::ops::{CiphertextMeta, LayerOps};
use lycaon_ckks::{CkksContext, CkksError, Evaluator, ExtendedSum, GiantStep, GiantSums, HoistedRotations, LinearTransform};

pub use bsgs_conv::BsgsConv;
pub use conv::{ConvMethod, MultiplexedConv};
pub use hyphen::{CaConv, RaConv};
pub use mpconv::{MpConv, Placement};
pub use multiplexed::MultiplexedLayout;
pub use pool_fc::AvgPoolFc;

/// Errors of the FHE layers.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum FheError {
    #[error(transparent)]
    Ckks(#[from] CkksError),
    #[error("invalid FHE layer: {0}")]
    Invalid(String),
}

/// Operation counts of one FHE layer evaluation.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FheOpCounts {
    /// Rotations with a key switch (step 0 is a copy and not counted; hoisted ones are counted
    /// one each, since each still needs its own key switch).
    pub rotations: u64,
    /// Ciphertext-plaintext products (weights, masks, diagonals).
    pub plain_mults: u64,
    /// Rescales (one prime dropped after a product).
    pub rescales: u64,
    /// Levels consumed from input to output.
    pub depth: u64,
}

impl std::ops::Add for FheOpCounts {
    type Output = FheOpCounts;
    fn add(self, o: FheOpCounts) -> FheOpCounts {
        FheOpCounts { rotations: self.rotations + o.rotations, plain_mults: self.plain_mults + o.plain_mults, rescales: self.rescales + o.rescales, depth: self.depth + o.depth }
    }
}

/// The CKKS evaluator, counting every operation the layers call. `E` is the host [`Evaluator`]
/// or a resident one (`lycaon_ckks::ResidentEvaluator`: every tensor, key and plaintext in a
/// device's memory); the layers run the same code on both and get the same results bit for bit.
#[derive(Debug)]
pub struct FheOps<E: LayerOps = Evaluator> {
    eval: E,
    rotations: AtomicU64,
    plain_mults: AtomicU64,
    rescales: AtomicU64,
}

impl<E: LayerOps> FheOps<E> {
    pub fn new(eval: E) -> Self {
        Self { eval, rotations: AtomicU64::new(0), plain_mults: AtomicU64::new(0), rescales: AtomicU64::new(0) }
    }

    pub fn evaluator(&self) -> &E {
        &self.eval
    }

    pub fn context(&self) -> &Arc<CkksContext> {
        self.eval.context()
    }

    /// Counts so far (`depth` is not tracked here: compare levels instead).
    pub fn counts(&self) -> FheOpCounts {
        FheOpCounts { rotations: self.rotations.load(Ordering::Relaxed), plain_mults: self.plain_mults.load(Ordering::Relaxed), rescales: self.rescales.load(Ordering::Relaxed), depth: 0 }
    }

    pub fn reset(&self) {
        self.rotations.store(0, Ordering::Relaxed);
        self.plain_mults.store(0, Ordering::Relaxed);
        self.rescales.store(0, Ordering::Relaxed);
    }

    fn nonzero_steps(ct: &E::Ct, steps: &[i64]) -> u64 {
        let slots = 1i64 << ct.log_slots();
        steps.iter().filter(|&&s| s.rem_euclid(slots) != 0).count() as u64
    }

    /// A copy of `ct` (on the host a clone; on a device a device-side copy).
    pub fn duplicate(&self, ct: &E::Ct) -> Result<E::Ct, FheError> {
        Ok(self.eval.duplicate(ct)?)
    }

    pub fn rotate(&self, ct: &E::Ct, step: i64) -> Result<E::Ct, FheError> {
        self.rotations.fetch_add(Self::nonzero_steps(ct, &[step]), Ordering::Relaxed);
        Ok(self.eval.rotate(ct, step)?)
    }

    /// Several rotations of one ciphertext sharing one decomposition.
    pub fn rotate_hoisted(&self, ct: &E::Ct, steps: &[i64]) -> Result<Vec<E::Ct>, FheError> {
        self.rotations.fetch_add(Self::nonzero_steps(ct, steps), Ordering::Relaxed);
        Ok(self.eval.rotate_hoisted(ct, steps)?)
    }

    /// The rotations of `ct` by `steps` kept over Q_l P for [`Self::rotated_products`] (double
    /// hoisting); each non-zero step counts as a rotation.
    pub fn hoist_rotations(&self, ct: &E::Ct, steps: &[i64]) -> Result<HoistedRotations<E::Poly>, FheError> {
        let h = self.eval.hoist_rotations(ct, steps)?;
        let slots = h.slots();
        self.rotations.fetch_add(h.steps().iter().filter(|&&s| s % slots != 0).count() as u64, Ordering::Relaxed);
        Ok(h)
    }

    /// sum over giants of rot_giant(sum values (.) rot_baby(ct)) over Q_l P, the plaintexts at
    /// the scale that makes [`Self::finish_extended`] land on the canonical scale of the level
    /// below; each term counts as a plaintext product, each non-zero giant step as a rotation.
    pub fn rotated_products(&self, hoisted: &HoistedRotations<E::Poly>, giants: &[GiantStep<'_>]) -> Result<ExtendedSum<E::Poly>, FheError> {
        let mut sums = self.giant_sums(hoisted)?;
        self.add_rotated_products(&mut sums, hoisted, giants)?;
        self.close_giant_sums(sums)
    }

    /// Empty giant-step sums for products with ciphertexts like `like`'s, the plaintexts at the
    /// scale [`Self::rotated_products`] uses.
    pub fn giant_sums(&self, like: &HoistedRotations<E::Poly>) -> Result<GiantSums<E::Poly>, FheError> {
        Ok(GiantSums::new(like, self.eval.plaintext_scale_at(like.level(), like.scale())?))
    }

    /// Adds the inner sums of `giants` over `hoisted` to `sums` (their giant rotations come at
    /// [`Self::close_giant_sums`]); each term counts as a plaintext product.
    pub fn add_rotated_products(&self, sums: &mut GiantSums<E::Poly>, hoisted: &HoistedRotations<E::Poly>, giants: &[GiantStep<'_>]) -> Result<(), FheError> {
        self.eval.add_rotated_products(sums, hoisted, giants)?;
        self.plain_mults.fetch_add(giants.iter().map(|g| g.terms.len() as u64).sum(), Ordering::Relaxed);
        Ok(())
    }

    /// `a` += `b` for giant sums of the same level, scale and slots.
    pub fn merge_giant_sums(&self, a: &mut GiantSums<E::Poly>, b: GiantSums<E::Poly>) -> Result<(), FheError> {
        Ok(self.eval.merge_giant_sums(a, b)?)
    }

    /// Each giant's inner sum rotated by it, all added; each non-zero giant counts as a rotation.
    pub fn close_giant_sums(&self, sums: GiantSums<E::Poly>) -> Result<ExtendedSum<E::Poly>, FheError> {
        self.rotations.fetch_add(sums.giants().iter().filter(|&&g| g != 0).count() as u64, Ordering::Relaxed);
        Ok(self.eval.close_giant_sums(sums)?)
    }

    /// ModDown and rescale of an [`ExtendedSum`] (one rescale).
    pub fn finish_extended(&self, sum: ExtendedSum<E::Poly>) -> Result<E::Ct, FheError> {
        self.rescales.fetch_add(1, Ordering::Relaxed);
        Ok(self.eval.finish_extended(sum)?)
    }

    /// ct (.) values, with the plaintext encoded so that the product rescales onto the canonical
    /// scale of the level below (so products of different terms can be summed directly).
    pub fn mul_values(&self, ct: &E::Ct, values: &[f64]) -> Result<E::Ct, FheError> {
        let scale = self.eval.plaintext_scale_at(ct.level(), ct.scale())?;
        self.plain_mults.fetch_add(1, Ordering::Relaxed);
        Ok(self.eval.mul_values(ct, values, scale)?)
    }

    /// ct + values at the ciphertext's own level and scale (a bias).
    pub fn add_values(&self, ct: &E::Ct, values: &[f64]) -> Result<E::Ct, FheError> {
        Ok(self.eval.add_values(ct, values)?)
    }

    pub fn rescale(&self, ct: &E::Ct) -> Result<E::Ct, FheError> {
        self.rescales.fetch_add(1, Ordering::Relaxed);
        Ok(self.eval.rescale(ct)?)
    }

    pub fn add(&self, a: &E::Ct, b: &E::Ct) -> Result<E::Ct, FheError> {
        Ok(self.eval.add(a, b)?)
    }

    /// The ckks linear transform (one rescale inside), counted from its BSGS plan.
    pub fn linear_transform(&self, ct: &E::Ct, lt: &LinearTransform) -> Result<E::Ct, FheError> {
        let c = linear_transform_counts(lt);
        self.rotations.fetch_add(c.rotations, Ordering::Relaxed);
        self.plain_mults.fetch_add(c.plain_mults, Ordering::Relaxed);
        self.rescales.fetch_add(c.rescales, Ordering::Relaxed);
        Ok(self.eval.linear_transform(ct, lt)?)
    }
}

/// What `Evaluator::linear_transform` does for `lt` under its baby-step giant-step split: one
/// rotation per distinct non-zero baby step and per non-zero giant step, one product per
/// diagonal, one rescale.
pub fn linear_transform_counts(lt: &LinearTransform) -> FheOpCounts {
    let indices: Vec<usize> = lt.diagonals().keys().copied().collect();
    diagonal_method_counts(&indices, lt.baby_steps())
}

/// [`linear_transform_counts`] from the distinct diagonal indices and the baby-step count n1.
pub fn diagonal_method_counts(indices: &[usize], n1: usize) -> FheOpCounts {
    let (babies, giants) = bsgs_steps(indices, n1);
    FheOpCounts { rotations: (babies.len() + giants.len()) as u64, plain_mults: indices.len() as u64, rescales: 1, depth: 1 }
}

/// The distinct non-zero baby steps (k mod n1) and giant steps (k - k mod n1) of diagonals `indices`.
pub fn bsgs_steps(indices: &[usize], n1: usize) -> (Vec<usize>, Vec<usize>) {
    let mut babies: Vec<usize> = indices.iter().map(|k| k % n1).filter(|&b| b != 0).collect();
    babies.sort_unstable();
    babies.dedup();
    let mut giants: Vec<usize> = indices.iter().map(|k| k / n1 * n1).filter(|&g| g != 0).collect();
    giants.sort_unstable();
    giants.dedup();
    (babies, giants)
}

/// Residual (skip) connection: a + b for two ciphertexts in the same multiplexed packing. The
/// evaluator brings the higher operand down to the lower level and onto its scale at no extra
/// level, so the shortcut branch (usually at a higher level) needs no explicit level drop.
pub fn residual_add<E: LayerOps>(ops: &FheOps<E>, a: &E::Ct, a_layout: &MultiplexedLayout, b: &E::Ct, b_layout: &MultiplexedLayout) -> Result<E::Ct, FheError> {
    if a_layout != b_layout {
        return Err(FheError::Invalid(format!("residual addition of different packings: {a_layout:?} and {b_layout:?}")));
    }
    ops.add(a, b)
}

#[cfg(test)]
mod tests;
