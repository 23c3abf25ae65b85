//! GPU parity tests for maxtree
