"""The warm start: SFT on demonstrations (the oracle's or saved trajectories) and check drills, AdamW or Muon."""
