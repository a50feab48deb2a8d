//! `--draft mtp --draft-max K`, shared by `run` and `bench`: speculative greedy decoding with the
//! model's own NextN/MTP block as the drafter.

use anyhow::{bail, Result};
use ingot_model::speculative::{Drafts, MAX_DRAFT};

/// Where draft tokens come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Draft {
    /// The model's first NextN/MTP block (DeepSeek-V3, GLM-4.5/4.7): it guesses the token after
    /// next.
    Mtp,
}

#[derive(clap::Args, Clone)]
pub struct DraftArgs {
    /// Speculative decoding: draft tokens with the model's NextN/MTP block and verify them in one
    /// step of k + 1 positions (batched on the cpu backend; on sim and cuda one verify graph in
    /// which only the lm_head and the attention output read their weights once, every other
    /// launch runs per position: `ingot plan --draft-mtp` predicts it slower than plain decoding
    /// on a GPU). Greedy (--temp 0) output is the same token for
    /// token as without it; sampling keeps the sampler's distribution (speculative-sampling
    /// acceptance), not its seeded token stream.
    #[arg(long, value_enum)]
    pub draft: Option<Draft>,
    /// Drafts per step, 1 to 3: with more than 1 the MTP block is chained on its own output.
    #[arg(long, default_value_t = 1, requires = "draft")]
    pub draft_max: usize,
    /// Draft among the first N token ids only (a pruned draft head: its lm_head reads N rows of
    /// the vocabulary's). The verify still reads every id, so greedy output does not change; the
    /// acceptance may.
    #[arg(long, value_name = "N", requires = "draft")]
    pub draft_vocab: Option<usize>,
}

impl DraftArgs {
    /// The drafts when `--draft` is given, after checking `--draft-max` and `--draft-vocab`
    /// (against the model's vocabulary when the drafter starts).
    pub fn drafts(&self) -> Result<Option<Drafts>> {
        if self.draft_vocab == Some(0) {
            bail!("--draft-vocab 0: drafts need at least one token id to choose from");
        }
        if !(1..=MAX_DRAFT).contains(&self.draft_max) {
            bail!(
                "--draft-max {} is out of range 1..={MAX_DRAFT}",
                self.draft_max
            );
        }
        Ok(self.draft.map(|Draft::Mtp| Drafts {
            k: self.draft_max,
            vocab: self.draft_vocab,
        }))
    }
}
