//! linear_opening (work in progress)
