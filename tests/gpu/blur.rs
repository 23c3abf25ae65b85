//! GPU parity tests for blur
