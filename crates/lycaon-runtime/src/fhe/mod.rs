//! The FHE mode (DESIGN.md, Setup A) in the runtime: the whole network runs under CKKS on the
//! server; the client encrypts its input once and decrypts the logits.
//!
//! - [`graph`]: the model front's graph as JSON, the compiler's input;
//! - [`compile`]: the compiler from a graph to a program (the leveled and the bootstrapped
//!   path, bootstrapping placement, parameters);
//! - [`program`]: the program format (serde JSON, versioned): parameters, packings, ops with
//!   their levels and refreshes (bootstraps), the keys a client makes;
//! - [`executor`]: the program prepared once per server and run per query with a session's keys;
//! - [`fanout`]: a session's ops on workers in other processes (a Ray cluster), steps of
//!   independent ops spread over them;
//! - [`resident`]: sessions whose tensors and keys stay on a device (the CUDA backend);
//! - [`session`]: the session protocol over a channel (chunked key upload, queries, flooded
//!   answers) and the client that holds the secret key.

pub mod compile;
pub mod executor;
pub mod fanout;
pub mod graph;
pub mod program;
pub mod resident;
pub mod session;

pub use compile::{choose_path, compile, CompileOptions, CompilePath, PathChoice};
pub use executor::{FheExecutable, FheRunStats, SessionKeys};
pub use fanout::{FheBatch, FheFanout, FheStep, FheWorker, Unit};
pub use graph::ModelGraph;
pub use program::{FheOp, FheOpKind, FheParameters, FheProgram, InputPacking, Layout, Refresh, SlotValues, FHE_PROGRAM_FORMAT};
pub use resident::ResidentDevice;
pub use session::{accept_keys, open_session, FheClient, FheServed, FheSessionOptions, Flooding, QueryOutcome};
