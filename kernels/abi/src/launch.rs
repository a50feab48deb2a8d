//! Kernel launch descriptors shared by the device crate, the host launcher and the tests.
