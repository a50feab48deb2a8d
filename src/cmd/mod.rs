pub mod demo;
pub mod inspect;
pub mod run;
pub mod synth;
