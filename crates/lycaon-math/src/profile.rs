//! Process-wide CPU-time counters of the hot kernels, for "where the time goes" reports (003
//! Fig. 7): each thread adds the nanoseconds it spends inside a kernel, so under rayon a kernel's
//! total can exceed the wall time. Callers read deltas of [`snapshot`]; sessions running at the
//! same time in one process share the counters. A timer costs two clock reads (~50 ns), small
//! against the kernels timed (an NTT of 4,096 words takes ~10 µs).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

/// The kernels timed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kernel {
    /// Forward and inverse NTTs (also those inside key switching).
    Ntt = 0,
    /// Key switching (rotations, relinearisation), its NTTs included.
    KeySwitch = 1,
    /// Silent-OT (Ferret) extension: half-tree expansion and LPN encoding.
    OtExtension = 2,
    /// Fixed-key AES hashing of OT keys (derived OTs and Ferret's masks).
    OtHash = 3,
    /// Ciphertext and key (de)serialisation.
    Serialize = 4,
}

impl Kernel {
    pub const ALL: [Kernel; 5] = [Kernel::Ntt, Kernel::KeySwitch, Kernel::OtExtension, Kernel::OtHash, Kernel::Serialize];

    pub fn name(self) -> &'static str {
        match self {
            Kernel::Ntt => "ntt",
            Kernel::KeySwitch => "key_switch",
            Kernel::OtExtension => "ot_extension",
            Kernel::OtHash => "ot_hash",
            Kernel::Serialize => "serialize",
        }
    }
}

static NANOS: [AtomicU64; 5] = [const { AtomicU64::new(0) }; 5];

/// Adds the time from its creation to its drop to a kernel's counter.
#[must_use = "the time is counted when the timer is dropped"]
pub struct Timer {
    kernel: Kernel,
    start: Instant,
}

impl Drop for Timer {
    fn drop(&mut self) {
        NANOS[self.kernel as usize].fetch_add(self.start.elapsed().as_nanos() as u64, Ordering::Relaxed);
    }
}

/// Starts timing `kernel` until the returned timer is dropped.
#[inline]
pub fn time(kernel: Kernel) -> Timer {
    Timer { kernel, start: Instant::now() }
}

/// The counters now.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Snapshot([u64; 5]);

pub fn snapshot() -> Snapshot {
    Snapshot(std::array::from_fn(|k| NANOS[k].load(Ordering::Relaxed)))
}

impl Snapshot {
    /// Seconds spent in `kernel` between `earlier` and this snapshot.
    pub fn seconds_since(&self, earlier: &Snapshot, kernel: Kernel) -> f64 {
        self.0[kernel as usize].saturating_sub(earlier.0[kernel as usize]) as f64 * 1e-9
    }

    /// Seconds in each kernel since the start of the process.
    pub fn seconds(&self, kernel: Kernel) -> f64 {
        self.0[kernel as usize] as f64 * 1e-9
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_timer_adds_its_time_to_its_kernel_only() {
        let before = snapshot();
        {
            let _t = time(Kernel::Serialize);
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        let after = snapshot();
        assert!(after.seconds_since(&before, Kernel::Serialize) >= 0.005);
        assert!(after.seconds(Kernel::Serialize) >= after.seconds_since(&before, Kernel::Serialize));
    }
}
