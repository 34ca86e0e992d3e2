//! A TCP server that keeps serving: one thread per session, each with its own keys; a cap on
//! concurrent sessions; read/write timeouts and a frame-size limit per connection; a bad or
//! malicious client ends only its own session (with an error message sent to it), and a panic in
//! a session is caught. Logs are JSON lines with per-op timings and bytes, never a secret.

use std::net::{SocketAddr, TcpListener};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use lycaon_mpc::tcp::TcpChannel;
use lycaon_mpc::{Channel, LinkModel};
use serde_json::json;

use crate::fhe::session::FheServed;
use crate::hello::{Hello, Want};

/// Connections that may be waiting for their hello at once (each for at most the hello timeout).
const MAX_GREETING: usize = 64;
use crate::session::ServedModel;
use crate::{Mode, Result, RuntimeError};

/// What a server serves: a hybrid program with its weights, or an FHE program.
#[derive(Clone)]
pub enum Served {
    Hybrid(Arc<ServedModel>),
    Fhe(Arc<FheServed>),
}

impl Served {
    pub fn mode(&self) -> Mode {
        match self {
            Served::Hybrid(_) => Mode::Hybrid,
            Served::Fhe(_) => Mode::Fhe,
        }
    }

    fn name(&self) -> String {
        match self {
            Served::Hybrid(m) => m.compiled.program.name.clone(),
            Served::Fhe(m) => m.name().to_string(),
        }
    }

    /// Serves one session whose hello is `hello`: a JSON summary for the log. `progress(done,
    /// total, op)` follows a hybrid session's ops.
    fn serve(&self, channel: &mut dyn lycaon_mpc::Channel, hello: Hello, progress: &mut dyn FnMut(usize, usize, &str)) -> Result<serde_json::Value> {
        match self {
            Served::Hybrid(m) => {
                let s = crate::session::serve_after_hello_with(m, channel, hello, progress)?;
                Ok(json!({"seconds": s.total_s, "bytes": s.bytes, "layers": s.layers}))
            }
            Served::Fhe(m) => {
                let s = crate::fhe::session::serve_after_hello(m, channel, hello)?;
                Ok(json!({"seconds": s.total_s, "bytes": s.bytes, "queries": s.queries, "key_bytes": s.key_bytes}))
            }
        }
    }
}

#[derive(Clone, Copy, Debug)]
pub struct ServerOptions {
    pub max_sessions: usize,
    /// A connection whose hello has not arrived this long after it opened is dropped (idle
    /// connections cannot hold the session slots).
    pub hello_timeout: Duration,
    /// A session ends when the client is silent this long.
    pub timeout: Duration,
    /// Longest message a client may send.
    pub max_message_bytes: usize,
    /// Link emulation applied to what the server sends (benchmarks).
    pub link: LinkModel,
    /// A hybrid session logs its progress (`session_progress`: ops done of the total) at most
    /// this often: a long ImageNet session has hundreds of ops, and many sessions must not
    /// crowd the others' lines out of the kept log.
    pub progress_every: Duration,
}

impl Default for ServerOptions {
    fn default() -> Self {
        Self {
            max_sessions: 16,
            hello_timeout: Duration::from_secs(5),
            timeout: Duration::from_secs(120),
            max_message_bytes: 256 << 20,
            link: LinkModel::UNLIMITED,
            progress_every: Duration::from_secs(2),
        }
    }
}

/// Keeps the most recent log lines in memory (and prints them to stderr when asked).
#[derive(Default)]
pub struct LogSink {
    lines: Mutex<Vec<String>>,
    echo: AtomicBool,
}

const KEPT_LOG_LINES: usize = 10_000;

impl LogSink {
    fn push(&self, value: serde_json::Value) {
        let line = value.to_string();
        if self.echo.load(Ordering::Relaxed) {
            eprintln!("{line}");
        }
        if let Ok(mut lines) = self.lines.lock() {
            if lines.len() >= KEPT_LOG_LINES {
                lines.remove(0);
            }
            lines.push(line);
        }
    }

    pub fn lines(&self) -> Vec<String> {
        self.lines.lock().map(|l| l.clone()).unwrap_or_default()
    }

    /// Whether each new line is also printed to stderr.
    pub fn set_echo(&self, on: bool) {
        self.echo.store(on, Ordering::Relaxed);
    }
}

/// A bound server; `run` serves until `stop` is called (from any thread).
pub struct Server {
    model: Served,
    listener: TcpListener,
    options: ServerOptions,
    stop: Arc<AtomicBool>,
    active: Arc<AtomicUsize>,
    /// Connections whose hello has not arrived yet.
    greeting: Arc<AtomicUsize>,
    sessions: AtomicU64,
    pub log: Arc<LogSink>,
}

impl Server {
    pub fn bind(model: Served, addr: &str, options: ServerOptions) -> Result<Self> {
        if options.max_sessions == 0 {
            return Err(RuntimeError::Program("max_sessions must be at least 1".into()));
        }
        let listener = TcpListener::bind(addr).map_err(|e| RuntimeError::Protocol(format!("cannot listen on {addr}: {e}")))?;
        listener.set_nonblocking(true).map_err(|e| RuntimeError::Protocol(format!("listener: {e}")))?;
        Ok(Self {
            model,
            listener,
            options,
            stop: Arc::new(AtomicBool::new(false)),
            active: Arc::new(AtomicUsize::new(0)),
            greeting: Arc::new(AtomicUsize::new(0)),
            sessions: AtomicU64::new(0),
            log: Arc::new(LogSink::default()),
        })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.listener.local_addr().expect("a bound listener has an address")
    }

    /// Also print every log line to stderr.
    pub fn echo_logs(&self, on: bool) {
        self.log.set_echo(on);
    }

    /// A handle that stops the accept loop.
    pub fn stopper(&self) -> Arc<AtomicBool> {
        self.stop.clone()
    }

    pub fn active_sessions(&self) -> usize {
        self.active.load(Ordering::Relaxed)
    }

    /// Accepts and serves connections until stopped; sessions run on their own threads.
    pub fn run(&self) {
        self.log.push(json!({"event": "listening", "addr": self.local_addr().to_string(), "model": self.model.name(), "mode": self.model.mode().name()}));
        while !self.stop.load(Ordering::Relaxed) {
            match self.listener.accept() {
                Ok((stream, peer)) => self.start_session(stream, peer),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => std::thread::sleep(Duration::from_millis(10)),
                Err(e) => self.log.push(json!({"event": "accept_error", "error": e.to_string()})),
            }
        }
        self.log.push(json!({"event": "stopped"}));
    }

    fn start_session(&self, stream: std::net::TcpStream, peer: SocketAddr) {
        let id = self.sessions.fetch_add(1, Ordering::Relaxed) + 1;
        let _ = stream.set_nonblocking(false);
        let hello_wait = self.options.hello_timeout.min(self.options.timeout);
        let channel = match TcpChannel::from_stream(stream, self.options.link, hello_wait) {
            Ok(c) => c.with_max_frame(self.options.max_message_bytes),
            Err(e) => {
                self.log.push(json!({"event": "session_error", "session": id, "peer": peer.to_string(), "error": e.to_string()}));
                return;
            }
        };
        // Connections still saying hello have a bounded number of threads of their own; a
        // session slot is taken only by a client that asks for an inference (a request for the
        // public program is answered at once and holds none).
        if self.greeting.fetch_add(1, Ordering::SeqCst) >= MAX_GREETING {
            self.greeting.fetch_sub(1, Ordering::SeqCst);
            let mut channel = channel;
            crate::wire::send_error(&mut channel, "the server has too many connections waiting; try again later");
            self.log.push(json!({"event": "refused", "session": id, "peer": peer.to_string(), "reason": "connections"}));
            return;
        }
        let (model, log, active, greeting) = (self.model.clone(), self.log.clone(), self.active.clone(), self.greeting.clone());
        let (session_timeout, max_sessions, progress_every) = (self.options.timeout, self.options.max_sessions, self.options.progress_every);
        let spawned = std::thread::Builder::new().name(format!("lycaon-session-{id}")).spawn(move || {
            let mut channel = channel;
            let hello = channel.recv().map_err(RuntimeError::from).and_then(|h| Hello::parse(&h));
            greeting.fetch_sub(1, Ordering::SeqCst);
            let hello = match hello.and_then(|h| channel.set_timeout(session_timeout).map(|_| h).map_err(RuntimeError::from)) {
                Ok(h) => h,
                Err(e) => {
                    crate::wire::send_error(&mut channel, &e.to_string());
                    log.push(json!({"event": "session_error", "session": id, "peer": peer.to_string(), "error": format!("no valid hello: {e}")}));
                    return;
                }
            };
            let holds_slot = hello.want == Want::Inference;
            if holds_slot && active.fetch_add(1, Ordering::SeqCst) >= max_sessions {
                active.fetch_sub(1, Ordering::SeqCst);
                crate::wire::send_error(&mut channel, &format!("the server is busy ({max_sessions} sessions); try again later"));
                log.push(json!({"event": "refused", "session": id, "peer": peer.to_string(), "reason": "busy"}));
                return;
            }
            log.push(json!({"event": "session_start", "session": id, "peer": peer.to_string()}));
            let mut last = std::time::Instant::now();
            let mut progress = |done: usize, total: usize, op: &str| {
                if last.elapsed() >= progress_every || done == total {
                    last = std::time::Instant::now();
                    log.push(json!({"event": "session_progress", "session": id, "done": done, "total": total, "op": op}));
                }
            };
            let outcome = catch_unwind(AssertUnwindSafe(|| model.serve(&mut channel, hello, &mut progress)));
            match outcome {
                Ok(Ok(mut summary)) => {
                    summary["event"] = json!("session_end");
                    summary["session"] = json!(id);
                    summary["peer"] = json!(peer.to_string());
                    log.push(summary)
                }
                Ok(Err(e)) => log.push(json!({"event": "session_error", "session": id, "peer": peer.to_string(), "error": e.to_string()})),
                Err(_) => log.push(json!({"event": "session_panic", "session": id, "peer": peer.to_string()})),
            }
            if holds_slot {
                active.fetch_sub(1, Ordering::SeqCst);
            }
        });
        if spawned.is_err() {
            self.greeting.fetch_sub(1, Ordering::SeqCst);
            self.log.push(json!({"event": "session_error", "session": id, "error": "could not start a thread"}));
        }
    }
}
