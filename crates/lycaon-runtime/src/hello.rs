//! The first message of every session, in both modes: magic, wire version, what the client
//! wants (an inference, or only the public program) and the mode it expects (or any). The
//! server answers with its public description, `{"mode": ..., "program": ...}`, or an error.

use serde::{Deserialize, Serialize};

use crate::{Result, RuntimeError};

const MAGIC: &[u8; 4] = b"LYCN";
/// Version of the session protocol (both modes); 2 added the mode, 3 the hybrid keys per layer.
pub const WIRE_VERSION: u32 = 3;

/// The two modes a server can serve (DESIGN.md).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    Hybrid,
    Fhe,
}

impl Mode {
    pub fn name(self) -> &'static str {
        match self {
            Mode::Hybrid => "hybrid",
            Mode::Fhe => "fhe",
        }
    }

    pub fn parse(text: &str) -> Result<Self> {
        match text.trim().to_ascii_lowercase().as_str() {
            "hybrid" => Ok(Mode::Hybrid),
            "fhe" => Ok(Mode::Fhe),
            other => Err(RuntimeError::Program(format!("mode '{other}': hybrid or fhe"))),
        }
    }

    fn code(mode: Option<Mode>) -> u32 {
        match mode {
            None => 0,
            Some(Mode::Hybrid) => 1,
            Some(Mode::Fhe) => 2,
        }
    }
}

/// What a client asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Want {
    Inference,
    Program,
}

/// A parsed hello.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Hello {
    pub want: Want,
    pub mode: Option<Mode>,
}

impl Hello {
    pub fn to_bytes(self) -> Vec<u8> {
        let mut m = MAGIC.to_vec();
        m.extend_from_slice(&WIRE_VERSION.to_le_bytes());
        m.extend_from_slice(&(if self.want == Want::Inference { 1u32 } else { 2 }).to_le_bytes());
        m.extend_from_slice(&Mode::code(self.mode).to_le_bytes());
        m
    }

    pub fn parse(h: &[u8]) -> Result<Self> {
        if h.len() < 8 || &h[..4] != MAGIC {
            return Err(RuntimeError::Protocol("the first message is not a Lycaon hello".into()));
        }
        let word = |i: usize| u32::from_le_bytes(h[i..i + 4].try_into().expect("4 bytes"));
        let version = word(4);
        if version != WIRE_VERSION || h.len() != 16 {
            return Err(RuntimeError::Protocol(format!(
                "the client speaks protocol version {version}, this server {WIRE_VERSION}; use the same Lycaon version on both sides"
            )));
        }
        let want = match word(8) {
            1 => Want::Inference,
            2 => Want::Program,
            w => return Err(RuntimeError::Protocol(format!("unknown request {w} in the hello"))),
        };
        let mode = match word(12) {
            0 => None,
            1 => Some(Mode::Hybrid),
            2 => Some(Mode::Fhe),
            m => return Err(RuntimeError::Protocol(format!("unknown mode {m} in the hello"))),
        };
        Ok(Self { want, mode })
    }

    /// Errors unless the client takes `served` (or any mode).
    pub fn check_mode(&self, served: Mode) -> Result<()> {
        match self.mode {
            Some(m) if m != served => Err(RuntimeError::Refused(format!(
                "this server serves the {} mode and the client asked for the {} mode; run the client with --mode {}",
                served.name(),
                m.name(),
                served.name()
            ))),
            _ => Ok(()),
        }
    }
}

/// The server's answer to a hello.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct PublicModel {
    pub mode: Mode,
    pub program: serde_json::Value,
}

impl PublicModel {
    pub fn json(mode: Mode, program_json: &str) -> Result<String> {
        let program: serde_json::Value = serde_json::from_str(program_json).map_err(|e| RuntimeError::Program(format!("program JSON: {e}")))?;
        Ok(serde_json::to_string(&PublicModel { mode, program }).expect("JSON values serialise"))
    }

    pub fn parse(bytes: &[u8]) -> Result<Self> {
        serde_json::from_slice(bytes).map_err(|e| RuntimeError::Protocol(format!("the server's description is not valid: {e}")))
    }
}
