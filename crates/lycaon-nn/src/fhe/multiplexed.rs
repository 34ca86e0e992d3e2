//! Multiplexed parallel packing (Lee et al. 2022, "MP" packing).
//!
//! A tensor of C channels of h x w pixels with gap (multiplex factor) k lives on a grid of
//! (k h) x (k w) slots, row-major. Pixel (y, x) of channel c sits at grid position
//!
//!   row k y + (c mod k^2) / k,   column k x + (c mod k^2) mod k,
//!
//! in block b = c / k^2; a block holds k^2 channels in k^2 h w slots, and a copy holds T blocks,
//! T = the next power of two of t = ceil(C / k^2). The copy (k^2 h w T slots) is repeated
//! p = slots / (k^2 h w T) times over the ciphertext, so that MPConv can compute p output
//! channels at once. Slot of (c, y, x) in copy r:
//!
//!   r k^2 h w T + b k^2 h w + (k y + (c mod k^2) / k) k w + k x + (c mod k^2) mod k.
//!
//! With k = 1 this is the plain channel-after-channel raster packing. A stride-2 convolution on
//! an h x w grid at gap k leaves its valid outputs on every second grid point of every k-th
//! row and column: that is the same grid at gap 2k for an (h/2) x (w/2) image, and the k^2 - 1
//! points in between are filled with the other channels (the "multiplexing"), so a ciphertext
//! stays full across the whole network.
//!
//! Images whose sides are not powers of two sit in the top-left corner of the power-of-two grid
//! (`rows` x `cols` valid pixels of `height` x `width`); the other grid points hold zeros, which
//! every layer keeps: convolutions give them zero weights when read and mask them when written,
//! biases and constants are packed at valid pixels only, and pooling divides by the valid area.
//!
//! Simplification (named): the paper sizes the copies as n_t / p_i with t_i blocks; we round t up
//! to a power of two T so that channel sums by doubling rotations stay inside one copy. With h,
//! w and k powers of two this is the same copy spacing the paper gets.

use super::FheError;

/// A multiplexed packing of a C x h x w tensor into `slots` slots.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MultiplexedLayout {
    pub channels: usize,
    /// Grid height (a power of two): the image's rows and zeros below them.
    pub height: usize,
    /// Grid width (a power of two).
    pub width: usize,
    /// The image's rows (at most `height`; the rest of the grid is zero).
    pub rows: usize,
    /// The image's columns (at most `width`).
    pub cols: usize,
    /// The gap k: 1 for the input image, doubled by every stride-2 layer.
    pub gap: usize,
    /// Slots of the ciphertext (a power of two up to n/2).
    pub slots: usize,
}

impl MultiplexedLayout {
    /// Checks: h, w, k and slots powers of two (the channel and pooling sums rotate by
    /// doubling steps), and one copy fits into the slots.
    pub fn new(channels: usize, height: usize, width: usize, gap: usize, slots: usize) -> Result<Self, FheError> {
        let l = Self { channels, height, width, rows: height, cols: width, gap, slots };
        for (name, v) in [("height", height), ("width", width), ("gap", gap), ("slots", slots)] {
            if v == 0 || !v.is_power_of_two() {
                return Err(FheError::Invalid(format!("{name} = {v} must be a power of two")));
            }
        }
        if channels == 0 {
            return Err(FheError::Invalid("a tensor needs at least one channel".into()));
        }
        if l.copy_len() > slots {
            return Err(FheError::Invalid(format!(
                "{channels} x {height} x {width} at gap {gap} needs {} slots, the ciphertext has {slots}",
                l.copy_len()
            )));
        }
        Ok(l)
    }

    /// The layout of a C x rows x cols image on the smallest power-of-two grid that holds it.
    pub fn for_image(channels: usize, rows: usize, cols: usize, gap: usize, slots: usize) -> Result<Self, FheError> {
        if rows == 0 || cols == 0 {
            return Err(FheError::Invalid(format!("a {rows} x {cols} image is empty")));
        }
        Self::new(channels, rows.next_power_of_two(), cols.next_power_of_two(), gap, slots)?.with_valid(rows, cols)
    }

    /// The same grid holding a rows x cols image in its top-left corner.
    pub fn with_valid(mut self, rows: usize, cols: usize) -> Result<Self, FheError> {
        if rows == 0 || cols == 0 || rows > self.height || cols > self.width {
            return Err(FheError::Invalid(format!("a {rows} x {cols} image does not fit the {} x {} grid", self.height, self.width)));
        }
        (self.rows, self.cols) = (rows, cols);
        Ok(self)
    }

    /// Whether every grid point is a pixel of the image.
    pub fn is_full(&self) -> bool {
        self.rows == self.height && self.cols == self.width
    }

    /// t = ceil(C / k^2): blocks holding channels.
    pub fn blocks(&self) -> usize {
        self.channels.div_ceil(self.gap * self.gap)
    }

    /// T: blocks per copy (t rounded up to a power of two).
    pub fn padded_blocks(&self) -> usize {
        self.blocks().next_power_of_two()
    }

    /// Slots of one grid row: k w.
    pub fn row_len(&self) -> usize {
        self.gap * self.width
    }

    /// Slots of one block: k^2 h w.
    pub fn block_len(&self) -> usize {
        self.gap * self.gap * self.height * self.width
    }

    /// Slots of one copy: k^2 h w T.
    pub fn copy_len(&self) -> usize {
        self.block_len() * self.padded_blocks()
    }

    /// p: copies of the tensor in the ciphertext.
    pub fn copies(&self) -> usize {
        self.slots / self.copy_len()
    }

    /// Slot of channel c, pixel (y, x) in copy 0.
    pub fn slot(&self, c: usize, y: usize, x: usize) -> usize {
        let k = self.gap;
        let (b, m) = (c / (k * k), c % (k * k));
        b * self.block_len() + (k * y + m / k) * self.row_len() + k * x + m % k
    }

    /// Packs a tensor ([c][y][x], row-major, `rows` x `cols` pixels) into `slots` values, every
    /// copy filled, zeros off the image.
    pub fn pack(&self, tensor: &[f64]) -> Result<Vec<f64>, FheError> {
        let len = self.channels * self.rows * self.cols;
        if tensor.len() != len {
            return Err(FheError::Invalid(format!("expected {len} tensor values, got {}", tensor.len())));
        }
        let mut v = vec![0.0; self.slots];
        for r in 0..self.copies() {
            for c in 0..self.channels {
                for y in 0..self.rows {
                    for x in 0..self.cols {
                        v[r * self.copy_len() + self.slot(c, y, x)] = tensor[(c * self.rows + y) * self.cols + x];
                    }
                }
            }
        }
        Ok(v)
    }

    /// Reads the tensor back from copy 0 of decoded slots.
    pub fn unpack(&self, slots: &[f64]) -> Result<Vec<f64>, FheError> {
        if slots.len() < self.copy_len() {
            return Err(FheError::Invalid(format!("expected at least {} slots, got {}", self.copy_len(), slots.len())));
        }
        let mut t = Vec::with_capacity(self.channels * self.rows * self.cols);
        for c in 0..self.channels {
            for y in 0..self.rows {
                for x in 0..self.cols {
                    t.push(slots[self.slot(c, y, x)]);
                }
            }
        }
        Ok(t)
    }
}
