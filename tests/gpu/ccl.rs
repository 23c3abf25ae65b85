//! GPU parity tests for ccl
