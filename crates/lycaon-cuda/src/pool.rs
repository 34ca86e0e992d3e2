//! Device memory reused by size. CKKS allocates the same few sizes over and over (one limb, Q_l,
//! Q_l P, the digits of a ModUp), so a buffer dropped by one operation is handed to the next one
//! of its size instead of going back to the driver: after the first operations of a session, an
//! operation allocates nothing (`PoolStats::allocations` stops growing; tests check it).

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// What a pool has done so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PoolStats {
    /// Buffers obtained from the device (pool misses).
    pub allocations: usize,
    /// Buffers handed out again from the pool.
    pub reuses: usize,
    /// Words in buffers currently handed out.
    pub live_words: usize,
    /// The most words handed out at once.
    pub peak_words: usize,
    /// Words held free in the pool.
    pub free_words: usize,
}

/// Free buffers by length, and the counters of [`PoolStats`].
pub struct BufferPool<B> {
    free: Mutex<HashMap<usize, Vec<B>>>,
    allocations: AtomicUsize,
    reuses: AtomicUsize,
    live_words: AtomicUsize,
    peak_words: AtomicUsize,
}

impl<B> Default for BufferPool<B> {
    fn default() -> Self {
        Self {
            free: Mutex::default(),
            allocations: AtomicUsize::new(0),
            reuses: AtomicUsize::new(0),
            live_words: AtomicUsize::new(0),
            peak_words: AtomicUsize::new(0),
        }
    }
}

impl<B: Send + Sync + 'static> BufferPool<B> {
    /// A buffer of exactly `len` words: a free one of that length, or `alloc(len)`.
    pub fn take<Err>(self: &Arc<Self>, len: usize, alloc: impl FnOnce(usize) -> Result<B, Err>) -> Result<PooledBuf<B>, Err> {
        let reused = self.free.lock().ok().and_then(|mut m| m.get_mut(&len).and_then(Vec::pop));
        let buf = match reused {
            Some(b) => {
                self.reuses.fetch_add(1, Ordering::Relaxed);
                b
            }
            None => {
                let b = alloc(len)?;
                self.allocations.fetch_add(1, Ordering::Relaxed);
                b
            }
        };
        let live = self.live_words.fetch_add(len, Ordering::Relaxed) + len;
        self.peak_words.fetch_max(live, Ordering::Relaxed);
        Ok(PooledBuf { buf: Some(buf), len, pool: self.clone() })
    }

    pub fn stats(&self) -> PoolStats {
        let free_words = self.free.lock().map(|m| m.iter().map(|(len, v)| len * v.len()).sum()).unwrap_or(0);
        PoolStats {
            allocations: self.allocations.load(Ordering::Relaxed),
            reuses: self.reuses.load(Ordering::Relaxed),
            live_words: self.live_words.load(Ordering::Relaxed),
            peak_words: self.peak_words.load(Ordering::Relaxed),
            free_words,
        }
    }

    /// Gives every free buffer back to the device.
    pub fn trim(&self) {
        if let Ok(mut m) = self.free.lock() {
            m.clear();
        }
    }
}

/// A buffer on loan from a [`BufferPool`]; dropping it returns it to the pool.
pub struct PooledBuf<B: Send + Sync + 'static> {
    buf: Option<B>,
    len: usize,
    pool: Arc<BufferPool<B>>,
}

impl<B: Send + Sync + 'static> PooledBuf<B> {
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn buf(&self) -> &B {
        // Present from take() until drop.
        self.buf.as_ref().unwrap_or_else(|| unreachable!("a pooled buffer is present until dropped"))
    }

    pub fn buf_mut(&mut self) -> &mut B {
        self.buf.as_mut().unwrap_or_else(|| unreachable!("a pooled buffer is present until dropped"))
    }
}

impl<B: Send + Sync + 'static> Drop for PooledBuf<B> {
    fn drop(&mut self) {
        self.pool.live_words.fetch_sub(self.len, Ordering::Relaxed);
        if let (Some(b), Ok(mut m)) = (self.buf.take(), self.pool.free.lock()) {
            m.entry(self.len).or_default().push(b);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_are_reused_by_length() {
        let pool: Arc<BufferPool<Vec<u64>>> = Arc::default();
        let alloc = |len| Ok::<_, ()>(vec![0u64; len]);
        let a = pool.take(8, alloc).unwrap();
        let b = pool.take(8, alloc).unwrap();
        assert_eq!(pool.stats().live_words, 16);
        drop(a);
        let c = pool.take(8, alloc).unwrap();
        let d = pool.take(4, alloc).unwrap();
        let s = pool.stats();
        assert_eq!((s.allocations, s.reuses, s.live_words, s.peak_words, s.free_words), (3, 1, 20, 20, 0));
        drop((b, c, d));
        assert_eq!(pool.stats().free_words, 20);
        pool.trim();
        assert_eq!(pool.stats().free_words, 0);
    }
}
