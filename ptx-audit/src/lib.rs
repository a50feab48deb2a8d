//! ptx-audit
