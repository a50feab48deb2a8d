pub mod bench;
pub mod demo;
pub mod gate;
pub mod inspect;
pub mod plan;
pub mod run;
pub mod serve;
pub mod synth;
