//! One party of a two-party session: its channel end, a random-COT generator in each direction
//! (it is the OT sender in one, the receiver in the other) and the OT-derived correlations the
//! protocols consume: shared-output 1-out-of-N OT of short messages, correlated OT over a share
//! ring, random OT of short words (for AND triples).
//!
//! The derived OTs are `ot::OtSender` / `ot::OtReceiver` over the session's generators; both
//! parties call them in the same order, so their tweak counters agree.

use crate::{
    bits::Bits,
    channel::Channel,
    compare::DEFAULT_DIGIT_BITS,
    cot::{BatchCost, CotReceiver, CotSender},
    ot::{OtReceiver, OtSender},
    ring::ShareRing,
    Result,
};

/// Which of the two parties this is. Party 0 (the server in Lycaon's hybrid mode) and party 1
/// (the client) run the same code; where a protocol is asymmetric the role decides.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    P0,
    P1,
}

impl Role {
    pub fn index(self) -> usize {
        match self {
            Role::P0 => 0,
            Role::P1 => 1,
        }
    }
}

/// Where a session's random COTs come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OtKind {
    /// IKNP extension of base OTs: 128 bits of communication per COT.
    Iknp,
    /// Ferret silent OT (LPN), bootstrapped from IKNP: well under one bit per COT; each main
    /// iteration makes about 10 million COTs (one round trip).
    Silent,
    /// Ferret with emp-ot's middle stage as the main one ([`crate::ferret::FerretParameters::regular_128_compact`]):
    /// about 530 thousand COTs per iteration, so a session that needs a few million COTs does not
    /// pay for 10 million; more round trips per COT than [`OtKind::Silent`].
    SilentCompact,
}

/// One party's state: role, channel, COT generators.
pub struct Party<'c> {
    role: Role,
    channel: &'c mut dyn Channel,
    ot_sender: OtSender<Box<dyn CotSender>>,
    ot_receiver: OtReceiver<Box<dyn CotReceiver>>,
}

impl<'c> Party<'c> {
    /// Sets up both COT directions with the peer. Party 0 is the sender of the first direction,
    /// so the two sides' setup messages interleave without deadlock.
    pub fn new(role: Role, channel: &'c mut dyn Channel, kind: OtKind) -> Result<Self> {
        let (sender, receiver) = crate::setup_cot_pair(role, channel, kind)?;
        let (mut ot_sender, mut ot_receiver) = (OtSender::new(sender), OtReceiver::new(receiver));
        // Silent sessions: the comparisons' leaf OTs (party 0 sends them) take one vector
        // correlation per digit instead of one COT per bit.
        if kind == OtKind::Silent {
            match role {
                Role::P0 => ot_sender.enable_vector_ot(channel, DEFAULT_DIGIT_BITS)?,
                Role::P1 => ot_receiver.enable_vector_ot(channel, DEFAULT_DIGIT_BITS)?,
            }
        }
        Ok(Party { role, channel, ot_sender, ot_receiver })
    }

    pub fn role(&self) -> Role {
        self.role
    }

    pub fn channel(&mut self) -> &mut dyn Channel {
        &mut *self.channel
    }

    /// The COT direction this party sends in: COTs consumed so far and the generator's batch
    /// traffic. The two parties' figures together cover both directions, each once.
    pub fn sent_cots(&self) -> (u64, BatchCost) {
        (self.ot_sender.cots_used(), self.ot_sender.cot().batch_cost())
    }

    /// The vector OTs this party sends (party 0 of a silent session): correlations consumed so
    /// far and the generator's batch traffic; None where there are none.
    pub fn sent_vector_ots(&self) -> Option<(u64, BatchCost)> {
        self.ot_sender.vector_ots()
    }

    /// Sender of `count` random OTs of `bits`-bit words (1 to 8): pairs (s0, s1), as bit planes
    /// (plane k of s0 holds bit k of every s0).
    pub fn random_word_ot_send(&mut self, count: usize, bits: u32) -> Result<(Vec<Bits>, Vec<Bits>)> {
        self.ot_sender.send_random_words(&mut *self.channel, count, bits)
    }

    /// Receiver of `count` random OTs of `bits`-bit words: random choices c and the planes of s_c.
    pub fn random_word_ot_receive(&mut self, count: usize, bits: u32) -> Result<(Bits, Vec<Bits>)> {
        self.ot_receiver.receive_random_words(&mut *self.channel, count, bits)
    }

    /// Sender of correlated OT over `ring`: the receiver learns `r_i + c_i * deltas[i]`;
    /// returns the `r_i`.
    pub fn correlated_ot_send(&mut self, ring: ShareRing, deltas: &[u64]) -> Result<Vec<u64>> {
        self.correlated_ot_send_modulo(ring.modulus(), deltas)
    }

    /// Receiver of correlated OT with chosen bits `choices`: `r_i + c_i * delta_i`.
    pub fn correlated_ot_receive(&mut self, ring: ShareRing, choices: &[bool]) -> Result<Vec<u64>> {
        self.correlated_ot_receive_modulo(ring.modulus(), choices)
    }

    /// [`Self::correlated_ot_send`] modulo any M in [2, 2^64] (e.g. a product of two rings'
    /// moduli, whose shares reduce to shares in each).
    pub fn correlated_ot_send_modulo(&mut self, modulus: u128, deltas: &[u64]) -> Result<Vec<u64>> {
        self.ot_sender.send_correlated(&mut *self.channel, deltas, modulus)
    }

    /// [`Self::correlated_ot_receive`] modulo any M in [2, 2^64].
    pub fn correlated_ot_receive_modulo(&mut self, modulus: u128, choices: &[bool]) -> Result<Vec<u64>> {
        self.ot_receiver.receive_correlated(&mut *self.channel, choices, modulus)
    }

    /// Sender of batches of shared-output 1-out-of-2^k OTs, each `(k, width, table)` with
    /// instance i's f_i(v) at `table[i * 2^k + v]`, all in one round trip: returns this party's
    /// XOR shares of f_i(c_i), one vector per batch.
    pub fn one_of_n_send<M: crate::ot::OtWord>(&mut self, batches: &[(u32, u32, &[M])]) -> Result<Vec<Vec<u64>>> {
        self.ot_sender.send_shared_1_of_n_batches(&mut *self.channel, batches)
    }

    /// Receiver of batches of shared-output 1-out-of-2^k OTs, each `(k, width, choices)`: its
    /// XOR shares of f_i(`choices[i]`), one vector per batch.
    pub fn one_of_n_receive(&mut self, batches: &[(u32, u32, &[u32])]) -> Result<Vec<Vec<u64>>> {
        self.ot_receiver.receive_shared_1_of_n_batches(&mut *self.channel, batches)
    }

    /// Exchanges bits with the peer: sends ours, returns theirs (one flight each way).
    pub fn exchange_bits(&mut self, bits: &Bits) -> Result<Bits> {
        self.channel.send_packed(bits)?;
        self.channel.recv_packed(bits.len())
    }

    /// Runs a step that has a half in each COT direction: party 0 runs its sending half first
    /// and party 1 its receiving half first, so each half meets its counterpart.
    pub fn both_ways<S, R>(&mut self, send: impl FnOnce(&mut Self) -> Result<S>, receive: impl FnOnce(&mut Self) -> Result<R>) -> Result<(S, R)> {
        match self.role {
            Role::P0 => {
                let sent = send(self)?;
                Ok((sent, receive(self)?))
            }
            Role::P1 => {
                let received = receive(self)?;
                Ok((send(self)?, received))
            }
        }
    }
}
