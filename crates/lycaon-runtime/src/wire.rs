//! Runtime messages: a tag byte (data or error) on top of the channel's frames, and a simple
//! length-prefixed layout for lists of byte blobs. Two-party protocol messages run untagged on
//! the same channel in between.

use lycaon_mpc::Channel;

use crate::{Result, RuntimeError};

const TAG_DATA: u8 = 0x01;
const TAG_ERROR: u8 = 0xEE;
/// Longest error text sent to a peer.
const MAX_ERROR_TEXT: usize = 1024;

pub(crate) fn send(channel: &mut dyn Channel, payload: &[u8]) -> Result<()> {
    let mut message = Vec::with_capacity(payload.len() + 1);
    message.push(TAG_DATA);
    message.extend_from_slice(payload);
    channel.send(&message)?;
    Ok(())
}

/// The next runtime message; a peer's error message becomes `RuntimeError::Refused`.
pub(crate) fn recv(channel: &mut dyn Channel, what: &str) -> Result<Vec<u8>> {
    let mut message = channel.recv()?;
    match message.first() {
        Some(&TAG_DATA) => {
            message.remove(0);
            Ok(message)
        }
        Some(&TAG_ERROR) => Err(RuntimeError::Refused(String::from_utf8_lossy(&message[1..]).into_owned())),
        Some(t) => Err(RuntimeError::Protocol(format!("expected {what}, got a message with tag {t:#04x}"))),
        None => Err(RuntimeError::Protocol(format!("expected {what}, got an empty message"))),
    }
}

/// Tells the peer why the session ends (best effort: the peer may already be gone).
pub(crate) fn send_error(channel: &mut dyn Channel, text: &str) {
    let mut message = vec![TAG_ERROR];
    message.extend(text.bytes().take(MAX_ERROR_TEXT));
    let _ = channel.send(&message);
}

/// A session's result, its error also sent to the peer unless the peer is gone or silent
/// (closed or timed out: nobody would read it).
pub(crate) fn tell_peer<T>(channel: &mut dyn Channel, result: crate::Result<T>) -> crate::Result<T> {
    if let Err(e) = &result {
        if !matches!(e, crate::RuntimeError::Mpc(lycaon_mpc::MpcError::PeerClosed(_)) | crate::RuntimeError::Mpc(lycaon_mpc::MpcError::Timeout(_))) {
            send_error(channel, &e.to_string());
        }
    }
    result
}

#[derive(Default)]
pub(crate) struct Writer {
    buf: Vec<u8>,
}

impl Writer {
    pub(crate) fn blob(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
        self.buf.extend_from_slice(bytes);
    }

    pub(crate) fn u32(&mut self, v: u32) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }

    pub(crate) fn finish(self) -> Vec<u8> {
        self.buf
    }
}

pub(crate) struct Reader<'a> {
    data: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(data: &'a [u8]) -> Self {
        Self { data, pos: 0 }
    }

    fn take(&mut self, len: usize) -> Result<&'a [u8]> {
        let end = self.pos.checked_add(len).filter(|&e| e <= self.data.len());
        let end = end.ok_or_else(|| RuntimeError::Protocol(format!("a message ends after {} bytes, {len} more were announced", self.data.len())))?;
        let out = &self.data[self.pos..end];
        self.pos = end;
        Ok(out)
    }

    pub(crate) fn u32(&mut self) -> Result<u32> {
        Ok(u32::from_le_bytes(self.take(4)?.try_into().expect("4 bytes")))
    }

    pub(crate) fn blob(&mut self) -> Result<&'a [u8]> {
        let len = self.u32()? as usize;
        self.take(len)
    }

    /// Errors if bytes are left over (`what` names the message).
    pub(crate) fn finish(&self, what: &str) -> Result<()> {
        if self.pos != self.data.len() {
            return Err(RuntimeError::Protocol(format!("{} trailing bytes after the {what}", self.data.len() - self.pos)));
        }
        Ok(())
    }
}
