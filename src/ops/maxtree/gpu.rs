//! stub
pub struct MaxtreeGpu;
pub struct MaxtreeOutput;
pub fn maxtree_gpu() {}
