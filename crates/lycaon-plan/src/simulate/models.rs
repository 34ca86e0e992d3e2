//! Layer specifications of the networks that 000 (Hyena / HEPack-Sim) evaluates, built by code.
//!
//! Two families live here:
//! - the real networks ([`resnet20`], [`resnet50`], [`mobilenet_v2`], [`mobilenet_v1`],
//!   [`vgg16`], [`alexnet`], [`gnmt`]), with "same" padding where the network pads;
//! - the layer lists that the public HEPack-Sim layer files give (`hepack_*`), which the paper's
//!   numbers were computed from (000 Sec. 7.1.2). They come from MAESTRO's model files and carry
//!   quirks (MobileNetV2's first layer listed as 1x1, duplicated names, no padding, half of
//!   ResNet-20's convolutions missing, the residual additions listed as 1x1 convolutions with one
//!   output channel, ...). [`spec_differences`] lists what differs from the real network.
//!
//! Layer files are read by [`parse_model`]: JSON of [`Model`] or the MAESTRO `.m` text format the
//! HEPack-Sim files use (`Layer NAME { Type: CONV|DSCONV Stride { X: .., Y: .. } Dimensions { K:
//! .., C: .., R: .., S: .., Y: .., X: .. } }`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::PlanError;

/// What a linear layer computes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LayerKind {
    /// A dense convolution: every output channel reads every input channel.
    Conv,
    /// A depthwise convolution: output channel `i` reads input channel `i` only (`c_out = c_in`).
    Depthwise,
    /// A fully connected layer: `c_out x c_in` matrix times a vector (`h = w = k = 1`).
    FullyConnected,
    /// A matrix product with a weight matrix over `h x w` input columns, as GNMT's LSTM gate and
    /// attention products (`c_out x c_in` weights times a `c_in x (h w)` activation matrix).
    MatMul,
}

/// One linear layer: an `h x w x c_in` input, `c_out` filters of `k x k`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LayerSpec {
    /// The layer's name in the network.
    pub name: String,
    /// What the layer computes.
    pub kind: LayerKind,
    /// Input height.
    pub h: usize,
    /// Input width.
    pub w: usize,
    /// Input channels.
    pub c_in: usize,
    /// Output channels.
    pub c_out: usize,
    /// Filter side.
    pub k: usize,
    /// Stride.
    #[serde(default = "one")]
    pub stride: usize,
    /// Zero padding on each side.
    #[serde(default)]
    pub pad: usize,
    /// How many times the layer runs per inference (1 for a CNN layer).
    #[serde(default = "one")]
    pub count: usize,
}

fn one() -> usize {
    1
}

impl LayerSpec {
    /// A convolution.
    pub fn conv(name: impl Into<String>, h: usize, c_in: usize, c_out: usize, k: usize, stride: usize, pad: usize) -> Self {
        Self { name: name.into(), kind: LayerKind::Conv, h, w: h, c_in, c_out, k, stride, pad, count: 1 }
    }

    /// A depthwise convolution over `channels` channels.
    pub fn depthwise(name: impl Into<String>, h: usize, channels: usize, k: usize, stride: usize, pad: usize) -> Self {
        Self { kind: LayerKind::Depthwise, ..Self::conv(name, h, channels, channels, k, stride, pad) }
    }

    /// A fully connected layer.
    pub fn fully_connected(name: impl Into<String>, c_in: usize, c_out: usize) -> Self {
        Self { kind: LayerKind::FullyConnected, ..Self::conv(name, 1, c_in, c_out, 1, 1, 0) }
    }

    /// A weight matrix (`c_out x c_in`) times `columns` activation vectors.
    pub fn matmul(name: impl Into<String>, columns: usize, c_in: usize, c_out: usize) -> Self {
        Self { name: name.into(), kind: LayerKind::MatMul, h: columns, w: 1, c_in, c_out, k: 1, stride: 1, pad: 0, count: 1 }
    }

    /// Output height.
    pub fn out_h(&self) -> usize {
        (self.h + 2 * self.pad).saturating_sub(self.k) / self.stride.max(1) + 1
    }

    /// Output width.
    pub fn out_w(&self) -> usize {
        (self.w + 2 * self.pad).saturating_sub(self.k) / self.stride.max(1) + 1
    }

    /// Multiply-accumulates of one run of the layer.
    pub fn macs(&self) -> u64 {
        let per_out = match self.kind {
            LayerKind::Depthwise => self.k * self.k,
            _ => self.c_in * self.k * self.k,
        };
        (self.out_h() * self.out_w() * self.c_out * per_out) as u64
    }

    /// Checks that every size is positive and the kernel fits the padded input.
    pub fn validate(&self) -> Result<(), PlanError> {
        let bad = |reason: String| Err(PlanError::InvalidLayer { layer: self.name.clone(), reason });
        if self.h == 0 || self.w == 0 || self.c_in == 0 || self.c_out == 0 || self.k == 0 || self.stride == 0 || self.count == 0 {
            return bad(format!(
                "sizes, stride and count must be positive (h {}, w {}, c_in {}, c_out {}, k {}, stride {}, count {})",
                self.h, self.w, self.c_in, self.c_out, self.k, self.stride, self.count
            ));
        }
        if self.k > self.h + 2 * self.pad || self.k > self.w + 2 * self.pad {
            return bad(format!("a {}x{} kernel does not fit the padded {}x{} input", self.k, self.k, self.h + 2 * self.pad, self.w + 2 * self.pad));
        }
        if self.kind == LayerKind::Depthwise && self.c_in != self.c_out {
            return bad(format!("a depthwise layer has c_out = c_in, got {} and {}", self.c_out, self.c_in));
        }
        if self.kind == LayerKind::FullyConnected && (self.h, self.w, self.k) != (1, 1, 1) {
            return bad("a fully connected layer has h = w = k = 1".into());
        }
        const LIMIT: usize = 1 << 24;
        if [self.h, self.w, self.c_in, self.c_out, self.k, self.count].iter().any(|&v| v > LIMIT) {
            return bad(format!("a size exceeds {LIMIT}"));
        }
        Ok(())
    }
}

/// A network: a name and its linear layers in order.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Model {
    /// The network's name.
    pub name: String,
    /// Its linear layers in order.
    pub layers: Vec<LayerSpec>,
}

impl Model {
    /// Validates every layer and that there is at least one.
    pub fn validate(&self) -> Result<(), PlanError> {
        if self.layers.is_empty() {
            return Err(PlanError::InvalidModel { model: self.name.clone(), reason: "no layers".into() });
        }
        self.layers.iter().try_for_each(LayerSpec::validate)
    }

    /// Multiply-accumulates of one inference.
    pub fn macs(&self) -> u64 {
        self.layers.iter().map(|l| l.macs() * l.count as u64).sum()
    }
}

// ---------------------------------------------------------------------------------------------
// Real networks

/// ResNet-20 for CIFAR-10 (He et al. 2016, Sec. 4.2): a 3x3 stem, three stages of three basic
/// blocks (16, 32, 64 channels at 32, 16, 8 pixels), identity shortcuts with zero-padded channels
/// (option A: no projection convolution), global average pooling and a 64 -> 10 classifier.
pub fn resnet20() -> Model {
    let mut layers = vec![LayerSpec::conv("conv1", 32, 3, 16, 3, 1, 1)];
    let (mut c_in, mut size) = (16usize, 32usize);
    for (stage, &width) in [16usize, 32, 64].iter().enumerate() {
        for block in 0..3 {
            let stride = if stage > 0 && block == 0 { 2 } else { 1 };
            layers.push(LayerSpec::conv(format!("layer{}.{}.conv1", stage + 1, block), size, c_in, width, 3, stride, 1));
            size /= stride;
            layers.push(LayerSpec::conv(format!("layer{}.{}.conv2", stage + 1, block), size, width, width, 3, 1, 1));
            c_in = width;
        }
    }
    layers.push(LayerSpec::fully_connected("fc", 64, 10));
    Model { name: "resnet20".into(), layers }
}

/// ResNet-50 for ImageNet at 224 x 224 (He et al. 2016, Table 1; stride on the 3x3 convolution
/// as in torchvision's v1.5): a 7x7/2 stem and max pooling to 56 x 56, four stages of bottleneck
/// blocks (3, 4, 6, 3 blocks of widths 64, 128, 256, 512, expansion 4) with a 1x1 projection
/// shortcut in each stage's first block, global average pooling and a 2048 -> 1000 classifier.
pub fn resnet50() -> Model {
    let mut layers = vec![LayerSpec::conv("conv1", 224, 3, 64, 7, 2, 3)];
    let (mut c_in, mut size) = (64usize, 56usize);
    for (stage, (&width, &blocks)) in [64usize, 128, 256, 512].iter().zip(&[3usize, 4, 6, 3]).enumerate() {
        for block in 0..blocks {
            let stride = if stage > 0 && block == 0 { 2 } else { 1 };
            let name = |part: &str| format!("layer{}.{}.{}", stage + 1, block, part);
            layers.push(LayerSpec::conv(name("conv1"), size, c_in, width, 1, 1, 0));
            layers.push(LayerSpec::conv(name("conv2"), size, width, width, 3, stride, 1));
            let out = size / stride;
            layers.push(LayerSpec::conv(name("conv3"), out, width, 4 * width, 1, 1, 0));
            if block == 0 {
                layers.push(LayerSpec::conv(name("downsample"), size, c_in, 4 * width, 1, stride, 0));
            }
            c_in = 4 * width;
            size = out;
        }
    }
    layers.push(LayerSpec::fully_connected("fc", 2048, 1000));
    Model { name: "resnet50".into(), layers }
}

/// MobileNetV2 for ImageNet at 224 x 224 (Sandler et al. 2018, Table 2): a 3x3/2 stem, the
/// inverted-residual bottlenecks (t, c, n, s) = (1,16,1,1), (6,24,2,2), (6,32,3,2), (6,64,4,2),
/// (6,96,3,1), (6,160,3,2), (6,320,1,1) as expansion 1x1 (absent when t = 1), depthwise 3x3 and
/// projection 1x1, a 1x1 convolution to 1280 channels and a 1280 -> 1000 classifier.
pub fn mobilenet_v2() -> Model {
    let mut layers = vec![LayerSpec::conv("conv1", 224, 3, 32, 3, 2, 1)];
    let (mut c_in, mut size) = (32usize, 112usize);
    let settings = [(1usize, 16usize, 1usize, 1usize), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1)];
    for (stage, &(t, c, n, s)) in settings.iter().enumerate() {
        for block in 0..n {
            let stride = if block == 0 { s } else { 1 };
            let hidden = c_in * t;
            let name = |part: &str| format!("block{}.{}.{}", stage + 1, block, part);
            if t != 1 {
                layers.push(LayerSpec::conv(name("expand"), size, c_in, hidden, 1, 1, 0));
            }
            layers.push(LayerSpec::depthwise(name("dw"), size, hidden, 3, stride, 1));
            size /= stride;
            layers.push(LayerSpec::conv(name("project"), size, hidden, c, 1, 1, 0));
            c_in = c;
        }
    }
    layers.push(LayerSpec::conv("conv_last", 7, 320, 1280, 1, 1, 0));
    layers.push(LayerSpec::fully_connected("fc", 1280, 1000));
    Model { name: "mobilenetv2".into(), layers }
}

/// MobileNetV1 for ImageNet at 224 x 224 (Howard et al. 2017, Table 1): a 3x3/2 stem, thirteen
/// depthwise-separable pairs (depthwise 3x3, pointwise 1x1) and a 1024 -> 1000 classifier.
pub fn mobilenet_v1() -> Model {
    let mut layers = vec![LayerSpec::conv("conv1", 224, 3, 32, 3, 2, 1)];
    let (mut c_in, mut size) = (32usize, 112usize);
    let pairs = [(64usize, 1usize), (128, 2), (128, 1), (256, 2), (256, 1), (512, 2), (512, 1), (512, 1), (512, 1), (512, 1), (512, 1), (1024, 2), (1024, 1)];
    for (i, &(c_out, stride)) in pairs.iter().enumerate() {
        layers.push(LayerSpec::depthwise(format!("dw{}", i + 1), size, c_in, 3, stride, 1));
        size /= stride;
        layers.push(LayerSpec::conv(format!("pw{}", i + 1), size, c_in, c_out, 1, 1, 0));
        c_in = c_out;
    }
    layers.push(LayerSpec::fully_connected("fc", 1024, 1000));
    Model { name: "mobilenetv1".into(), layers }
}

/// VGG-16 for ImageNet at 224 x 224 (Simonyan and Zisserman 2015, configuration D): thirteen
/// 3x3 convolutions in five blocks separated by 2x2 max pooling, then 25088 -> 4096 -> 4096 -> 1000.
pub fn vgg16() -> Model {
    let mut layers = Vec::new();
    let (mut c_in, mut size) = (3usize, 224usize);
    for (block, &(width, convs)) in [(64usize, 2usize), (128, 2), (256, 3), (512, 3), (512, 3)].iter().enumerate() {
        for i in 0..convs {
            layers.push(LayerSpec::conv(format!("conv{}_{}", block + 1, i + 1), size, c_in, width, 3, 1, 1));
            c_in = width;
        }
        size /= 2;
    }
    layers.push(LayerSpec::fully_connected("fc6", 512 * 7 * 7, 4096));
    layers.push(LayerSpec::fully_connected("fc7", 4096, 4096));
    layers.push(LayerSpec::fully_connected("fc8", 4096, 1000));
    Model { name: "vgg16".into(), layers }
}

/// AlexNet (Krizhevsky et al. 2012, one-tower form at 227 x 227): 11x11/4, 5x5, three 3x3
/// convolutions with 3x3/2 max pooling after the first, second and fifth, then
/// 9216 -> 4096 -> 4096 -> 1000.
pub fn alexnet() -> Model {
    let layers = vec![
        LayerSpec::conv("conv1", 227, 3, 96, 11, 4, 0),
        LayerSpec::conv("conv2", 27, 96, 256, 5, 1, 2),
        LayerSpec::conv("conv3", 13, 256, 384, 3, 1, 1),
        LayerSpec::conv("conv4", 13, 384, 384, 3, 1, 1),
        LayerSpec::conv("conv5", 13, 384, 256, 3, 1, 1),
        LayerSpec::fully_connected("fc6", 256 * 6 * 6, 4096),
        LayerSpec::fully_connected("fc7", 4096, 4096),
        LayerSpec::fully_connected("fc8", 4096, 1000),
    ];
    Model { name: "alexnet".into(), layers }
}

/// GNMT (Wu et al. 2016) as 000 models it (Sec. 7.1: the MAESTRO "gnmt_gemm" workload that
/// HEPack-Sim uses): the LSTM gate and attention products as nine weight-matrix products, four of
/// a 2048 x 4096 matrix over 128 activation columns and five of a 3072 x 4096 matrix over 320
/// columns. The public file encodes each as a 1x1 convolution over a 128 x 1 (320 x 1) image;
/// here they are [`LayerKind::MatMul`] layers of the same shape.
pub fn gnmt() -> Model {
    let shapes = [(128usize, 2048usize), (128, 2048), (320, 3072), (128, 2048), (128, 2048), (320, 3072), (320, 3072), (320, 3072), (320, 3072)];
    let layers = shapes.iter().enumerate().map(|(i, &(cols, k))| LayerSpec::matmul(format!("gemm{i}"), cols, 4096, k)).collect();
    Model { name: "gnmt".into(), layers }
}

// ---------------------------------------------------------------------------------------------
// The public HEPack-Sim layer lists (the paper's inputs), with their quirks

/// One row of a HEPack-Sim layer list: name, depthwise?, K, C, R (= S), input side, stride.
type HepackRow = (&'static str, bool, usize, usize, usize, usize, usize);

fn hepack_layer(&(name, dw, k, c, r, side, stride): &HepackRow) -> LayerSpec {
    // The HEPack-Sim files list a depthwise layer as K = 1 output channel over C channels and no
    // layer is padded (000's Table 2 uses P = (X - R + 1)(Y - S + 1) / stride^2).
    let kind = if dw { LayerKind::Depthwise } else { LayerKind::Conv };
    LayerSpec { name: name.into(), kind, h: side, w: side, c_in: c, c_out: if dw { c } else { k }, k: r, stride, pad: 0, count: 1 }
}

/// ResNet-50 as HEPack-Sim lists it (from MAESTRO): no padding; the stride-2 on each stage's first
/// 1x1 convolution; no projection shortcuts; every residual addition listed as a 1x1 convolution
/// with one output channel ("CONVs_b_Residual", whose name repeats for stage 3, block 2); stage
/// 3's blocks 2-4 reading 256 channels instead of 512; the classifier as a 7x7 convolution over
/// the 7x7x2048 map (no average pooling).
pub fn hepack_resnet50() -> Model {
    let mut layers = vec![hepack_layer(&("CONV1", false, 64, 3, 7, 224, 2))];
    let mut prev_out = 64usize;
    let mut size = 56usize;
    for (stage, (&width, &blocks)) in [64usize, 128, 256, 512].iter().zip(&[3usize, 4, 6, 3]).enumerate() {
        let s = stage + 2;
        for b in 0..blocks {
            let stride = if stage > 0 && b == 0 { 2 } else { 1 };
            // Quirk: stage 3's later blocks read 256 channels (the real network has 512).
            let c_first = if b == 0 {
                prev_out
            } else if s == 3 {
                256
            } else {
                4 * width
            };
            let out = size / stride;
            let n = |part: &str| format!("CONV{}_{}_{}", s, b + 1, part);
            layers.push(LayerSpec { name: n("1"), ..hepack_layer(&("", false, width, c_first, 1, size, stride)) });
            layers.push(LayerSpec { name: n("2"), ..hepack_layer(&("", false, width, width, 3, out, 1)) });
            layers.push(LayerSpec { name: n("3"), ..hepack_layer(&("", false, 4 * width, width, 1, out, 1)) });
            // Quirk: the residual addition as a K = 1, 1x1 convolution; stage 3 block 2 reuses
            // block 1's name.
            let res_block = if s == 3 && b == 1 { 1 } else { b + 1 };
            layers.push(LayerSpec { name: format!("CONV{s}_{res_block}_Residual"), ..hepack_layer(&("", false, 1, 4 * width, 1, out, 1)) });
            size = out;
            prev_out = 4 * width;
        }
    }
    layers.push(hepack_layer(&("FC1000", false, 1000, 2048, 7, 7, 1)));
    Model { name: "hepack-resnet50".into(), layers }
}

/// MobileNetV2 as HEPack-Sim lists it (from MAESTRO). Quirks against [`mobilenet_v2`]: the stem
/// is 1x1 (not 3x3); block 1 has an expansion layer although t = 1; several expansion and
/// projection widths are off (e.g. 96 -> 96 where the network projects 96 -> 24); residual
/// additions listed as 1x1 depthwise layers; the name "Bottleneck5_2_3" appears twice; the
/// classifier as a 7x7 convolution over 7x7x1280; no padding.
pub fn hepack_mobilenet_v2() -> Model {
    const ROWS: &[HepackRow] = &[
        ("CONV1", false, 32, 3, 1, 224, 2),
        ("Bottleneck1_1_1", false, 32, 32, 1, 112, 1),
        ("Bottleneck1_1_2", true, 1, 32, 3, 112, 1),
        ("Bottleneck1_1_3", false, 16, 32, 1, 112, 1),
        ("Bottleneck1_1_Residual", true, 1, 16, 1, 112, 1),
        ("Bottleneck2_1_1", false, 96, 16, 1, 112, 1),
        ("Bottleneck2_1_2", true, 1, 96, 3, 112, 2),
        ("Bottleneck2_1_3", false, 96, 96, 1, 56, 1),
        ("Bottleneck2_2_1", false, 96, 96, 1, 56, 1),
        ("Bottleneck2_2_2", true, 1, 96, 3, 56, 1),
        ("Bottleneck2_2_3", false, 24, 96, 1, 56, 1),
        ("Bottleneck3_1_1", false, 144, 24, 1, 56, 1),
        ("Bottleneck3_1_2", true, 1, 144, 3, 56, 2),
        ("Bottleneck3_1_3", false, 144, 144, 1, 28, 1),
        ("Bottleneck3_2_1", false, 144, 144, 1, 28, 1),
        ("Bottleneck3_2_2", true, 1, 144, 3, 28, 1),
        ("Bottleneck3_2_3", false, 144, 144, 1, 28, 1),
        ("Bottleneck3_2_Residual", true, 1, 144, 1, 28, 1),
        ("Bottleneck3_3_1", false, 144, 144, 1, 28, 1),
        ("Bottleneck3_3_2", true, 1, 144, 3, 28, 1),
        ("Bottleneck3_3_3", false, 32, 144, 1, 28, 1),
        ("Bottleneck4_1_1", false, 192, 32, 1, 28, 1),
        ("Bottleneck4_1_2", true, 1, 192, 3, 28, 2),
        ("Bottleneck4_1_3", false, 192, 192, 1, 14, 1),
        ("Bottleneck4_2_1", false, 192, 192, 1, 14, 1),
        ("Bottleneck4_2_2", true, 1, 192, 3, 14, 1),
        ("Bottleneck4_2_3", false, 192, 192, 1, 14, 1),
        ("Bottleneck4_2_Residual", true, 1, 192, 1, 14, 1),
        ("Bottleneck4_3_1", false, 192, 192, 1, 14, 1),
        ("Bottleneck4_3_2", true, 1, 192, 3, 14, 1),
        ("Bottleneck4_3_3", false, 192, 192, 1, 14, 1),
        ("Bottleneck4_3_Residual", true, 1, 192, 1, 14, 1),
        ("Bottleneck4_4_1", false, 192, 192, 1, 14, 1),
        ("Bottleneck4_4_2", true, 1, 192, 3, 14, 1),
        ("Bottleneck4_4_3", false, 64, 192, 1, 14, 1),
        ("Bottleneck5_1_1", false, 384, 64, 1, 14, 1),
        ("Bottleneck5_1_2", true, 1, 384, 3, 14, 1),
        ("Bottleneck5_1_3", false, 384, 384, 1, 14, 1),
        ("Bottleneck5_2_1", false, 384, 384, 1, 14, 1),
        ("Bottleneck5_2_2", true, 1, 384, 3, 14, 1),
        ("Bottleneck5_2_3", false, 96, 384, 1, 14, 1),
        ("Bottleneck6_1_1", false, 576, 96, 1, 14, 1),
        ("Bottleneck6_1_2", true, 1, 576, 3, 14, 2),
        ("Bottleneck5_2_3", false, 576, 576, 1, 7, 1),
        ("Bottleneck6_2_1", false, 576, 576, 1, 7, 1),
        ("Bottleneck6_2_2", true, 1, 576, 3, 7, 1),
        ("Bottleneck6_2_3", false, 576, 576, 1, 7, 1),
        ("Bottleneck6_2_Residual", true, 1, 576, 1, 7, 1),
        ("Bottleneck6_3_1", false, 576, 576, 1, 7, 1),
        ("Bottleneck6_3_2", true, 1, 576, 3, 7, 1),
        ("Bottleneck6_3_3", false, 160, 576, 1, 7, 1),
        ("Bottleneck7_1_1", false, 960, 160, 1, 7, 1),
        ("Bottleneck7_1_2", true, 1, 960, 3, 7, 1),
        ("Bottleneck7_1_3", false, 320, 960, 1, 7, 1),
        ("CONV2D_2", false, 1280, 320, 1, 7, 1),
        ("CONV2D_3", false, 1000, 1280, 7, 7, 1),
    ];
    Model { name: "hepack-mobilenetv2".into(), layers: ROWS.iter().map(hepack_layer).collect() }
}

/// ResNet-20 as HEPack-Sim lists it (after Lee et al. 2022's FHE ResNet-20): one convolution per
/// basic block where the network has two (12 of 19 convolutions), a 1x1 projection at stride 1
/// over the 2x-larger map, the classifier as an 8x8 convolution over 8x8x64, no padding.
pub fn hepack_resnet20() -> Model {
    const ROWS: &[HepackRow] = &[
        ("CONV1", false, 16, 3, 3, 32, 1),
        ("CONV2_1", false, 16, 16, 3, 32, 1),
        ("CONV2_2", false, 16, 16, 3, 32, 1),
        ("CONV2_3", false, 16, 16, 3, 32, 1),
        ("CONV3_1_1", false, 32, 16, 3, 32, 2),
        ("CONV3_1_2", false, 32, 32, 3, 16, 1),
        ("CONV3_1_Residual", false, 32, 16, 1, 32, 1),
        ("CONV3_2", false, 32, 32, 3, 16, 1),
        ("CONV3_3", false, 32, 32, 3, 16, 1),
        ("CONV4_1_1", false, 64, 32, 3, 16, 2),
        ("CONV4_1_2", false, 64, 64, 3, 8, 1),
        ("CONV4_1_Residual", false, 64, 32, 1, 16, 1),
        ("CONV4_2", false, 64, 64, 3, 8, 1),
        ("CONV4_3", false, 64, 64, 3, 8, 1),
        ("FC10", false, 10, 64, 8, 8, 1),
    ];
    Model { name: "hepack-resnet20".into(), layers: ROWS.iter().map(hepack_layer).collect() }
}

/// GNMT as HEPack-Sim lists it: the same nine products as [`gnmt`] (1x1 convolutions over a
/// 128 x 1 or 320 x 1 image in the file).
pub fn hepack_gnmt() -> Model {
    Model { name: "hepack-gnmt".into(), ..gnmt() }
}

/// Names [`model_by_name`] accepts.
pub const MODEL_NAMES: &[&str] = &[
    "resnet20",
    "resnet50",
    "mobilenetv2",
    "mobilenetv1",
    "vgg16",
    "alexnet",
    "gnmt",
    "hepack-resnet20",
    "hepack-resnet50",
    "hepack-mobilenetv2",
    "hepack-gnmt",
];

/// A built-in network by name (case-insensitive; `-`, `_` and spaces ignored).
pub fn model_by_name(name: &str) -> Result<Model, PlanError> {
    let key: String = name.chars().filter(|c| !matches!(c, '-' | '_' | ' ')).flat_map(char::to_lowercase).collect();
    Ok(match key.as_str() {
        "resnet20" => resnet20(),
        "resnet50" => resnet50(),
        "mobilenetv2" | "mobilenet" => mobilenet_v2(),
        "mobilenetv1" => mobilenet_v1(),
        "vgg16" | "vgg" => vgg16(),
        "alexnet" => alexnet(),
        "gnmt" => gnmt(),
        "hepackresnet20" => hepack_resnet20(),
        "hepackresnet50" | "hepackresnet" => hepack_resnet50(),
        "hepackmobilenetv2" | "hepackmobile" => hepack_mobilenet_v2(),
        "hepackgnmt" => hepack_gnmt(),
        _ => return Err(PlanError::UnknownModel { name: name.into(), known: MODEL_NAMES.join(", ") }),
    })
}

// ---------------------------------------------------------------------------------------------
// Model files

/// Parses a model file: JSON of [`Model`] (or of a bare list of [`LayerSpec`]), or the MAESTRO
/// `.m` layer format of the HEPack-Sim files. `name` names the model when the text does not.
pub fn parse_model(text: &str, name: &str) -> Result<Model, PlanError> {
    let trimmed = text.trim_start();
    let model = if trimmed.starts_with('{') {
        serde_json::from_str::<Model>(text).map_err(|e| PlanError::ModelFile { reason: format!("JSON model: {e}") })?
    } else if trimmed.starts_with('[') {
        let layers = serde_json::from_str::<Vec<LayerSpec>>(text).map_err(|e| PlanError::ModelFile { reason: format!("JSON layer list: {e}") })?;
        Model { name: name.into(), layers }
    } else {
        parse_maestro(text, name)?
    };
    model.validate()?;
    Ok(model)
}

/// Parses the MAESTRO layer format. Each `Layer` block needs a `Dimensions` line with K, C, R, S,
/// Y and X; `Stride` defaults to 1; `Type: DSCONV` is a depthwise layer (listed with K = 1).
pub fn parse_maestro(text: &str, default_name: &str) -> Result<Model, PlanError> {
    let mut name = default_name.to_string();
    let mut layers = Vec::new();
    let mut current: Option<(String, bool, usize)> = None;
    for (lineno, raw) in text.lines().enumerate() {
        let line = raw.split("//").next().unwrap_or("").trim();
        let err = |reason: String| PlanError::ModelFile { reason: format!("line {}: {reason}", lineno + 1) };
        let mut words = line.split_whitespace();
        match words.next() {
            Some("Network") => name = words.next().unwrap_or(default_name).trim_end_matches('{').to_string(),
            Some("Layer") => current = Some((words.next().ok_or_else(|| err("a Layer needs a name".into()))?.trim_end_matches('{').to_string(), false, 1)),
            Some("Type:") => {
                let t = words.next().unwrap_or("");
                let layer = current.as_mut().ok_or_else(|| err("Type outside a Layer".into()))?;
                layer.1 = t.eq_ignore_ascii_case("DSCONV");
            }
            Some("Stride") => {
                let fields = braced_fields(line).map_err(err)?;
                let layer = current.as_mut().ok_or_else(|| err("Stride outside a Layer".into()))?;
                let (sx, sy) = (fields.get("X").copied().unwrap_or(1), fields.get("Y").copied().unwrap_or(1));
                if sx != sy {
                    return Err(err(format!("unequal strides X {sx}, Y {sy} are not supported")));
                }
                layer.2 = sx;
            }
            Some("Dimensions") => {
                let f = braced_fields(line).map_err(err)?;
                let get = |k: &str| f.get(k).copied().ok_or_else(|| err(format!("Dimensions lack {k}")));
                let (k, c, r, s, y, x) = (get("K")?, get("C")?, get("R")?, get("S")?, get("Y")?, get("X")?);
                let (lname, dw, stride) = current.take().ok_or_else(|| err("Dimensions outside a Layer".into()))?;
                if r != s {
                    return Err(err(format!("non-square kernels ({r}x{s}) are not supported")));
                }
                let spec = if x == 1 && r == 1 && !dw && y > 1 {
                    // A GEMM written as a 1x1 convolution over a Y x 1 image.
                    LayerSpec { name: lname, kind: LayerKind::MatMul, h: y, w: 1, c_in: c, c_out: k, k: 1, stride, pad: 0, count: 1 }
                } else {
                    LayerSpec {
                        name: lname,
                        kind: if dw { LayerKind::Depthwise } else { LayerKind::Conv },
                        h: y,
                        w: x,
                        c_in: c,
                        c_out: if dw { c } else { k },
                        k: r,
                        stride,
                        pad: 0,
                        count: 1,
                    }
                };
                layers.push(spec);
            }
            _ => {}
        }
    }
    if layers.is_empty() {
        return Err(PlanError::ModelFile { reason: "no Layer with Dimensions found (neither JSON nor the MAESTRO .m format)".into() });
    }
    Ok(Model { name, layers })
}

/// `{ A: 1, B: 2 }` -> {A: 1, B: 2}.
fn braced_fields(line: &str) -> Result<BTreeMap<String, usize>, String> {
    let open = line.find('{').ok_or("expected '{'")?;
    let close = line[open..].find('}').ok_or("expected '}'")? + open;
    let mut out = BTreeMap::new();
    for part in line[open + 1..close].split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (k, v) = part.split_once(':').ok_or_else(|| format!("expected KEY: VALUE, got {part:?}"))?;
        let v: usize = v.trim().parse().map_err(|_| format!("{} is not a non-negative integer", v.trim()))?;
        out.insert(k.trim().to_string(), v);
    }
    Ok(out)
}

// ---------------------------------------------------------------------------------------------
// Differences between a layer list and the real network

/// One difference between a (quirky) layer list and the real network.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum SpecDifference {
    /// A name used by more than one layer.
    DuplicateName { name: String, times: usize },
    /// A layer shape the list has and the real network lacks (after matching equal shapes).
    Extra { layer: String, shape: String },
    /// A layer shape the real network has and the list lacks.
    Missing { layer: String, shape: String },
    /// The first layers differ (e.g. MobileNetV2's stem listed as 1x1).
    FirstLayer { listed: String, real: String },
    /// Totals differ.
    Totals { listed_layers: usize, real_layers: usize, listed_macs: u64, real_macs: u64 },
}

fn shape_key(l: &LayerSpec) -> (LayerKind, usize, usize, usize, usize, usize, usize) {
    // Residual "layers" and depthwise layers are compared by what they compute.
    let kind = match l.kind {
        LayerKind::FullyConnected => LayerKind::Conv,
        k => k,
    };
    (kind, l.out_h(), l.out_w(), l.c_in, l.c_out, l.k, l.stride)
}

fn describe(l: &LayerSpec) -> String {
    format!("{:?} {}x{}x{} -> {} ({}x{}, stride {}, pad {}, out {}x{})", l.kind, l.h, l.w, l.c_in, l.c_out, l.k, l.k, l.stride, l.pad, l.out_h(), l.out_w())
}

/// Lists how `listed` (e.g. a HEPack-Sim layer file) differs from `real`: duplicated names, the
/// first layers, layer shapes present in one and not the other (a multiset difference on kind,
/// output size, channels, kernel and stride, so padding conventions do not count), and totals.
pub fn spec_differences(listed: &Model, real: &Model) -> Vec<SpecDifference> {
    let mut out = Vec::new();
    let mut names: BTreeMap<&str, usize> = BTreeMap::new();
    for l in &listed.layers {
        *names.entry(l.name.as_str()).or_default() += 1;
    }
    out.extend(names.into_iter().filter(|&(_, n)| n > 1).map(|(name, times)| SpecDifference::DuplicateName { name: name.into(), times }));
    if let (Some(a), Some(b)) = (listed.layers.first(), real.layers.first()) {
        if shape_key(a) != shape_key(b) {
            out.push(SpecDifference::FirstLayer { listed: describe(a), real: describe(b) });
        }
    }
    let mut remaining: Vec<Option<&LayerSpec>> = real.layers.iter().map(Some).collect();
    for l in &listed.layers {
        match remaining.iter_mut().find(|r| r.is_some_and(|r| shape_key(r) == shape_key(l))) {
            Some(slot) => *slot = None,
            None => out.push(SpecDifference::Extra { layer: l.name.clone(), shape: describe(l) }),
        }
    }
    out.extend(remaining.into_iter().flatten().map(|r| SpecDifference::Missing { layer: r.name.clone(), shape: describe(r) }));
    out.push(SpecDifference::Totals { listed_layers: listed.layers.len(), real_layers: real.layers.len(), listed_macs: listed.macs(), real_macs: real.macs() });
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn real_networks_have_their_published_sizes() {
        // Layer counts and multiply-accumulates as published (conv + FC):
        // ResNet-50 ~4.1 GMACs (He et al.), MobileNetV2 ~300 MMACs (Sandler et al. Table 3),
        // MobileNetV1 ~569 MMACs (Howard et al. Table 1), VGG-16 ~15.5 GMACs, ResNet-20 ~41 MMACs.
        let r50 = resnet50();
        assert_eq!(r50.layers.len(), 1 + 16 * 3 + 4 + 1);
        assert!((4.0e9..4.2e9).contains(&(r50.macs() as f64)), "{}", r50.macs());
        let mv2 = mobilenet_v2();
        assert!((2.9e8..3.1e8).contains(&(mv2.macs() as f64)), "{}", mv2.macs());
        assert!((5.6e8..5.8e8).contains(&(mobilenet_v1().macs() as f64)), "{}", mobilenet_v1().macs());
        assert!((1.54e10..1.56e10).contains(&(vgg16().macs() as f64)), "{}", vgg16().macs());
        let r20 = resnet20();
        assert_eq!(r20.layers.len(), 20);
        assert!((4.0e7..4.2e7).contains(&(r20.macs() as f64)), "{}", r20.macs());
        for m in [r50, mv2, r20, vgg16(), alexnet(), gnmt(), mobilenet_v1()] {
            m.validate().unwrap();
            // Channels chain: a layer's input channels equal some earlier layer's output (or 3).
        }
        assert_eq!(alexnet().layers[0].out_h(), 55);
        assert_eq!(vgg16().layers[12].out_h(), 14);
    }

    #[test]
    fn hepack_lists_show_their_quirks() {
        let d = spec_differences(&hepack_mobilenet_v2(), &mobilenet_v2());
        assert!(d.iter().any(|x| matches!(x, SpecDifference::DuplicateName { name, times: 2 } if name == "Bottleneck5_2_3")));
        assert!(d.iter().any(|x| matches!(x, SpecDifference::FirstLayer { listed, .. } if listed.contains("(1x1"))));
        let d = spec_differences(&hepack_resnet50(), &resnet50());
        assert!(d.iter().any(|x| matches!(x, SpecDifference::DuplicateName { name, .. } if name == "CONV3_1_Residual")));
        let d = spec_differences(&hepack_resnet20(), &resnet20());
        let missing = d.iter().filter(|x| matches!(x, SpecDifference::Missing { .. })).count();
        assert!(missing >= 7, "{d:?}");
        assert_eq!(hepack_resnet50().layers.len(), 66);
        assert_eq!(hepack_mobilenet_v2().layers.len(), 56);
    }

    #[test]
    fn maestro_and_json_files_parse() {
        let text = "Network tiny {\nLayer A {\nType: CONV\nStride { X: 2, Y: 2 }\nDimensions { K: 8, C: 3, R: 3, S: 3, Y: 16, X: 16 }\n}\nLayer B {\nType: DSCONV\nDimensions { K: 1, C: 8, R: 3, S: 3, Y: 7, X: 7 }\n}\nLayer G {\nDimensions { K: 64, C: 32, Y: 10, X: 1, R: 1, S: 1 }\n}\n}";
        let m = parse_model(text, "x").unwrap();
        assert_eq!(m.name, "tiny");
        assert_eq!(m.layers[0], LayerSpec { name: "A".into(), ..LayerSpec::conv("", 16, 3, 8, 3, 2, 0) });
        assert_eq!(m.layers[1].kind, LayerKind::Depthwise);
        assert_eq!(m.layers[1].c_out, 8);
        assert_eq!(m.layers[2].kind, LayerKind::MatMul);
        let json = serde_json::to_string(&m).unwrap();
        assert_eq!(parse_model(&json, "y").unwrap(), m);
        let list = serde_json::to_string(&m.layers).unwrap();
        assert_eq!(parse_model(&list, "y").unwrap().layers, m.layers);
        assert!(parse_model("Layer X {\nDimensions { K: 1 }\n}", "z").is_err());
        assert!(parse_model("{ not json", "z").is_err());
        assert!(parse_model("", "z").is_err());
        assert!(matches!(model_by_name("nope"), Err(PlanError::UnknownModel { .. })));
        assert_eq!(model_by_name("ResNet-50").unwrap().name, "resnet50");
    }
}
