//! GPU parity tests for linear_opening
