//! Tests of the FHE layers: packing positions and round trips in the clear; MPConv, pooling + FC
//! and residual additions encrypted, against plain f64 references, with op counts checked
//! against the evaluator calls.

use std::sync::Arc;

use lycaon_ckks::rlwe::{Parameters, PublicKey, SecretKey, Security};
use lycaon_backend::RayonBackend;
use lycaon_ckks::{precision_stats, Ciphertext, CkksContext, Decryptor, Encoder, EvaluationKeys, Evaluator, PublicKeyEncryptor};
use lycaon_math::Sampler;

use super::mpconv::conv_reference_f64;
use super::pool_fc::avgpool_fc_reference;
use super::*;

/// Deterministic test values (splitmix64), uniform in [-1, 1).
struct Values(u64);

impl Values {
    fn next(&mut self) -> f64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        (z >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0
    }

    fn vec(&mut self, len: usize, scale: f64) -> Vec<f64> {
        (0..len).map(|_| self.next() * scale).collect()
    }
}

// ------------------------------------------------------------------------------------------------
// Packing (no encryption)

#[test]
fn fhe_packing_slot_positions_follow_the_paper() {
    // k = 1: channel after channel, raster order.
    let l = MultiplexedLayout::new(3, 4, 4, 1, 64).unwrap();
    assert_eq!((l.blocks(), l.padded_blocks(), l.copy_len(), l.copies()), (3, 4, 64, 1));
    assert_eq!(l.slot(2, 1, 3), 2 * 16 + 4 + 3);
    // k = 2, 8 channels of 4 x 4: grid 8 x 8, 4 channels per block, 2 blocks.
    let l = MultiplexedLayout::new(8, 4, 4, 2, 256).unwrap();
    assert_eq!((l.row_len(), l.block_len(), l.copy_len(), l.copies()), (8, 64, 128, 2));
    // Channel 5 = block 1, offset (0, 1); pixel (1, 2) -> grid (2, 5).
    assert_eq!(l.slot(5, 1, 2), 64 + 2 * 8 + 5);
    // Channel 3 = block 0, offset (1, 1); pixel (3, 3) -> grid (7, 7), the last slot of block 0.
    assert_eq!(l.slot(3, 3, 3), 63);
    // The k^2 channels of a block interleave: pixel (0, 0) of channels 0..4 are grid (0,0),(0,1),(1,0),(1,1).
    assert_eq!((0..4).map(|c| l.slot(c, 0, 0)).collect::<Vec<_>>(), vec![0, 1, 8, 9]);
    // A stride-2 output at gap 2k lands where the stride-1 grid at gap k has its even pixels.
    let fine = MultiplexedLayout::new(8, 8, 8, 1, 512).unwrap();
    let coarse = MultiplexedLayout::new(8, 4, 4, 2, 512).unwrap();
    for y in 0..4 {
        for x in 0..4 {
            assert_eq!(coarse.slot(0, y, x), fine.slot(0, 2 * y, 2 * x));
        }
    }
}

#[test]
fn fhe_packing_round_trip_and_copies() {
    let mut v = Values(1);
    for (c, h, w, k, slots) in [(3, 8, 8, 1, 1024), (16, 4, 4, 2, 1024), (16, 2, 2, 4, 256), (5, 8, 4, 2, 2048), (64, 4, 4, 4, 4096)] {
        let l = MultiplexedLayout::new(c, h, w, k, slots).unwrap();
        let t = v.vec(c * h * w, 1.0);
        let packed = l.pack(&t).unwrap();
        assert_eq!(l.unpack(&packed).unwrap(), t, "{l:?}");
        // Every copy holds the same tensor.
        for r in 1..l.copies() {
            assert_eq!(&packed[r * l.copy_len()..(r + 1) * l.copy_len()], &packed[..l.copy_len()]);
        }
        // Exactly C h w slots per copy are used: no two elements share a slot.
        let mut used: Vec<usize> = (0..c).flat_map(|ch| (0..h).flat_map(move |y| (0..w).map(move |x| (ch, y, x)))).map(|(ch, y, x)| l.slot(ch, y, x)).collect();
        used.sort_unstable();
        used.dedup();
        assert_eq!(used.len(), c * h * w);
        assert!(*used.last().unwrap() < l.copy_len());
    }
    assert!(MultiplexedLayout::new(16, 16, 16, 1, 2048).is_err(), "4096 slots needed");
    assert!(MultiplexedLayout::new(4, 6, 8, 1, 2048).is_err(), "height not a power of two");
}

// ------------------------------------------------------------------------------------------------
// Encrypted

struct Fhe {
    ctx: Arc<CkksContext>,
    sk: SecretKey,
    pk: Arc<PublicKey>,
    sampler: Sampler,
}

impl Fhe {
    /// logN, q_0 bits, levels of `log_scale` bits, one special prime of q_0's size.
    /// `insecure`: TEST ONLY, below 128-bit security (logN = 12 cannot hold these moduli
    /// securely); used to keep the tests fast.
    fn new(log_n: u32, log_q0: u32, log_scale: u32, levels: usize, insecure: bool) -> Self {
        let mut lit = lycaon_ckks::scale_stable_literal(1 << log_n, log_q0, log_scale, levels, &[log_q0]).unwrap();
        if insecure {
            lit.security = Security::InsecureTestOnly;
        }
        let params: Arc<Parameters> = Parameters::with_backend(lit, RayonBackend::shared()).unwrap();
        let ctx = CkksContext::new(&params, 2f64.powi(log_scale as i32)).unwrap();
        let mut sampler = Sampler::from_os().unwrap();
        let sk = SecretKey::generate(&params, &mut sampler).unwrap();
        let pk = Arc::new(PublicKey::generate(&sk, &mut sampler).unwrap());
        Self { ctx, sk, pk, sampler }
    }

    fn ops(&mut self, steps: &[i64]) -> FheOps {
        let mut s = steps.to_vec();
        s.sort_unstable();
        s.dedup();
        let keys = EvaluationKeys::generate(&self.sk, &s, false, &mut self.sampler).unwrap();
        FheOps::new(Evaluator::new(&self.ctx, keys))
    }

    fn encrypt(&self, values: &[f64]) -> Ciphertext {
        let level = self.ctx.max_level();
        let pt = Encoder::new(&self.ctx).encode_real(values, level, self.ctx.scale_at(level).unwrap()).unwrap();
        PublicKeyEncryptor::new(&self.ctx, self.pk.clone()).unwrap().encrypt(&pt).unwrap()
    }

    fn decrypt(&self, ct: &Ciphertext) -> Vec<f64> {
        Encoder::new(&self.ctx).decode_real(&Decryptor::new(&self.ctx, &self.sk).unwrap().decrypt(ct).unwrap()).unwrap()
    }
}

/// One MPConv layer: encrypted result vs the f64 reference, every output copy checked, op
/// counts vs the evaluator calls, depth vs levels. Returns the worst-slot precision in bits.
#[allow(clippy::too_many_arguments)]
fn check_mpconv(fhe: &mut Fhe, seed: u64, c_in: usize, hw: usize, gap: usize, c_out: usize, kernel: usize, stride: usize) -> f64 {
    let slots = fhe.ctx.max_slots();
    let mut v = Values(seed);
    let input = MultiplexedLayout::new(c_in, hw, hw, gap, slots).unwrap();
    let x = v.vec(c_in * hw * hw, 1.0);
    let w = v.vec(c_out * c_in * kernel * kernel, 1.0 / ((c_in * kernel * kernel) as f64).sqrt());
    let conv = MpConv::new(input, c_out, kernel, stride, &w).unwrap();
    let ops = fhe.ops(&conv.rotation_steps());
    let ct = fhe.encrypt(&input.pack(&x).unwrap());
    let start = std::time::Instant::now();
    let out = conv.evaluate(&ops, &ct).unwrap();
    let secs = start.elapsed().as_secs_f64();

    let mut want_counts = conv.counts();
    let got_depth = (ct.level() - out.level()) as u64;
    assert_eq!(got_depth, want_counts.depth, "depth");
    want_counts.depth = 0;
    assert_eq!(ops.counts(), want_counts, "op counts of {c_in}x{hw}x{hw} gap {gap} -> {c_out}, f {kernel}, s {stride}");

    let reference = conv_reference_f64((c_in, hw, hw), &x, c_out, kernel, stride, &w);
    let ol = conv.output_layout();
    // The whole slot vector: every copy, and zeros everywhere else (the next layer relies on it).
    let want_slots = ol.pack(&reference).unwrap();
    let got_slots = fhe.decrypt(&out);
    let p = precision_stats(&want_slots, &got_slots);
    let c = conv.counts();
    println!(
        "MPConv {c_in}x{hw}x{hw} gap {gap} -> {c_out}x{}x{} gap {}, f {kernel}, s {stride}, logN {}: {p}; rotations {}, plain mults {}, rescales {}, depth {}; q = {}, p_in = {}, p_out = {}; {secs:.2} s",
        ol.height, ol.width, ol.gap, fhe.ctx.n().trailing_zeros(), c.rotations, c.plain_mults, c.rescales, c.depth, conv.groups(), input.copies(), ol.copies()
    );
    assert!(p.min_bits >= 15.0, "{p}");
    p.min_bits
}

#[test]
fn fhe_mpconv_small_shapes_logn12() {
    // TEST ONLY, insecure: logN = 12 with 2 levels of 40 bits (see Fhe::new).
    let mut fhe = Fhe::new(12, 50, 40, 2, true);
    // (c_in, hw, gap, c_out, kernel, stride)
    let shapes = [
        (4, 8, 1, 8, 3, 1),  // p_in = 8 copies, one group
        (4, 8, 1, 8, 3, 2),  // stride 2: gap 1 -> 2
        (8, 4, 2, 8, 3, 1),  // multiplexed input, stride 1
        (16, 8, 2, 16, 3, 2), // multiplexed input, stride 2: gap 2 -> 4, 8 groups
        (8, 8, 1, 16, 1, 2), // 1x1 stride-2 shortcut
        (3, 16, 1, 4, 3, 1), // 16 x 16 image, 3 channels
        (5, 8, 1, 7, 5, 1),  // odd channel counts, 5x5 kernel
    ];
    for (i, &(c_in, hw, gap, c_out, f, s)) in shapes.iter().enumerate() {
        check_mpconv(&mut fhe, 100 + i as u64, c_in, hw, gap, c_out, f, s);
    }
}

#[test]
fn fhe_images_that_are_not_powers_of_two_sit_on_a_zero_padded_grid_logn12() {
    // TEST ONLY, insecure: logN = 12 with 5 levels.
    let mut fhe = Fhe::new(12, 50, 40, 5, true);
    let slots = fhe.ctx.max_slots();
    let mut v = Values(77);
    let (c0, c1, rows, cols, classes) = (3, 4, 5, 7, 3);
    let l0 = MultiplexedLayout::for_image(c0, rows, cols, 1, slots).unwrap();
    assert_eq!((l0.height, l0.width, l0.is_full()), (8, 8, false));
    let x = v.vec(c0 * rows * cols, 1.0);
    let w1 = v.vec(c1 * c0 * 9, 0.3);
    // A 2 x 2 average pooling at stride 2 as a 3 x 3 stride-2 convolution on each channel alone
    // (taps at offsets 0 and +1), keeping floor(5 / 2) x floor(7 / 2) outputs of ceil's 3 x 4.
    let mut wp = vec![0.0; c1 * c1 * 9];
    for c in 0..c1 {
        for (dy, dx) in [(1, 1), (1, 2), (2, 1), (2, 2)] {
            wp[((c * c1 + c) * 3 + dy) * 3 + dx] = 0.25;
        }
    }
    let wf = v.vec(classes * c1, 0.5);
    let bias = v.vec(classes, 0.1);
    let conv = MpConv::new(l0, c1, 3, 1, &w1).unwrap();
    assert_eq!((conv.output_layout().rows, conv.output_layout().cols), (rows, cols));
    let pool = MpConv::with_output(*conv.output_layout(), c1, 3, 2, &wp, (rows / 2, cols / 2)).unwrap();
    assert!(MpConv::with_output(*conv.output_layout(), c1, 3, 2, &wp, (4, 4)).is_err(), "more rows than ceil(5 / 2)");
    let fc = AvgPoolFc::new(&fhe.ctx, *pool.output_layout(), classes, &wf, &bias).unwrap();
    let ops = fhe.ops(&[conv.rotation_steps(), pool.rotation_steps(), fc.rotation_steps()].concat());
    let ct = fhe.encrypt(&l0.pack(&x).unwrap());
    let a = conv.evaluate(&ops, &ct).unwrap();
    let p = pool.evaluate(&ops, &a).unwrap();
    let logits = fc.evaluate(&ops, &p).unwrap();

    let ra = conv_reference_f64((c0, rows, cols), &x, c1, 3, 1, &w1);
    let (pr, pc) = (rows / 2, cols / 2);
    let rp: Vec<f64> = (0..c1)
        .flat_map(|c| (0..pr).flat_map(move |y| (0..pc).map(move |x| (c, y, x))))
        .map(|(c, y, x)| (0..2).flat_map(|i| (0..2).map(move |j| (i, j))).map(|(i, j)| ra[(c * rows + 2 * y + i) * cols + 2 * x + j]).sum::<f64>() / 4.0)
        .collect();
    let rl = avgpool_fc_reference(c1, pr, pc, &rp, classes, &wf, &bias);
    // Whole slot vectors: off-image grid points must hold zeros for the next layer.
    let pa = precision_stats(&conv.output_layout().pack(&ra).unwrap(), &fhe.decrypt(&a));
    let pp = precision_stats(&pool.output_layout().pack(&rp).unwrap(), &fhe.decrypt(&p));
    let pl = precision_stats(&rl, &fhe.decrypt(&logits)[..classes]);
    println!("5 x 7 image on an 8 x 8 grid: conv {pa}; 2 x 2 pooling {pp}; logits {pl}");
    for q in [pa, pp, pl] {
        assert!(q.min_bits >= 15.0, "{q}");
    }
}

#[test]
fn fhe_mpconv_16x16_logn13_secure() {
    // 128-bit secure set: logN = 13, 50 + 2 * 40 + 50 = 180 bits <= 218.
    let mut fhe = Fhe::new(13, 50, 40, 2, false);
    check_mpconv(&mut fhe, 7, 16, 16, 1, 16, 3, 1); // p_in = 1: 16 groups
    check_mpconv(&mut fhe, 8, 4, 16, 1, 16, 3, 2); // gap 1 -> 2, 8 x 8 out
}

#[test]
fn fhe_mpconv_placement_by_baby_and_giant_steps_cuts_keys() {
    // ResNet-20's layers at 2^15 slots: (c_in, hw, gap, c_out, stride). The plain placement needs
    // one key per output channel (less the zero offset); baby and giant steps about 2 sqrt(C_out).
    let slots = 1 << 15;
    for &(c_in, hw, gap, c_out, s) in &[(16, 32, 1, 16, 1), (16, 32, 1, 32, 2), (32, 16, 2, 32, 1), (32, 16, 2, 64, 2), (64, 8, 4, 64, 1)] {
        let input = MultiplexedLayout::new(c_in, hw, hw, gap, slots).unwrap();
        let conv = MpConv::new(input, c_out, 3, s, &vec![0.0; c_out * c_in * 9]).unwrap();
        let plain = MpConv::new(input, c_out, 3, s, &vec![0.0; c_out * c_in * 9]).unwrap().with_placement_group(c_out.next_power_of_two()).unwrap();
        let (keys, plain_keys) = (conv.rotation_steps().len(), plain.rotation_steps().len());
        assert!(conv.placement_group() < c_out, "{c_in}x{hw} gap {gap} -> {c_out}: g = {}", conv.placement_group());
        assert!(keys < plain_keys, "{c_in}x{hw} gap {gap} -> {c_out}: {keys} keys, plain {plain_keys}");
        // No more rotations: channel u g's own offset is 0, its rotation becomes u's giant step.
        assert_eq!(conv.counts().rotations, plain.counts().rotations);
    }
}

#[test]
fn fhe_mpconv_giant_steps_evaluate_exactly_logn13() {
    // 128-bit secure set; p_in = 1, so g = 4 of 16 output channels: 4 giant steps.
    let mut fhe = Fhe::new(13, 50, 40, 2, false);
    let input = MultiplexedLayout::new(16, 16, 16, 1, fhe.ctx.max_slots()).unwrap();
    assert!(MpConv::new(input, 16, 3, 1, &vec![0.0; 16 * 16 * 9]).unwrap().placement_group() < 16);
    check_mpconv(&mut fhe, 9, 16, 16, 1, 16, 3, 1);
}

#[test]
fn fhe_block_conv_residual_pool_fc_logn12() {
    // TEST ONLY, insecure: logN = 12 with 5 levels of 40 bits.
    let mut fhe = Fhe::new(12, 50, 40, 5, true);
    let slots = fhe.ctx.max_slots();
    let mut v = Values(42);
    let (c0, c1, c2, hw, classes) = (4, 8, 16, 8, 10);
    let x = v.vec(c0 * hw * hw, 1.0);
    let w1 = v.vec(c1 * c0 * 9, 1.0 / 6.0);
    let w2 = v.vec(c2 * c1 * 9, 1.0 / 8.5);
    let ws = v.vec(c2 * c1, 1.0 / 2.8);
    let wf = v.vec(classes * c2, 0.5);
    let bias = v.vec(classes, 0.1);

    let l0 = MultiplexedLayout::new(c0, hw, hw, 1, slots).unwrap();
    let conv1 = MpConv::new(l0, c1, 3, 1, &w1).unwrap();
    let conv2 = MpConv::new(*conv1.output_layout(), c2, 3, 2, &w2).unwrap();
    let shortcut = MpConv::new(*conv1.output_layout(), c2, 1, 2, &ws).unwrap();
    let fc = AvgPoolFc::new(&fhe.ctx, *conv2.output_layout(), classes, &wf, &bias).unwrap();
    let steps: Vec<i64> = [conv1.rotation_steps(), conv2.rotation_steps(), shortcut.rotation_steps(), fc.rotation_steps()].concat();
    let ops = fhe.ops(&steps);

    let start = std::time::Instant::now();
    let ct = fhe.encrypt(&l0.pack(&x).unwrap());
    let a1 = conv1.evaluate(&ops, &ct).unwrap();
    let main = conv2.evaluate(&ops, &a1).unwrap();
    // ResNet downsampling block: 1x1 stride-2 shortcut on the same input, same output packing.
    let short = shortcut.evaluate(&ops, &a1).unwrap();
    let sum = residual_add(&ops, &main, conv2.output_layout(), &short, shortcut.output_layout()).unwrap();
    let logits = fc.evaluate(&ops, &sum).unwrap();
    let secs = start.elapsed().as_secs_f64();

    let want = conv1.counts() + conv2.counts() + shortcut.counts() + fc.counts();
    let got = ops.counts();
    assert_eq!((got.rotations, got.plain_mults, got.rescales), (want.rotations, want.plain_mults, want.rescales));
    assert_eq!((ct.level() - logits.level()) as u64, conv1.counts().depth + conv2.counts().depth + fc.counts().depth);

    let r1 = conv_reference_f64((c0, hw, hw), &x, c1, 3, 1, &w1);
    let r2 = conv_reference_f64((c1, hw, hw), &r1, c2, 3, 2, &w2);
    let rs = conv_reference_f64((c1, hw, hw), &r1, c2, 1, 2, &ws);
    let rsum: Vec<f64> = r2.iter().zip(&rs).map(|(a, b)| a + b).collect();
    let rlogits = avgpool_fc_reference(c2, hw / 2, hw / 2, &rsum, classes, &wf, &bias);

    let p_sum = precision_stats(&conv2.output_layout().pack(&rsum).unwrap(), &fhe.decrypt(&sum));
    let p_logits = precision_stats(&rlogits, &fhe.decrypt(&logits)[..classes]);
    let fc_counts = fc.counts();
    println!("block conv(4->8) -> conv s2 (8->16) + 1x1 s2 shortcut -> residual: {p_sum}");
    println!(
        "avgpool + fc 16 -> 10: {p_logits}; fc rotations {}, plain mults {}; total rotations {}, plain mults {}, rescales {}; {secs:.2} s",
        fc_counts.rotations, fc_counts.plain_mults, got.rotations, got.plain_mults, got.rescales
    );
    assert!(p_sum.min_bits >= 15.0, "{p_sum}");
    assert!(p_logits.min_bits >= 15.0, "{p_logits}");
}

#[test]
fn fhe_residual_add_aligns_levels_and_rejects_other_packings() {
    // TEST ONLY, insecure: logN = 12.
    let mut fhe = Fhe::new(12, 50, 40, 2, true);
    let slots = fhe.ctx.max_slots();
    let mut v = Values(9);
    let l = MultiplexedLayout::new(8, 8, 8, 1, slots).unwrap();
    let (x, w) = (v.vec(8 * 64, 1.0), v.vec(8 * 8 * 9, 0.1));
    let conv = MpConv::new(l, 8, 3, 1, &w).unwrap();
    let ops = fhe.ops(&conv.rotation_steps());
    let ct = fhe.encrypt(&l.pack(&x).unwrap());
    let y = conv.evaluate(&ops, &ct).unwrap();
    // Shortcut at the top level, branch two levels lower: the sum lands at the lower level.
    let sum = residual_add(&ops, &y, conv.output_layout(), &ct, &l).unwrap();
    assert_eq!(sum.level(), y.level());
    let want: Vec<f64> = conv_reference_f64((8, 8, 8), &x, 8, 3, 1, &w).iter().zip(&x).map(|(a, b)| a + b).collect();
    let p = precision_stats(&l.pack(&want).unwrap(), &fhe.decrypt(&sum));
    println!("residual add across 2 levels: {p}");
    assert!(p.min_bits >= 15.0, "{p}");
    let other = MultiplexedLayout::new(8, 4, 4, 2, slots).unwrap();
    assert!(residual_add(&ops, &y, &other, &ct, &l).is_err());
}

// ------------------------------------------------------------------------------------------------
// HyPHEN: CAConv (CA -> RA) and RAConv (RA -> CA)

/// A HyPHEN block's convolutions, CA -> CaConv -> RA (each channel checked at every slot: the RA
/// packing is full replication) -> x^2 on each RA ciphertext -> RaConv -> CA (the whole slot
/// vector, every copy), against the f64 reference; op counts vs the evaluator calls; one level
/// per convolution. Returns the worst precision in bits.
fn check_hyphen_block(fhe: &mut Fhe, seed: u64, c_in: usize, hw: usize, c_mid: usize, c_out: usize, kernel: usize) -> f64 {
    let slots = fhe.ctx.max_slots();
    let mut v = Values(seed);
    let input = MultiplexedLayout::new(c_in, hw, hw, 1, slots).unwrap();
    let x = v.vec(c_in * hw * hw, 1.0);
    let w1 = v.vec(c_mid * c_in * kernel * kernel, 1.0 / ((c_in * kernel * kernel) as f64).sqrt());
    let w2 = v.vec(c_out * c_mid * kernel * kernel, 1.0 / ((c_mid * kernel * kernel) as f64).sqrt());
    let ca = CaConv::new(input, c_mid, kernel, &w1).unwrap();
    let ra = RaConv::new(c_mid, hw, hw, slots, c_out, kernel, &w2).unwrap();
    let ops = fhe.ops(&[ca.rotation_steps(), ra.rotation_steps()].concat());
    let ct = fhe.encrypt(&input.pack(&x).unwrap());

    let mid = ca.evaluate(&ops, &ct).unwrap();
    let mut c = ca.counts();
    assert_eq!((ct.level() - mid[0].level()) as u64, c.depth);
    c.depth = 0;
    assert_eq!(ops.counts(), c, "CAConv counts {c_in}x{hw}x{hw} -> {c_mid}, f {kernel}");
    let r1 = conv_reference_f64((c_in, hw, hw), &x, c_mid, kernel, 1, &w1);
    let area = hw * hw;
    let mut worst = f64::INFINITY;
    for (o, ct_o) in mid.iter().enumerate() {
        let want: Vec<f64> = (0..slots).map(|s| r1[o * area + s % area]).collect();
        let p = precision_stats(&want, &fhe.decrypt(ct_o));
        assert!(p.min_bits >= 15.0, "CAConv channel {o}: {p}");
        worst = worst.min(p.min_bits);
    }

    // The activation between them, on every RA ciphertext (what the network does with AESPA).
    let eval = ops.evaluator();
    let squared: Vec<Ciphertext> = mid.iter().map(|m| eval.rescale(&eval.mul_relin(m, m).unwrap()).unwrap()).collect();
    let a1: Vec<f64> = r1.iter().map(|t| t * t).collect();
    ops.reset();
    let out = ra.evaluate(&ops, &squared).unwrap();
    let mut c = ra.counts();
    assert_eq!((squared[0].level() - out.level()) as u64, c.depth);
    c.depth = 0;
    assert_eq!(ops.counts(), c, "RAConv counts {c_mid} -> {c_out}");
    let r2 = conv_reference_f64((c_mid, hw, hw), &a1, c_out, kernel, 1, &w2);
    let p = precision_stats(&ra.output_layout().pack(&r2).unwrap(), &fhe.decrypt(&out));
    println!(
        "HyPHEN {c_in}x{hw}x{hw} -CAConv-> {c_mid} RA -x^2-> -RAConv-> {c_out} CA, f {kernel}, logN {}: {p}; rotations CA {} + RA {}, plain mults {} + {}",
        fhe.ctx.n().trailing_zeros(),
        ca.counts().rotations,
        ra.counts().rotations,
        ca.counts().plain_mults,
        ra.counts().plain_mults
    );
    assert!(p.min_bits >= 15.0, "RAConv: {p}");
    worst.min(p.min_bits)
}

#[test]
fn fhe_hyphen_block_small_shapes_logn12() {
    // TEST ONLY, insecure: logN = 12 with 3 levels of 40 bits (see Fhe::new).
    let mut fhe = Fhe::new(12, 50, 40, 3, true);
    // (c_in, hw, c_mid, c_out, kernel): copies p = 8, 2 and 1; odd channel counts (padded
    // blocks carry zeros); a 5x5 and a 1x1 kernel.
    for (i, &(c_in, hw, c_mid, c_out, f)) in [(4, 8, 4, 4, 3), (16, 8, 8, 16, 3), (3, 16, 5, 7, 3), (5, 8, 6, 3, 5), (8, 8, 8, 8, 1)].iter().enumerate() {
        check_hyphen_block(&mut fhe, 300 + i as u64, c_in, hw, c_mid, c_out, f);
    }
}

#[test]
fn fhe_hyphen_block_logn13_secure() {
    // 128-bit secure set: logN = 13, 48 + 3 * 38 + 48 = 210 bits <= 218 (three levels: CAConv,
    // the square, RAConv).
    let mut fhe = Fhe::new(13, 48, 38, 3, false);
    check_hyphen_block(&mut fhe, 11, 16, 16, 16, 16, 3);
}

#[test]
fn fhe_hyphen_refuses_what_it_cannot_run() {
    let slots = 1 << 11;
    let gap2 = MultiplexedLayout::new(8, 8, 8, 2, slots).unwrap();
    assert!(CaConv::new(gap2, 8, 3, &[0.0; 8 * 8 * 9]).unwrap_err().to_string().contains("gap 2"));
    let gap1 = MultiplexedLayout::new(8, 8, 8, 1, slots).unwrap();
    assert!(CaConv::new(gap1, 8, 2, &[0.0; 8 * 8 * 4]).unwrap_err().to_string().contains("odd kernel"));
    assert!(CaConv::new(gap1, 8, 3, &[0.0; 10]).unwrap_err().to_string().contains("expected 576 weights"));
    assert!(RaConv::new(8, 8, 8, slots, 8, 3, &[0.0; 5]).unwrap_err().to_string().contains("weights"));
    // RAConv counts its inputs.
    let ra = RaConv::new(2, 8, 8, slots, 2, 3, &[0.0; 36]).unwrap();
    let mut fhe = Fhe::new(12, 50, 40, 1, true);
    let ops = fhe.ops(&ra.rotation_steps());
    let ct = fhe.encrypt(&vec![0.0; slots]);
    assert!(ra.evaluate(&ops, &[ct]).unwrap_err().to_string().contains("takes 2 RA ciphertexts"));
}

#[test]
fn fhe_hyphen_block_needs_fewer_rotations_than_two_mpconvs_on_resnet20_stage1() {
    // ResNet-20's stage 1 (16 x 32 x 32, 2^15 slots): the CA/RA pair against two MPConvs (from
    // each layer's structure; the timing is the hyphen_blocks example).
    let slots = 1 << 15;
    let l = MultiplexedLayout::new(16, 32, 32, 1, slots).unwrap();
    let w = vec![0.0; 16 * 16 * 9];
    let mp = MpConv::new(l, 16, 3, 1, &w).unwrap();
    let pair = CaConv::new(l, 16, 3, &w).unwrap().counts() + RaConv::new(16, 32, 32, slots, 16, 3, &w).unwrap().counts();
    let mps = mp.counts() + mp.counts();
    println!("stage 1 block: MPConv x2 {mps:?}; CAConv + RAConv {pair:?}");
    assert_eq!(pair.depth, 2);
    assert_eq!(mps.depth, 4);
    assert!(pair.rotations < mps.rotations, "{pair:?} vs {mps:?}");
}

// ------------------------------------------------------------------------------------------------
// BSGS convolution (block diagonals)

/// One BsgsConv layer against the f64 reference and against MPConv's output packing: the whole
/// slot vector (every copy, zeros elsewhere), op counts vs the evaluator calls, depth vs levels.
#[allow(clippy::too_many_arguments)]
fn check_bsgs_conv(fhe: &mut Fhe, seed: u64, c_in: usize, hw: usize, gap: usize, c_out: usize, kernel: usize, stride: usize, baby_blocks: Option<usize>) -> f64 {
    check_bsgs_conv_split(fhe, seed, c_in, hw, gap, c_out, kernel, stride, baby_blocks, None)
}

#[allow(clippy::too_many_arguments)]
fn check_bsgs_conv_split(fhe: &mut Fhe, seed: u64, c_in: usize, hw: usize, gap: usize, c_out: usize, kernel: usize, stride: usize, baby_blocks: Option<usize>, split: Option<usize>) -> f64 {
    let slots = fhe.ctx.max_slots();
    let mut v = Values(seed);
    let input = MultiplexedLayout::new(c_in, hw, hw, gap, slots).unwrap();
    let x = v.vec(c_in * hw * hw, 1.0);
    let w = v.vec(c_out * c_in * kernel * kernel, 1.0 / ((c_in * kernel * kernel) as f64).sqrt());
    let mut conv = BsgsConv::new(input, c_out, kernel, stride, &w).unwrap();
    if let Some(d) = split {
        let full = ((hw - 1) / stride + 1, (hw - 1) / stride + 1);
        conv = BsgsConv::try_split(input, c_out, kernel, stride, &w, full, d).unwrap().expect("a possible split");
        assert_eq!(conv.split(), d);
    }
    if let Some(n1) = baby_blocks {
        conv = conv.with_baby_blocks(n1).unwrap();
    }
    let mp = MpConv::new(input, c_out, kernel, stride, &w).unwrap();
    assert_eq!(conv.output_layout(), mp.output_layout());
    let ops = fhe.ops(&conv.rotation_steps());
    let ct = fhe.encrypt(&input.pack(&x).unwrap());
    let start = std::time::Instant::now();
    let out = conv.evaluate(&ops, &ct).unwrap();
    let secs = start.elapsed().as_secs_f64();
    let mut want_counts = conv.counts();
    assert_eq!((ct.level() - out.level()) as u64, want_counts.depth, "depth");
    want_counts.depth = 0;
    assert_eq!(ops.counts(), want_counts, "op counts of {c_in}x{hw}x{hw} gap {gap} -> {c_out}, f {kernel}, s {stride}");
    let reference = conv_reference_f64((c_in, hw, hw), &x, c_out, kernel, stride, &w);
    let ol = conv.output_layout();
    let p = precision_stats(&ol.pack(&reference).unwrap(), &fhe.decrypt(&out));
    let (c, m) = (conv.counts(), mp.counts());
    println!(
        "BsgsConv {c_in}x{hw}x{hw} gap {gap} -> {c_out} gap {}, f {kernel}, s {stride}: {p}; rotations {} (MPConv {}), plain mults {} ({}), groups {}, split {}, n1 {}, cost {:.1} rotations; {secs:.2} s",
        ol.gap, c.rotations, m.rotations, c.plain_mults, m.plain_mults, conv.groups(), conv.split(), conv.baby_blocks(), conv.estimated_cost()
    );
    assert!(p.min_bits >= 15.0, "{p}");
    p.min_bits
}

#[test]
fn fhe_bsgs_conv_matches_the_reference_on_small_shapes_logn12() {
    // TEST ONLY, insecure: logN = 12 with 2 levels of 40 bits (see Fhe::new).
    let mut fhe = Fhe::new(12, 50, 40, 2, true);
    // (c_in, hw, gap, c_out, kernel, stride, n1)
    let shapes = [
        (4, 8, 1, 8, 3, 1, None),     // T_o > T_i: one lane per output block round
        (4, 8, 1, 8, 3, 2, None),     // stride 2: gap 1 -> 2
        (8, 4, 2, 8, 3, 1, Some(1)),  // multiplexed input: sub-position sums; giants only
        (8, 4, 2, 8, 3, 1, Some(2)),  // ... and block shifts among the babies
        (16, 8, 2, 16, 3, 2, None),   // gap 2 -> 4
        (8, 8, 1, 16, 1, 2, None),    // 1x1 stride-2 shortcut
        (16, 4, 1, 4, 3, 1, Some(2)), // C_out < C_in: T_i > T_o
        (5, 8, 1, 7, 5, 1, None),     // odd channel counts, 5x5 kernel
        (6, 4, 2, 3, 3, 1, None),     // a partly filled block
    ];
    for (i, &(c_in, hw, gap, c_out, f, s, n1)) in shapes.iter().enumerate() {
        check_bsgs_conv(&mut fhe, 300 + i as u64, c_in, hw, gap, c_out, f, s, n1);
    }
}

#[test]
fn fhe_bsgs_conv_splits_block_sums_over_idle_copies_logn12() {
    // TEST ONLY, insecure: logN = 12 with 2 levels of 40 bits (see Fhe::new).
    let mut fhe = Fhe::new(12, 50, 40, 2, true);
    // (c_in, hw, gap, c_out, kernel, stride, n1, d): 4 to 16 copies, up to 3 of 4 idle per lane.
    let shapes = [
        (8, 8, 1, 8, 3, 1, None, 2),    // one lane, 4 copies
        (8, 8, 1, 8, 3, 1, Some(1), 4), // two block shifts per copy, giants only
        (4, 8, 1, 8, 3, 1, Some(2), 2), // T_o > T_i: two lanes
        (4, 8, 1, 8, 3, 2, None, 4),    // stride 2
        (8, 4, 2, 8, 3, 1, None, 2),    // multiplexed input (sub-position sums)
        (5, 8, 1, 7, 5, 1, None, 4),    // odd channel counts, 5x5 kernel
    ];
    for (i, &(c_in, hw, gap, c_out, f, s, n1, d)) in shapes.iter().enumerate() {
        check_bsgs_conv_split(&mut fhe, 400 + i as u64, c_in, hw, gap, c_out, f, s, n1, Some(d));
    }
}

#[test]
fn fhe_bsgs_conv_splits_a_wide_placement_into_shared_giant_steps_logn12() {
    // TEST ONLY, insecure: logN = 12 with 2 levels of 40 bits (see Fhe::new).
    let mut fhe = Fhe::new(12, 50, 40, 2, true);
    let slots = fhe.ctx.max_slots();
    // Stride 2 from gap 4 into gap 8 (64 sub-positions, 16 groups): one placement step per
    // output sub-position; split into babies and giants shared by all groups, the keys drop.
    let l = MultiplexedLayout::new(64, 4, 4, 4, slots).unwrap();
    let conv = BsgsConv::new(l, 128, 3, 2, &vec![0.1; 128 * 64 * 9]).unwrap();
    assert!(conv.placement_modulus() < slots, "{}", conv.placement_modulus());
    assert!(conv.rotation_steps().len() <= 70, "{} keys (101 with one baby per step)", conv.rotation_steps().len());
    check_bsgs_conv(&mut fhe, 520, 64, 4, 4, 128, 3, 2, None);
    // A narrow placement keeps one baby per step.
    assert_eq!(BsgsConv::new(MultiplexedLayout::new(8, 8, 1, 1, slots).unwrap(), 8, 3, 1, &[0.1; 576]).unwrap().placement_modulus(), slots);
}

#[test]
fn fhe_the_cheaper_convolution_is_chosen_per_layer() {
    let slots = 1 << 15;
    let w = |c_out: usize, c_in: usize, f: usize| vec![0.1; c_out * c_in * f * f];
    // ResNet-20's stage 3 and its downsampling shortcut: block diagonals are far cheaper.
    let stage3 = MultiplexedLayout::new(64, 8, 8, 4, slots).unwrap();
    let c = MultiplexedConv::cheapest(stage3, 64, 3, 1, &w(64, 64, 3), None).unwrap();
    assert_eq!(c.method(), ConvMethod::Bsgs);
    let mp = MpConv::new(stage3, 64, 3, 1, &w(64, 64, 3)).unwrap();
    assert!(c.estimated_cost() < 0.5 * mp.estimated_cost(), "{} vs {}", c.estimated_cost(), mp.estimated_cost());
    let stage2 = MultiplexedLayout::new(32, 16, 16, 2, slots).unwrap();
    assert_eq!(MultiplexedConv::cheapest(stage2, 64, 1, 2, &w(64, 32, 1), None).unwrap().method(), ConvMethod::Bsgs);
    // Whatever the shape, the choice is the lower of the two estimates.
    for (c_in, hw, gap, c_out, f, s, slots) in [(16, 4, 1, 4, 3, 1, 2048), (3, 32, 1, 16, 3, 1, 1 << 15), (4, 8, 1, 4, 3, 1, 1 << 15), (64, 8, 4, 64, 1, 1, 1 << 15)] {
        let l = MultiplexedLayout::new(c_in, hw, hw, gap, slots).unwrap();
        let costs = [ConvMethod::MpConv, ConvMethod::Bsgs].map(|m| MultiplexedConv::with_method(m, l, c_out, f, s, &w(c_out, c_in, f), None).unwrap().estimated_cost());
        let chosen = MultiplexedConv::cheapest(l, c_out, f, s, &w(c_out, c_in, f), None).unwrap();
        assert_eq!(chosen.estimated_cost(), costs[0].min(costs[1]), "{l:?} -> {c_out}: {costs:?}");
        assert_eq!(chosen.method(), if costs[1] < costs[0] { ConvMethod::Bsgs } else { ConvMethod::MpConv });
    }
    // Names round trip; a wrong one is named.
    for m in [ConvMethod::MpConv, ConvMethod::Bsgs] {
        assert_eq!(ConvMethod::parse(m.name()).unwrap(), m);
    }
    assert!(ConvMethod::parse("fft").unwrap_err().to_string().contains("'fft'"));
}

#[test]
fn fhe_layers_on_resident_memory_equal_the_host_bit_for_bit_logn12() {
    super::resident_conformance::check_resident_layers(Arc::new(lycaon_backend::CpuBackend), 12);
}
