"""Instruction tuning: a decoder fine-tuned on chat conversations, with loss on assistant turns only."""
