//! segment (work in progress)
