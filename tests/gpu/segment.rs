//! GPU parity tests for segment
