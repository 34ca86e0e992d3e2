//! CKKS bootstrapping (Cheon-Han-Kim-Kim-Song 2018; Chen-Chillotti-Song 2019; Han-Ki 2020;
//! Bossuat-Mouchet-Troncoso-Pastoriza-Hubaux 2021): ModRaise lifts a level-0 ciphertext to the
//! top of the chain, where its phase is Delta m + q_0 I with a small integer polynomial I;
//! CoeffsToSlots moves the coefficients into slots (the inverse special FFT as a few sparse
//! diagonal factors), EvalMod removes q_0 I slot by slot (a scaled cosine with double-angle
//! steps), and SlotsToCoeffs moves the result back (the forward special FFT).

pub mod dft;
pub mod evalmod;
