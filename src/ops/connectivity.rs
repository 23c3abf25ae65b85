//! Pixel adjacency, shared by the ops that follow connected pixels (the max-tree's components,
//! the connected-component labelling).

use super::OpError;

/// Pixel adjacency.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Connectivity {
    /// 4 neighbours (scikit-image `connectivity=1`).
    #[default]
    Four,
    /// 8 neighbours (scikit-image `connectivity=2`).
    Eight,
}

impl Connectivity {
    /// From the neighbour count (4 or 8).
    pub fn from_neighbors(n: u32) -> Result<Self, OpError> {
        match n {
            4 => Ok(Self::Four),
            8 => Ok(Self::Eight),
            _ => Err(OpError::InvalidParam(format!(
                "connectivity = {n}: allowed values are 4 and 8"
            ))),
        }
    }
    /// The neighbour count (4 or 8).
    #[must_use]
    pub fn neighbors(self) -> u8 {
        match self {
            Self::Four => 4,
            Self::Eight => 8,
        }
    }
}
