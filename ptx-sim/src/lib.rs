//! ptx-sim
