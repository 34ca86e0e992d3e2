//! A `Channel` over one TCP connection: whole messages as length-prefixed frames, with the same
//! byte, message and round counters and the same link emulation as `MemoryChannel`.
//!
//! Frame: a u32 little-endian payload length, then the payload. Frames above `MAX_FRAME`
//! (1 GiB) are refused when sending (`InvalidArgument`) and when receiving (`Malformed`). The
//! counters count payload bytes only, as for every transport.
//!
//! Silence and failure: reads and writes time out after the channel's timeout, so a silent peer
//! gives `Timeout` and a closed or killed one `PeerClosed`; nothing ever blocks for good. A
//! timeout before the first byte of a frame leaves the channel usable; an error in the middle
//! of a frame leaves it unusable (every later `recv` fails), as the stream has lost its framing.
//!
//! Link emulation (`LinkModel` other than `UNLIMITED`): the sender computes each message's
//! arrival instant with the same `LinkClock` as `MemoryChannel` (messages queue behind each other
//! on the emulated wire for their transmission time, then travel the one-way delay) and hands
//! the frame to a writer thread that puts it on the socket at that instant. `send` returns at
//! once, as on a real link with a large socket buffer, so the sender keeps computing while its
//! message is in flight; the receiver sees the message at the emulated arrival plus the real
//! transit time of the connection. The emulation therefore adds to the real link's own cost and
//! is meant for loopback or a fast LAN, where that cost is negligible. Dropping the channel waits
//! for the frames still in flight to be written. Without emulation, frames are written directly
//! from `send` through a buffered writer (one flush per message) with `TCP_NODELAY` set.

use std::io::{self, BufRead, BufReader, BufWriter, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::mpsc::{self, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::channel::{Channel, ChannelStats, Counter, LinkClock, LinkModel};
use crate::{MpcError, Result};

/// The largest payload of one frame.
pub const MAX_FRAME: usize = 1 << 30;
/// Buffer size of the reader and of the writer.
const BUFFER: usize = 1 << 16;
/// Pause between connection attempts while the peer is not listening yet.
const RETRY_PAUSE: Duration = Duration::from_millis(20);

/// The frame header for a payload of `len` bytes.
fn frame_header(len: usize) -> Result<[u8; 4]> {
    if len > MAX_FRAME {
        return Err(MpcError::InvalidArgument(format!("a message of {len} bytes exceeds the frame limit of {MAX_FRAME} bytes")));
    }
    Ok((len as u32).to_le_bytes())
}

/// Maps a socket error to the crate's errors: silence is `Timeout`, a gone peer `PeerClosed`.
fn socket_error(e: io::Error, timeout: Duration) -> MpcError {
    match e.kind() {
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => MpcError::Timeout(timeout),
        io::ErrorKind::UnexpectedEof
        | io::ErrorKind::ConnectionReset
        | io::ErrorKind::ConnectionAborted
        | io::ErrorKind::BrokenPipe
        | io::ErrorKind::NotConnected => MpcError::PeerClosed(format!("tcp: {e}")),
        _ => MpcError::Io(e),
    }
}

fn write_frame(writer: &mut BufWriter<TcpStream>, message: &[u8]) -> io::Result<()> {
    writer.write_all(&(message.len() as u32).to_le_bytes())?;
    writer.write_all(message)?;
    writer.flush()
}

/// How frames reach the socket.
enum Writer {
    /// Written by `send` itself (no emulation).
    Direct(BufWriter<TcpStream>),
    /// Written by a thread at each frame's emulated arrival instant.
    Delayed {
        queue: Option<Sender<(Instant, Vec<u8>)>>,
        /// The writer thread's error, once it has stopped on one.
        failure: Arc<Mutex<Option<MpcError>>>,
        thread: Option<JoinHandle<()>>,
    },
}

/// One party's end of a TCP connection.
pub struct TcpChannel {
    reader: BufReader<TcpStream>,
    writer: Writer,
    clock: LinkClock,
    counter: Counter,
    timeout: Duration,
    /// Why the stream lost its framing, if it did.
    broken: Option<String>,
    peer: SocketAddr,
    /// Longest frame this end accepts (`MAX_FRAME` unless lowered).
    max_frame: usize,
}

impl std::fmt::Debug for TcpChannel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TcpChannel").field("peer", &self.peer).field("timeout", &self.timeout).field("stats", &self.counter.stats()).finish()
    }
}

impl TcpChannel {
    /// Connects to `addr`, retrying while nobody listens there yet, for at most `timeout`
    /// (which then also bounds every later read and write).
    /// Errors: `InvalidArgument` for a zero timeout or an address that does not resolve;
    /// `Timeout` if no connection was made in time.
    pub fn connect(addr: impl ToSocketAddrs, link: LinkModel, timeout: Duration) -> Result<Self> {
        if timeout.is_zero() {
            return Err(MpcError::InvalidArgument("the timeout must be positive".into()));
        }
        let addrs: Vec<SocketAddr> = addr.to_socket_addrs().map_err(|e| MpcError::InvalidArgument(format!("cannot resolve the peer address: {e}")))?.collect();
        if addrs.is_empty() {
            return Err(MpcError::InvalidArgument("the peer address resolves to nothing".into()));
        }
        let deadline = Instant::now() + timeout;
        loop {
            for a in &addrs {
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return Err(MpcError::Timeout(timeout));
                }
                if let Ok(stream) = TcpStream::connect_timeout(a, left) {
                    return Self::from_stream(stream, link, timeout);
                }
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(MpcError::Timeout(timeout));
            }
            std::thread::sleep(RETRY_PAUSE.min(left));
        }
    }

    /// Accepts one connection on `listener`, waiting at most `timeout` (which then also bounds
    /// every later read and write). Leaves the listener in blocking mode.
    /// Errors: `InvalidArgument` for a zero timeout; `Timeout` if nobody connected in time;
    /// `Io` if the listener fails.
    pub fn accept(listener: &TcpListener, link: LinkModel, timeout: Duration) -> Result<Self> {
        if timeout.is_zero() {
            return Err(MpcError::InvalidArgument("the timeout must be positive".into()));
        }
        let deadline = Instant::now() + timeout;
        listener.set_nonblocking(true)?;
        let accepted = loop {
            match listener.accept() {
                Ok((stream, _)) => break Ok(stream),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    let left = deadline.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        break Err(MpcError::Timeout(timeout));
                    }
                    std::thread::sleep(Duration::from_millis(2).min(left));
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => break Err(MpcError::Io(e)),
            }
        };
        listener.set_nonblocking(false)?;
        let stream = accepted?;
        stream.set_nonblocking(false)?;
        Self::from_stream(stream, link, timeout)
    }

    /// Binds `addr`, accepts one connection (see `accept`) and closes the listener.
    pub fn listen(addr: impl ToSocketAddrs, link: LinkModel, timeout: Duration) -> Result<Self> {
        let listener = TcpListener::bind(addr)?;
        Self::accept(&listener, link, timeout)
    }

    /// Wraps a connected stream: sets `TCP_NODELAY` and the read and write timeouts.
    /// Errors: `InvalidArgument` for a zero timeout; `Io` if the socket refuses an option.
    pub fn from_stream(stream: TcpStream, link: LinkModel, timeout: Duration) -> Result<Self> {
        if timeout.is_zero() {
            return Err(MpcError::InvalidArgument("the timeout must be positive".into()));
        }
        stream.set_nodelay(true)?;
        stream.set_read_timeout(Some(timeout))?;
        stream.set_write_timeout(Some(timeout))?;
        let peer = stream.peer_addr()?;
        let write_half = BufWriter::with_capacity(BUFFER, stream.try_clone()?);
        let writer = if link == LinkModel::UNLIMITED {
            Writer::Direct(write_half)
        } else {
            let (queue, frames) = mpsc::channel::<(Instant, Vec<u8>)>();
            let failure = Arc::new(Mutex::new(None));
            let thread_failure = Arc::clone(&failure);
            let thread = std::thread::Builder::new().name("lycaon-tcp-writer".into()).spawn(move || {
                let mut w = write_half;
                for (arrival, message) in frames {
                    let now = Instant::now();
                    if arrival > now {
                        std::thread::sleep(arrival - now);
                    }
                    if let Err(e) = write_frame(&mut w, &message) {
                        if let Ok(mut slot) = thread_failure.lock() {
                            *slot = Some(socket_error(e, timeout));
                        }
                        return;
                    }
                }
            })?;
            Writer::Delayed { queue: Some(queue), failure, thread: Some(thread) }
        };
        Ok(TcpChannel {
            reader: BufReader::with_capacity(BUFFER, stream),
            writer,
            clock: LinkClock::new(link),
            counter: Counter::default(),
            timeout,
            broken: None,
            peer,
            max_frame: MAX_FRAME,
        })
    }

    /// Lowers the longest frame this end accepts (a server's limit on what a client may send);
    /// a longer frame is refused before its payload is read.
    pub fn with_max_frame(mut self, bytes: usize) -> Self {
        self.max_frame = bytes.min(MAX_FRAME);
        self
    }

    /// Changes the read and write timeouts from now on (a server gives a new connection a few
    /// seconds for its hello, then the session's timeout). Errors: `InvalidArgument` for a zero
    /// timeout.
    pub fn set_timeout(&mut self, timeout: Duration) -> Result<()> {
        if timeout.is_zero() {
            return Err(MpcError::InvalidArgument("the timeout must be positive".into()));
        }
        self.reader.get_ref().set_read_timeout(Some(timeout))?;
        self.reader.get_ref().set_write_timeout(Some(timeout))?;
        self.timeout = timeout;
        Ok(())
    }

    /// The peer's address.
    pub fn peer_addr(&self) -> SocketAddr {
        self.peer
    }

    /// Reads one frame; `PeerClosed` if the peer closed the connection between frames.
    fn read_frame(&mut self) -> Result<Vec<u8>> {
        // Wait for the first byte without consuming anything: a timeout here keeps the framing.
        loop {
            match self.reader.fill_buf() {
                Ok([]) => return Err(MpcError::PeerClosed("tcp: the peer closed the connection".into())),
                Ok(_) => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(socket_error(e, self.timeout)),
            }
        }
        let mut header = [0u8; 4];
        self.reader.read_exact(&mut header).map_err(|e| self.break_framing(e))?;
        let len = u32::from_le_bytes(header) as usize;
        if len > self.max_frame {
            let what = format!("a frame of {len} bytes exceeds the limit of {} bytes", self.max_frame);
            self.broken = Some(what.clone());
            return Err(MpcError::Malformed(what));
        }
        let mut payload = vec![0u8; len];
        self.reader.read_exact(&mut payload).map_err(|e| self.break_framing(e))?;
        Ok(payload)
    }

    fn break_framing(&mut self, e: io::Error) -> MpcError {
        let err = socket_error(e, self.timeout);
        self.broken = Some(format!("a frame was cut off: {err}"));
        err
    }
}

impl Channel for TcpChannel {
    /// Errors: `InvalidArgument` above `MAX_FRAME`; `Timeout` if the peer stops reading;
    /// `PeerClosed` if it is gone (with emulation, a writer failure shows at the next `send`).
    fn send(&mut self, message: &[u8]) -> Result<()> {
        frame_header(message.len())?;
        match &mut self.writer {
            Writer::Direct(w) => write_frame(w, message).map_err(|e| socket_error(e, self.timeout))?,
            Writer::Delayed { queue, failure, .. } => {
                if let Some(e) = failure.lock().ok().and_then(|mut f| f.take()) {
                    *queue = None;
                    return Err(e);
                }
                let arrival = self.clock.arrival(message.len());
                let gone = || MpcError::PeerClosed("tcp: the writer stopped after an earlier error".into());
                queue.as_ref().ok_or_else(gone)?.send((arrival, message.to_vec())).map_err(|_| gone())?;
            }
        }
        self.counter.sent(message.len());
        Ok(())
    }

    /// Errors: `Timeout` after the channel's timeout of silence; `PeerClosed` if the peer closed
    /// the connection or it was cut; `Malformed` for a frame above `MAX_FRAME`.
    fn recv(&mut self) -> Result<Vec<u8>> {
        if let Some(why) = &self.broken {
            return Err(MpcError::PeerClosed(format!("tcp: the channel is unusable after an earlier error ({why})")));
        }
        let message = self.read_frame()?;
        self.counter.received(message.len());
        Ok(message)
    }

    fn stats(&self) -> ChannelStats {
        self.counter.stats()
    }
}

impl Drop for TcpChannel {
    fn drop(&mut self) {
        if let Writer::Delayed { queue, thread, .. } = &mut self.writer {
            *queue = None; // the writer thread drains what is queued, then ends
            if let Some(t) = thread.take() {
                let _ = t.join();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cot::{CotReceiver, CotSender};
    use crate::iknp::{IknpReceiver, IknpSender};
    use rand_chacha::ChaCha20Rng;
    use rand_core::SeedableRng;

    const T: Duration = Duration::from_secs(10);

    /// A listener on a free loopback port.
    fn listener() -> (TcpListener, SocketAddr) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let a = l.local_addr().unwrap();
        (l, a)
    }

    #[test]
    fn exchanges_messages_and_counts_payload_bytes() {
        let (l, addr) = listener();
        let server = std::thread::spawn(move || {
            let mut ch = TcpChannel::accept(&l, LinkModel::UNLIMITED, T).unwrap();
            let a = ch.recv().unwrap();
            let b = ch.recv().unwrap();
            let big = ch.recv().unwrap();
            ch.send(&[a.len() as u8, b.len() as u8]).unwrap();
            ch.send_blocks(&[u128::MAX, 3]).unwrap();
            assert_eq!(big.len(), 3 << 20);
            assert!(big.iter().enumerate().all(|(i, &x)| x == (i % 251) as u8));
            ch.stats()
        });
        let mut ch = TcpChannel::connect(addr, LinkModel::UNLIMITED, T).unwrap();
        ch.send(b"hello").unwrap();
        ch.send(&[]).unwrap();
        let big: Vec<u8> = (0..3 << 20).map(|i| (i % 251) as u8).collect();
        ch.send(&big).unwrap();
        assert_eq!(ch.recv().unwrap(), vec![5, 0]);
        assert_eq!(ch.recv_blocks(2).unwrap(), vec![u128::MAX, 3]);
        let theirs = server.join().unwrap();
        let mine = ch.stats();
        assert_eq!((mine.bytes_sent, mine.bytes_received, mine.messages_sent, mine.rounds), (5 + (3 << 20), 34, 3, 1));
        assert_eq!((theirs.bytes_sent, theirs.bytes_received, theirs.messages_received, theirs.rounds), (34, 5 + (3 << 20), 3, 1));
    }

    #[test]
    fn killed_peer_and_silent_peer_are_errors_within_the_timeout() {
        let (l, addr) = listener();
        let server = std::thread::spawn(move || {
            let mut ch = TcpChannel::accept(&l, LinkModel::UNLIMITED, T).unwrap();
            std::thread::sleep(Duration::from_millis(400)); // silent for a while
            ch.send(b"late").unwrap();
            ch.recv().unwrap(); // then dies after one more message
        });
        let mut ch = TcpChannel::connect(addr, LinkModel::UNLIMITED, Duration::from_millis(150)).unwrap();
        let start = Instant::now();
        assert!(matches!(ch.recv(), Err(MpcError::Timeout(_))));
        let waited = start.elapsed();
        assert!(waited >= Duration::from_millis(140) && waited < Duration::from_millis(390), "{waited:?}");
        // A timeout between frames leaves the channel usable.
        let late = loop {
            match ch.recv() {
                Err(MpcError::Timeout(_)) => continue,
                other => break other,
            }
        };
        assert_eq!(late.unwrap(), b"late");
        ch.send(b"bye").unwrap();
        server.join().unwrap(); // the peer's socket is closed now
        let start = Instant::now();
        assert!(matches!(ch.recv(), Err(MpcError::PeerClosed(_))));
        assert!(start.elapsed() < Duration::from_millis(100));
    }

    #[test]
    fn malformed_and_cut_frames() {
        let (l, addr) = listener();
        let raw = std::thread::spawn(move || {
            let (mut s, _) = l.accept().unwrap();
            s.write_all(&((MAX_FRAME as u32) + 1).to_le_bytes()).unwrap();
            let (mut s2, _) = l.accept().unwrap();
            s2.write_all(&100u32.to_le_bytes()).unwrap();
            s2.write_all(&[7; 10]).unwrap();
            drop(s2); // cut in the middle of the frame
            std::thread::sleep(Duration::from_millis(100));
            drop(s);
        });
        let mut ch = TcpChannel::connect(addr, LinkModel::UNLIMITED, T).unwrap();
        assert!(matches!(ch.recv(), Err(MpcError::Malformed(_))));
        assert!(matches!(ch.recv(), Err(MpcError::PeerClosed(_))), "unusable after losing the framing");
        let mut ch2 = TcpChannel::connect(addr, LinkModel::UNLIMITED, T).unwrap();
        assert!(matches!(ch2.recv(), Err(MpcError::PeerClosed(_))));
        raw.join().unwrap();
        assert!(matches!(frame_header(MAX_FRAME + 1), Err(MpcError::InvalidArgument(_))));
        assert_eq!(frame_header(MAX_FRAME).unwrap(), (1u32 << 30).to_le_bytes());
    }

    #[test]
    fn connect_retries_until_the_peer_listens_and_times_out_otherwise() {
        let addr = listener().1; // free port, nobody listening now
        let late = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(150));
            let mut ch = TcpChannel::listen(addr, LinkModel::UNLIMITED, T).unwrap();
            ch.send(b"up").unwrap();
        });
        let mut ch = TcpChannel::connect(addr, LinkModel::UNLIMITED, T).unwrap();
        assert_eq!(ch.recv().unwrap(), b"up");
        late.join().unwrap();
        let nobody = listener().1;
        let start = Instant::now();
        assert!(matches!(TcpChannel::connect(nobody, LinkModel::UNLIMITED, Duration::from_millis(200)), Err(MpcError::Timeout(_))));
        assert!(start.elapsed() < Duration::from_secs(2));
        let (l, _) = listener();
        assert!(matches!(TcpChannel::accept(&l, LinkModel::UNLIMITED, Duration::from_millis(50)), Err(MpcError::Timeout(_))));
    }

    #[test]
    fn link_emulation_delays_arrival_but_not_the_sender() {
        let link = LinkModel::new(Some(1e6), Duration::from_millis(30)).unwrap();
        let (l, addr) = listener();
        let server = std::thread::spawn(move || {
            let mut ch = TcpChannel::accept(&l, link, T).unwrap();
            for _ in 0..2 {
                let m = ch.recv().unwrap();
                ch.send(&m[..1]).unwrap();
            }
        });
        let mut ch = TcpChannel::connect(addr, link, T).unwrap();
        let start = Instant::now();
        ch.send(&[1u8; 20_000]).unwrap();
        assert!(start.elapsed() < Duration::from_millis(15), "send does not wait for the link");
        ch.recv().unwrap();
        ch.send(&[2u8; 20_000]).unwrap();
        ch.recv().unwrap();
        // Two round trips: 2 * (20 ms on the wire + 30 ms + 30 ms).
        let took = start.elapsed();
        assert!(took >= Duration::from_millis(160), "{took:?}");
        assert!(took < Duration::from_millis(1000), "{took:?}");
        server.join().unwrap();
    }

    #[test]
    fn iknp_runs_over_tcp() {
        let (l, addr) = listener();
        let server = std::thread::spawn(move || {
            let mut ch = TcpChannel::accept(&l, LinkModel::UNLIMITED, T).unwrap();
            let mut r = IknpReceiver::new(&mut ch, &mut ChaCha20Rng::seed_from_u64(2)).unwrap();
            r.extend(&mut ch, 1000).unwrap()
        });
        let mut ch = TcpChannel::connect(addr, LinkModel::UNLIMITED, T).unwrap();
        let mut s = IknpSender::new(&mut ch, &mut ChaCha20Rng::seed_from_u64(1)).unwrap();
        let q = s.extend(&mut ch, 1000).unwrap();
        let (b, t) = server.join().unwrap();
        assert!((0..1000).all(|i| t[i] == q[i] ^ if b[i] { s.delta() } else { 0 }));
        assert_eq!(ch.stats().bytes_sent, 4096);
        assert_eq!(ch.stats().bytes_received, 32 + 128 * 125);
    }
}
