//! ingot-synth
