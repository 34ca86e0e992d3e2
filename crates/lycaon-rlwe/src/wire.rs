//! Temporary placeholder until the wire format lands (being written concurrently).
pub type ParamsId = [u8; 32];
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    #[error("malformed: {what}")]
    Malformed { what: String },
}
