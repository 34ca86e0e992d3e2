//! stub
pub struct LinearTransform;
pub fn bsgs_split() {}
